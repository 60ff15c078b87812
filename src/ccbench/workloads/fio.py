"""fio: the block-size x access-pattern matrix of seed 000 (and the mixed job of seed 003).

Each execution runs every selected job one after the other (``stonewall``) on one data file in the
workload's directory (the storage variant's directory), and parses fio's JSON output into
throughput (MB/s), IOPS and completion latency (mean, p50, p99 in microseconds), per direction.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator

from ccbench.formats import FormatError
from ccbench.formats import fio as fio_format
from ccbench.model import Measurement
from ccbench.workloads.base import (
    DEVICE_IO_CHECK,
    ExecutionContext,
    PrepareContext,
    Workload,
    WorkloadFailed,
    WorkloadParams,
)

Pattern = Literal["read", "write", "randread", "randwrite", "readwrite", "randrw"]
DATA_FILE = "ccbench-fio.dat"


class FioParams(WorkloadParams):
    blocksizes: list[str] = Field(default_factory=lambda: ["4k", "64k", "1m"])
    patterns: list[Pattern] = Field(default_factory=lambda: ["read", "write", "randread", "randwrite"])
    size: str = "256M"
    runtime: int = Field(10, ge=1, description="seconds per job")
    ramp_time: int = Field(0, ge=0)
    iodepth: int = Field(16, ge=1)
    numjobs: int = Field(1, ge=1)
    direct: bool = True
    ioengine: str = "libaio"
    #: share of reads in the mixed patterns (readwrite, randrw)
    rwmixread: int = Field(70, ge=0, le=100)
    #: run each job for ``runtime`` seconds, going over the file again (fio's time_based); false: each
    #: job reads or writes ``size`` once (at most ``runtime``), so that buffered reads of a file fio
    #: has dropped from the page cache (its ``invalidate``, on by default) read cold data only
    time_based: bool = True
    #: open the file O_SYNC (fio's sync): a buffered write returns once written back, so its time
    #: holds what writeback costs (an encrypting file system encrypts there, not in the write call)
    sync: bool = False

    @field_validator("blocksizes")
    @classmethod
    def _sizes(cls, values: list[str]) -> list[str]:
        for value in values:
            if not value or not value[:-1].isdigit() and not value.isdigit():
                raise ValueError(f"block size {value!r} is not like 4k, 64k, 1m")
        if not values:
            raise ValueError("list at least one block size")
        return [v.lower() for v in values]


def supports_direct_io(directory: Path) -> bool:
    """tmpfs and some FUSE filesystems refuse O_DIRECT: find out before fio fails on it."""
    test = directory / ".ccbench-odirect-test"
    try:
        fd = os.open(test, os.O_CREAT | os.O_WRONLY | os.O_DIRECT, 0o600)
    except OSError:
        return False
    else:
        os.close(fd)
        return True
    finally:
        try:
            test.unlink()
        except OSError:
            pass


#: statx(2)'s request for the direct-I/O alignment (Linux 6.1+) and where struct statx keeps it
STATX_DIOALIGN = 0x2000
_STATX_SIZE, _DIO_MEM_ALIGN_OFFSET = 256, 152


def kernel_direct_io(path: Path) -> bool | None:
    """Whether the kernel serves O_DIRECT on this file as direct I/O, as statx(2) reports it
    (STATX_DIOALIGN: a memory alignment of 0 means "no direct I/O": the filesystem falls back to
    buffered I/O, as ext4 does for an fscrypt file without inline encryption, although the open with
    O_DIRECT succeeds). None where the kernel, the C library or the filesystem (tmpfs, FUSE) does not
    say."""
    import ctypes

    try:
        statx = ctypes.CDLL(None, use_errno=True).statx
    except (OSError, AttributeError):
        return None
    buffer = ctypes.create_string_buffer(_STATX_SIZE)
    at_fdcwd = -100
    if statx(at_fdcwd, os.fsencode(path), 0, STATX_DIOALIGN, buffer) != 0:
        return None
    mask = int.from_bytes(buffer.raw[0:4], sys.byteorder)
    if not mask & STATX_DIOALIGN:
        return None
    offset = _DIO_MEM_ALIGN_OFFSET
    return int.from_bytes(buffer.raw[offset : offset + 4], sys.byteorder) != 0


def job_file(params: FioParams, directory: Path, direct: bool, parts: list[dict[str, str]] | None = None) -> str:
    """fio's job file: one job per block size and pattern, in that order; with ``parts``, only the
    jobs they name (``{"bs": "4k", "rw": "randread"}``; ExecutionContext.parts)."""
    chosen = None if parts is None else {(part.get("bs"), part.get("rw")) for part in parts}
    lines = [
        "[global]",
        f"directory={directory}",
        f"filename={DATA_FILE}",
        f"size={params.size}",
        f"ioengine={params.ioengine}",
        f"iodepth={params.iodepth}",
        f"numjobs={params.numjobs}",
        f"direct={1 if direct else 0}",
        f"runtime={params.runtime}",
        f"ramp_time={params.ramp_time}",
        *(["time_based=1"] if params.time_based else []),
        *(["sync=1"] if params.sync else []),
        "group_reporting=1",
        "randrepeat=1",
        "norandommap=1",
        "",
    ]
    for bs in params.blocksizes:
        for pattern in params.patterns:
            if chosen is not None and (bs, pattern) not in chosen:
                continue
            lines += [f"[{bs}_{pattern}]", "stonewall", f"bs={bs}", f"rw={pattern}"]
            if pattern in ("readwrite", "randrw"):
                lines.append(f"rwmixread={params.rwmixread}")
            lines.append("")
    return "\n".join(lines)


def parse_fio_json(document: dict) -> list[Measurement]:
    """fio's JSON through the shared parser (ccbench.formats.fio); a case the options leave open is
    read from the job's name, which this workload writes as ``<bs>_<pattern>`` (job_file)."""
    try:
        measurements = fio_format.parse(document)
    except FormatError as exc:
        raise WorkloadFailed(f"{exc} (see raw/fio.json)") from None
    for measurement in measurements:
        bs, _, pattern = str(measurement.metadata.get("job", "")).partition("_")
        measurement.case = {"bs": bs, "rw": pattern, **measurement.case}
    return measurements


def _load_json_output(text: str) -> dict:
    # fio may print warnings before the JSON document
    start = text.find("{")
    if start < 0:
        raise WorkloadFailed("fio printed no JSON")
    try:
        return json.loads(text[start:])
    except ValueError as exc:
        raise WorkloadFailed(f"fio's JSON output is unreadable: {exc}") from None


class Fio(Workload):
    kind = "fio"
    description = "fio matrix {4k,64k,1m} x {seq,rand} x {read,write} (+ mixed): MB/s, IOPS, clat mean/p50/p99"
    Params = FioParams
    variant_axes = frozenset({"storage"})
    system_checks = (DEVICE_IO_CHECK,)
    setup_component = "core"
    matrix_params = frozenset({"blocksizes", "patterns"})
    #: throughput per block size and pattern (IOPS is the same figure per operation; latencies explain it)
    primary_metrics = ("throughput",)
    #: a job runs alone in a settle round (each job lays out or reuses the one data file)
    selectable = ("bs", "rw")

    def requirements(self) -> str | None:
        if shutil.which("fio") is None:
            return "fio is not installed: run 'bash scripts/setup.sh' (or apt-get install fio)"
        return None

    def cleanup(self, ctx: PrepareContext) -> None:
        try:
            (ctx.workdir / DATA_FILE).unlink()
        except OSError:
            pass

    def run(self, ctx: ExecutionContext) -> list[Measurement]:
        params: FioParams = self.params
        ctx.workdir.mkdir(parents=True, exist_ok=True)
        direct = params.direct and supports_direct_io(ctx.workdir)
        ctx.raw_dir.mkdir(parents=True, exist_ok=True)
        job_path = ctx.raw_dir / "fio.job"
        text = job_file(params, ctx.workdir, direct, ctx.parts)
        if "stonewall" not in text:
            raise WorkloadFailed(
                f"none of the parts a settle round asked for is a job of this matrix: {ctx.parts} "
                "(a ccbench bug: run the plan without settle, and report it)"
            )
        job_path.write_text(text)
        output = ctx.raw_dir / "fio.json"
        ctx.run_command(["fio", "--output-format=json", f"--output={output}", str(job_path)], log_name="fio")
        measurements = parse_fio_json(_load_json_output(output.read_text(errors="replace")))
        # O_DIRECT opened is not O_DIRECT served: the kernel says per file (ext4 with fscrypt without
        # inline encryption serves it buffered; docs/analysis.md, "Implausible rows")
        served = kernel_direct_io(ctx.workdir / DATA_FILE) if direct else None
        facts = {"direct_effective": direct and served is not False, "ioengine": params.ioengine}
        if direct:
            facts["direct_served"] = {True: "direct", False: "buffered", None: "not reported"}[served]
        for m in measurements:
            m.metadata.update(facts)
        return measurements
