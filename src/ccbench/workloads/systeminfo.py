"""systeminfo: the environment probe, taken again inside the run and kept as samples and raw JSON."""

from __future__ import annotations

import json
import time

from ccbench.model import Measurement
from ccbench.workloads.base import ExecutionContext, Workload, WorkloadParams


class SystemInfoParams(WorkloadParams):
    pass


class SystemInfo(Workload):
    kind = "systeminfo"
    description = "the environment probe (CPU, memory, kernel, TEE with evidence, storage protection) as samples"
    Params = SystemInfoParams
    variant_axes = frozenset({"storage"})
    #: machine facts and the probe's own time: no application result to take a layer's cost from
    primary_metrics = ()

    def run(self, ctx: ExecutionContext) -> list[Measurement]:
        from ccbench.probe import probe

        start = time.perf_counter()
        document = probe(bench_dir=ctx.workdir)
        elapsed = time.perf_counter() - start
        ctx.raw_dir.mkdir(parents=True, exist_ok=True)
        (ctx.raw_dir / "probe.json").write_text(json.dumps(document, indent=2, default=str))
        facts = {
            "tee_technology": document["tee"]["technology"],
            "tee_evidence": [f"{e['source']}: {e['signal']}" for e in document["tee"]["evidence"]],
            "cpu_model": document["cpu"].get("model"),
            "kernel_release": document["kernel"]["release"],
            "virtualization": document["virtualization"],
            "storage_protection": document["storage"].get("protection"),
        }
        measurements = [
            Measurement(metric="probe_time", unit="s", value=elapsed, better="lower", metadata=facts),
            Measurement(metric="cpu_threads", unit="count", value=document["cpu"].get("threads") or 0, better=None),
        ]
        total = document["memory"].get("total_bytes")
        if total:
            measurements.append(Measurement(metric="memory_total", unit="bytes", value=total, better=None))
        return measurements
