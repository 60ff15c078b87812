"""The seed-001 overhead model: C per protection layer, per case and pooled per workload."""

from __future__ import annotations

from ccbench.analysis.rows.overhead import BOOTSTRAP, NOT_MODELLED, model_table, overhead_model, without_left_out
from ccbench.report.sections import ReportContext, Section, Table

ORDER = 45

POOLED_TITLES = {
    "workload": "pooled per workload over its cases and metrics",
    "kind": "pooled per workload kind over its workloads' cases",
    "all": "pooled over every case of every workload",
}


def build(ctx: ReportContext) -> Section | None:
    samples = ctx.samples
    if ctx.exclude_contended and "contended" in samples:
        samples = samples[~samples["contended"]]
    # the rows the verdict left out (implausible) are in no fit: the model says what the verdict says
    samples = without_left_out(samples, ctx.comparison)
    model = overhead_model(samples, bootstrap=BOOTSTRAP, pool_by=ctx.model_by)
    if model.empty:
        return None
    tables = []
    pooled = model_table(model, "pooled")
    if not pooled.empty:
        tables.append(
            Table(
                title=POOLED_TITLES[ctx.model_by],
                frame=pooled,
                note="Observations: each case's median per configuration divided by that case's T_base (so T_base is 1 "
                f"by construction). [low, high]: 95% bootstrap over those observations ({BOOTSTRAP} resamples), i.e. the "
                "spread between the cases pooled, not measurement noise. A note applies to every case pooled. "
                "Choose the grouping with --model-by workload|kind|all.",
            )
        )
    tables.append(
        Table(
            title="per case (one fit per workload, case and metric)",
            frame=model_table(model, "case"),
            note="T_base: the fitted time without any protection layer, in the metric's unit (higher-is-better metrics are "
            f"modelled as their reciprocal, 1/unit). [low, high]: 95% bootstrap ({BOOTSTRAP} resamples) of the samples "
            "within each configuration, i.e. measurement noise of that one case.",
        )
    )
    return Section(
        title="Overhead model",
        intro="T = T_base * (1 + sum C_i x_i), x_i = 1 when layer i is active, fitted by non-negative least squares "
        "(seed 001's model). C_i is the share of T_base that layer i adds: 0.126 = +12.6%. C cannot be negative: "
        f"a layer that speeds things up is '{NOT_MODELLED}', never a cost of 0. The rows the verdict left out "
        "(implausible) are in no fit. A layer that only changes "
        "together with the machine includes the machines' other differences (see the notes).",
        tables=tables,
    )
