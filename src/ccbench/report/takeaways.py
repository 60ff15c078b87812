"""What a reader should take from a chart, in one sentence, from the comparison rows behind it
(the same numbers as the comparison table, judged as the verdict judges a scope:
ccbench.analysis.judgement.semantics)."""

from __future__ import annotations

import pandas as pd

from ccbench.analysis import format as fmt
from ccbench.analysis.judgement import semantics
from ccbench.analysis.rows.compare import with_time_equivalent


def from_comparison(comparison: pd.DataFrame | None, workload, metrics, baseline: str | None) -> str:
    """``workload``: one name, or a collection of names (a chart across workloads)."""
    if comparison is None or comparison.empty:
        return ""
    workloads = {workload} if isinstance(workload, str) else set(workload)
    rows = comparison[comparison["workload"].isin(workloads) & comparison["metric"].isin(set(metrics))]
    if rows.empty:
        return ""
    judged = semantics.judge(with_time_equivalent(rows))
    left = f" Left out: {'; '.join(judged.left_out)}." if judged.left_out else ""
    plausible = rows[~semantics.implausible_mask(rows)]
    significant = plausible[plausible["significant"].astype(bool)]
    if significant.empty:
        if judged.holds_significant:  # pooled across benchmarks of one value each
            return (
                f"No single comparison against the baseline ({baseline}) is significant, but across "
                f"{judged.comparisons} benchmarks of one value each: {judged.phrase()} ({judged.test_named()}).{left}"
            )
        return (
            f"No configuration differs significantly from the baseline ({baseline}) in these "
            f"{len(plausible)} comparisons: {judged.phrase()}.{left}"
        )
    top = significant.loc[significant["overhead_percent"].abs().idxmax()]
    where = " ".join(
        p
        for p in (
            top["workload"] if len(workloads) > 1 else "",
            top["case"] if isinstance(top["case"], str) else "",
            top["metric"],
        )
        if p
    )
    return (
        f"{len(significant)} of {len(plausible)} differences from the baseline are significant "
        f"({judged.phrase()}); the largest: {top['config']} at {where}, {fmt.row_effect(top)} "
        f"(ratio {fmt.ratio_interval(top['ratio'], top['ci_low'], top['ci_high'])}).{left}"
    )
