"""A small real fio run, parsed."""

import shutil

import pytest

from ccbench.workloads.base import ExecutionContext
from ccbench.workloads.fio import Fio, FioParams, job_file

pytestmark = pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed (scripts/setup.sh installs it)")


def test_small_real_fio_matrix_is_parsed(tmp_path):
    params = FioParams(blocksizes=["4k", "64k"], patterns=["randread", "write", "randrw"], size="8M", runtime=1)
    workload = Fio("fio", params)
    assert workload.requirements() is None
    ctx = ExecutionContext(workload_name="fio", workdir=tmp_path / "data", raw_dir=tmp_path / "raw", repetition=0,
                           warmup=False, variant={"storage": "disk"})
    measurements = workload.run(ctx)
    cases = {(m.case["bs"], m.case["rw"], m.case["direction"]) for m in measurements}
    assert ("4k", "randread", "read") in cases and ("64k", "write", "write") in cases
    # the mixed job reports both directions
    assert ("4k", "randrw", "read") in cases and ("4k", "randrw", "write") in cases
    metrics = {m.metric for m in measurements}
    assert {"throughput", "iops", "clat_mean", "clat_p50", "clat_p99"} <= metrics
    for m in measurements:
        assert m.value >= 0
        if m.metric in ("throughput", "iops"):
            assert m.better == "higher" and m.value > 0
    assert (tmp_path / "raw" / "fio.json").exists()
    # the sample params name the case, not the whole matrix
    sample_params = workload.sample_params(measurements[0])
    assert "blocksizes" not in sample_params and sample_params["bs"] in ("4k", "64k")


def test_job_file_sections():
    text = job_file(FioParams(blocksizes=["1m"], patterns=["read", "randrw"], rwmixread=60), tmp := __import__("pathlib").Path("/x"), False)
    assert "[1m_read]" in text and "[1m_randrw]" in text and "rwmixread=60" in text and "direct=0" in text
    assert text.count("stonewall") == 2
