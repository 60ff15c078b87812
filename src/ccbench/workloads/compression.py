"""compression: seed 003's archive workload on the storage variant.

A deterministic dataset (text-like records with incompressible blocks mixed in, seeded) is written
to the variant's directory in prepare (not timed). Each execution compresses it into an archive on
the same variant (CPU-bound) and decompresses it back (I/O-bound), each timed separately and
including the ``sync`` of the written file, for every algorithm (gzip, zstd).
"""

from __future__ import annotations

import hashlib
import re
import shlex
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import Field, field_validator

from ccbench.model import Measurement
from ccbench.workloads.base import (
    DEVICE_IO_CHECK,
    ExecutionContext,
    PrepareContext,
    Workload,
    WorkloadFailed,
    WorkloadParams,
    missing_tools,
    selected,
    size_bytes,
)

DATASET = "ccbench-dataset.bin"
WORDS = (
    "confidential computing memory encryption attestation enclave guest host kernel page table "
    "storage volume cipher block latency throughput benchmark workload notebook dataset model "
    "training inference tensor vector query record field value key index cache queue"
).split()
TOOLS = {"gzip": ("gz", "gzip -{level} -c"), "zstd": ("zst", "zstd -q -{level} -c")}


class CompressionParams(WorkloadParams):
    size: str = Field("64M", description="dataset size, e.g. 64M or 1G")
    algorithms: list[Literal["gzip", "zstd"]] = Field(default_factory=lambda: ["gzip", "zstd"])
    gzip_level: int = Field(6, ge=1, le=9)
    zstd_level: int = Field(3, ge=1, le=19)
    #: share of the dataset that is random (incompressible) bytes
    random_fraction: float = Field(0.3, ge=0, le=1)
    seed: int = 42

    @field_validator("size")
    @classmethod
    def _size(cls, value: str) -> str:
        if not re.fullmatch(r"\d+[KkMmGg]?", value):
            raise ValueError(f"size {value!r} is not like 64M or 1G")
        return value


def write_dataset(path: Path, total: int, random_fraction: float, seed: int) -> str:
    """Write the dataset in 4 MiB chunks; returns its SHA-256 (to check the round trip)."""
    rng = np.random.default_rng(seed)
    vocabulary = np.array([w.encode() for w in WORDS], dtype=object)
    digest = hashlib.sha256()
    chunk = 4 * 2**20
    written = 0
    with open(path, "wb") as handle:
        while written < total:
            size = min(chunk, total - written)
            random_part = int(size * random_fraction)
            words = vocabulary[rng.integers(0, len(vocabulary), size // 6 + 1)]
            text = b" ".join(words)[: size - random_part]
            block = text + rng.bytes(random_part)
            handle.write(block)
            digest.update(block)
            written += len(block)
    return digest.hexdigest()


def file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(4 * 2**20):
            digest.update(block)
    return digest.hexdigest()


class Compression(Workload):
    kind = "compression"
    description = "compress a deterministic dataset into an archive on the storage variant and back (gzip, zstd)"
    Params = CompressionParams
    variant_axes = frozenset({"storage"})
    system_checks = (DEVICE_IO_CHECK,)
    setup_component = "storage"
    matrix_params = frozenset({"algorithms"})
    #: the time to compress and to decompress (the throughputs say the same per byte)
    primary_metrics = ("compress_time", "decompress_time")
    #: each algorithm compresses and restores the dataset on its own: one runs alone in a settle round
    selectable = ("algorithm",)

    def requirements(self) -> str | None:
        missing = missing_tools(*self.params.algorithms, "sync", "bash")
        if missing:
            return f"{', '.join(missing)} not installed: run 'bash scripts/setup.sh --with storage'"
        return None

    def prepare(self, ctx: PrepareContext) -> None:
        ctx.workdir.mkdir(parents=True, exist_ok=True)
        digest = write_dataset(
            ctx.workdir / DATASET, size_bytes(self.params.size), self.params.random_fraction, self.params.seed
        )
        (ctx.workdir / (DATASET + ".sha256")).write_text(digest)

    def cleanup(self, ctx: PrepareContext) -> None:
        for name in (DATASET, DATASET + ".sha256"):
            (ctx.workdir / name).unlink(missing_ok=True)

    def run(self, ctx: ExecutionContext) -> list[Measurement]:
        dataset = ctx.workdir / DATASET
        if not dataset.exists():
            raise WorkloadFailed(f"the dataset {dataset} is missing (prepare did not run?)")
        size = dataset.stat().st_size
        digest_file = ctx.workdir / (DATASET + ".sha256")
        expected_digest = digest_file.read_text().strip() if digest_file.exists() else None
        measurements = []
        for algorithm in selected(ctx.parts, "algorithm", self.params.algorithms):
            suffix, command = TOOLS[algorithm]
            level = self.params.gzip_level if algorithm == "gzip" else self.params.zstd_level
            archive = ctx.workdir / f"archive.{suffix}"
            restored = ctx.workdir / "restored.bin"
            source, target, back = (shlex.quote(str(p)) for p in (dataset, archive, restored))
            compress = ctx.run_command(
                ["bash", "-c", f"set -o pipefail; {command.format(level=level)} {source} > {target} && sync {target}"],
                log_name=f"{algorithm}-compress",
            )
            decompress = ctx.run_command(
                ["bash", "-c", f"set -o pipefail; {algorithm} -d -c {target} > {back} && sync {back}"],
                log_name=f"{algorithm}-decompress",
            )
            archive_size = archive.stat().st_size
            if restored.stat().st_size != size:
                raise WorkloadFailed(
                    f"{algorithm}: the restored file has {restored.stat().st_size} bytes, expected {size}"
                )
            # the round trip must give the dataset back bit for bit (checked after the timing)
            if expected_digest and file_digest(restored) != expected_digest:
                raise WorkloadFailed(f"{algorithm}: the restored file differs from the dataset (SHA-256 mismatch)")
            archive.unlink()
            restored.unlink()
            case = {"algorithm": algorithm, "level": level}
            mb = size / 1e6
            measurements += [
                Measurement(metric="compress_time", unit="s", value=compress.wall_s, case=case),
                Measurement(metric="decompress_time", unit="s", value=decompress.wall_s, case=case),
                Measurement(
                    metric="compress_throughput", unit="MB/s", value=mb / compress.wall_s, better="higher", case=case
                ),
                Measurement(
                    metric="decompress_throughput",
                    unit="MB/s",
                    value=mb / decompress.wall_s,
                    better="higher",
                    case=case,
                ),
                Measurement(metric="compression_ratio", unit="x", value=size / archive_size, better=None, case=case),
            ]
        return measurements
