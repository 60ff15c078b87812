"""ccbench's work directory: one run at a time in it, writable, and cleared of what killed runs left."""

from __future__ import annotations

import fcntl
import os
import tempfile
from pathlib import Path

from ccbench.basics.errors import Busy, CCBenchError

#: the work directory of run, cleanup, gate --confirm and machines run when --workdir is not given
DEFAULT_WORKDIR = ".ccbench/work"


class WorkdirLock:
    """One run per work directory: cleaning up a killed run's mounts must not touch a live run's."""

    def __init__(self, workdir: Path):
        self.path = workdir / ".lock"
        self.handle = None

    def __enter__(self):
        self.handle = open(self.path, "w")
        try:
            fcntl.flock(self.handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self.handle.close()
            raise Busy(
                f"another ccbench run is using the work directory {self.path.parent}; wait for it or pass a different --workdir"
            ) from None
        self.handle.write(str(os.getpid()))
        self.handle.flush()
        return self

    def __exit__(self, *exc):
        if self.handle:
            fcntl.flock(self.handle, fcntl.LOCK_UN)
            self.handle.close()


def prepare_workdir(workdir: Path) -> Path:
    try:
        workdir.mkdir(parents=True, exist_ok=True)
        probe_file = workdir / ".write-test"
        probe_file.write_text("")
        probe_file.unlink()
    except OSError as exc:
        raise CCBenchError(f"work directory {workdir} is not writable ({exc.strerror}); pass --workdir DIR") from None
    return workdir.resolve()


def cleanup_stale(workdir: Path) -> list[str]:
    """Undo what a killed earlier run left behind under workdir: what workloads left (servers,
    first: their data may sit in a storage variant's directory), mounts, loop devices and keys, and
    emulated hosts (network namespaces, bridges, veths) whose owner is gone. Callers hold the
    workdir lock, so nothing here belongs to a live run. Emulated hosts a killed run made under
    another work directory go too (topology's machine-wide index): each has a lock of its own, held
    by its owner while it lives."""
    from ccbench import topology
    from ccbench.observe import counters
    from ccbench.variants import storage
    from ccbench.workloads import cleanup_stale as workloads_cleanup_stale

    removed = workloads_cleanup_stale(workdir)
    removed += storage.cleanup_stale(workdir)
    removed += topology.cleanup_stale(workdir)
    removed += counters.cleanup_stale(workdir)
    return removed


def unwritable(directory: Path) -> str | None:
    """Why no directory can be made in ``directory`` or below it (which need not exist yet), or None.
    Tried for real, by making and removing a directory in the nearest one that exists: os.access
    answers yes to root even where nothing can be made, as in /proc."""
    existing = Path(os.path.abspath(directory))
    while not os.path.lexists(existing):
        existing = existing.parent
    if not existing.is_dir():
        return f"{existing} is not a directory"
    try:
        probe = tempfile.mkdtemp(prefix=".ccbench-write-test-", dir=existing)
    except OSError as exc:
        return exc.strerror or str(exc)
    os.rmdir(probe)
    return None
