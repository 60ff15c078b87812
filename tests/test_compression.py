"""The compression workload run directly (gzip and zstd for real), its dataset and its checks."""

import gzip
import shutil
from pathlib import Path

import pytest
from pydantic import ValidationError

from ccbench.workloads.base import ExecutionContext, PrepareContext, WorkloadFailed
from ccbench.workloads.compression import DATASET, Compression, CompressionParams, file_digest, write_dataset

needs_tools = pytest.mark.skipif(
    shutil.which("zstd") is None or shutil.which("gzip") is None,
    reason="gzip/zstd not installed (bash scripts/setup.sh --with storage)",
)


def contexts(tmp_path: Path) -> tuple[PrepareContext, ExecutionContext]:
    workdir = tmp_path / "variant"
    raw = tmp_path / "raw"
    prepare = PrepareContext(workload_name="compression", workdir=workdir, raw_dir=raw, variant={"storage": "disk"})
    execution = ExecutionContext(
        workload_name="compression",
        workdir=workdir,
        raw_dir=raw,
        repetition=0,
        warmup=False,
        variant={"storage": "disk"},
    )
    return prepare, execution


def test_dataset_is_deterministic_sized_and_partly_compressible(tmp_path):
    first = write_dataset(tmp_path / "a", 5 * 2**20 + 123, 0.3, seed=7)
    second = write_dataset(tmp_path / "b", 5 * 2**20 + 123, 0.3, seed=7)
    other = write_dataset(tmp_path / "c", 5 * 2**20 + 123, 0.3, seed=8)
    assert first == second != other
    assert (tmp_path / "a").read_bytes() == (tmp_path / "b").read_bytes()
    assert (tmp_path / "a").stat().st_size == 5 * 2**20 + 123
    assert file_digest(tmp_path / "a") == first
    data = (tmp_path / "a").read_bytes()
    ratio = len(data) / len(gzip.compress(data, 1))
    # text-like records compress well, the 30% random part not at all: roughly 1.3x to 3x overall
    assert 1.3 < ratio < 3.0, ratio
    all_random = write_dataset(tmp_path / "r", 2**20, 1.0, seed=1)
    assert all_random and len(gzip.compress((tmp_path / "r").read_bytes(), 1)) > 2**20 * 0.99


def test_params_are_validated():
    assert CompressionParams().size == "64M"
    with pytest.raises(ValidationError, match="not like 64M"):
        CompressionParams(size="lots")
    with pytest.raises(ValidationError):
        CompressionParams(algorithms=["lz4"])
    with pytest.raises(ValidationError):
        CompressionParams(gzip_level=12)
    with pytest.raises(ValidationError):
        CompressionParams(unknown=1)


@needs_tools
def test_round_trip_with_gzip_and_zstd(tmp_path):
    prepare, execution = contexts(tmp_path)
    workload = Compression("compression", CompressionParams(size="3M"))
    assert workload.requirements() is None
    workload.prepare(prepare)
    measurements = workload.run(execution)
    by_case = {}
    for m in measurements:
        by_case.setdefault(m.case["algorithm"], {})[m.metric] = m
    assert set(by_case) == {"gzip", "zstd"}
    for metrics in by_case.values():
        assert set(metrics) == {
            "compress_time",
            "decompress_time",
            "compress_throughput",
            "decompress_throughput",
            "compression_ratio",
        }
        assert metrics["compress_time"].value > 0 and metrics["compress_time"].better == "lower"
        assert metrics["decompress_throughput"].better == "higher"
        assert metrics["compression_ratio"].value > 1.2
        assert metrics["compress_throughput"].value == pytest.approx(3 * 2**20 / 1e6 / metrics["compress_time"].value)
    assert by_case["gzip"]["compression_ratio"].case == {"algorithm": "gzip", "level": 6}
    # the archive and the restored copy are removed; the tools' output is kept in raw/
    assert sorted(p.name for p in execution.workdir.iterdir()) == [DATASET, DATASET + ".sha256"]
    assert (execution.raw_dir / "zstd-compress.stderr").exists()
    workload.cleanup(prepare)
    assert list(execution.workdir.iterdir()) == []


@needs_tools
def test_a_corrupted_round_trip_fails(tmp_path, monkeypatch):
    prepare, execution = contexts(tmp_path)
    workload = Compression("compression", CompressionParams(size="1M", algorithms=["zstd"]))
    workload.prepare(prepare)
    # a dataset that changed after prepare no longer matches the recorded digest
    (execution.workdir / (DATASET + ".sha256")).write_text("0" * 64)
    with pytest.raises(WorkloadFailed, match="SHA-256 mismatch"):
        workload.run(execution)


@needs_tools
def test_a_failing_tool_is_a_workload_failure(tmp_path):
    prepare, execution = contexts(tmp_path)
    workload = Compression("compression", CompressionParams(size="1M", algorithms=["gzip"]))
    workload.prepare(prepare)
    (execution.workdir / DATASET).unlink()
    with pytest.raises(WorkloadFailed, match="missing"):
        workload.run(execution)
    # a dataset that cannot be read: gzip exits non-zero and the pipeline reports it
    (execution.workdir / DATASET).mkdir()
    with pytest.raises(WorkloadFailed, match="exited with"):
        workload.run(execution)


@needs_tools
def test_an_execution_given_parts_runs_only_their_algorithms(tmp_path):
    """A settle round's execution names its parts (Workload.selectable: the algorithm): only
    those run; a part of no algorithm of the plan is a workload failure, not an empty result."""
    from dataclasses import replace

    prepare, execution = contexts(tmp_path)
    workload = Compression("compression", CompressionParams(size="1M"))
    assert workload.selectable == ("algorithm",)
    workload.prepare(prepare)
    only_zstd = workload.run(replace(execution, parts=[{"algorithm": "zstd"}]))
    assert {m.case["algorithm"] for m in only_zstd} == {"zstd"}
    assert not (execution.raw_dir / "gzip-compress.stderr").exists()
    with pytest.raises(WorkloadFailed, match="is one of this workload.s algorithm values"):
        workload.run(replace(execution, parts=[{"algorithm": "lz4"}]))
