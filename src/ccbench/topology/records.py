"""What a topology made, and undoing it once its owner is gone.

Each topology records every namespace, bridge, veth and process in ``state.json`` under its state
directory (``<workdir>/topology/<name>-<rid>/``) before making it, and its owner holds a lock on
``owner.lock`` there while it lives. ``cleanup_stale`` undoes the records whose lock nobody holds.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ccbench.ledger import read_entries

STATE_FILE = "state.json"
LOCK_FILE = "owner.lock"


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
    """Remove the namespaces, links and processes of topologies under ``<workdir>/topology/``
    whose owner is gone (killed). A live topology (its owner holds its lock) is left alone."""
    root = Path(workdir) / "topology"
    if not root.is_dir():
        return []
    removed: list[str] = []
    for directory in sorted(p for p in root.iterdir() if p.is_dir()):
        lock_path = directory / LOCK_FILE
        handle = None
        if lock_path.exists():
            handle = open(lock_path, "a")
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                handle.close()
                continue  # its owner is alive
        try:
            entries, header = read_entries(directory / STATE_FILE)
            # state files of older versions kept processes in a list of their own
            entries += [{**p, "kind": "process"} for p in header.get("processes", [])]
            removed += _undo(entries)
            shutil.rmtree(directory, ignore_errors=True)
            removed.append(f"removed {directory}")
        finally:
            if handle:
                handle.close()
    return removed
