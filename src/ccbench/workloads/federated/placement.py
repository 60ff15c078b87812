"""Where the parties run: every one on loopback (``hosts = "local"``) or each on its own emulated
host (``hosts = "emulated"``: a network namespace made and removed by ``ccbench.topology``)."""

from __future__ import annotations

import json
import subprocess
from typing import Any

from ccbench.workloads.base import ExecutionContext
from ccbench.workloads.federated.params import FederatedParams


class LocalHosts:
    """Every party on this machine's loopback."""

    local = True

    def address(self, name: str) -> str:
        return "127.0.0.1"

    def popen(self, name: str, argv: list[str], **kwargs) -> subprocess.Popen:
        return subprocess.Popen(argv, **kwargs)


class EmulatedHosts(LocalHosts):
    """Each party in its own network namespace, at that namespace's address."""

    local = False

    def __init__(self, parties: dict[str, Any]):
        self.parties = parties

    def address(self, name: str) -> str:
        return self.parties[name].address

    def popen(self, name: str, argv: list[str], **kwargs) -> subprocess.Popen:
        return self.parties[name].popen(argv, **kwargs)


class placement:
    """Context manager giving the execution's hosts; namespaces are made and removed by the topology module."""

    def __init__(self, params: FederatedParams, ctx: ExecutionContext, names: list[str]):
        self.params, self.ctx, self.names = params, ctx, names
        self.topology = None

    def __enter__(self) -> LocalHosts:
        if self.params.hosts == "local":
            return LocalHosts()
        from ccbench.topology import LinkShape, Topology

        self.topology = Topology(self.ctx.workdir, name="fl")
        self.topology.__enter__()
        try:
            parties = {"aggregator": self.topology.add_host("agg")}
            for name in self.names:
                parties[name] = self.topology.add_host(name)
            shape = LinkShape(rate=self.params.rate, delay=self.params.delay)
            self.topology.connect(list(parties.values()), shape=shape)
        except BaseException as exc:
            # __exit__ is not called when __enter__ raises: remove the hosts made so far here
            self.topology.__exit__(type(exc), exc, exc.__traceback__)
            raise
        (self.ctx.raw_dir / "hosts.json").write_text(
            json.dumps({name: {"netns": host.netns, "address": host.address} for name, host in parties.items()})
        )
        return EmulatedHosts(parties)

    def __exit__(self, *exc) -> None:
        if self.topology is not None:
            self.topology.__exit__(*exc)
