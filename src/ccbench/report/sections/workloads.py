"""Per workload: grouped bars with error bars by configuration, and latency percentile charts."""

from __future__ import annotations

import re
from functools import partial

import pandas as pd

from ccbench.analysis import format as fmt
from ccbench.report import charts
from ccbench.report.sections import Figure, ReportContext, Section, Table
from ccbench.report.takeaways import from_comparison

ORDER = 30
PERCENTILE = re.compile(r"(?:^|_)p(\d{2,3}(?:\.\d+)?)(?:_|$)")
MAX_CASES = 24


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


def build(ctx: ReportContext) -> Section | None:
    summary = ctx.summary
    if summary is None or summary.empty:
        return None
    kinds = ctx.samples.drop_duplicates("workload").set_index("workload")["kind"].to_dict()
    own = charted_elsewhere()
    # latency percentiles: metrics whose names carry the percentile (clat_p50, clat_p99, p95_latency ...)
    # are drawn together, p50, p95 and p99 in one chart, not one chart each
    percentile_rows = summary[
        summary["metric"].map(lambda m: bool(PERCENTILE.search(m)))
        & ~summary["workload"].map(lambda w: own.get(kinds.get(w)) == "")
    ].copy()
    in_percentile_charts: set[tuple[str, str]] = set()
    percentile_figures = []
    if not percentile_rows.empty:
        percentile_rows["percentile"] = percentile_rows["metric"].str.extract(PERCENTILE)[0].astype(float)
        percentile_rows["family"] = percentile_rows["metric"].str.replace(PERCENTILE, "_", regex=True).str.strip("_")
        for (workload, family), rows in percentile_rows.groupby(["workload", "family"], sort=False):
            if rows["percentile"].nunique() < 2:
                continue
            metrics = list(dict.fromkeys(rows["metric"]))
            in_percentile_charts.update((workload, m) for m in metrics)
            draw = partial(
                charts.percentile_lines,
                rows,
                f"{workload} {family}: latency percentiles",
                rows["unit"].iloc[0],
                colours=ctx.colours,
            )
            percentile_figures.append(
                Figure(
                    name=slug(workload, family, "percentiles"),
                    draw=draw,
                    caption=f"{workload} {family}: {', '.join(f'p{p:g}' for p in sorted(rows['percentile'].unique()))} per case "
                    "and configuration (medians over runs; up to 8 cases; log axis where values span orders of magnitude)",
                    takeaway=from_comparison(ctx.comparison, workload, metrics, ctx.baseline),
                )
            )
    figures, medians = [], []
    for (workload, metric), rows in summary.groupby(["workload", "metric"], sort=False):
        prefix = own.get(kinds.get(workload))
        if prefix is not None and metric.startswith(prefix):
            continue
        if rows["better"].isna().all():
            continue  # facts, not measurements
        medians.append(rows)
        if (workload, metric) in in_percentile_charts:
            continue
        cases = list(dict.fromkeys(rows["case"].fillna("")))
        if len(cases) > MAX_CASES:
            keep = rows.groupby("case")["median"].max().nlargest(MAX_CASES).index
            rows = rows[rows["case"].isin(keep)]
        unit = rows["unit"].iloc[0]
        draw = partial(charts.grouped_bars, rows, f"{workload}: {metric}", unit, rows["better"].iloc[0], ctx.colours)
        figures.append(
            Figure(
                name=slug(workload, metric),
                draw=draw,
                caption=f"{workload} {metric}: median per configuration, error bars = interquartile range",
                takeaway=from_comparison(ctx.comparison, workload, [metric], ctx.baseline),
            )
        )
    figures += percentile_figures
    if not figures:
        return None
    tables = []
    if medians:
        # Markdown has no charts without --figures: the numbers behind them
        data = pd.concat(medians)
        wide = data.pivot_table(
            index=["workload", "case", "metric", "unit"], columns="config", values="median", aggfunc="first", sort=False
        )
        wide = wide.map(fmt.number) if hasattr(wide, "map") else wide.applymap(fmt.number)
        tables.append(
            Table("medians per configuration (the numbers behind the charts)", wide.reset_index(), formats=("md",))
        )
    return Section(
        title="Workloads by configuration",
        intro="Each chart: the median over measured executions per configuration; error bars span the "
        "interquartile range; one colour per configuration in every chart. Warmups are excluded.",
        figures=figures,
        tables=tables,
    )
