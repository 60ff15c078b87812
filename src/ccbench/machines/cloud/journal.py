"""The run's journal: one JSON line per step, each synced to disk before the call it announces, so
that a run killed at any point (kill -9 included) leaves a record of every resource it may have
made. A live run holds an exclusive lock on its journal; a sweep on the same host that can take the
lock knows the run is gone."""

from __future__ import annotations

import fcntl
import json
import os
import socket
import time
from pathlib import Path
from typing import Any

STATE_ENV = "CCBENCH_CLOUD_STATE"


def state_dir(given: str | Path | None = None) -> Path:
    """Where journals live: the option, else $CCBENCH_CLOUD_STATE, else $XDG_STATE_HOME/ccbench/cloud."""
    if given:
        return Path(given)
    if os.environ.get(STATE_ENV):
        return Path(os.environ[STATE_ENV])
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "ccbench" / "cloud"


class Journal:
    def __init__(self, directory: Path, run_id: str, header: dict[str, Any]) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.path = directory / f"{run_id}.jsonl"
        self.fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        dir_fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dir_fd)  # the journal's name survives a crash too
        finally:
            os.close(dir_fd)
        self.write({"op": "run", "run": run_id, "pid": os.getpid(), "host": socket.gethostname(), **header})

    def write(self, record: dict[str, Any]) -> None:
        line = json.dumps({"t": round(time.time(), 3), **record}, sort_keys=True) + "\n"
        os.write(self.fd, line.encode())
        os.fsync(self.fd)

    def intend(self, what: str, name: str, **extra: Any) -> None:
        """Before the create call: a resource of this kind and name may exist from now on."""
        self.write({"op": "create", "what": what, "name": name, **extra})

    def made(self, what: str, name: str, ident: str) -> None:
        self.write({"op": "made", "what": what, "name": name, "id": ident})

    def close(self, outcome: str) -> None:
        self.write({"op": "end", "outcome": outcome})
        fcntl.flock(self.fd, fcntl.LOCK_UN)
        os.close(self.fd)


def read(path: Path) -> list[dict[str, Any]]:
    records = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            continue  # a line cut by the kill: the lines before it stand
    return records


def is_live(path: Path) -> bool:
    """Whether a run still holds this journal's lock (on this host)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


def runs(directory: Path) -> dict[str, dict[str, Any]]:
    """Each journal's run: its header, whether it is live, whether it ended with its teardown done."""
    found = {}
    for path in sorted(directory.glob("*.jsonl")) if directory.is_dir() else []:
        records = read(path)
        if not records or records[0].get("op") != "run":
            continue
        header = records[0]
        ended = records[-1].get("op") == "end" and records[-1].get("outcome") == "torn down"
        found[header["run"]] = {**header, "path": path, "live": is_live(path), "ended": ended}
    return found
