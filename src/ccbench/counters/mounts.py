"""The counters' private debugfs/tracefs mounts and trace instances: made after being recorded in the
run's ledger, undone at the run's end, by the next run or ``ccbench cleanup`` after a kill."""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from ccbench.counters.proc import LEDGER, read_or_none
from ccbench.ledger import Ledger, read_entries

# --- mounts and the ledger ---------------------------------------------------------------------------


def mounted(path: Path) -> bool:
    text = read_or_none(Path("/proc/self/mountinfo")) or ""
    return any(line.split()[4] == str(path) for line in text.splitlines() if len(line.split()) > 4)


def mount(fstype: str, path: Path) -> None:
    done = subprocess.run(["mount", "-t", fstype, fstype, str(path)], capture_output=True, text=True)
    if done.returncode != 0:
        raise OSError(f"mount -t {fstype} {path}: {done.stderr.strip() or done.returncode}")


def umount(path: Path) -> None:
    if mounted(path):
        # recursive: debugfs grows a tracefs submount at tracing/ once anything looks inside it
        subprocess.run(["umount", "-R", str(path)], check=False, capture_output=True)


#: private mount points are named after the process that made them: <prefix><pid>-<random>
MOUNT_PREFIX = "ccbench-counters-"


def private_dir() -> Path:
    """A directory no one removes recursively (a mount point under the work directory or a test's
    temporary directory could be walked into by a clean-up), named after this process."""
    base = "/run" if os.access("/run", os.W_OK) else tempfile.gettempdir()
    return Path(tempfile.mkdtemp(prefix=f"{MOUNT_PREFIX}{os.getpid()}-", dir=base))


def _dead(name: str, prefix: str) -> bool:
    """Whether the process named in ``<prefix><pid>-...`` is gone (a live one, or a pid reused, is kept)."""
    pid = name[len(prefix) :].split("-", 1)[0]
    if not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False
    return False


def sweep_orphans(tracefs: Path | None) -> list[str]:
    """Undo the trace instances and private mounts of counters' sessions whose process died without
    its ledger being read again (a run killed in a work directory where nothing runs afterwards)."""
    done = []
    if tracefs is not None:
        for instance in (tracefs / "instances").glob("ccbench-*"):
            if _dead(instance.name, "ccbench-"):
                try:
                    os.rmdir(instance)
                    done.append(f"removed the trace instance {instance.name} of a run that died")
                except OSError:
                    continue
    for base in {Path("/run"), Path(tempfile.gettempdir())}:
        for point in base.glob(f"{MOUNT_PREFIX}*"):
            if point.is_dir() and _dead(point.name, MOUNT_PREFIX) and (tracefs is None or point != tracefs):
                umount(point)
                try:
                    os.rmdir(point)
                    done.append(f"unmounted and removed {point}, left by a run that died")
                except OSError:
                    continue
    return done


def cleanup_stale(workdir: Path) -> list[str]:
    """Undo the trace instances and mounts a killed run's counters left (its ledger under workdir)."""
    path = Path(workdir) / LEDGER
    if not path.exists():
        return []
    entries, _ = read_entries(path)
    ledger = Ledger(path)
    ledger.entries = entries
    done = ledger.undo(undo_entry)
    path.unlink(missing_ok=True)
    return done


def undo_entry(entry: dict[str, Any]) -> list[str]:
    if entry.get("kind") == "trace-instance":
        tracefs = Path(entry["tracefs"])
        temporary = None
        if not mounted(tracefs):  # its mount is gone: the instance lives on in the kernel
            temporary = private_dir()
            mount("tracefs", temporary)
            tracefs = temporary
        try:
            instance = tracefs / "instances" / entry["name"]
            if instance.exists():
                os.rmdir(instance)
                return [f"removed the trace instance {entry['name']}"]
            return []
        finally:
            if temporary is not None:
                umount(temporary)
                os.rmdir(temporary)
    if entry.get("kind") == "mount":
        point = Path(entry["path"])
        done = []
        if mounted(point):
            umount(point)
            done.append(f"unmounted {entry.get('fstype')} at {point}")
        if point.is_dir():
            os.rmdir(point)
        return done
    return []
