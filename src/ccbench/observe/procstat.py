"""The machine's own figures under /proc, read under a configurable root (tests feed files): busy and
steal ticks and the run queue (``stat``), pressure stall information (``pressure/``), the load
average. ccbench.observe.interference reads them at the start and the end of an execution."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

USER_HZ = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
#: /proc/stat "cpu" columns: user nice system idle iowait irq softirq steal guest guest_nice.
#: guest time is already inside user (and guest_nice inside nice), so it is not added again.
_BUSY_COLUMNS = (0, 1, 2, 5, 6)
_STEAL_COLUMN = 7
PSI_RESOURCES = ("cpu", "memory", "io")


def _read(root: Path, name: str) -> str | None:
    try:
        return (root / name).read_text()
    except OSError:
        return None


def _stat(root: Path) -> dict[str, Any]:
    """Busy and steal ticks (all CPUs), CPU count, and the run queue from <root>/stat."""
    text = _read(root, "stat")
    if text is None:
        return {}
    result: dict[str, Any] = {"cpus": 0}
    for line in text.splitlines():
        parts = line.split()
        if not parts:
            continue
        if parts[0] == "cpu":
            values = [int(v) for v in parts[1:]]
            values += [0] * (10 - len(values))
            result["busy"] = sum(values[i] for i in _BUSY_COLUMNS)
            result["steal"] = values[_STEAL_COLUMN]
        elif parts[0].startswith("cpu") and parts[0][3:].isdigit():
            result["cpus"] += 1
        elif parts[0] == "procs_running":
            result["procs_running"] = int(parts[1])
        elif parts[0] == "procs_blocked":
            result["procs_blocked"] = int(parts[1])
    return result


def _pressure(root: Path) -> dict[str, dict[str, float]]:
    """some/full avg10 and total (microseconds) per resource, where <root>/pressure exists."""
    found: dict[str, dict[str, float]] = {}
    for resource in PSI_RESOURCES:
        text = _read(root, f"pressure/{resource}")
        if text is None:
            continue
        entry: dict[str, float] = {}
        for line in text.splitlines():
            kind, _, rest = line.partition(" ")
            for item in rest.split():
                key, _, value = item.partition("=")
                if key in ("avg10", "total"):
                    entry[f"{kind}_{key}"] = float(value)
        found[resource] = entry
    return found


def _loadavg(root: Path) -> float | None:
    text = _read(root, "loadavg")
    try:
        return float(text.split()[0]) if text else None
    except (ValueError, IndexError):
        return None
