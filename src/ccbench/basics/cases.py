"""Short labels for a workload's sub-cases (light: the report and the runner both import it)."""

from __future__ import annotations

from typing import Any


def case_text(case: dict[str, Any]) -> str:
    """A short label for a case: fio {"bs": "4k", "rw": "randread", "direction": "read"} -> "4k randread"."""
    values = [str(v) for k, v in case.items() if k != "first_line"]
    direction = case.get("direction")
    if direction and str(direction) in str(case.get("rw", "")) and case.get("rw") not in ("readwrite", "randrw"):
        values.remove(str(direction))
    return " ".join(values)
