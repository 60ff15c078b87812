"""ycsb: the real YCSB core (0.17.0) driving an embedded RocksDB on the storage variant.

For each selected core workload (A to F, with YCSB's standard parameter values) an execution loads
a fresh database in the variant's directory (``load`` phase) and runs the operations (``run``
phase), each in its own JVM, and parses YCSB's report: throughput (ops/s) per phase and, per
operation type, average, p95 and p99 latency (us). The binding is ccbench's own
(java/ycsb-rocksdb), built by ``bash scripts/setup.sh --with ycsb``.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import Literal

from pydantic import Field

from ccbench.model import Measurement
from ccbench.workloads.base import (
    DEVICE_IO_CHECK,
    ExecutionContext,
    Workload,
    WorkloadFailed,
    WorkloadParams,
    selected,
)

BINDING_DIR = Path(__file__).resolve().parents[3] / "java" / "ycsb-rocksdb"
BINDING_CLASS = "ccbench.ycsb.RocksDbBinding"

#: YCSB's standard core workloads (workloads/workloada ... workloadf in the YCSB distribution)
CORE_WORKLOADS: dict[str, dict[str, str]] = {
    "a": {
        "readproportion": "0.5",
        "updateproportion": "0.5",
        "scanproportion": "0",
        "insertproportion": "0",
        "requestdistribution": "zipfian",
    },
    "b": {
        "readproportion": "0.95",
        "updateproportion": "0.05",
        "scanproportion": "0",
        "insertproportion": "0",
        "requestdistribution": "zipfian",
    },
    "c": {
        "readproportion": "1",
        "updateproportion": "0",
        "scanproportion": "0",
        "insertproportion": "0",
        "requestdistribution": "zipfian",
    },
    "d": {
        "readproportion": "0.95",
        "updateproportion": "0",
        "scanproportion": "0",
        "insertproportion": "0.05",
        "requestdistribution": "latest",
    },
    "e": {
        "readproportion": "0",
        "updateproportion": "0",
        "scanproportion": "0.95",
        "insertproportion": "0.05",
        "requestdistribution": "zipfian",
        "maxscanlength": "100",
        "scanlengthdistribution": "uniform",
    },
    "f": {
        "readproportion": "0.5",
        "updateproportion": "0",
        "scanproportion": "0",
        "insertproportion": "0",
        "readmodifywriteproportion": "0.5",
        "requestdistribution": "zipfian",
    },
}
LINE = re.compile(r"^\[(?P<op>[A-Z-]+)\], (?P<name>[^,]+), (?P<value>[-0-9.eE]+)\s*$")


class YcsbParams(WorkloadParams):
    workloads: list[Literal["a", "b", "c", "d", "e", "f"]] = Field(default_factory=lambda: list("abcdef"))
    recordcount: int = Field(10_000, ge=1)
    operationcount: int = Field(10_000, ge=1)
    threads: int = Field(1, ge=1)
    fieldcount: int = Field(10, ge=1)
    fieldlength: int = Field(100, ge=1)
    #: every write waits for RocksDB's write-ahead log to be fsynced (a database that commits durably);
    #: off, writes reach the storage only when RocksDB flushes its memtable
    sync_writes: bool = False
    #: RocksDB memtable size (MiB); smaller means more flushes and compactions on the storage
    write_buffer_mb: int | None = Field(None, ge=1)
    #: RocksDB block cache (MiB); RocksDB's default when unset
    block_cache_mb: int | None = Field(None, ge=1)
    java: str = "java"
    #: extra JVM options, e.g. ["-Xmx1g"]
    jvm_options: list[str] = Field(default_factory=lambda: ["-Xmx1g"])


def binding_dir() -> Path:
    return Path(os.environ.get("CCBENCH_YCSB_DIR", BINDING_DIR))


def classpath() -> str:
    directory = binding_dir()
    return f"{directory / 'target' / 'ycsb-rocksdb-0.1.0.jar'}:{directory / 'target' / 'lib' / '*'}"


def parse_report(text: str) -> dict[str, dict[str, float]]:
    """YCSB's report lines ``[OP], Name, value`` -> {op: {name: value}}."""
    report: dict[str, dict[str, float]] = {}
    for line in text.splitlines():
        match = LINE.match(line.strip())
        if match:
            report.setdefault(match["op"], {})[match["name"].strip()] = float(match["value"])
    return report


def measurements_from(report: dict[str, dict[str, float]], phase: str, workload: str) -> list[Measurement]:
    overall = report.get("OVERALL", {})
    if "Throughput(ops/sec)" not in overall:
        raise WorkloadFailed(f"YCSB {phase} of workload {workload} printed no throughput")
    case = {"workload": workload, "phase": phase}
    result = [
        Measurement(metric="throughput", unit="ops/s", value=overall["Throughput(ops/sec)"], better="higher", case=case)
    ]
    for operation, values in report.items():
        if operation in ("OVERALL", "CLEANUP") or operation.endswith("-FAILED"):
            continue
        failed = sum(v for k, v in values.items() if k.startswith("Return=") and k != "Return=OK")
        if failed:
            raise WorkloadFailed(f"YCSB {phase} {workload}: {failed:g} {operation} operations failed")
        op_case = {**case, "operation": operation.lower()}
        # the operations its latencies rest on: a p99 of 2,500 rests on 25 beyond it (the lint says so)
        counted = {"operations": int(values["Operations"])} if "Operations" in values else {}
        for name, metric in (
            ("AverageLatency(us)", "latency_avg"),
            ("95thPercentileLatency(us)", "latency_p95"),
            ("99thPercentileLatency(us)", "latency_p99"),
        ):
            if name in values:
                result.append(
                    Measurement(metric=metric, unit="us", value=values[name], case=op_case, metadata=dict(counted))
                )
    return result


class Ycsb(Workload):
    kind = "ycsb"
    description = "YCSB core workloads A-F on an embedded RocksDB in the storage variant's directory"
    Params = YcsbParams
    variant_axes = frozenset({"storage"})
    system_checks = (DEVICE_IO_CHECK,)
    setup_component = "ycsb"
    matrix_params = frozenset({"workloads"})
    #: operations per second of each YCSB workload, and its operations' tail latency
    primary_metrics = ("throughput", "latency_p99")
    #: each core workload loads and runs its own database: one runs alone in a settle round
    selectable = ("workload",)

    def requirements(self) -> str | None:
        if shutil.which(self.params.java) is None:
            return "java is not installed: run 'bash scripts/setup.sh --with ycsb'"
        if not (binding_dir() / "target" / "ycsb-rocksdb-0.1.0.jar").exists():
            return f"the YCSB binding is not built in {binding_dir()}: run 'bash scripts/setup.sh --with ycsb'"
        return None

    def _client(self, ctx: ExecutionContext, phase_flag: str, letter: str, database: Path) -> str:
        p = self.params
        properties = {
            "workload": "site.ycsb.workloads.CoreWorkload",
            "recordcount": p.recordcount,
            "operationcount": p.operationcount,
            "fieldcount": p.fieldcount,
            "fieldlength": p.fieldlength,
            "readallfields": "true",
            "rocksdb.dir": database,
            "rocksdb.sync": str(p.sync_writes).lower(),
            **CORE_WORKLOADS[letter],
        }
        if p.write_buffer_mb:
            properties["rocksdb.write_buffer_mb"] = p.write_buffer_mb
        if p.block_cache_mb:
            properties["rocksdb.block_cache_mb"] = p.block_cache_mb
        argv = [
            p.java,
            *p.jvm_options,
            "-cp",
            classpath(),
            "site.ycsb.Client",
            phase_flag,
            "-db",
            BINDING_CLASS,
            "-threads",
            str(p.threads),
        ]
        for key, value in properties.items():
            argv += ["-p", f"{key}={value}"]
        result = ctx.run_command(argv, log_name=f"ycsb-{letter}-{phase_flag.strip('-')}")
        return result.stdout

    def run(self, ctx: ExecutionContext) -> list[Measurement]:
        measurements = []
        for letter in selected(ctx.parts, "workload", self.params.workloads):
            database = ctx.workdir / f"ycsb-rocksdb-{letter}"
            shutil.rmtree(database, ignore_errors=True)
            try:
                load = self._client(ctx, "-load", letter, database)
                measurements += measurements_from(parse_report(load), "load", letter)
                run = self._client(ctx, "-t", letter, database)
                measurements += measurements_from(parse_report(run), "run", letter)
            finally:
                shutil.rmtree(database, ignore_errors=True)
        return measurements
