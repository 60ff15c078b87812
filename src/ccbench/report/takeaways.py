"""What a reader should take from a chart, in one sentence, from the comparison rows behind it
(the same numbers as the comparison table)."""

from __future__ import annotations

import pandas as pd

from ccbench.analysis import format as fmt


def from_comparison(comparison: pd.DataFrame | None, workload, metrics, baseline: str | None) -> str:
    """``workload``: one name, or a collection of names (a chart across workloads)."""
    if comparison is None or comparison.empty:
        return ""
    workloads = {workload} if isinstance(workload, str) else set(workload)
    rows = comparison[comparison["workload"].isin(workloads) & comparison["metric"].isin(set(metrics))]
    if rows.empty:
        return ""
    significant = rows[rows["significant"].astype(bool)]
    if significant.empty:
        return (f"No configuration differs significantly from the baseline ({baseline}) in these "
                f"{len(rows)} comparisons: the differences seen are within the noise.")
    top = significant.loc[significant["overhead_percent"].abs().idxmax()]
    where = " ".join(p for p in (top["workload"] if len(workloads) > 1 else "", top["case"] if isinstance(top["case"], str) else "", top["metric"]) if p)
    direction = "slower" if top["overhead_percent"] > 0 else "faster"
    return (f"{len(significant)} of {len(rows)} differences from the baseline are significant; the largest: "
            f"{top['config']} at {where}, {fmt.percent(top['overhead_percent'])} ({direction}; "
            f"ratio {fmt.ratio_interval(top['ratio'], top['ci_low'], top['ci_high'])}).")
