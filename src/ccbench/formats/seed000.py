"""The seed-000 study's benchmark names: one map read by the plan loader (its CSV plan names the
benchmarks) and by ``ccbench import seed000`` (its result files carry the same names).

A name is one of: ``systeminfo``; ``fio_<4k|64k|1m>_<sequential|random><read|write>``; a notebook
path ending in ``.ipynb``; ``pyperformance [suite]``. Anything else is not a benchmark ccbench knows.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any

FIO_NAME = re.compile(r"^fio_(?P<bs>4k|64k|1m)_(?P<order>sequential|random)(?P<direction>read|write)$")
_UNSAFE = re.compile(r"[^A-Za-z0-9_.+-]")


@dataclass(frozen=True)
class Seed000Benchmark:
    """What a seed-000 benchmark name stands for in ccbench: a workload kind, its name, its params."""

    kind: str
    name: str
    params: dict[str, Any] = field(default_factory=dict)


def safe_name(text: str) -> str:
    return _UNSAFE.sub("_", text)


def benchmark(target: str) -> Seed000Benchmark | None:
    """The workload a seed-000 benchmark name stands for, or None for a name ccbench does not know."""
    target = target.strip()
    if target == "systeminfo":
        return Seed000Benchmark("systeminfo", "systeminfo")
    fio = FIO_NAME.match(target)
    if fio:
        pattern = fio["direction"] if fio["order"] == "sequential" else f"rand{fio['direction']}"
        return Seed000Benchmark("fio", target, {"blocksizes": [fio["bs"]], "patterns": [pattern]})
    if target.endswith(".ipynb"):
        return Seed000Benchmark("notebook", safe_name(PurePath(target).stem), {"notebook": target})
    if target.startswith("pyperformance"):
        suite = target.split(None, 1)[1].strip() if " " in target else "default"
        return Seed000Benchmark("pyperformance", f"pyperformance-{suite}", {"suite": suite})
    return None
