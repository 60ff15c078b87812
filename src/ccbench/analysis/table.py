"""The comparison as a table of text cells, the same for ``ccbench compare`` and the report: the
headers, a row's cells in the one number format (ccbench.analysis.format), the machines behind each
side, the interval a settled row uses."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ccbench.analysis.format import cell, cv_pair, mde, ratio_interval, row_effect

if TYPE_CHECKING:
    import pandas as pd

COMPARISON_HEADERS = [
    "workload",
    "case",
    "metric",
    "config",
    "layer",
    "baseline median",
    "median",
    "ratio [95% CI]",
    "effect [95% CI]",
    "MDE",
    "verdict",
    "CV % (base/config)",
    "n",
    "machines",
    "contended",
    "flags",
]


def _against(config: str, baseline: str) -> str:
    """The config cell: the configuration, and " (vs ext4-loop)" where it stands against its loop twin."""
    from ccbench.analysis.labels import LOOP_CONTROL, loop_twin

    twin = loop_twin(config)
    return f"{config} (vs {LOOP_CONTROL})" if twin is not None and baseline == twin else config


def comparison_table(comparison: pd.DataFrame) -> pd.DataFrame:
    """The comparison as text cells, the same for ``ccbench compare`` and the report."""
    import pandas as pd

    if comparison.empty:
        return pd.DataFrame(columns=COMPARISON_HEADERS)
    cells = pd.DataFrame(
        {
            "workload": comparison["workload"].to_numpy(),
            "case": comparison["case"].fillna("").to_numpy(),
            "metric": (comparison["metric"] + " (" + comparison["unit"] + ")").to_numpy(),
            # a row against another configuration than its group's baseline (a cipher on a loop
            # file against its loop twin: ccbench.analysis.rows.pairing) names it
            "config": [_against(c, b) for c, b in zip(comparison["config"], comparison["baseline"])],
            "layer": comparison["layer"].to_numpy(),
            "baseline median": [cell(v, u) for v, u in zip(comparison["baseline_median"], comparison["unit"])],
            "median": [cell(v, u) for v, u in zip(comparison["median"], comparison["unit"])],
            "ratio [95% CI]": [
                ratio_interval(r, lo, hi)
                for r, lo, hi in zip(comparison["ratio"], comparison["ci_low"], comparison["ci_high"])
            ],
            "effect [95% CI]": [row_effect(row) for row in _effect_rows(comparison)],
            "MDE": [mde(v) for v in comparison["mde"]] if "mde" in comparison else ["-"] * len(comparison),
            # a row the plausibility checks left out of the verdict says so where its verdict would be
            "verdict": [
                "implausible" if reason else verdict
                for verdict, reason in zip(
                    comparison["verdict"],
                    comparison["implausible"] if "implausible" in comparison else [""] * len(comparison),
                )
            ],
            "CV % (base/config)": [cv_pair(a, b) for a, b in zip(comparison["cv_baseline"], comparison["cv"])],
            "n": [f"{a}/{b}" for a, b in zip(comparison["n_baseline"], comparison["n"])],
            "machines": machine_counts(comparison),
            "contended": [
                "yes" if a or b else "" for a, b in zip(comparison["contended_baseline"], comparison["contended"])
            ],
            "flags": [", ".join(f) for f in comparison["flags"]],
        }
    )
    return _with_interval(cells, comparison)


def _answer(answer: str, target: float) -> str:
    """A settled case's answer; "no cost above" with its target (a settled row's MDE)."""
    from ccbench.analysis.labels import NO_COST_ABOVE

    return f"{answer} {target:.1%}" if answer == NO_COST_ABOVE else answer


def _with_interval(cells: pd.DataFrame, comparison: pd.DataFrame) -> pd.DataFrame:
    """Where a run settled some of the cases (ccbench.analysis.settling.settled), an ``interval`` column
    after the effect: which interval each row uses, with a settled case's answer."""
    from ccbench.analysis.labels import is_settle_interval

    if "interval" not in comparison or not comparison["interval"].map(is_settle_interval).any():
        return cells
    names = [
        f"{kind} ({_answer(answer, target)})" if is_settle_interval(kind) and isinstance(answer, str) else kind
        for kind, answer, target in zip(comparison["interval"], comparison["settled"], comparison["mde"])
    ]
    cells.insert(list(cells.columns).index("effect [95% CI]") + 1, "interval", names)
    return cells


#: the default table's columns (the rest behind ``compare --details``)
NARROW_HEADERS = [
    "workload",
    "case",
    "metric",
    "config",
    "baseline median",
    "median",
    "effect [95% CI]",
    "interval",  # only where a run settled cases (_with_interval)
    "verdict",
]


def _effect_rows(comparison: pd.DataFrame) -> list[dict]:
    columns = ["ratio", "ci_low", "ci_high", "better"]
    return comparison[[c for c in columns if c in comparison]].to_dict(orient="records")


def machine_counts(comparison: pd.DataFrame) -> list[str]:
    """Machines behind each side, "3/3", with "same" where both sides ran on the same machines (each
    machine measured both: its offset cancels) and "-" for a table without the counts."""
    from ccbench.analysis.statistics.replicas import SAME_MACHINES

    if "machines" not in comparison:
        return ["-"] * len(comparison)
    same = comparison["interval_from"] == SAME_MACHINES
    return [
        f"{b} same" if is_same else f"{a}/{b}"
        for a, b, is_same in zip(comparison["machines_baseline"], comparison["machines"], same)
    ]
