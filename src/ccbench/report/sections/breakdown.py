"""The cost of each cross-machine comparison split by mechanism (ccbench.analysis.rows.breakdown): a
stacked bar per workload and compared machine, the parts from mechanism twins and from counts times
unit costs, the rest unexplained; the per-row shares with their intervals as a table."""

from __future__ import annotations

import functools

import pandas as pd

from ccbench.analysis.judgement.lint import bundle_machines
from ccbench.analysis.rows.breakdown import MECHANISMS, UNEXPLAINED, breakdowns
from ccbench.report.sections import Figure, ReportContext, Section, Table

ORDER = 8
DRAWS = True
#: one colour per mechanism (Paul Tol's bright palette), the unexplained rest grey
MECHANISM_COLOURS = dict(zip(MECHANISMS, ["#4477AA", "#EE6677", "#228833", "#CCBB44", "#66CCEE"], strict=True))
MECHANISM_COLOURS[UNEXPLAINED] = "#BBBBBB"


def stacked_shares(bars: pd.DataFrame):
    """A horizontal bar per (workload, compared configuration), its segments the mean share of each
    mechanism over the workload's rows with a breakdown."""
    from matplotlib.figure import Figure as MplFigure

    labels = [f"{w}\n{c}" for w, c in zip(bars["workload"], bars["config"], strict=True)]
    fig = MplFigure(figsize=(9.0, 0.6 + 0.55 * len(bars)))
    ax = fig.subplots()
    left = [0.0] * len(bars)
    for mechanism in [*MECHANISMS, UNEXPLAINED]:
        if mechanism not in bars:
            continue
        widths = bars[mechanism].fillna(0.0).tolist()
        container = ax.barh(labels, widths, left=left, color=MECHANISM_COLOURS[mechanism], label=mechanism)
        for number, patch in enumerate(container.patches):
            patch.set_gid(f"mechanism:{mechanism}:{number}")
        left = [a + b for a, b in zip(left, widths, strict=True)]
    ax.set_xlim(0, 1)
    ax.set_xlabel("share of the cost (the time added or the rate lost)")
    ax.invert_yaxis()
    ax.tick_params(axis="y", labelsize=7)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    fig.tight_layout()
    return fig


def build(ctx: ReportContext) -> Section | None:
    if ctx.comparison is None or ctx.comparison.empty or ctx.samples is None or ctx.samples.empty:
        return None
    machines, _device_io = bundle_machines(ctx.bundles)
    measured = ctx.samples[~ctx.samples["warmup"]]
    executions = {str(bundle.path): bundle.executions for bundle in ctx.bundles}
    parts, _findings = breakdowns(ctx.comparison, measured, machines, executions=executions)
    rows = []
    for row, breakdown in zip(ctx.comparison.to_dict(orient="records"), parts, strict=True):
        for part in breakdown:
            rows.append(
                {
                    "workload": row["workload"],
                    "case": row["case"],
                    "metric": row["metric"],
                    "config": row["config"],
                    **part,
                }
            )
    if not any(row["mechanism"] != UNEXPLAINED for row in rows):
        return None  # no twin and no count: every bar would be one grey "unexplained"
    table = pd.DataFrame(rows)
    bars = (
        table.pivot_table(index=["workload", "config"], columns="mechanism", values="share", aggfunc="mean")
        .reset_index()
        .sort_values(["workload", "config"])
    )
    shown = table.assign(
        share=table["share"].map("{:.0%}".format),
        interval=[f"[{low:.0%}, {high:.0%}]" for low, high in zip(table["ci_low"], table["ci_high"], strict=True)],
    )[["workload", "case", "metric", "config", "mechanism", "share", "interval", "source", "basis"]]
    return Section(
        title="Why the machines differ: the cost by mechanism",
        intro=(
            "For each comparison between two machines with a TEE (or an unknown one) on the compared side, the share "
            "of its cost (the time it adds or the rate it loses) that each mechanism explains: from a mechanism twin (a plain "
            "machine booted with swiotlb=force, the CVM booted with idle=poll) and from counts times unit costs measured by the "
            "mechanisms workload on the same machine; the rest is unexplained. Intervals: 95% bootstrap over the "
            "executions (docs/analysis.md, Breakdown)."
        ),
        figures=[
            Figure(
                name="breakdown",
                draw=functools.partial(stacked_shares, bars),
                caption="share of each workload's cost by mechanism (mean over its comparisons)",
                takeaway="the grey part is what no twin or counted mechanism explains",
            )
        ],
        tables=[Table("shares with 95% intervals", shown)],
    )
