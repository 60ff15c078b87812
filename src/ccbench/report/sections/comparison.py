"""The comparison table: every configuration against the baseline, with intervals and flags."""

from __future__ import annotations

from ccbench.analysis.judgement import semantics
from ccbench.analysis.table import comparison_table
from ccbench.report.sections import ReportContext, Section, Table

ORDER = 20


def build(ctx: ReportContext) -> Section | None:
    if ctx.comparison is None or ctx.comparison.empty:
        return None
    comparison = ctx.comparison
    # a row the plausibility lint marked measures no layer: in no count of significant rows (4 of a
    # trial's 6 "significant" were left-out fscrypt rows), counted apart as left out
    left_out = semantics.implausible_mask(comparison)
    significant = int((comparison["significant"].astype(bool) & ~left_out).sum())
    dropped = int(left_out.sum())
    contended = int(((comparison["contended_baseline"] + comparison["contended"]) > 0).sum())
    excluded = "; contended executions left out" if ctx.exclude_contended else ""
    apart = f", {dropped} left out as implausible (the lint says why)" if dropped else ""
    intro = (
        f"Baseline: {ctx.baseline}{excluded}. {len(comparison)} comparisons, {significant} significant at 95%"
        f"{apart}, {contended} with contended executions on either side (column contended). "
        "Ratio = geometric mean of the configuration over the baseline's; overhead is the time-equivalent cost "
        "(positive = worse), so a throughput ratio of 0.8 is +25%. Layer = the protection layer that differs "
        "from the baseline."
    )
    return Section(
        title="Comparison with the baseline",
        intro=intro,
        tables=[Table(title="ratios with 95% intervals", frame=comparison_table(comparison))],
    )
