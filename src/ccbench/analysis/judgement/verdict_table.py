"""The verdict per protection layer as text cells (the report's table and ``compare --details``), and
the count of contended executions behind it. The words come from the verdict (ccbench.analysis.judgement.verdict)
and ccbench.analysis.format; nothing here computes a figure of its own."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import pandas as pd

from ccbench.analysis import format as fmt

if TYPE_CHECKING:
    from ccbench.analysis.judgement.layer import LayerVerdict


def _typical_cell(item: LayerVerdict) -> str:
    if item.confounded and item.layer != "none":
        return f"confounded ({item.words()} measured)"
    return item.words()


def _interval_cell(item: LayerVerdict) -> str:
    return "-" if item.confounded and item.layer != "none" else item.interval_text()


def _interval_over_cell(item: LayerVerdict) -> str:
    stated = item.states_interval() and not (item.confounded and item.layer != "none")
    return item.interval_over if stated else "-"


VERDICT_HEADERS = [
    "layer",
    "typical cost",
    "95% interval",
    "interval from",
    "smallest detectable",
    "rests on",
    "range between workloads",
    "hurts most",
    "causes recorded",
    "machines",
    "comparisons",
]


def counts_cell(item: LayerVerdict) -> str:
    """The layer's counts in one cell ("2 of 6 significant, 1 contended, 0 noisy"): five columns of
    single numbers made the report's table too wide for a 1280 px page."""
    cell = f"{item.significant} of {item.comparisons} significant, {item.contended} contended, {item.noisy} noisy"
    if item.left_out_contended:  # the left-out rows are in no count above: their contention said apart
        cell += f"; {item.left_out_contended} of {item.left_out_rows} left out contended"
    return cell


def verdict_table(items: list[LayerVerdict]) -> pd.DataFrame:
    """The verdict as text cells (the report's table and ``compare --summary``)."""
    return pd.DataFrame(
        [
            {
                "layer": "no layer (other machine or run)" if v.layer == "none" else v.layer,
                "typical cost": _typical_cell(v),
                "95% interval": _interval_cell(v),
                "interval from": _interval_over_cell(v),
                "smallest detectable": "-" if math.isnan(v.mde) else f"{fmt.mde(v.mde)} (median MDE)",
                "rests on": v.rests_on or "-",
                "range between workloads": _per_workload_cell(v),
                "hurts most": v.worst if v.worst_overhead > 0 else "-",
                "causes recorded": "; ".join(v.causes) or "-",
                "machines": v.machines,
                "comparisons": counts_cell(v),
            }
            for v in items
        ],
        columns=VERDICT_HEADERS,
    )


def _per_workload_cell(v: LayerVerdict) -> str:
    """Each workload's own judgement where the layer has several ("fio: faster, 4.3x to 5.5x; fio-cold:
    5.3x faster"): the words the headline is combined from, so the cell and the headline agree (a
    geometric mean of every row of a workload did not: "2.6x faster to 2.5x faster" under "4.3x to 5.5x")."""
    if v.workloads <= 1:
        return "-"
    if v.judgement is not None and v.judgement.settled_on:
        return "settled as one layer across them (their cases: the settled section)"
    if v.workload_judgements:
        return "; ".join(f"{name}: {judgement.phrase(where=False)}" for name, judgement in v.workload_judgements)
    return f"{fmt.effect(v.range_low)} to {fmt.effect(v.range_high)}"


def contended_executions(samples: pd.DataFrame | None, machines: dict | None = None) -> tuple[int, int]:
    """(contended, all) measured executions in the samples: by execution key where the bundle has one
    (format 2), else by bundle, workload, variant and repetition. With ``machines`` ({bundle: probe}),
    the executions of imported bundles are not counted: nothing recorded whether they were contended
    (contention_counts counts them apart)."""
    contended, counted, _ = contention_counts(samples, machines)
    return contended, counted


def contention_counts(samples: pd.DataFrame | None, machines: dict | None) -> tuple[int, int, int]:
    """(contended, counted, unrecorded) executions: the executions of imported bundles ({bundle: probe}
    ``machines``) are unrecorded, counted apart and never as uncontended (a user trial read "0 of 6
    executions contended" of imported results that `show` calls of unknown contention)."""
    executions = _executions(samples)
    if executions is None:
        return 0, 0, 0
    imported = (
        executions["bundle"].map(lambda b: bool((machines.get(b) or {}).get("imported"))).astype(bool)
        if machines
        else pd.Series(False, index=executions.index)
    )
    counted = executions[~imported]
    return int(counted["contended"].sum()), len(counted), int(imported.sum())


def contention_words(contended: int, executions: int, unrecorded: int) -> str:
    """ "3 of 30 executions contended", with imported executions apart: "contention not recorded (6
    imported executions)", "0 of 4 executions contended, 6 imported (contention not recorded)"."""
    if unrecorded and not executions:
        return f"contention not recorded ({unrecorded} imported execution{'s' if unrecorded != 1 else ''})"
    said = f"{contended} of {executions} executions contended"
    return f"{said}, {unrecorded} imported (contention not recorded)" if unrecorded else said


def _executions(samples: pd.DataFrame | None) -> pd.DataFrame | None:
    if samples is None or samples.empty:
        return None
    data = samples[~samples["warmup"]]
    if "contended" not in data:
        return None
    keys = (
        ["bundle", "execution"]
        if "execution" in data and (data["execution"] != "").all()
        else ["bundle", "workload", "config", "repetition"]
    )
    return data.drop_duplicates(keys)
