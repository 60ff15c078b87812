"""The federated workload as the runner sees it: what it needs, and one execution (data shards, then
the federation on its hosts, then the work directory removed)."""

from __future__ import annotations

import os
import shutil
from typing import Any, ClassVar

from ccbench.model import Measurement
from ccbench.workloads.base import ExecutionContext, Workload, WorkloadFailed
from ccbench.workloads.federated.federation import federate
from ccbench.workloads.federated.params import FederatedParams
from ccbench.workloads.federated.placement import placement
from ccbench.workloads.federated.proxies import proxy_binary
from ccbench.workloads.federated.workspace import openfl_python, prepare_data

TRANSPORTS = ("plain", "tls", "securechannel")


class Federated(Workload):
    kind = "federated"
    description = (
        "seed 001: OpenFL federated training (aggregator + collaborators) over plaintext, TLS and the secure channel"
    )
    Params = FederatedParams
    variant_axes = frozenset({"transport"})
    #: the federation's wall-clock (seed 001's Table II); rounds, communication time and handshakes explain it
    primary_metrics = ("wall_clock",)
    setup_component: ClassVar[str | None] = "federated"

    def requirements(self) -> str | None:
        python = openfl_python()
        if not python.exists():
            return f"OpenFL's environment is not installed ({python}): run 'bash scripts/setup.sh --with federated'"
        if self.params.hosts == "emulated":
            from ccbench import topology

            reason = topology.available(self.link_shape())
            if reason:
                return f"hosts = 'emulated' cannot run here ({reason}); use hosts = 'local' or change rate/delay"
        return None

    def variant_requirements(self, transport: str) -> str | None:
        if transport == "securechannel" and not proxy_binary().exists():
            return (
                f"the secure-channel proxy is not built ({proxy_binary()}): "
                "run 'bash scripts/setup.sh --with federated'"
            )
        if self.params.hosts == "emulated":
            from ccbench import topology

            reason = topology.available(self.link_shape())
            if reason:
                return f"hosts = 'emulated' cannot run here ({reason}); use hosts = 'local'"
        return None

    def link_shape(self):
        from ccbench.topology import LinkShape

        return LinkShape(rate=self.params.rate, delay=self.params.delay)

    def run(self, ctx: ExecutionContext) -> list[Measurement]:
        p = self.params
        transport = ctx.variant.get("transport", "plain")
        if transport not in TRANSPORTS:
            raise WorkloadFailed(f"unknown transport {transport!r}: use plain, tls or securechannel")
        ctx.raw_dir.mkdir(parents=True, exist_ok=True)
        problem = self.variant_requirements(transport)
        if problem:
            raise WorkloadFailed(problem)
        names = p.collaborator_names()
        source = p.source()
        root = ctx.workdir / f"federation-{os.getpid()}"
        if root.exists():
            shutil.rmtree(root)
        ws = root / "workspace"
        measurements: list[Measurement] = []
        facts: dict[str, Any] = {"dataset_source": source, "hosts": p.hosts}
        try:
            # harness: data shards (not timed as a metric: data generation is not the workload)
            facts["data"] = prepare_data(ctx, p, source, root, root / "shards")
            with placement(p, ctx, names) as hosts:
                measured = federate(p, hosts, ctx, transport, names, ws, facts, measurements)
            # the federation's wall-clock first: the run summary shows a workload's first metric
            return sorted(measured, key=lambda m: m.metric != "wall_clock")
        finally:
            shutil.rmtree(root, ignore_errors=True)
