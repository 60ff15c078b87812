"""The verdict per protection layer, first in the report: what each layer costs, where it hurts
most, the causes ccbench recorded, and how far to trust it (the same numbers as the comparison)."""

from __future__ import annotations

from ccbench.analysis.verdict import contended_executions, verdict_table, verdicts
from ccbench.report.sections import ReportContext, Section, Table

ORDER = 5


def build(ctx: ReportContext) -> Section | None:
    engine = ctx.engine
    items = verdicts(ctx.comparison, ctx.samples if engine is None else engine.facts)
    if not items:
        return None
    contended, executions = contended_executions(ctx.samples if engine is None else engine.executions)
    excluded = (
        " They were left out of every comparison (--exclude-contended)." if ctx.exclude_contended and contended else ""
    )
    intro = (
        f"Against the baseline {ctx.baseline}: the time-equivalent cost of each protection layer (positive = slower), "
        "typical across the workloads measured, with a 95% interval and the comparison it hurts most. "
        f"{contended} of {executions} measured executions were contended (other processes' CPU or steal time while "
        f"they ran).{excluded} The comparison table below has every row behind these numbers."
    )
    return Section(
        title="Verdict per protection layer",
        intro=intro,
        points=[item.sentence() for item in items],
        tables=[Table("cost per protection layer", verdict_table(items))],
        css_class="verdict",
    )
