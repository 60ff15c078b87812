"""ccbench's own processes outside a run's process tree, which the contention check must not count
as neighbours.

A `ccbench run` that the fleet started on a host (a study's guest is one) is followed by the fleet's
agent: about every second the controller runs ``python -m ccbench.fleet.remote status`` there over
SSH. Each call is a few processes (Ansible's module wrapper, the agent), and under software
emulation each takes about a CPU second: counted as other processes' CPU, they alone made every
execution of a study "contended".

Which processes they are is decided by identity, never by name (a user's own ``python3`` beside the
run is a neighbour): each agent call registers the process that serves its connection, with its
start time, in a file of its run directory (``register_connection``). That process is the parent of
the call's session leader: SSH starts every command of a connection in a session of its own, as a
child of the connection's server process, which reaps each command when it ends, so the
connection's CPU with its reaped children is every agent call's CPU. The run learns the file from
``$CCBENCH_OWN_PROCESSES`` (set by the agent's supervisor) and counts those processes' trees apart
(``ccbench.observe.interference``: ``own_cpu_s``), each checked by pid and start time (a recycled pid is
someone else's).
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

#: the variable that names the registry file of the run's own processes
ENV = "CCBENCH_OWN_PROCESSES"
#: the registry's name in a fleet run directory
FILE_NAME = "own-processes.json"


def _stat_fields(pid: int, proc_root: Path = Path("/proc")) -> list[str] | None:
    """The fields of /proc/<pid>/stat after the command name (state is [0], ppid [1], session [3],
    start time in ticks [19])."""
    try:
        text = (proc_root / str(pid) / "stat").read_text(errors="replace")
    except OSError:
        return None
    return text[text.rfind(")") + 2 :].split()


def start_ticks(pid: int, proc_root: Path = Path("/proc")) -> int | None:
    fields = _stat_fields(pid, proc_root)
    try:
        return int(fields[19]) if fields else None
    except (IndexError, ValueError):
        return None


def connection_of(pid: int | None = None) -> tuple[int, int] | None:
    """(pid, start ticks) of the process that started this process's session: the connection's
    server under SSH. None when there is none to name: the session's leader is gone, or was started
    by init (a daemon's session)."""
    pid = os.getpid() if pid is None else pid
    try:
        leader = os.getsid(pid)
    except OSError:
        return None
    fields = _stat_fields(leader)
    if not fields:
        return None
    parent = int(fields[1])
    if parent <= 1:
        return None
    started = start_ticks(parent)
    return (parent, started) if started is not None else None


def registered(path: str | Path | None) -> list[tuple[int, int]]:
    """The (pid, start ticks) the registry holds; [] without one."""
    if not path:
        return []
    try:
        entries = json.loads(Path(path).read_text())
        return [(int(e["pid"]), int(e["start"])) for e in entries]
    except (OSError, ValueError, TypeError, KeyError):
        return []


def register_connection(path: Path) -> tuple[int, int] | None:
    """Add this process's connection to the registry at ``path`` (once; its directory must exist);
    it returns it. An entry lost to a concurrent writer is added again by the connection's next call."""
    connection = connection_of()
    if connection is None or connection in (known := registered(path)):
        return connection
    entries = [{"pid": pid, "start": start} for pid, start in [*known, connection]]
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    with os.fdopen(handle, "w") as out:
        json.dump(entries, out)
    os.replace(temporary, path)
    return connection
