"""Flagged measurements: noisy configurations and too few samples."""

from __future__ import annotations

from ccbench.analysis import format as fmt
from ccbench.analysis.statistics.stats import MIN_SAMPLES, NOISY_CV
from ccbench.report.sections import ReportContext, Section, Table

ORDER = 80


def build(ctx: ReportContext) -> Section | None:
    summary = ctx.summary
    if summary is None or summary.empty:
        return None
    flagged = summary[(summary["better"].notna()) & ((summary["cv"] > NOISY_CV) | (summary["n"] < MIN_SAMPLES))].copy()
    if flagged.empty:
        return Section(
            title="Flags", intro=f"No configuration has a CV above {NOISY_CV:.0%} or fewer than {MIN_SAMPLES} samples."
        )
    flagged["flag"] = flagged.apply(
        lambda r: ", ".join(
            f for f, on in (("noisy", r["cv"] > NOISY_CV), ("not enough samples", r["n"] < MIN_SAMPLES)) if on
        ),
        axis=1,
    )
    table = flagged[["workload", "case", "metric", "config", "median", "cv", "n", "flag"]].copy()
    table["cv"] = table["cv"].map(lambda v: "-" if v != v else f"{v:.1%}")
    table["median"] = table["median"].map(fmt.number)
    table["n"] = table["n"].astype(str)
    return Section(
        title="Flags",
        intro=f"Configurations with a coefficient of variation above {NOISY_CV:.0%} (noisy) or "
        f"fewer than {MIN_SAMPLES} measured samples: read their comparisons with care.",
        tables=[Table(title="flagged", frame=table)],
    )
