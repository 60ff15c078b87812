"""Per workload: every case of a workload the first chart pooled (a forest plot), and latency percentile charts."""

from __future__ import annotations

import re
from functools import partial

import pandas as pd

from ccbench.analysis import format as fmt
from ccbench.report import charts, forest
from ccbench.report.sections import Figure, ReportContext, Section, Table
from ccbench.report.takeaways import from_comparison

ORDER = 30
DRAWS = True
PERCENTILE = re.compile(r"(?:^|_)p(\d{2,3}(?:\.\d+)?)(?:_|$)")
#: panels of a latency percentile chart
PERCENTILE_PANELS = 8


def slug(*parts: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", "-".join(p for p in parts if p)).strip("-").lower()[:80]


def charted_elsewhere() -> dict[str, str]:
    """{kind: metric prefix ("" for every metric)} of what a family's own section charts (its
    ``CHARTED_HERE``) and this one leaves out: e.g. one chart across all notebooks instead of one per
    notebook, the secure channel's per-cell metrics."""
    from ccbench.report.sections import discover

    own: dict[str, str] = {}
    for module in discover():
        own.update(getattr(module, "CHARTED_HERE", {}))
    return own


def _percentile_figures(ctx: ReportContext, summary: pd.DataFrame, kinds: dict, own: dict) -> list[Figure]:
    """The latency percentile charts: one per kind and family of percentile metrics."""
    # latency percentiles: metrics whose names carry the percentile (clat_p50, clat_p99, p95_latency ...)
    # are drawn together, p50, p95 and p99 in one chart, not one chart each
    percentile_rows = summary[
        summary["metric"].map(lambda m: bool(PERCENTILE.search(m)))
        & ~summary["workload"].map(lambda w: own.get(kinds.get(w)) == "")
    ].copy()
    percentile_figures = []
    if not percentile_rows.empty:
        percentile_rows["percentile"] = percentile_rows["metric"].str.extract(PERCENTILE)[0].astype(float)
        percentile_rows["family"] = percentile_rows["metric"].str.replace(PERCENTILE, "_", regex=True).str.strip("_")
        # one chart per kind and family: fio's files imported as one workload each share one chart,
        # a panel per workload and case (the first 8; the others counted in the caption)
        percentile_rows["kind"] = percentile_rows["workload"].map(kinds).fillna(percentile_rows["workload"])
        percentile_rows["left_out"] = left_out_rows(percentile_rows, ctx.comparison)
        for (kind, family), rows in percentile_rows.groupby(["kind", "family"], sort=False):
            rows = rows.copy()
            if rows["percentile"].nunique() < 2:
                continue
            workloads = list(dict.fromkeys(rows["workload"]))
            metrics = list(dict.fromkeys(rows["metric"]))
            if len(workloads) > 1:
                rows["case"] = (rows["workload"] + " " + rows["case"].fillna("")).str.strip()
            panels = list(dict.fromkeys(rows["case"].fillna("")))
            hidden = len(panels) - PERCENTILE_PANELS
            name = workloads[0] if len(workloads) == 1 else f"{kind} ({len(workloads)} workloads)"
            draw = partial(
                charts.percentile_lines,
                rows,
                f"{name} {family}: latency percentiles",
                rows["unit"].iloc[0],
                max_panels=PERCENTILE_PANELS,
                colours=ctx.colours,
            )
            percentiles = ", ".join(f"p{p:g}" for p in sorted(rows["percentile"].unique()))
            percentile_figures.append(
                Figure(
                    name=slug(name, family, "percentiles"),
                    draw=draw,
                    caption=f"{name} {family}: {percentiles} per case and configuration (medians over runs, no "
                    "interval; log axis where values span orders of magnitude)"
                    + (f"; {hidden} more cases not drawn (the table below has them)" if hidden > 0 else "")
                    + (
                        "; grey dashed: left out of the verdict as implausible (the lint says why)"
                        if rows["left_out"].any()
                        else ""
                    ),
                    takeaway=from_comparison(ctx.comparison, workloads, metrics, ctx.baseline, ctx.layer_verdicts()),
                )
            )
    return percentile_figures


def left_out_rows(summary: pd.DataFrame, comparison: pd.DataFrame | None) -> pd.Series:
    """Per summary row (workload, case, metric, configuration): whether the verdict left its comparison
    out as implausible (a chart draws it grey, as the forest plot does)."""
    from ccbench.analysis.judgement import semantics

    if comparison is None or comparison.empty:
        return pd.Series(False, index=summary.index)
    keys = ["workload", "case", "metric", "config"]
    marked = comparison[semantics.implausible_mask(comparison)]
    flagged = set(zip(*(marked[k].fillna("") for k in keys)))
    if not flagged:
        return pd.Series(False, index=summary.index)
    return pd.Series(
        [key in flagged for key in zip(*(summary[k].fillna("") for k in keys))], index=summary.index, dtype=bool
    )


def _measured_medians(summary: pd.DataFrame, kinds: dict, own: dict) -> list[pd.DataFrame]:
    """The summary's rows per workload and measured metric this section shows (not charted elsewhere, no facts)."""
    medians = []
    for (workload, metric), rows in summary.groupby(["workload", "metric"], sort=False):
        prefix = own.get(kinds.get(workload))
        if prefix is not None and metric.startswith(prefix):
            continue
        if rows["better"].isna().all():
            continue  # facts, not measurements
        medians.append(rows)
    return medians


def _pooled_figures(ctx: ReportContext) -> list[Figure]:
    """Every case of a workload the first chart pooled (pyperformance's benchmarks), each with its
    interval; the other workloads' cases are rows of the first chart already."""
    # every case of a workload the first chart pooled (pyperformance's benchmarks), each with its
    # interval; the other workloads' cases are rows of the first chart already
    figures = []
    from ccbench.report.sections.verdict import first_chart

    for workload in first_chart(ctx).pooled:
        data = forest.build(
            ctx.comparison, ctx.samples, max_rows=forest.WORKLOAD_ROWS, workloads=[workload], pool=False
        )
        if data.empty:
            continue
        figure = Figure(
            name=slug(workload, "forest"),
            draw=partial(charts.forest, data, f"{workload}: every case against {ctx.baseline}", ctx.colours),
            caption=forest.caption(data, ctx.baseline),
        )
        ctx.draw_soon([figure])  # drawn while its takeaway is judged (a sign test over many benchmarks)
        figure.takeaway = from_comparison(
            ctx.comparison, workload, list(dict.fromkeys(data.rows["metric"])), ctx.baseline, ctx.layer_verdicts()
        )
        figures.append(figure)
    return figures


def build(ctx: ReportContext) -> Section | None:
    summary = ctx.summary
    if summary is None or summary.empty:
        return None
    kinds = ctx.samples.drop_duplicates("workload").set_index("workload")["kind"].to_dict()
    own = charted_elsewhere()
    percentile_figures = _percentile_figures(ctx, summary, kinds, own)
    ctx.draw_soon(percentile_figures)
    medians = _measured_medians(summary, kinds, own)
    figures = _pooled_figures(ctx) + percentile_figures
    if not figures and not medians:
        return None
    tables = []
    if medians:
        # the numbers behind the charts, every measured metric (folded on the page when long)
        data = pd.concat(medians)
        wide = data.pivot_table(
            index=["workload", "case", "metric", "unit"], columns="config", values="median", aggfunc="first", sort=False
        )
        wide = wide.map(fmt.number) if hasattr(wide, "map") else wide.applymap(fmt.number)
        tables.append(Table("medians per configuration (the numbers behind the charts)", wide.reset_index()))
    return Section(
        title="Workloads by configuration",
        intro="Every case of a workload the first chart pooled, as a time ratio against the baseline with its 95% "
        "interval, and latency percentiles (medians over runs) where a workload records them; one colour per "
        "configuration in every chart. Warmups are excluded; every metric is in the comparison table.",
        figures=figures,
        tables=tables,
    )
