"""The verdict per protection layer, first in the report: what each layer costs, where it hurts
most, the causes ccbench recorded, and how far to trust it (the same numbers as the comparison)."""

from __future__ import annotations

from functools import partial

import pandas as pd

from ccbench.analysis import format as fmt
from ccbench.analysis.judgement.headline import page_points
from ccbench.analysis.judgement.impact import share_text
from ccbench.analysis.judgement.verdict import LayerVerdict
from ccbench.analysis.judgement.verdict_table import contention_counts, verdict_table
from ccbench.analysis.rows import pairing
from ccbench.report import charts, forest
from ccbench.report.sections import Figure, ReportContext, Section, Table

ORDER = 5
# not DRAWS: its chart goes to the drawer (draw_soon) before the verdict is computed, and the charts
# of the modules that draw are handed over before it, so a helper draws them during the verdict


def build(ctx: ReportContext) -> list[Section] | None:
    engine = ctx.engine
    # the chart first, to the drawer at once: a helper draws it while the verdict is computed
    figures = ctx.draw_soon(answer_figures(ctx))
    # the per-sample frame (the engine's bounded one): application shares and causes read a few metrics of it
    from ccbench.analysis.judgement.lint import bundle_machines

    machines = bundle_machines(ctx.bundles)[0] if ctx.bundles else None
    items = ctx.layer_verdicts()  # computed once: the charts' takeaways name the same bounds
    if not items:
        return None
    measured = ctx.samples if engine is None else engine.executions
    contended, executions, unrecorded = contention_counts(measured, machines)
    excluded = (
        " They were left out of every comparison (--exclude-contended)." if ctx.exclude_contended and contended else ""
    )
    # a cipher on a loop file stands against its loop twin (ccbench.analysis.rows.pairing): said once here
    twins = pairing.baselines(ctx.comparison)[1] if not ctx.comparison.empty else ""
    # and a machine's own layers against its own least protected configuration (ccbench.analysis.comparison)
    twins += pairing.own_note(ctx.comparison)
    intro = (
        f"Against the baseline {ctx.baseline}{twins}: what each protection layer costs in time, in one convention "
        '("2.9x slower [2.6x, 3.3x]", "1.31x faster", "4.2% slower" under 2x): one figure with its 95% interval '
        "only where the layer's comparisons agree in direction and are not heterogeneous (Cochran's Q, I2), "
        "otherwise the range with each end's direction; many benchmarks of one value each are pooled with a sign "
        'test ("faster in 90 of 92 benchmarks, 1.30x faster [1.27x, 1.33x]"); "no cost above X%" only where '
        "nothing in the layer is significant. "
        f"{_counted(contended, executions, unrecorded)}{excluded} Each typical cost rests on the workloads' application-level metrics (a notebook's "
        "wall time, a request's latency, fio throughput); per-message benchmarks (round trips, handshakes) are "
        "stated as the share of one unit of application work they add. The comparison table below has every row "
        "behind these numbers."
    )
    # the causes are each layer's sentence above, whole: in a cell of a 15-column table they were one
    # word wide and dozens of lines tall
    tables = [Table("cost per protection layer", verdict_table(items).drop(columns=["causes recorded"]))]
    per_message = message_cost_table(items)
    if per_message is not None:
        tables.append(per_message)
    # the first screen: one line per layer and one chart of every cost with its interval; then how
    # the verdict was reached (each layer's sentence, the table behind it)
    answer = Section(
        title="Verdict per protection layer",
        intro=f"Against the baseline {ctx.baseline}{twins}: one line per protection layer; below, what each configuration "
        f"costs each workload, as a time ratio with its 95% interval. {_contention(contended, executions, unrecorded)}"
        f"{excluded}" + _uncompared(ctx),
        points=page_points(items),
        figures=figures,
        css_class="verdict",
    )
    detail = Section(
        title="How the verdict was reached",
        intro=intro,
        points=[item.sentence() for item in items],
        tables=tables,
    )
    return [answer, detail]


def answer_figures(ctx: ReportContext) -> list[Figure]:
    """The forest plot of the first screen: every configuration's cost per workload case (primary
    metrics), a workload of many cases pooled into one row (its own chart lists them)."""
    data = first_chart(ctx)
    if data.empty:
        return []
    return [
        Figure(
            name="verdict-forest",
            draw=partial(charts.forest, data, f"time against {ctx.baseline} (95% intervals, log scale)", ctx.colours),
            caption=forest.caption(data, ctx.baseline),
        )
    ]


def first_chart(ctx: ReportContext) -> forest.Forest:
    """The first screen's forest rows, built once for the sections that need them (this one, and
    the workloads' section, which charts every case of the workloads it pooled)."""
    if "forest" not in ctx.shared:
        ctx.shared["forest"] = forest.build(ctx.comparison, ctx.samples)
    return ctx.shared["forest"]


def message_cost_table(items: list[LayerVerdict]) -> Table | None:
    """Per protected configuration of a per-message benchmark: what one request adds to one unit of
    application work, and its figures against the floors measured in the same run."""
    rows = [_message_cost_row(item.layer, cost) for item in items for cost in item.message_costs]
    if not rows:
        return None
    return Table(
        "what a protected transport adds to one request, and how close it is to its floors (medians of the same run)",
        pd.DataFrame(rows).fillna("-"),
        note="A request is one round trip of an embedding's size; a request that opens its connection pays the "
        "handshake too. Floors: the X25519 operations of a handshake (both ends on one core) and one core's AEAD "
        "seal+open speed.",
    )


def _message_cost_row(layer: str, cost: dict) -> dict:
    row = {
        "layer": layer,
        "configuration": cost["config"],
        "application": f"{cost['application']} ({fmt.number(cost['application_ms'], 'ms')})",
        "round trip added (us)": fmt.number(cost["request_us"]),
        "handshake (us)": fmt.number(cost["connection_us"]),
        "share, open connection": _share(cost["share_open_connection"]),
        "share, new connection": _share(cost["share_new_connection"]),
    }
    for floor in cost["floors"]:
        if floor["better"] == "higher":
            row[f"{floor['metric']} / {floor['what']}"] = f"{floor['ratio']:.0%}"
        else:
            row[f"{floor['metric']} / {floor['what']}"] = f"{floor['ratio']:.2f}x"
    return row


def _share(value: float | None) -> str:
    return "-" if value is None else share_text(value)


def _unrecorded(unrecorded: int) -> str:
    if not unrecorded:
        return ""
    many = unrecorded != 1
    return (
        f" {unrecorded} imported execution{'s' if many else ''} {'are' if many else 'is'} not counted: whether "
        f"{'they were' if many else 'it was'} contended was never recorded."
    )


def _counted(contended: int, executions: int, unrecorded: int) -> str:
    """The counts in the verdict's introduction, imported executions apart."""
    said = (
        f"{contended} of {executions} measured executions were contended (other processes' CPU or steal time "
        "while they ran)."
        if executions
        else ""
    )
    return (said + _unrecorded(unrecorded)).strip()


def _contention(contended: int, executions: int, unrecorded: int = 0) -> str:
    """The contention of the executions behind the verdict, said on its first screen as the terminal says it;
    imported executions apart (their contention was never recorded)."""
    if not executions:
        return _unrecorded(unrecorded).strip()
    if not contended:
        return f"None of the {executions} measured executions was contended.{_unrecorded(unrecorded)}"
    return (
        f"{contended} of {executions} measured executions were contended (other processes' CPU or steal time while "
        "they ran): their numbers may be distorted; run again on a quiet machine, or report with --exclude-contended."
        f"{_unrecorded(unrecorded)}"
    )


def _uncompared(ctx: ReportContext) -> str:
    """The machines no row compares, said on the first screen as the terminal says it."""
    from ccbench.analysis.comparison import uncompared

    machines = uncompared(ctx.engine.facts, ctx.comparison) if ctx.engine is not None else []
    if not machines:
        return ""
    return (
        f" Not compared: {', '.join(machines)} (no workload in common with the baseline it would stand against; "
        "name one with --pair CONFIG=BASELINE or --baseline)."
    )
