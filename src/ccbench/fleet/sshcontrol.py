"""The fleet's SSH control directories (``/tmp/ccbench-ssh-*``): where one fleet run's SSH masters keep
their sockets (a short path: a socket's path has at most 107 bytes), shared by that run's
connections only.

Each is made with a record of its owner (``owner.json``: the fleet run's pid and start time, and the
work directory that owns it, a study's ``--workdir``, or none), so that ``ccbench cleanup --workdir
DIR`` can end the masters and remove the directory of a fleet run that was killed, and only those
DIR owns (or no work directory does): the directory of a live run, or another work directory's, is
left alone. A directory without the record (an older ccbench's, or not ccbench's) is never touched.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from ccbench.basics import ownprocs
from ccbench.basics.fsutil import write_json_atomic

PREFIX = "ccbench-ssh-"
OWNER = "owner.json"


def make_control_dir(workdir: str | Path | None) -> Path:
    directory = Path(tempfile.mkdtemp(prefix=PREFIX))
    owner = {
        "pid": os.getpid(),
        "start": ownprocs.start_ticks(os.getpid()),
        "workdir": str(Path(workdir).resolve()) if workdir else None,
    }
    write_json_atomic(directory / OWNER, owner)
    return directory


def close_control_dir(directory: Path) -> None:
    """End the SSH masters whose sockets are in ``directory`` (ControlPersist would keep them a
    while) and remove it."""
    for path in directory.iterdir():
        if path.is_socket():
            subprocess.run(
                ["ssh", "-o", f"ControlPath={path}", "-O", "exit", "ccbench-fleet"], capture_output=True, timeout=30
            )
    shutil.rmtree(directory, ignore_errors=True)


def sweep_control_dirs(workdir: Path) -> list[str]:
    """Close the control directories of fleet runs that are gone, which ``workdir`` owns or no work
    directory does; one line each."""
    removed = []
    for directory in sorted(Path(tempfile.gettempdir()).glob(f"{PREFIX}*")):
        try:
            if directory.stat().st_uid != os.geteuid():
                continue
            owner = json.loads((directory / OWNER).read_text())
            pid, start, owned_by = int(owner["pid"]), owner.get("start"), owner.get("workdir")
        except (OSError, ValueError, TypeError, KeyError):
            continue
        if ownprocs.start_ticks(pid) == start:
            continue  # its fleet run lives
        if owned_by is not None and owned_by != str(workdir.resolve()):
            continue
        close_control_dir(directory)
        removed.append(f"removed {directory} (the SSH connections of a fleet run that died)")
    return removed
