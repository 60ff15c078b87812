"""What a topology made, and undoing it once its owner is gone.

Each topology records every namespace, bridge, veth and process in ``state.json`` under its state
directory (``<workdir>/topology/<name>-<rid>/``) before making it, and its owner holds a lock on
``owner.lock`` there while it lives. It is also entered in a machine-wide index
(``/run/ccbench/topologies/<rid>/``: a copy of the records, the state directory's path and a lock of
its own, below) before anything is made, so that a run under any work directory finds what a killed
one left. ``cleanup_stale`` undoes the records whose locks nobody holds: those in the work directory
it is given, then those in the index.
"""

from __future__ import annotations

import errno
import fcntl
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from ccbench.basics.fsutil import write_json_atomic
from ccbench.basics.ledger import read_entries

STATE_FILE = "state.json"
LOCK_FILE = "owner.lock"
#: the machine-wide index of topologies (below), and the variable that puts it elsewhere (tests)
INDEX_ROOT = Path("/run/ccbench/topologies")
INDEX_ENV = "CCBENCH_TOPOLOGY_INDEX"
#: a topology's id (``secrets.token_hex(3)``), the name of its index entry
_RID = re.compile(r"^[0-9a-f]{6}$")


def _ip(argv: Sequence[str]) -> subprocess.CompletedProcess:
    """Run an undo step; its failure (the thing is gone already) is not an error."""
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=60)


def _pids_in_netns(netns: str) -> list[int]:
    done = _ip(["ip", "netns", "pids", netns])
    return [int(p) for p in done.stdout.split() if p.isdigit()] if done.returncode == 0 else []


def _kill_netns_processes(netns: str, grace_s: float = 3.0) -> list[int]:
    """SIGTERM everything in the namespace, then SIGKILL what is left after grace_s."""
    pids = _pids_in_netns(netns)
    for pid in pids:
        _signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and _pids_in_netns(netns):
        time.sleep(0.05)
    for pid in _pids_in_netns(netns):
        _signal(pid, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and _pids_in_netns(netns):
        time.sleep(0.05)
    return pids


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _link_exists(name: str) -> bool:
    return Path("/sys/class/net", name).exists()


def _netns_exists(name: str) -> bool:
    return Path("/run/netns", name).exists() or Path("/var/run/netns", name).exists()


def _undo(recorded: list[dict[str, Any]]) -> list[str]:
    """Remove what the ledger lists, newest first. Missing things are fine (already gone). Processes go
    first (asked, then everything inside each namespace, then killed), then namespaces and links."""
    processes = [e for e in recorded if e.get("kind") == "process"]
    entries = [e for e in recorded if e.get("kind") != "process"]
    removed = []
    for proc in processes:
        pid = proc.get("pid")
        if pid and _is_same_process(pid, proc.get("start_time")):
            _signal(pid, signal.SIGTERM)
    for entry in reversed(entries):
        if entry["kind"] == "netns" and _netns_exists(entry["name"]):
            killed = _kill_netns_processes(entry["name"])
            if killed:
                removed.append(f"killed {len(killed)} process(es) in network namespace {entry['name']}")
    for proc in processes:
        pid = proc.get("pid")
        if pid and _is_same_process(pid, proc.get("start_time")):
            _signal(pid, signal.SIGKILL)
            removed.append(f"killed process {pid} ({proc.get('argv0', '?')})")
    for entry in reversed(entries):
        kind, name = entry["kind"], entry["name"]
        if kind == "netns" and _netns_exists(name):
            _ip(["ip", "netns", "delete", name])
            removed.append(f"deleted network namespace {name}")
        elif kind in ("veth", "bridge") and _link_exists(name):
            _ip(["ip", "link", "delete", name])
            removed.append(f"deleted {kind} {name}")
    return removed


def _process_start_time(pid: int) -> str | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rpartition(")")[2].split()[19]


def _is_same_process(pid: int, start_time: str | None) -> bool:
    current = _process_start_time(pid)
    return current is not None and (start_time is None or current == start_time)


def cleanup_stale(workdir: str | os.PathLike) -> list[str]:
    """Remove the namespaces, links and processes of topologies whose owner is gone (killed): those
    under ``<workdir>/topology/``, then those the machine-wide index lists, whatever work directory
    they were made under. A live topology (its owner holds its lock) is left alone."""
    root = Path(workdir) / "topology"
    removed: list[str] = []
    if root.is_dir():
        for directory in sorted(p for p in root.iterdir() if p.is_dir()):
            removed += _sweep_state_directory(directory)
    return removed + sweep_index()


def _sweep_state_directory(directory: Path) -> list[str]:
    """Undo one topology found in a work directory unless its owner lives; its index entry goes too."""
    lock_path = directory / LOCK_FILE
    handle = None
    if lock_path.exists():
        handle = _try_lock(lock_path)
        if handle is None:
            return []  # its owner is alive
    entry_handle = None
    try:
        entries, header = read_entries(directory / STATE_FILE)
        rid = str(header.get("rid", directory.name.rpartition("-")[2]))
        entry = index_root() / rid
        if _RID.match(rid) and (entry / LOCK_FILE).exists():
            entry_handle = _try_lock(entry / LOCK_FILE)
            if entry_handle is None:
                return []  # its owner is alive (still making its state directory), or a sweep of the index has it
            if not _made_here(read_entries(entry / STATE_FILE)[1]):
                return []
        # state files of older versions kept processes in a list of their own
        entries += [{**p, "kind": "process"} for p in header.get("processes", [])]
        removed = _undo(entries)
        shutil.rmtree(directory, ignore_errors=True)
        removed.append(f"removed {directory}")
        if entry_handle and read_entries(entry / STATE_FILE)[1].get("state_directory") == str(directory.resolve()):
            shutil.rmtree(entry, ignore_errors=True)
        return removed
    finally:
        for held in (entry_handle, handle):
            if held:
                held.close()


# ------------------------------------------------------------------------------ the machine-wide index
#
# A topology's state directory lives under the work directory of the run that made it, so a run
# with another work directory (another pytest basetemp, another --workdir) would never see what a
# killed one left there. Each topology therefore also enters itself in an index under /run (tmpfs:
# gone on reboot, like the namespaces themselves): a directory per topology, named by its rid (which
# names all its interfaces, so the index also keeps two live topologies from sharing one), holding
# ``owner.lock`` (locked by the owner as long as it lives) and ``state.json``: the path of the state
# directory and a copy of every record, written before the thing is made. The copy is what a sweep
# of the index undoes: it is root's own (a work directory may be anyone's) and outlives a state
# directory that was deleted with its work directory.


def index_root() -> Path:
    """The directory of the machine-wide index: ``$CCBENCH_TOPOLOGY_INDEX`` (tests: an index of their
    own) or ``/run/ccbench/topologies``."""
    return Path(os.environ.get(INDEX_ENV) or INDEX_ROOT)


def enter_index(rid: str, header: dict[str, Any]) -> tuple[Path, IO] | None:
    """Make the index entry of topology ``rid`` with this process holding its lock and ``header``
    written, appearing whole (made aside, then renamed into place); None when ``rid`` is taken. An
    OSError when the index cannot be written."""
    root = index_root()
    root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{rid}.", dir=root))
    handle = open(staging / LOCK_FILE, "w")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        handle.write(str(os.getpid()))
        handle.flush()
        write_json_atomic(staging / STATE_FILE, {**header, "entries": []}, indent=1)
        os.rename(staging, root / rid)
    except OSError as exc:
        handle.close()
        shutil.rmtree(staging, ignore_errors=True)
        if exc.errno in (errno.EEXIST, errno.ENOTEMPTY):
            return None
        raise
    return root / rid, handle


def leave_index(entry: Path, handle: IO) -> None:
    """Remove this process's own index entry (its topology is torn down), then let go of its lock."""
    shutil.rmtree(entry, ignore_errors=True)
    handle.close()


def sweep_index() -> list[str]:
    """Undo every topology in the machine-wide index whose owner is gone, wherever its state
    directory is (or was). Nothing for a user other than root: nothing in it could be undone."""
    root = index_root()
    if os.geteuid() != 0 or not root.is_dir():
        return []
    removed: list[str] = []
    for entry in sorted(p for p in root.iterdir() if p.is_dir()):
        if entry.name.startswith("."):
            removed += _sweep_staging(entry)
        else:
            removed += _sweep_entry(entry)
    return removed


def _made_here(header: dict[str, Any]) -> bool:
    """Whether an index entry's topology was made from this process's network namespace: from
    another one (a ccbench run inside an emulated host, or outside one) its bridges and veths are out
    of sight, and a sweep would drop the record of what stays behind."""
    return header.get("network_namespace", own_network_namespace()) == own_network_namespace()


def own_network_namespace() -> int | None:
    """The inode of this process's network namespace: where a topology's bridges and veths live."""
    try:
        return os.stat("/proc/self/ns/net").st_ino
    except OSError:
        return None


def _sweep_entry(entry: Path) -> list[str]:
    handle = _try_lock(entry / LOCK_FILE)
    if handle is None:
        return []  # its owner is alive, another sweep has it, or it is gone
    state_handle = None
    try:
        entries, header = read_entries(entry / STATE_FILE)
        if not _made_here(header):
            return []
        recorded = header.get("state_directory")
        state = Path(recorded) if isinstance(recorded, str) and os.path.isabs(recorded) else None
        if state is not None and not (state.parent.name == "topology" and state.name.endswith(f"-{entry.name}")):
            state = None  # not a path a topology's state directory has: nothing of it is touched
        if state is not None and (state / LOCK_FILE).exists():
            state_handle = _try_lock(state / LOCK_FILE)
            if state_handle is None:
                return []  # a sweep of its work directory has it
        removed = _undo(entries)
        if state is not None and state.is_dir():
            shutil.rmtree(state, ignore_errors=True)
            removed.append(f"removed {state} (found through {entry})")
        else:
            removed.append(f"removed what {entry} recorded (its state directory {recorded} was gone)")
        shutil.rmtree(entry, ignore_errors=True)
        return removed
    finally:
        for held in (state_handle, handle):
            if held:
                held.close()


def _sweep_staging(staging: Path) -> list[str]:
    """An entry its maker was killed while writing (nothing was made yet): removed once its lock is
    free and it is a minute old (younger, its maker may be between making it and locking it)."""
    try:
        if time.time() - staging.stat().st_mtime < 60:
            return []
    except OSError:
        return []
    handle = _try_lock(staging / LOCK_FILE)
    if handle is None:
        return []
    try:
        shutil.rmtree(staging, ignore_errors=True)
        return [f"removed {staging} (an index entry never finished)"]
    finally:
        handle.close()


def _try_lock(path: Path) -> IO | None:
    """The lock on ``path`` when nobody holds it (its owner is gone), else None; None too when the file
    is missing or went away meanwhile (someone finished with it). Never creates the file."""
    try:
        handle = os.fdopen(os.open(path, os.O_WRONLY | os.O_APPEND), "a")
    except OSError:
        return None
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        if os.stat(path).st_ino != os.fstat(handle.fileno()).st_ino:
            raise FileNotFoundError(path)
    except OSError:  # BlockingIOError: held; FileNotFoundError: removed while we waited
        handle.close()
        return None
    return handle
