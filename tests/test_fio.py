"""fio: a small real run, and the parser on fio output captured under tests/data/fio/."""

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from ccbench.workloads.base import ExecutionContext, WorkloadFailed
from ccbench.workloads.fio import Fio, FioParams, _load_json_output, job_file, parse_fio_json

needs_fio = pytest.mark.skipif(
    shutil.which("fio") is None, reason="fio is not installed (scripts/setup.sh installs it)"
)


@needs_fio
def test_small_real_fio_matrix_is_parsed(tmp_path):
    params = FioParams(blocksizes=["4k", "64k"], patterns=["randread", "write", "randrw"], size="8M", runtime=1)
    workload = Fio("fio", params)
    assert workload.requirements() is None
    ctx = ExecutionContext(
        workload_name="fio",
        workdir=tmp_path / "data",
        raw_dir=tmp_path / "raw",
        repetition=0,
        warmup=False,
        variant={"storage": "disk"},
    )
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
    text = job_file(FioParams(blocksizes=["1m"], patterns=["read", "randrw"], rwmixread=60), Path("/x"), False)
    assert "[1m_read]" in text and "[1m_randrw]" in text and "rwmixread=60" in text and "direct=0" in text
    assert text.count("stonewall") == 2
    assert "time_based=1" in text and "sync=1" not in text


@needs_fio
def test_a_job_that_is_not_time_based_reads_and_writes_its_size_once(tmp_path):
    # buffered, O_SYNC, sized: each job goes over the file once (a cold read after fio's invalidate,
    # writes that return once written back), however long its runtime
    params = FioParams(
        blocksizes=["1m"], patterns=["read", "write"], size="16M", runtime=30, iodepth=1, ioengine="psync",
        direct=False, time_based=False, sync=True,
    )  # fmt: skip
    text = job_file(params, tmp_path, False)
    assert "time_based" not in text and "sync=1" in text
    (tmp_path / "job.fio").write_text(text)
    done = subprocess.run(["fio", "--output-format=json", str(tmp_path / "job.fio")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    jobs = {job["jobname"]: job for job in _load_json_output(done.stdout)["jobs"]}
    assert jobs["1m_read"]["read"]["io_bytes"] == 16 * 2**20
    assert jobs["1m_write"]["write"]["io_bytes"] == 16 * 2**20
    assert jobs["1m_read"]["job_runtime"] < 30_000  # it ended when the file was read, not at its runtime


FIO_DATA = Path(__file__).parent / "data" / "fio"


def expected_from(document: dict) -> dict:
    """What the parser must report, read straight from fio's JSON (a second reading of the format)."""
    expected = {}
    for job in document["jobs"]:
        bs, _, rw = job["jobname"].partition("_")
        for direction in ("read", "write"):
            stats = job[direction]
            if not stats["io_bytes"]:
                continue
            case = (bs, rw, direction)
            expected[(case, "throughput")] = stats["bw_bytes"] / 1e6
            expected[(case, "iops")] = stats["iops"]
            expected[(case, "clat_mean")] = stats["clat_ns"]["mean"] / 1e3
            expected[(case, "clat_p50")] = stats["clat_ns"]["percentile"]["50.000000"] / 1e3
            expected[(case, "clat_p99")] = stats["clat_ns"]["percentile"]["99.000000"] / 1e3
    return expected


@pytest.mark.parametrize(
    "name, cases",
    [
        # fio 3.33 (Debian 12), job files written by job_file(): one mixed job, both directions
        ("randrw-4k", {("4k", "randrw", "read"), ("4k", "randrw", "write")}),
        # two block sizes x sequential read and write, numjobs=2 with group_reporting
        (
            "seq-64k-1m-numjobs2",
            {("64k", "read", "read"), ("64k", "write", "write"), ("1m", "read", "read"), ("1m", "write", "write")},
        ),
    ],
)
def test_parser_on_captured_fio_output(name, cases):
    text = (FIO_DATA / f"{name}.json").read_text()
    measurements = parse_fio_json(_load_json_output(text))
    got = {((m.case["bs"], m.case["rw"], m.case["direction"]), m.metric): m.value for m in measurements}
    assert {case for case, _ in got} == cases
    assert got == pytest.approx(expected_from(json.loads(text)))
    assert all(m.better == "higher" for m in measurements if m.metric in ("throughput", "iops"))
    # warnings fio prints before its JSON are skipped
    assert len(parse_fio_json(_load_json_output("fio: note: a warning\n" + text))) == len(measurements)


def test_parser_reports_a_failed_fio_job():
    document = json.loads((FIO_DATA / "randrw-4k.json").read_text())
    document["jobs"][0]["error"] = 5
    with pytest.raises(WorkloadFailed, match="failed with error 5"):
        parse_fio_json(document)
    document["jobs"] = []
    with pytest.raises(WorkloadFailed, match="no I/O"):
        parse_fio_json(document)
    with pytest.raises(WorkloadFailed, match="no JSON"):
        _load_json_output("fio: engine libaio not loadable\n")
