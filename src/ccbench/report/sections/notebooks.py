"""Notebooks side by side per configuration, the cells that changed most, and noisy notebooks."""

from __future__ import annotations

import json
from functools import partial

import pandas as pd

from ccbench.analysis import format as fmt
from ccbench.analysis.statistics.stats import NOISY_CV, coefficients_of_variation
from ccbench.report import charts
from ccbench.report.sections import Figure, ReportContext, Section, Table, measured_of_kind
from ccbench.report.takeaways import from_comparison

ORDER = 55
DRAWS = True
#: charted here, left out of the per-workload charts (sections/workloads): every notebook metric
CHARTED_HERE = {"notebook": ""}
TOP_CELLS = 8
#: the notebook metrics charted (one chart each, all notebooks side by side)
CHARTS = [
    ("total_s", "execution time", "execution time"),
    ("peak_rss_mib", "peak memory", "peak resident memory of the kernel"),
    ("kernel_start_s", "kernel start", "kernel start-up time"),
]


def build(ctx: ReportContext) -> Section | None:
    samples = ctx.samples
    data = measured_of_kind(samples, "notebook")
    if data is None:
        return None
    totals = data[data["metric"] == "total_s"]
    if totals.empty:
        return None
    tables, figures = [], []
    stats = totals.groupby(["workload", "config"], sort=False)["value"].agg(["median", "mean", "std", "count"])
    stats["cv"] = coefficients_of_variation(stats["std"], stats["mean"], stats["count"])
    side = stats["median"].unstack("config").round(2)
    side.columns = [f"{c} (s)" for c in side.columns]
    kernel = data[data["metric"] == "kernel_start_s"].groupby("workload")["value"].median().round(2)
    side["kernel start (s, all configs)"] = kernel
    tables.append(
        Table(
            "notebook execution time, median per configuration (kernel start excluded, shown apart)", side.reset_index()
        )
    )
    summary = ctx.summary
    if summary is not None and not summary.empty:
        for metric, title, caption in CHARTS:
            rows = summary[(summary["metric"] == metric) & summary["workload"].isin(set(totals["workload"]))].copy()
            if rows.empty:
                continue
            rows["case"] = rows["workload"]
            draw = partial(
                charts.grouped_bars,
                rows,
                f"notebooks: {title}",
                rows["unit"].iloc[0],
                rows["better"].iloc[0],
                ctx.colours,
            )
            figures.append(
                Figure(
                    f"notebooks-{metric.replace('_', '-')}",
                    draw,
                    f"median {caption} per notebook and configuration (error bars: interquartile range)",
                    takeaway=from_comparison(
                        ctx.comparison, set(totals["workload"]), [metric], ctx.baseline, ctx.layer_verdicts()
                    ),
                )
            )
    comparison = ctx.comparison
    if comparison is not None and not comparison.empty:
        cells = comparison[
            (comparison["metric"] == "cell_s") & comparison["workload"].isin(set(totals["workload"]))
        ].copy()
        if not cells.empty:
            cells["change_s"] = cells["median"] - cells["baseline_median"]
            cells["weight"] = cells["change_s"].abs()
            top = (
                cells.sort_values("weight", ascending=False)
                .groupby("workload", sort=False)
                .head(TOP_CELLS)
                .sort_values(["workload", "weight"], ascending=[True, False])
            )

            def cell_label(params: str) -> str:
                values = json.loads(params)
                return f"{values.get('cell')}: {values.get('first_line', '')}".strip()

            table = pd.DataFrame(
                {
                    "notebook": top["workload"],
                    "cell": top["params"].map(cell_label),
                    "config": top["config"],
                    "baseline (s)": top["baseline_median"].round(3),
                    "config (s)": top["median"].round(3),
                    "change (s)": top["change_s"].round(3),
                    "ratio [95% CI]": [
                        fmt.ratio_interval(r, lo, hi) for r, lo, hi in zip(top["ratio"], top["ci_low"], top["ci_high"])
                    ],
                    "verdict": top["verdict"],
                    "flags": top["flags"].map(", ".join),
                }
            )
            tables.append(
                Table(
                    f"the cells that changed most against {ctx.baseline} (up to {TOP_CELLS} per notebook, "
                    "by absolute change)",
                    table,
                )
            )
    noisy = stats[stats["cv"] > NOISY_CV].reset_index()
    if not noisy.empty:
        noisy = noisy[["workload", "config", "median", "cv", "count"]]
        noisy["cv"] = noisy["cv"].map(lambda v: f"{v:.1%}")
        noisy["median"] = noisy["median"].round(2)
        tables.append(Table(f"noisy notebooks (CV of the execution time above {NOISY_CV:.0%})", noisy))
    return Section(
        title="Notebooks",
        intro="Each notebook ran in a fresh kernel; execution time excludes kernel start-up, and per-cell "
        "times come from the kernel's own timestamps.",
        tables=tables,
        figures=figures,
    )
