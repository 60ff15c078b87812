"""The verdict per protection layer: what each layer costs, where it hurts most, and why.

Built from the comparison table (ccbench.analysis.rows.compare), never from numbers of its own, so the
report's verdict, ``ccbench compare --summary`` and the comparison rows always agree. Each
comparison row is attributed to the layer that differs between its configuration and its baseline
(``layer`` column); rows where several layers differ are summarised as "combined", rows where none
does (another machine or run with the same protections) as "no layer".

Cost is time-equivalent (a throughput ratio of 0.8 is +25%). The typical cost of a layer is the
geometric mean over workloads of each workload's geometric mean over its rows (cases, metrics); its
95% interval is a t interval on the logs between workloads (three or more workloads), or between a
single workload's rows, or, for one row, that row's own interval (noise within configurations).
With two workloads no interval is given (a t interval on two values spans nearly everything): the
range between them is.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy import special

from ccbench.analysis import format as fmt
from ccbench.analysis.judgement import combined, headline, impact, semantics
from ccbench.analysis.judgement.causes import causes_of
from ccbench.analysis.judgement.layer import CONFOUNDED, LayerVerdict, confounding, layer_rank
from ccbench.analysis.rows import pairing
from ccbench.analysis.statistics.replicas import BETWEEN_MACHINES, RUNS_ONLY, SAME_MACHINES
from ccbench.analysis.statistics.stats import CONFIDENCE, SKEWED


def _time_equivalent(comparison: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    higher = (comparison["better"] == "higher").to_numpy()
    ratio = comparison["ratio"].to_numpy(dtype=float)
    low, high = comparison["ci_low"].to_numpy(dtype=float), comparison["ci_high"].to_numpy(dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return (np.where(higher, 1 / ratio, ratio), np.where(higher, 1 / high, low), np.where(higher, 1 / low, high))


def t_interval(logs: np.ndarray) -> tuple[float, float, float]:
    """The geometric mean of ratios given as logs, with a t interval from their spread (nan with one)."""
    mean = float(logs.mean())
    if len(logs) < 2:
        return math.exp(mean), math.nan, math.nan
    se = float(logs.std(ddof=1)) / math.sqrt(len(logs))
    t = float(special.stdtrit(len(logs) - 1, 0.5 + CONFIDENCE / 2))
    return math.exp(mean), math.exp(mean - t * se), math.exp(mean + t * se)


def _judged(counted: pd.DataFrame) -> tuple[semantics.Judgement | None, list]:
    """The layer's judgement from its counted rows, and each workload's (semantics.judge, combined):
    a headline the run settled across the workloads is judged once on all of its rows, without the
    workloads' own lines."""
    # judged on the few columns it reads (a fleet's thousands of rows, hundreds of workloads)
    narrow = counted[[c for c in semantics.COLUMNS if c in counted]]
    parts = [(str(w), semantics.judge(r)) for w, r in narrow.groupby("workload", sort=False)]
    judgement = combined.combine(parts) if parts else None
    if len(parts) > 1 and "layer_settled" in narrow and narrow["layer_settled"].notna().all():
        # one headline the run settled across these workloads: judged once on all of its rows
        # (semantics.settled_judgement)
        whole = semantics.judge(narrow)
        if whole.settled_on:
            # its workloads' own lines would judge its cases on their own, beside the run's figure for
            # all of them ("fio: no cost above 2.3x" under "1.81x faster"): its cases are in compare's
            # settled section, workload by workload
            return whole, []
    return judgement, parts


def verdicts(
    comparison: pd.DataFrame | None, samples: pd.DataFrame | None = None, machines: dict | None = None
) -> list[LayerVerdict]:
    """One LayerVerdict per layer found in the comparison, in LAYER_ORDER. ``machines`` ({bundle:
    probe}) lets a layer measured across machines of different or unknown CPUs say so."""
    if comparison is None or comparison.empty or "layer" not in comparison:
        return []
    data = comparison.copy()
    data["te"], data["te_low"], data["te_high"] = _time_equivalent(data)
    # which rows are an application's result (each workload's declared primary metrics)
    declared = impact.declarations(samples)
    data["primary"] = impact.primary_mask(data, declared)
    data["per_message"] = data["workload"].map(lambda w: bool((declared.get(w) or impact.Declared(None)).message_costs))
    # the few distinct (configuration, machine, cipher) facts, found once instead of once per layer
    facts = None
    if samples is not None and not samples.empty:
        from ccbench.analysis.samples.load import CAUSE_KEYS

        columns = ["config", "machine"] + [c for c in CAUSE_KEYS if c in samples]
        facts = samples[columns].drop_duplicates()
    out = []
    for layer in sorted(set(data["layer"]), key=layer_rank):
        rows = data[data["layer"] == layer]
        # rows the plausibility lint marked are named, never counted (ccbench.analysis.judgement.semantics)
        usable = rows[np.isfinite(rows["te"]) & (rows["te"] > 0) & ~semantics.implausible_mask(rows)]
        if usable.empty:
            if semantics.implausible_mask(rows).any():
                out.append(_all_left_out(layer, rows))
            continue
        costs = impact.message_costs(rows, samples, declared)
        counted, basis = _counted_rows(usable)
        if counted.empty:
            per_workload, typical, low, high, over = _per_message_typical(costs)
            worst, worst_overhead = _largest_share(costs)
        else:
            per_workload, typical, low, high, over = _typical(counted)
            worst, worst_overhead = _worst(counted)
        judgement, parts = _judged(counted)
        if judgement is not None:
            judgement.left_out = semantics.left_out(rows)
            left_parts = semantics.left_out_parts(rows)
            if not counted.empty:
                # a figure only where one may be given (ccbench.analysis.judgement.semantics)
                given = judgement.kind in (semantics.POOLED, semantics.ACROSS)
                typical = judgement.typical if given else math.nan
                low, high = (judgement.low, judgement.high) if given else (math.nan, math.nan)
                over = judgement.test_named() or over if given else "-"
        # the counts are of the rows the figure rests on (the report's chart draws the same rows): a
        # row left out is named, never counted, and the supporting metrics are counted apart
        kept = rows[~semantics.implausible_mask(rows)]
        scope = _scope(kept, counted)
        flags = scope["flags"]
        confounded, confounded_rows = confounding(flags)
        causes, contended = _causes(layer, kept if not kept.empty else rows, facts, scope)
        out.append(
            LayerVerdict(
                layer=layer,
                typical=typical,
                low=low,
                high=high,
                interval_over=over,
                **_judged_range(parts, per_workload),
                workloads=len(per_workload),
                comparisons=len(scope),
                significant=int(scope["significant"].astype(bool).sum()),
                contended=contended,
                noisy=int(flags.map(lambda f: "noisy" in f).sum()),
                not_significant=int((~scope["significant"].astype(bool)).sum()),
                skewed=int(flags.map(lambda f: SKEWED in f).sum()),
                worst=worst,
                worst_overhead=worst_overhead,
                causes=causes,
                **machines_behind(rows),
                confounded=confounded,
                confounded_rows=confounded_rows,
                rests_on=basis,
                not_counted=len(kept) - len(counted),
                left_out_rows=len(_scope(rows, counted)) - len(scope),
                left_out_contended=_contended(_scope(rows, counted)) - _contended(scope),
                supporting_significant=int(usable["significant"].astype(bool).sum())
                - int(counted["significant"].astype(bool).sum()),
                per_message=counted.empty,
                message_costs=costs,
                mde=headline.median_mde(counted),
                judgement=judgement if not counted.empty else None,
                workload_judgements=parts,
                cpu_note=cpu_note(rows, samples, machines) if layer != "none" or machines else "",
                left_out_parts=left_parts if judgement is not None else [],
                against=pairing.twin_baseline(rows) if layer.startswith("storage encryption") else "",
            )
        )
    return out


def cpu_note(rows: pd.DataFrame, samples: pd.DataFrame | None, machines: dict | None) -> str:
    """ "machines differ in CPU" where a row's sides ran on different CPU models (its "confounded by
    CPU model" flag, or the probes), "CPU unknown" where a side's machine records none; "" else."""
    if rows["flags"].map(lambda flags: any(f.startswith(CONFOUNDED + "CPU model") for f in flags)).any():
        return "machines differ in CPU"
    if not machines or samples is None or samples.empty or "bundle" not in samples:
        return ""
    from ccbench.analysis.rows.sides import config_sides, differences

    sides = config_sides(samples, machines)
    for base, config in rows[["baseline", "config"]].drop_duplicates().itertuples(index=False):
        a, b = sides.get(base, []), sides.get(config, [])
        if {label for label, _ in a} == {label for label, _ in b}:
            continue  # the same machines on both sides
        found, unknown = differences(a, b)
        if any(d.fact == "CPU model" for d in found):
            return "machines differ in CPU"
        if "CPU model" in unknown:
            return "CPU unknown"
    return ""


def _all_left_out(layer: str, rows: pd.DataFrame) -> LayerVerdict:
    """A layer whose every comparison the plausibility lint marked: no figure, the rows named."""
    judgement = semantics.Judgement(kind=semantics.LEFT_OUT, left_out=semantics.left_out(rows))
    scope = _scope(rows, _counted_rows(rows)[0])
    judgement.left_count = len(scope)
    return LayerVerdict(
        layer=layer,
        typical=math.nan,
        low=math.nan,
        high=math.nan,
        interval_over="-",
        range_low=math.nan,
        range_high=math.nan,
        workloads=rows["workload"].nunique(),
        comparisons=0,
        significant=0,
        contended=0,  # of the 0 rows counted: the left-out rows' contention is said apart
        noisy=0,
        not_significant=0,
        left_out_rows=len(scope),
        left_out_contended=_contended(scope),
        worst="",
        worst_overhead=0.0,
        judgement=judgement,
        left_out_parts=semantics.left_out_parts(rows),
    )


def _contended(rows: pd.DataFrame) -> int:
    """How many of ``rows`` include contended executions."""
    return int(rows["flags"].map(lambda f: "contended" in f).sum())


def _count_range(values: pd.Series) -> str:
    low, high = int(values.min()), int(values.max())
    return str(low) if low == high else f"{low}-{high}"


def machines_behind(rows: pd.DataFrame) -> dict[str, str]:
    """How many machines stood behind each side of a layer's comparisons (``machines``) and what the
    interval can then say (``machines_note``): with replicas it includes the spread between machines;
    with one machine a side it covers run-to-run noise only."""
    if "interval_from" not in rows or rows.empty:
        return {}
    kinds = rows["interval_from"]
    across = rows[kinds != SAME_MACHINES]
    if across.empty:
        count = _count_range(rows["machines"])
        which = "machine" if count == "1" else f"{count} machines"
        return {
            "machines": f"{count} (same on both sides)",
            "machines_note": f"both sides measured on the same {which}",
        }
    cell = f"{_count_range(across['machines_baseline'])} vs {_count_range(across['machines'])}"
    between = across[across["interval_from"] == BETWEEN_MACHINES]
    single = int((across["interval_from"] == RUNS_ONLY).sum())
    if between.empty:
        note = (
            "one machine per side: the interval covers run-to-run noise only and cannot separate the layer from "
            "machine-to-machine variation (replicate: give several machines of each configuration the same label)"
        )
        return {"machines": cell, "machines_note": note}
    note = (
        f"{_count_range(between['machines_baseline'])} machines against {_count_range(between['machines'])}: "
        "the interval includes the spread between machines"
    )
    if (between[["machines_baseline", "machines"]].min(axis=1) == 1).any():
        note += " (a side with one machine is taken to vary as much as the other side's machines)"
    if single:
        note += f"; {single} of {len(across)} comparisons had one machine a side (run-to-run noise only)"
    return {"machines": cell, "machines_note": note}


def _counted_rows(usable: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """The rows a layer's typical cost is taken from, and what it rests on: the workloads' primary
    (application-level) metrics; where the layer has none, the metrics of workloads that are no
    per-message benchmark (an import, a kind whose declared metrics were not compared), said as such;
    never a per-message benchmark's round trips and handshakes (its share of an application's work
    leads instead: ccbench.analysis.judgement.impact)."""
    primary = usable[usable["primary"]]
    if not primary.empty:
        return primary, f"application metrics: {impact.rests_on(primary)}"
    other = usable[~usable["per_message"]]
    if not other.empty:
        return other, f"metrics not declared as an application's result: {impact.rests_on(other)}"
    return usable.iloc[0:0], "per-message costs only (no application metric compared)"


def _judged_range(parts: list, per_workload: pd.Series) -> dict[str, float]:
    """The smallest and largest of the workloads' own figures, as their judgements give them (the
    words beside them in every output); a layer with no judged workload (per-message costs only)
    keeps its per-workload shares."""
    figures = [j.typical for _, j in parts if math.isfinite(j.typical)] if parts else list(per_workload)
    if not figures:
        return {"range_low": math.nan, "range_high": math.nan}
    return {"range_low": float(min(figures)), "range_high": float(max(figures))}


def _scope(rows: pd.DataFrame, counted: pd.DataFrame) -> pd.DataFrame:
    """The rows of ``rows`` of the kind the figure rests on (``counted``, from _counted_rows): each
    workload's primary metrics, else the metrics of workloads that are no per-message benchmark;
    every row where the layer has per-message comparisons only. What the verdict counts, and what
    the report's chart draws."""
    if counted.empty:
        return rows
    if counted["primary"].all():
        return rows[rows["primary"].astype(bool)]
    return rows[~rows["per_message"].astype(bool)]


def _per_message_typical(costs: list[dict]) -> tuple[pd.Series, float, float, float, str]:
    """Where a layer has per-message comparisons only: the share of one unit of application work a
    request that opens its connection adds (time-equivalent: 1 + share), per workload and typical
    (medians over the protected configurations); no interval (a difference of medians)."""
    shares = pd.DataFrame(
        [(c["workload"], 1 + c["share_new_connection"]) for c in costs if c["share_new_connection"] is not None],
        columns=["workload", "te"],
    )
    if shares.empty:
        return pd.Series(dtype=float), math.nan, math.nan, math.nan, "-"
    per_workload = shares.groupby("workload", sort=False)["te"].median()
    over = "share of one unit of application work, from medians: no interval"
    return per_workload, float(shares["te"].median()), math.nan, math.nan, over


def _largest_share(costs: list[dict]) -> tuple[str, float]:
    """The protected configuration whose requests add the largest share of the application's work."""
    known = [c for c in costs if c["share_new_connection"] is not None]
    if len(known) < 2:  # one configuration: the sentence's head already says it
        return "", 0.0
    top = max(known, key=lambda c: c["share_new_connection"])
    share = top["share_new_connection"]
    return (
        f"{top['application']} per request that opens its connection on {top['config']}: +{impact.share_text(share)}",
        share * 100,
    )


def _typical(usable: pd.DataFrame) -> tuple[pd.Series, float, float, float, str]:
    """Per workload the geometric mean of its rows; the typical cost with its interval, and what the
    interval spans."""
    per_workload = usable.groupby("workload", sort=False)["te"].agg(lambda v: float(np.exp(np.log(v).mean())))
    if len(per_workload) >= 3:
        typical, low, high = t_interval(np.log(per_workload.to_numpy()))
        over = f"spread between {len(per_workload)} workloads"
    elif len(per_workload) == 2:
        typical, low, high = t_interval(np.log(per_workload.to_numpy()))
        low = high = math.nan
        over = "two workloads: see the range between them"
    elif len(usable) >= 2:
        typical, low, high = t_interval(np.log(usable["te"].to_numpy()))
        over = f"spread between {len(usable)} cases and metrics of one workload"
    else:
        row = usable.iloc[0]
        typical, low, high = float(row["te"]), float(row["te_low"]), float(row["te_high"])
        over = (
            "spread between machines (one comparison)"
            if row.get("interval_from") == BETWEEN_MACHINES
            else "noise within the configurations (one comparison)"
        )
    return per_workload, typical, low, high, over


def _worst(usable: pd.DataFrame) -> tuple[str, float]:
    """The comparison that hurts most (the largest significant cost, else the largest), as the table prints it."""
    ranked = usable.sort_values("te", ascending=False, kind="stable")
    significant = ranked[ranked["significant"]]
    top = (significant if not significant.empty else ranked).iloc[0]
    worst = (
        f"{' '.join(p for p in (top['workload'], top['case'] if isinstance(top['case'], str) else '', top['metric']) if p)} on {top['config']}: "
        f"{fmt.row_effect(top)}, ratio {fmt.ratio_interval(top['ratio'], top['ci_low'], top['ci_high'])}"
        f"{'' if top['significant'] else ' (not significant)'}"
    )
    return worst, float(top["overhead_percent"])


def _causes(
    layer: str, rows: pd.DataFrame, facts: pd.DataFrame | None, counted: pd.DataFrame | None = None
) -> tuple[list[str], int]:
    """The causes recorded for a layer's rows, and how many of its ``counted`` rows (the rows the
    verdict counts; all ``rows`` if not given) include contended executions."""
    causes = []
    if layer.startswith("TEE") or layer.startswith("combined"):
        pairs = rows[["baseline", "config"]].drop_duplicates()
        if facts is not None:
            machine = facts.drop_duplicates("config").set_index("config")["machine"]
            if any(machine.get(b) != machine.get(c) for b, c in pairs.itertuples(index=False)):
                causes.append("measured across machines: the cost includes any other difference between them")
    causes += causes_of(facts, set(rows["config"]), layer)
    if layer.startswith("storage encryption"):
        causes += [note for note in (pairing.loop_note(rows),) if note]
    counted = rows if counted is None or counted.empty else counted
    contended = _contended(counted)
    if contended:
        causes.append(
            f"{contended} of {len(counted)} comparisons include contended executions (others' CPU or steal "
            "time): compare again with --exclude-contended"
        )
    return causes, contended
