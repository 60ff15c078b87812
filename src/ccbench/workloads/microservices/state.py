"""A chain's record: which servers it started (each saved before it starts) and how to stop them, by
the run that started them or, after a kill, by ``ccbench cleanup`` and the next run."""

from __future__ import annotations

import hashlib
import json
import shutil
import signal
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from ccbench.basics.fsutil import write_json_atomic
from ccbench.basics.procs import same_process, stop_tree

#: chains' state files live in <the run's work directory>/microservices/, beside (not inside) the
#: storage variants' directories, which a stale-storage clean-up may remove first
REGISTRY_DIR = "microservices"
#: how long a server gets to shut down cleanly before it and its descendants are killed
STOP_GRACE_S = 10.0


@dataclass
class Server:
    name: str
    argv: list[str]
    log: str
    port: int
    pid: int | None = None
    create_time: float | None = None
    user: str | None = None
    #: the signal that shuts it down cleanly (postgres: SIGINT = fast shutdown)
    stop_signal: int = signal.SIGTERM


@dataclass
class ChainState:
    """What one started chain consists of; saved as JSON before each server starts."""

    path: Path
    servers: list[Server] = field(default_factory=list)
    #: directories outside the work directory that the chain made (PostgreSQL's, when root)
    extra_dirs: list[str] = field(default_factory=list)
    info: dict[str, Any] = field(default_factory=dict)

    def save(self) -> None:
        doc = {"servers": [vars(s) for s in self.servers], "extra_dirs": self.extra_dirs, "info": self.info}
        write_json_atomic(self.path, doc, indent=1)

    @classmethod
    def load(cls, path: Path) -> ChainState:
        doc = json.loads(path.read_text())
        return cls(
            path=path,
            servers=[Server(**s) for s in doc.get("servers", [])],
            extra_dirs=doc.get("extra_dirs", []),
            info=doc.get("info", {}),
        )

    def server(self, name: str) -> Server:
        for s in self.servers:
            if s.name == name:
                return s
        raise KeyError(name)


def server_process(server: Server) -> psutil.Process | None:
    """The server's process if it is still the one that was started (pid and start time match)."""
    return same_process(server.pid, server.create_time)


def stop_server(server: Server, grace: float = STOP_GRACE_S) -> bool:
    """Stop one server and its descendants; True when something was running. The clean-shutdown
    signal goes to the server alone (PostgreSQL and nginx stop their own children); whatever of the
    tree is left after the grace is killed."""
    proc = server_process(server)
    if proc is None:
        return False
    return stop_tree(proc, first_signal=server.stop_signal, grace=grace, children_first_signal=False)


def stop_chain(state: ChainState) -> list[str]:
    stopped = []
    for server in reversed(state.servers):
        if stop_server(server):
            stopped.append(f"stopped {server.name} (pid {server.pid})")
    for directory in state.extra_dirs:
        if Path(directory).exists():
            shutil.rmtree(directory, ignore_errors=True)
            stopped.append(f"removed {directory}")
    return stopped


def run_workdir(path: Path) -> Path:
    """The run's work directory (the one holding the runner's .lock) above path, where `ccbench
    cleanup` looks for emulated hosts; path itself when there is none."""
    for candidate in [path, *path.parents]:
        if (candidate / ".lock").exists():
            return candidate
    return path


def state_file(workdir: Path) -> Path:
    """Where the state of the chain serving work directory ``workdir`` is recorded."""
    key = hashlib.sha1(str(Path(workdir).resolve()).encode()).hexdigest()[:12]
    return run_workdir(Path(workdir)) / REGISTRY_DIR / f"chain-{key}.json"


def cleanup_stale(workdir: Path) -> list[str]:
    """Stop the servers and remove the directories that a killed run's chains left under workdir."""
    removed: list[str] = []
    for path in sorted((Path(workdir) / REGISTRY_DIR).glob("chain-*.json")):
        try:
            state = ChainState.load(path)
        except (OSError, ValueError, TypeError):
            continue
        removed += stop_chain(state)
        path.unlink(missing_ok=True)
        removed.append(f"removed {path}")
    return removed
