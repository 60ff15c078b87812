"""The seed-001 overhead model table: C per protection layer, per workload and pooled."""

from __future__ import annotations

from ccbench.analysis.overhead import BOOTSTRAP, model_table, overhead_model
from ccbench.report.sections import ReportContext, Section, Table

ORDER = 45


def build(ctx: ReportContext) -> Section | None:
    model = overhead_model(ctx.samples, bootstrap=BOOTSTRAP)
    if model.empty:
        return None
    return Section(
        title="Overhead model",
        intro="T = T_base * (1 + sum C_i x_i), x_i = 1 when layer i is active, fitted by non-negative least squares "
              f"per workload and pooled; [low, high] = 95% bootstrap interval ({BOOTSTRAP} resamples). Higher-is-better metrics are modelled "
              "as their reciprocal. C cannot be negative: a layer that speeds things up shows 0.",
        tables=[Table(title="coefficients per layer", frame=model_table(model))],
    )
