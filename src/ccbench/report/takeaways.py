"""What a reader should take from a chart, in one sentence, from the comparison rows behind it
(the same numbers as the comparison table, judged as the verdict judges a scope:
ccbench.analysis.judgement.semantics)."""

from __future__ import annotations

import math

import pandas as pd

from ccbench.analysis import format as fmt
from ccbench.analysis.judgement import semantics
from ccbench.analysis.judgement.wording import BOUND_MDE, WEAK_BOUND, bound_words
from ccbench.analysis.rows.compare import with_time_equivalent


def scope_phrase(judged: semantics.Judgement, rows: pd.DataFrame, verdicts: list | None = None) -> str:
    """A chart's judgement in words. A chart is no layer: where its rows show nothing, the figure its
    own rows bound is said as what it is, the chart's detection floor, never "no cost above" (a layer's
    bound is its verdict's alone, and several figures under that one name disagreed: a user trial read
    "no cost above 5.9x" in the verdict, 5.3x under the heatmap and 9.3x under a latency chart); each
    layer of its rows whose verdict states a bound follows in the verdict's own words."""
    if judged.kind != semantics.NONE_SEEN or math.isnan(judged.mde):
        return judged.phrase()
    weak = judged.bound == BOUND_MDE and judged.mde > WEAK_BOUND
    said = (
        f"{'inconclusive: ' if weak else ''}the chart's detection floor {fmt.mde(judged.mde)} "
        f"({bound_words(judged.bound)}; of these {judged.comparisons} comparisons, not a layer's bound)"
    )
    bounds = layer_bounds(rows, verdicts)
    return f"{said}; {bounds}" if bounds else said


def layer_bounds(rows: pd.DataFrame, verdicts: list | None) -> str:
    """ "the layers' own bounds (the verdict): loop file, no cipher: ext4-loop: no cost above 5.9x
    (...)": each layer of ``rows`` whose verdict states a bound, in its words; "" where none does."""
    if not verdicts or "layer" not in rows:
        return ""
    layers = set(rows["layer"])
    said = [
        f"{item.layer}: {item.words()}"
        for item in verdicts
        if item.layer in layers
        and item.judgement is not None
        and item.judgement.kind == semantics.NONE_SEEN
        and not math.isnan(item.judgement.mde)
    ]
    if not said:
        return ""
    return (
        f"the layer's own bound (the verdict): {said[0]}"
        if len(said) == 1
        else (f"the layers' own bounds (the verdict): {'; '.join(said)}")
    )


def from_comparison(
    comparison: pd.DataFrame | None, workload, metrics, baseline: str | None, verdicts: list | None = None
) -> str:
    """``workload``: one name, or a collection of names (a chart across workloads); ``verdicts``: the
    layers' verdicts, whose bounds a chart showing nothing names in their own words (scope_phrase)."""
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
            f"{len(plausible)} comparisons: {scope_phrase(judged, plausible, verdicts)}.{left}"
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
