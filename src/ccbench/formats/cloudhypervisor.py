"""cloud-hypervisor's ``performance-metrics`` report: the JSON its test binary writes with
``--report-file`` (or prints on standard output), read as cloud-hypervisor's ``MetricsReport``
defines it (performance-metrics/src/main.rs):

- the run: ``git_human_readable`` (``git describe --dirty``), ``git_revision``, ``git_commit_date``
  and ``date`` (the host's ``date`` output when the run ended: the zone as ``date`` prints it);
- ``results``: per test its ``name``, ``mean``, ``std_dev``, ``max`` and ``min`` over the test's
  iterations (already scaled to the unit its name ends in: ``boot_time_ms``, ``block_read_MiBps``),
  and since 2026 its ``status`` (``PASSED``, or ``FAILED`` with every figure 0.0, written under
  ``--continue-on-failure``).

The report states no iteration count (``--iterations`` overrides each test's own), and its
``std_dev`` divides by the count, not the count less one. Nor does it state which VM type ran
(``--vm-type regular|confidential``): a confidential arm's report looks like a regular one's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ccbench.formats import FormatError

#: the run facts the report states (MetricsReport's fields besides the results)
RUN_KEYS = ("git_human_readable", "git_revision", "git_commit_date", "date")
#: a test name's unit suffix: (suffix, unit, which way is better); the binary names each test by its unit
SUFFIXES = (
    ("_ms", "ms", "lower"),
    ("_us", "us", "lower"),
    ("_gbps", "Gbit/s", "higher"),
    ("_pps", "packets/s", "higher"),
    ("_MiBps", "MiB/s", "higher"),
    ("_IOPS", "IOPS", "higher"),
)
FIGURES = ("mean", "std_dev", "max", "min")


@dataclass(frozen=True)
class TestResult:
    """One test of the report: its figures as the file states them."""

    name: str
    mean: float
    std_dev: float
    max: float
    min: float
    #: "PASSED", "FAILED", or None where the writer predates the status field
    status: str | None

    @property
    def failed(self) -> bool:
        return self.status == "FAILED"


def is_report(document: Any) -> bool:
    """Whether a decoded JSON document is a performance-metrics report."""
    return (
        isinstance(document, dict)
        and isinstance(document.get("results"), list)
        and "git_revision" in document
        and all(isinstance(r, dict) and "name" in r and "mean" in r for r in document["results"])
    )


def run_facts(document: dict[str, Any]) -> dict[str, str]:
    """The run facts the report states (empty strings, as git's failures leave them, left out)."""
    return {key: str(document[key]) for key in RUN_KEYS if document.get(key) not in (None, "")}


def unit_of(name: str) -> tuple[str, str] | None:
    """(unit, better) that a test's name ends in, or None for a name of no known unit."""
    for suffix, unit, better in SUFFIXES:
        if name.endswith(suffix):
            return unit, better
    return None


def results(document: dict[str, Any]) -> list[TestResult]:
    """The report's tests, in its order; FormatError for a test whose figures are not numbers."""
    found = []
    for entry in document["results"]:
        name = str(entry.get("name", ""))
        figures = {key: entry.get(key) for key in FIGURES}
        if not name or not all(type(v) in (int, float) and math.isfinite(v) for v in figures.values()):
            missing = [key for key, value in figures.items() if type(value) not in (int, float)]
            raise FormatError(
                f"test {name or '?'!r} lacks a number for {', '.join(missing) or 'a figure'}"
                " (every test has mean, std_dev, max and min)"
            )
        status = entry.get("status")
        if status not in (None, "PASSED", "FAILED"):
            raise FormatError(f"test {name!r} has the status {status!r} (the writer knows PASSED and FAILED)")
        found.append(TestResult(name=name, status=status, **{k: float(v) for k, v in figures.items()}))
    return found
