"""Where the network workload's parties run, and the servers it starts.

``hosts = "emulated"``: a server host and a client host on this machine (two network namespaces on
one bridge, their links shaped by ``tc tbf``: ccbench.topology), under the run's work directory so
that ``ccbench cleanup`` finds what a killed run left. ``hosts = "peer"``: the client runs here and
the server on another machine (started there by the fleet for the run; see docs/network.md).

Every server the workload starts is written to a ledger (``<run workdir>/network/servers-*.json``)
before it starts, runs under ``timeout`` (so it ends by itself after the execution's bound even if
everything else is killed), and is stopped when the execution ends, fails or is interrupted;
``cleanup_stale`` stops what a killed run's ledger still lists.
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from ccbench.basics.ledger import Ledger, read_entries
from ccbench.basics.procs import same_process, stop_tree
from ccbench.basics.stopping import block_stop_signals
from ccbench.workloads.base import ExecutionContext, WorkloadFailed, tail
from ccbench.workloads.network.params import NetworkParams

#: the kind's directory under the run's work directory (Workload.cleanup_stale looks there)
KIND_DIR = "network"
#: how long a server gets to start listening
LISTEN_WAIT_S = 10.0


def run_workdir(path: Path) -> Path:
    """The run's work directory (the one holding the runner's .lock) above path, where `ccbench
    cleanup` looks for emulated hosts and ledgers; path itself when there is none."""
    for candidate in [path, *path.parents]:
        if (candidate / ".lock").exists():
            return candidate
    return path


class Servers:
    """The servers one execution started, each recorded before it starts."""

    def __init__(self, directory: Path):
        name = f"servers-{os.getpid()}-{secrets.token_hex(3)}.json"
        self.ledger = Ledger(directory / KIND_DIR / name, {"owner_pid": os.getpid()})

    def start(
        self,
        name: str,
        argv: Sequence[str],
        *,
        bound_s: float,
        log: Path,
        listens: tuple[str, int],
        host=None,
    ) -> subprocess.Popen:
        """Start ``argv`` (inside ``host``, an emulated host, when given) under ``timeout bound_s``
        and wait until it listens on ``listens`` (protocol, port)."""
        entry = self.ledger.record({"kind": "server", "name": name, "argv": list(argv), "port": listens[1]})
        bounded = ["timeout", "-k", "5", str(int(bound_s) + 1), *argv]
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "ab") as output:
            kwargs = {"stdout": output, "stderr": subprocess.STDOUT, "stdin": subprocess.DEVNULL}
            if host is not None:
                process = host.popen(bounded, **kwargs)
            else:
                process = subprocess.Popen(bounded, start_new_session=True, **kwargs)
        found = same_process(process.pid)
        self.ledger.update(entry, pid=process.pid, create_time=found.create_time() if found else None)
        self._wait_listening(name, process, listens, log, host)
        return process

    @staticmethod
    def _wait_listening(name: str, process: subprocess.Popen, listens: tuple[str, int], log: Path, host) -> None:
        protocol, port = listens
        argv = ["ss", "-H", "-ln" + ("t" if protocol == "tcp" else "u"), f"sport = :{port}"]
        argv = host.command(argv) if host is not None else argv
        deadline = time.monotonic() + LISTEN_WAIT_S
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise WorkloadFailed(
                    f"{name} server exited ({process.returncode}) before listening: {tail(log.read_text(errors='replace'), 3, 300)}"
                )
            if subprocess.run(argv, capture_output=True, text=True, timeout=10).stdout.strip():
                return
            time.sleep(0.05)
        raise WorkloadFailed(f"{name} server did not listen on {protocol} port {port} within {LISTEN_WAIT_S:.0f} s")

    def stop_all(self) -> list[str]:
        """Stop every recorded server (newest first) and remove the ledger."""
        done = self.ledger.undo(_stop_entry)
        self.ledger.path.unlink(missing_ok=True)
        return done


def _stop_entry(entry: dict) -> list[str]:
    process = same_process(entry.get("pid"), entry.get("create_time"))
    if process is None:
        return []
    stop_tree(process, grace=3.0)
    return [f"stopped {entry.get('name', 'server')} (pid {entry['pid']})"]


def cleanup_stale(workdir: Path) -> list[str]:
    """Stop the servers that killed runs' ledgers list under workdir/network/, and remove the ledgers."""
    removed: list[str] = []
    for path in sorted((Path(workdir) / KIND_DIR).glob("servers-*.json")):
        entries, _ = read_entries(path)
        for entry in reversed(entries):
            removed += _stop_entry(entry)
        path.unlink(missing_ok=True)
        removed.append(f"removed {path}")
    return removed


class Placement:
    """The execution's two ends: ``address`` is the server's; ``client(argv)`` is how the client
    side runs a command; ``start_server`` starts one (not in peer mode: the peer serves)."""

    def __init__(self, address: str, servers: Servers | None = None, server_host=None, client_host=None):
        self.address = address
        self.servers = servers
        self.server_host = server_host
        self.client_host = client_host

    @property
    def peer(self) -> bool:
        return self.servers is None

    def client(self, argv: Sequence[str]) -> list[str]:
        return self.client_host.command(argv) if self.client_host is not None else list(argv)

    def start_server(self, name: str, argv: Sequence[str], *, bound_s: float, log: Path, listens: tuple[str, int]):
        assert self.servers is not None, "a peer placement starts no server"
        return self.servers.start(name, argv, bound_s=bound_s, log=log, listens=listens, host=self.server_host)


@contextmanager
def placement(params: NetworkParams, ctx: ExecutionContext) -> Iterator[Placement]:
    """The execution's placement; on the way out (success, failure, SIGINT, or SIGTERM, which the
    topology turns into SystemExit) its servers are stopped and its emulated hosts removed."""
    if params.hosts == "peer":
        address = params.peer_address()
        if not address:
            raise WorkloadFailed("hosts = 'peer' but no peer address: set peer = ADDRESS or run it in a fleet")
        yield Placement(address)
        return
    from ccbench.topology import LinkShape, Topology

    directory = run_workdir(Path(ctx.workdir))
    topology = Topology(directory, name="net")
    servers = Servers(directory)
    topology.__enter__()
    try:
        server_host = topology.add_host("server")
        client_host = topology.add_host("client")
        topology.connect([server_host, client_host], shape=LinkShape(rate=params.rate, delay=params.delay))
        yield Placement(server_host.address, servers, server_host, client_host)
    finally:
        # a second SIGTERM (the runner signals the worker and its process group) must not cut the
        # clean-up short: signals wait until it is done, then end the process as they would have
        mask = block_stop_signals()
        try:
            servers.stop_all()
        finally:
            topology.__exit__(None, None, None)
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
