"""Per workload: grouped bars with error bars by configuration, and latency percentile charts."""

from __future__ import annotations

import re
from functools import partial

from ccbench.report import charts
from ccbench.report.sections import Figure, ReportContext, Section

ORDER = 30
PERCENTILE = re.compile(r"(?:^|_)p(\d{2,3}(?:\.\d+)?)(?:_|$)")
#: families charted in their own sections: notebooks entirely (one chart across all notebooks instead
#: of one per notebook), transport per-cell metrics
OWN_SECTIONS = {"notebook", "transport"}
OWN_CHARTS = {"notebook"}
MAX_CASES = 24


def slug(*parts: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", "-".join(p for p in parts if p)).strip("-").lower()[:80]


def build(ctx: ReportContext) -> Section | None:
    summary = ctx.summary
    if summary is None or summary.empty:
        return None
    kinds = ctx.samples.drop_duplicates("workload").set_index("workload")["kind"].to_dict()
    figures = []
    for (workload, metric), rows in summary.groupby(["workload", "metric"], sort=False):
        if kinds.get(workload) in OWN_CHARTS or (kinds.get(workload) in OWN_SECTIONS and metric.startswith("cell")):
            continue
        if rows["better"].isna().all():
            continue  # facts, not measurements
        cases = list(dict.fromkeys(rows["case"].fillna("")))
        if len(cases) > MAX_CASES:
            keep = rows.groupby("case")["median"].max().nlargest(MAX_CASES).index
            rows = rows[rows["case"].isin(keep)]
        unit = rows["unit"].iloc[0]
        draw = partial(charts.grouped_bars, rows, f"{workload}: {metric}", unit, rows["better"].iloc[0])
        figures.append(Figure(name=slug(workload, metric), draw=draw,
                              caption=f"{workload} {metric}: median per configuration, error bars = interquartile range"))
    # latency percentiles: metrics whose names carry the percentile (clat_p50, clat_p99, p95_latency ...)
    percentile_rows = summary[summary["metric"].map(lambda m: bool(PERCENTILE.search(m)))
                              & ~summary["workload"].map(lambda w: kinds.get(w) in OWN_CHARTS)].copy()
    if not percentile_rows.empty:
        percentile_rows["percentile"] = percentile_rows["metric"].str.extract(PERCENTILE)[0].astype(float)
        percentile_rows["family"] = percentile_rows["metric"].str.replace(PERCENTILE, "_", regex=True).str.strip("_")
        for (workload, family), rows in percentile_rows.groupby(["workload", "family"], sort=False):
            if rows["percentile"].nunique() < 2:
                continue
            draw = partial(charts.percentile_lines, rows, f"{workload} {family}: latency percentiles", rows["unit"].iloc[0])
            figures.append(Figure(name=slug(workload, family, "percentiles"), draw=draw,
                                  caption=f"{workload} {family}: latency percentiles per case and configuration "
                                          "(medians over runs; up to 8 cases)"))
    if not figures:
        return None
    return Section(title="Workloads by configuration",
                   intro="Each chart: the median over measured executions per configuration; error bars span the "
                         "interquartile range. Warmups are excluded.", figures=figures)
