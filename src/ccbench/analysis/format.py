"""One number format and one formatter per table, shared by the terminal and the report.

Numbers: thousands separators from 1,000 up, three significant figures below, no exponent between
0.001 and 1e9 (no ``6.657e+04`` beside ``66,573``). Ratios keep three decimals, overheads one.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pandas only for the comparison table: the run summary formats numbers without it
    import pandas as pd


def missing(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def number(value, unit: str | None = None) -> str:
    """A measured value for a reader: 66,573 / 512 / 42.7 / 3.14 / 0.0123; "-" when missing."""
    if missing(value):
        return "-"
    value = float(value)
    magnitude = abs(value)
    if magnitude == 0:
        text = "0"
    elif magnitude >= 1e9 or magnitude < 1e-3:
        text = f"{value:.3g}"
    elif magnitude >= 1000:
        text = f"{value:,.0f}"
    elif magnitude >= 100:
        text = f"{value:.0f}"
    elif magnitude >= 10:
        text = f"{value:.1f}"
    elif magnitude >= 1:
        text = f"{value:.2f}"
    else:
        text = f"{value:.3g}"
    return f"{text} {unit}" if unit else text


def ratio(value) -> str:
    return "-" if missing(value) else f"{float(value):.3f}"


def ratio_interval(value, low, high) -> str:
    """ "1.234 [1.200, 1.270]", or "1.234 [-]" where no interval could be computed."""
    if missing(low) or missing(high):
        return f"{ratio(value)} [-]"
    return f"{ratio(value)} [{ratio(low)}, {ratio(high)}]"


def percent(value, signed: bool = True) -> str:
    if missing(value):
        return "-"
    if math.isinf(float(value)):
        return "+inf%" if value > 0 else "-inf%"
    return f"{float(value):+.1f}%" if signed else f"{float(value):.1f}%"


def mde(value) -> str:
    """A minimum detectable effect (a fraction) as the table shows it: "2.1%"; "-" when missing."""
    return "-" if missing(value) else f"{float(value) * 100:.1f}%"


def cv_pair(baseline_cv, cv) -> str:
    """The two sides' coefficients of variation in percent: "1.2/3.4"."""
    return "/".join("-" if missing(v) else f"{float(v) * 100:.1f}" for v in (baseline_cv, cv))


COMPARISON_HEADERS = [
    "workload",
    "case",
    "metric",
    "config",
    "layer",
    "baseline median",
    "median",
    "ratio [95% CI]",
    "overhead",
    "MDE",
    "verdict",
    "CV % (base/config)",
    "n",
    "machines",
    "contended",
    "flags",
]


def comparison_table(comparison: pd.DataFrame) -> pd.DataFrame:
    """The comparison as text cells, the same for ``ccbench compare`` and the report."""
    import pandas as pd

    if comparison.empty:
        return pd.DataFrame(columns=COMPARISON_HEADERS)
    return pd.DataFrame(
        {
            "workload": comparison["workload"].to_numpy(),
            "case": comparison["case"].fillna("").to_numpy(),
            "metric": (comparison["metric"] + " (" + comparison["unit"] + ")").to_numpy(),
            "config": comparison["config"].to_numpy(),
            "layer": comparison["layer"].to_numpy(),
            "baseline median": [number(v) for v in comparison["baseline_median"]],
            "median": [number(v) for v in comparison["median"]],
            "ratio [95% CI]": [
                ratio_interval(r, lo, hi)
                for r, lo, hi in zip(comparison["ratio"], comparison["ci_low"], comparison["ci_high"])
            ],
            "overhead": [percent(v) for v in comparison["overhead_percent"]],
            "MDE": [mde(v) for v in comparison["mde"]] if "mde" in comparison else ["-"] * len(comparison),
            "verdict": comparison["verdict"].to_numpy(),
            "CV % (base/config)": [cv_pair(a, b) for a, b in zip(comparison["cv_baseline"], comparison["cv"])],
            "n": [f"{a}/{b}" for a, b in zip(comparison["n_baseline"], comparison["n"])],
            "machines": machine_counts(comparison),
            "contended": [
                "yes" if a or b else "" for a, b in zip(comparison["contended_baseline"], comparison["contended"])
            ],
            "flags": [", ".join(f) for f in comparison["flags"]],
        }
    )


def machine_counts(comparison: pd.DataFrame) -> list[str]:
    """Machines behind each side, "3/3", with "same" where both sides ran on the same machines (each
    machine measured both: its offset cancels) and "-" for a table without the counts."""
    from ccbench.analysis.replicas import SAME_MACHINES

    if "machines" not in comparison:
        return ["-"] * len(comparison)
    same = comparison["interval_from"] == SAME_MACHINES
    return [
        f"{b} same" if is_same else f"{a}/{b}"
        for a, b, is_same in zip(comparison["machines_baseline"], comparison["machines"], same)
    ]
