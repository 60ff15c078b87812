"""The comparison table: every configuration against the baseline, with intervals and flags."""

from __future__ import annotations

import pandas as pd

from ccbench.report.sections import ReportContext, Section, Table

ORDER = 20


def formatted(comparison: pd.DataFrame) -> pd.DataFrame:
    def interval(row):
        if pd.isna(row["ci_low"]):
            return f"{row['ratio']:.3f} [-]"
        return f"{row['ratio']:.3f} [{row['ci_low']:.3f}, {row['ci_high']:.3f}]"

    return pd.DataFrame({
        "workload": comparison["workload"],
        "case": comparison["case"],
        "metric": comparison["metric"] + " (" + comparison["unit"] + ")",
        "config": comparison["config"],
        "baseline median": comparison["baseline_median"].map(lambda v: f"{v:.4g}"),
        "median": comparison["median"].map(lambda v: f"{v:.4g}"),
        "ratio [95% CI]": comparison.apply(interval, axis=1),
        "overhead": comparison["overhead_percent"].map(lambda v: f"{v:+.1f}%"),
        "verdict": comparison["verdict"],
        "n": comparison["n_baseline"].astype(str) + "/" + comparison["n"].astype(str),
        "flags": comparison["flags"].map(", ".join),
    })


def build(ctx: ReportContext) -> Section | None:
    if ctx.comparison is None or ctx.comparison.empty:
        return None
    table = formatted(ctx.comparison)
    significant = int(ctx.comparison["significant"].sum())
    intro = (f"Baseline: {ctx.baseline}. {len(ctx.comparison)} comparisons, {significant} significant at 95%. "
             "Ratio = geometric mean of the configuration over the baseline's; overhead is the time-equivalent cost "
             "(positive = worse), so a throughput ratio of 0.8 is +25%.")
    return Section(title="Comparison with the baseline", intro=intro,
                   tables=[Table(title="ratios with 95% intervals", frame=table)])
