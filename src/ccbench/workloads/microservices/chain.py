"""The chain: nginx -> the Go application tier -> memcached and Redis -> PostgreSQL, placed on
loopback or on emulated hosts, every server recorded in the chain's state before it starts."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any

import psutil

from ccbench.basics.netutil import free_ports, listening, negotiated_tls
from ccbench.workloads.base import WorkloadFailed, tail
from ccbench.workloads.microservices import tiers
from ccbench.workloads.microservices.params import TIERS, MicroservicesParams
from ccbench.workloads.microservices.state import ChainState, Server, stop_chain

#: emulated hosts: tier -> host name (each tier on its own network namespace; the client on "edge")
PLACEMENT = {"nginx": "front", "app": "app", "memcached": "memcached", "redis": "redis", "postgres": "db"}


class Chain:
    """Starts the servers of one chain in ``directory`` and records them in its state file.

    ``hosts="local"``: every tier on 127.0.0.1. ``hosts="emulated"``: each tier in its own network
    namespace (ccbench.topology) on a back-end segment, nginx also on an edge segment with the load
    generator's host, whose links have the plan's ``edge_delay`` and ``edge_rate``."""

    def __init__(
        self,
        directory: Path,
        params: MicroservicesParams,
        transport: str,
        topology_workdir: Path | None = None,
        state_path: Path | None = None,
    ):
        self.dir = directory
        self.params = params
        self.transport = transport
        self.state = ChainState(path=state_path or directory / "chain-state.json")
        self.state.path.parent.mkdir(parents=True, exist_ok=True)
        self.topology_workdir = topology_workdir or directory
        self.topology = None
        self.hosts: dict[str, Any] = {}
        #: tier -> the address it listens on (and is reached at by the other tiers)
        self.address = {tier: "127.0.0.1" for tier in TIERS}
        self.front_address = "127.0.0.1"

    def log_tail(self, server: Server) -> str:
        try:
            return tail(Path(server.log).read_text(errors="replace"), 8, 1200)
        except OSError:
            return "(no log)"

    def start(self, server: Server, ready_timeout: float = 30.0, address: str = "127.0.0.1", **popen: Any) -> None:
        """Record ``server``, start it (in its tier's emulated host when there is one) and wait until
        it listens on address; a server that exits or never listens fails with its log's end."""
        self.state.servers.append(server)
        self.state.save()  # recorded before it starts
        proc = self._launch(server, **popen)
        server.pid = proc.pid
        try:
            server.create_time = psutil.Process(proc.pid).create_time()
        except psutil.Error:
            pass
        self.state.save()
        deadline = time.monotonic() + ready_timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise WorkloadFailed(
                    f"{server.name} exited with {proc.returncode} at start; "
                    f"its log ({server.log}) ends: {self.log_tail(server)}"
                )
            if listening(address, server.port):
                return
            time.sleep(0.05)
        raise WorkloadFailed(
            f"{server.name} did not listen on {address}:{server.port} within {ready_timeout:g} s; "
            f"its log ({server.log}) ends: {self.log_tail(server)}"
        )

    def _launch(self, server: Server, **popen: Any) -> subprocess.Popen:
        host = self.hosts.get(PLACEMENT.get(server.name, ""))
        with open(server.log, "ab") as log:
            try:
                if host is not None:
                    return host.popen(
                        server.argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, **popen
                    )
                return subprocess.Popen(
                    server.argv,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,
                    **popen,
                )
            except OSError as exc:
                raise WorkloadFailed(f"{server.name} did not start: {exc}") from None

    def _place(self) -> None:
        """Emulated hosts: one namespace per tier plus the edge client's; recorded by ccbench.topology."""
        from ccbench.topology import LinkShape, Topology

        p = self.params
        self.topology = Topology(self.topology_workdir, name="ms")
        self.topology.start()
        self.state.info["topology"] = str(self.topology.directory)
        self.state.save()
        for name in ["edge", *PLACEMENT.values()]:
            self.hosts[name] = self.topology.add_host(name)
        shape = LinkShape(rate=p.edge_rate, delay=p.edge_delay) if (p.edge_rate or p.edge_delay) else None
        # root_access: the runner (root namespace) checks readiness and loads the dataset over the segments
        edge = self.topology.connect([self.hosts["edge"], self.hosts["front"]], shape=shape, root_access=True)
        back = self.topology.connect([self.hosts[h] for h in PLACEMENT.values()], root_access=True)
        self.address = {tier: self.hosts[host].address_on(back) for tier, host in PLACEMENT.items()}
        self.front_address = self.hosts["front"].address_on(edge)

    def stop(self) -> list[str]:
        done = stop_chain(self.state)
        if self.topology is not None:
            done += self.topology.teardown()
            self.topology = None
        return done

    def start_all(self) -> dict[str, Any]:
        """Start the tiers from the back (the database) to the front (nginx), load the dataset in
        between, and record what the load generators need to know in the chain's state."""
        self.dir.mkdir(parents=True, exist_ok=True)
        if self.params.hosts == "emulated":
            self._place()
        a = self.address
        nginx_port, app_port, mc_port, redis_port, pg_port = free_ports(5, "127.0.0.1")
        (self.dir / "logs").mkdir(exist_ok=True)
        pg_url, pgdata = tiers.start_postgres(self, pg_port)
        redis_address = f"{a['redis']}:{redis_port}"
        tiers.start_redis(self, redis_port)
        tiers.start_memcached(self, mc_port)
        dataset = tiers.load_dataset(self, pg_url, redis_address)
        tiers.start_app(self, app_port, pg_url, redis_address, f"{a['memcached']}:{mc_port}")
        ca = tiers.start_nginx(self, nginx_port, f"{a['app']}:{app_port}")
        self.state.info = self._info(nginx_port, ca, dataset, pgdata)
        self.state.save()
        return self.state.info

    def _info(self, nginx_port: int, ca: Path | None, dataset: dict[str, Any], pgdata: Path) -> dict[str, Any]:
        p = self.params
        a = self.address
        tls = self.transport == "tls"
        scheme = "https" if tls else "http"
        front = self.front_address
        info = {
            **self.state.info,
            "host": front,
            "port": nginx_port,
            "scheme": scheme,
            "base_url": f"{scheme}://{front}:{nginx_port}",
            "cacert": str(ca) if ca else None,
            "access_log": str(self.dir / "logs" / "access.log"),
            "dataset": dataset,
            "transport": self.transport,
            "hosts": p.hosts,
            "pgdata": str(pgdata),
            # False when the postgres user could not reach the work directory (a storage variant's
            # directory under a private parent): the database then is not on the variant's storage
            "pgdata_in_workdir": self.dir in pgdata.parents,
            # the load generator runs in the edge host when there is one
            "client_prefix": ["ip", "netns", "exec", self.hosts["edge"].netns] if self.hosts else [],
            "placement": {tier: {"host": PLACEMENT[tier], "address": a[tier]} for tier in TIERS}
            if self.hosts
            else None,
            "edge": {"delay": p.edge_delay, "rate": p.edge_rate} if self.hosts else None,
        }
        if tls:
            info["transport_cipher"], info["tls_version"] = negotiated_tls(front, nginx_port, cafile=ca)
        return info
