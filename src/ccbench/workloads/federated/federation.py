"""One federation's life cycle: workspace, PKI, parties started, rounds watched, parties stopped,
events summarised. ``federate`` reads as the table of contents; each step is a function below."""

from __future__ import annotations

import ssl
import subprocess
import threading
import time
from pathlib import Path
from typing import IO, Any

from ccbench.basics.netutil import free_port, negotiated_tls
from ccbench.basics.procs import describe_exit, stop_all
from ccbench.model import Measurement
from ccbench.workloads.base import ExecutionContext, WorkloadFailed, tail
from ccbench.workloads.federated.params import FederatedParams
from ccbench.workloads.federated.placement import LocalHosts
from ccbench.workloads.federated.proxies import proxy_cipher, proxy_measurements, start_proxies
from ccbench.workloads.federated.summary import completed_rounds, read_events, summarize
from ccbench.workloads.federated.workspace import (
    WORKSPACE_FILES,
    build_workspace,
    make_certificates,
    openfl_environment,
    openfl_python,
)

#: the aggregator's port on its own emulated host (nothing else listens there)
EMULATED_AGGREGATOR_PORT = 50051
#: how long parties and proxies get between SIGTERM and SIGKILL once the federation is over
STOP_GRACE_S = 5.0
#: how long collaborators get to leave on their own after the aggregator finished
COLLABORATOR_EXIT_S = 60
#: how long the TLS probe keeps trying to reach the aggregator
TLS_PROBE_PATIENCE_S = 300

#: (party or proxy, its exit status or what went wrong)
Failure = tuple[str, int | str]


def federate(
    p: FederatedParams,
    hosts: LocalHosts,
    ctx: ExecutionContext,
    transport: str,
    names: list[str],
    ws: Path,
    facts: dict[str, Any],
    measurements: list[Measurement],
) -> list[Measurement]:
    """Run one federation on ``hosts`` and return its samples (``measurements`` grows with the
    harness steps as they are done). Raises WorkloadFailed when a party fails."""
    agg_addr = hosts.address("aggregator")
    agg_port = free_port() if hosts.local else EMULATED_AGGREGATOR_PORT
    use_tls = transport == "tls"
    measurements.append(build_workspace(ctx, p, ws, agg_addr, agg_port, use_tls, names))
    if use_tls:
        measurements.append(make_certificates(ws, agg_addr, names, facts))
    events_path = ctx.raw_dir / "events.jsonl"
    parties = Parties(ctx, hosts)
    probe = None
    try:
        connect: dict[str, str] = {}
        if transport == "securechannel":
            connect = _start_channel(p, parties, names, agg_port, measurements)
        launched = time.time()
        parties.launch(_party_commands(p, names, events_path, connect), cwd=ws)
        if use_tls:
            probe = TlsProbe(hosts, agg_addr, agg_port, ws / "cert", names[0])
            probe.start()
        failure = parties.watch_rounds(names)
        finished = time.time()
        failure = failure or parties.await_collaborators(names)
    finally:
        parties.stop()
    if probe is not None:
        _record_negotiated_tls(probe, facts)
    events = read_events(events_path)
    if failure is not None:
        raise _federation_failed(failure, events, p.rounds, parties)
    measurements += summarize(events, names, launched, finished)
    if parties.proxies:
        measurements += proxy_measurements(ctx.raw_dir, parties.proxies)
        facts["transport_cipher"] = proxy_cipher(ctx.raw_dir)
    if not any(m.metric == "round_time" for m in measurements):
        raise WorkloadFailed("the federation ended without a completed round (see raw/aggregator.log)")
    for m in measurements:
        m.metadata.update(facts)
        m.metadata.setdefault("transport", transport)
    return measurements


class Parties:
    """The federation's processes (aggregator, collaborators, proxies) and their log files."""

    def __init__(self, ctx: ExecutionContext, hosts: LocalHosts):
        self.ctx, self.hosts = ctx, hosts
        self.procs: dict[str, subprocess.Popen] = {}
        self.proxies: dict[str, subprocess.Popen] = {}
        self.logs: dict[str, IO[bytes]] = {}

    def launch(self, commands: dict[str, list[str]], cwd: Path) -> None:
        """Start every party on its host, output to raw/<party>.log."""
        env = openfl_environment()
        for name, argv in commands.items():
            self.logs[name] = open(self.ctx.raw_dir / f"{name}.log", "wb")
            self.procs[name] = self.hosts.popen(
                name, argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=self.logs[name], stderr=subprocess.STDOUT
            )

    def watch_rounds(self, names: list[str]) -> Failure | None:
        """Wait until the aggregator exits (all rounds done) or a collaborator or proxy fails first."""
        while True:
            aggregator_code = self.procs["aggregator"].poll()
            failure = self._first_failure(names)
            if failure is not None:
                return failure
            if aggregator_code is not None:
                return None if aggregator_code == 0 else ("aggregator", aggregator_code)
            time.sleep(0.1)

    def _first_failure(self, names: list[str]) -> Failure | None:
        for name in names:
            code = self.procs[name].poll()
            if code not in (None, 0):
                return name, code
        for key, proxy in self.proxies.items():
            if proxy.poll() is not None:
                return key, proxy.returncode
        return None

    def await_collaborators(self, names: list[str]) -> Failure | None:
        """The aggregator has sent every collaborator its quit job: they end on their own."""
        for name in names:
            try:
                code = self.procs[name].wait(timeout=COLLABORATOR_EXIT_S)
            except subprocess.TimeoutExpired:
                return name, f"did not exit within {COLLABORATOR_EXIT_S} s of the federation's end"
            if code != 0:
                return name, code
        return None

    def stop(self) -> None:
        """Parties first, then the proxies they talk through (each process with its descendants)."""
        try:
            stop_all(self.procs.values(), grace=STOP_GRACE_S)
            stop_all(self.proxies.values(), grace=STOP_GRACE_S)
        finally:
            for handle in self.logs.values():
                handle.close()

    def log_path(self, name: str) -> Path:
        """A party's combined output, or a proxy's stderr (its stdout is the proxy's counters)."""
        suffix = "stderr" if name in self.proxies else "log"
        return self.ctx.raw_dir / f"{name}.{suffix}"


def _start_channel(
    p: FederatedParams, parties: Parties, names: list[str], agg_port: int, measurements: list[Measurement]
) -> dict[str, str]:
    """The secure channel's proxies, timed; returns the address each collaborator dials."""
    start = time.perf_counter()
    connect = start_proxies(
        parties.hosts, parties.ctx, p.channel_evidence, names, agg_port, parties.proxies, parties.logs
    )
    measurements.append(
        Measurement(
            metric="proxy_startup_time",
            unit="s",
            value=time.perf_counter() - start,
            metadata={"what": "ccbench harness: ccchannel-proxy processes started and listening (one per host)"},
        )
    )
    return connect


def _party_commands(
    p: FederatedParams, names: list[str], events_path: Path, connect: dict[str, str]
) -> dict[str, list[str]]:
    """party.py in OpenFL's environment: the aggregator, then each collaborator (dialling its own
    proxy when the secure channel carries the connection)."""
    python, party = str(openfl_python()), str(WORKSPACE_FILES / "party.py")
    commands = {
        "aggregator": [python, party, "aggregator", "--events", str(events_path), "--task-poll", str(p.task_poll_s)]
    }
    for name in names:
        commands[name] = [python, party, "collaborator", "--name", name, "--events", str(events_path)]
        if name in connect:
            commands[name] += ["--connect", connect[name]]
    return commands


def _federation_failed(failure: Failure, events: list[dict], rounds: int, parties: Parties) -> WorkloadFailed:
    name, code = failure
    how = describe_exit(code) if isinstance(code, int) else code
    log = parties.log_path(name)
    log_tail = tail(log.read_text(errors="replace"), 3, 500) if log.exists() else "(no output)"
    return WorkloadFailed(
        f"federation failed: {name} {how} after {len(completed_rounds(events))} of {rounds} round(s); "
        f"the other parties were stopped (log raw/{log.name}: {log_tail})"
    )


class TlsProbe(threading.Thread):
    """Ask the aggregator's TLS endpoint which suite it negotiates (grpcio does not expose it)."""

    def __init__(self, hosts: LocalHosts, address: str, port: int, cert_dir: Path, collaborator: str):
        super().__init__(daemon=True)
        self.hosts, self.address, self.port = hosts, address, port
        self.cert_dir, self.collaborator = cert_dir, collaborator
        self.cipher: str | None = None
        self.version: str | None = None

    def run(self) -> None:
        if not self.hosts.local:
            return  # the aggregator is inside its namespace: not reachable from here
        client = self.cert_dir / "client" / f"col_{self.collaborator}"
        deadline = time.monotonic() + TLS_PROBE_PATIENCE_S
        while time.monotonic() < deadline:
            try:
                self.cipher, self.version = negotiated_tls(
                    self.address,
                    self.port,
                    cafile=self.cert_dir / "cert_chain.crt",
                    certfile=Path(f"{client}.crt"),
                    keyfile=Path(f"{client}.key"),
                    alpn=["h2"],
                )
                return
            except (OSError, ssl.SSLError):
                time.sleep(0.5)  # the aggregator is not listening yet


def _record_negotiated_tls(probe: TlsProbe, facts: dict[str, Any]) -> None:
    probe.join(timeout=5)
    facts["transport_cipher"] = probe.cipher
    facts["transport_version"] = probe.version
    facts["transport_cipher_probe"] = (
        "negotiated by a Python ssl (OpenSSL) client holding a collaborator "
        "certificate against the aggregator's gRPC TLS endpoint"
    )
