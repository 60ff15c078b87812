"""compare's rows of the cases a run settled (``run --settle``): the run's own interval on the
paired rounds (the repeated interval for its round limit, or the anytime-valid one where its record
names no limit: sequential.record_limit) (ccbench.analysis.statistics.sequential) in place of Welch's on all the
executions each side has, so the table, the verdict per layer, ``--summary``, the JSON and the
report say what the run's closing lines said (docs/analysis.md, "Settling each case").

A row takes it when the bundle's run settled that workload, the row's metric and parameters are
one of its cases (a series of its primary metrics), the row's baseline is the run's baseline and
each side's configuration comes from that one bundle and one variant (a row that pools replicas
or other bundles keeps its own interval). The row's ``interval`` column names the interval it
uses (ccbench.analysis.labels.interval_name: "repeated interval, limit 10", "anytime-valid"),
``settled`` the case's answer ("cost", "gain", "no cost above", or "unsettled: <what
stopped it>"; None on the other rows).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from ccbench.analysis.labels import COST, GAIN
from ccbench.analysis.statistics.sequential import Settlement
from ccbench.analysis.statistics.stats import skew_flags

#: (workload, metric, params as canonical JSON, baseline configuration, configuration)
Key = tuple[str, str, str, str, str]


def settled_cases(
    bundles: Iterable[Any], labels: Mapping[str, str] | None = None, exclude_contended: bool = False
) -> dict[Key, dict[str, Any]]:
    """Per case the bundles' runs settled: its settlement recomputed from the samples (the run's
    rule and interval), its p value on that interval, what stopped its variant and the bundle (its path). With
    ``exclude_contended`` the contended executions' rounds are left out, as from the rows."""
    from ccbench.analysis.samples.load import canonical_params, config_label, storage_label
    from ccbench.analysis.settling.plausible import left_out
    from ccbench.analysis.settling.recorded import settled_workloads
    from ccbench.analysis.statistics.sequential import by_pair, case_p_value, paired_series, record_limit, settle
    from ccbench.model import ExecutionKey
    from ccbench.probe.facts import machine_of

    out: dict[Key, dict[str, Any]] = {}
    for bundle in bundles:
        settled, declared, samples = settled_workloads(bundle)
        if not settled:
            continue
        machine, _, tee = machine_of(bundle.probe, bundle.path, labels or {})
        for name, record in settled.items():
            mine = [s for s in samples[name] if s.execution and not (exclude_contended and s.contended)]
            seen: dict[str, set[str]] = {}
            for sample in mine:
                config = config_label(machine, tee, storage_label(sample.variant), sample.variant.get("transport"))
                seen.setdefault(ExecutionKey.parse(sample.execution).variant, set()).add(config)
            # a configuration two variants share (a variant axis the label does not show) mixes them
            config_of = {key: next(iter(configs)) for key, configs in seen.items() if len(configs) == 1}
            shared = Counter(config_of.values())
            baseline, limit = record["baseline"], record_limit(record)
            # each variant against its own pair: a cipher on a loop file against its loop twin
            against = {k: v["against"] for k, v in record["variants"].items() if v.get("against")}
            # a run settled by layer leaves the cases the comparison finds implausible out of its layers
            left = left_out(mine, baseline, [baseline, *record["variants"]], against, declared.get(name, ()))
            for base, paired in by_pair(baseline, [baseline, *record["variants"]], against).items():
                if base not in config_of or shared[config_of[base]] > 1:
                    continue
                for series, label, per_key in paired_series(mine, base, [base, *paired], declared.get(name, ())):
                    for key, values in per_key.items():
                        if key not in config_of or shared[config_of[key]] > 1:
                            continue
                        found = (name, series[0], canonical_params(series[1]), config_of[base], config_of[key])
                        out[found] = {
                            "settlement": settle(values, record["target"], limit=limit),
                            "p_value": case_p_value(values, limit),
                            "stopped_by": _stopped_by(record["variants"].get(key) or {}, label),
                            "bundle": str(bundle.path),
                            "workload": name,
                            "variant": key,
                            "pair": base,
                            "label": label,
                            "values": values,
                            "left_out": (left.get(key) or {}).get(label),
                        }
        # a run settled by layer settled each layer across its workloads settled by layer, together
        layered = [name for name, record in settled.items() if record.get("by") == "layer"]
        if layered:
            mine_cases = [case for k, case in out.items() if k[0] in layered and case["bundle"] == str(bundle.path)]
            first = settled[layered[0]]
            _claims_by_layer(mine_cases, first["target"], record_limit(first))
    for case in out.values():
        case.pop("values", None)
    return out


#: a layer's state in its rows' ``layer_settled`` where the run left it open
OPEN = "open"
#: what a case of a run settled by layer is, where e-BH did not call it: its interval as it stood
SO_FAR = "so far (its layer settled by its headline)"
#: a case of a run settled by layer that its layer left out (the comparison finds it implausible)
LEFT_OUT = "left out of its layer as implausible"
#: the flag of a case of a run settled by layer whose own interval excludes 1 but that e-BH did not call
#: across its layer: not significant, though its interval alone would read as a difference
NOT_CALLED = "not called across its layer"


def _claims_by_layer(cases: list[dict[str, Any]], target: float, limit: int | None) -> None:
    """A run settled by layer claims only the cases e-BH calls within each layer (its variant:
    ccbench.analysis.settling.layer_settle): every other case keeps its interval but no answer ("so far")."""
    from dataclasses import replace

    from ccbench.analysis.settling.layer_settle import case_label, settle_layer

    for layer_key in {(case["variant"], case["pair"]) for case in cases}:
        mine = [case for case in cases if (case["variant"], case["pair"]) == layer_key]
        workloads = list(dict.fromkeys(case["workload"] for case in mine))
        named = {case_label(case["workload"], case["label"], workloads): case for case in mine}
        dropped = {label: case["left_out"] for label, case in named.items() if case.get("left_out")}
        kept = {label: case["values"] for label, case in named.items() if label not in dropped}
        layer = settle_layer(kept, target, limit, workloads=workloads, left_out=dropped)
        head = layer.headline
        headline = {
            # "open" where the layer is not settled (a null read as "no answer" where the text said open)
            "state": layer.state or OPEN,
            "estimate": head.estimate,
            "low": head.low,
            "high": head.high,
            "target": head.target,
            "rounds": head.rounds,
            "cases": len(kept),
            "workloads": len(layer.kept_workloads),
            "interval": head.interval,
        }
        for label, case in named.items():
            case["layer"] = headline
            if label not in layer.called:
                case["settlement"] = replace(case["settlement"], state=None)
                case["stopped_by"] = LEFT_OUT if label in dropped else SO_FAR


def _stopped_by(variant: Mapping[str, Any], label: str) -> str | None:
    """Why the run stopped one case: its own reason (runs since cases stop one by one), else its
    variant's."""
    return ((variant.get("cases") or {}).get(label) or {}).get("stopped_by") or variant.get("stopped_by")


def answer(settlement: Settlement, stopped_by: str | None) -> str:
    """The ``settled`` column: the case's answer, or what left it unsettled."""
    if settlement.state is not None:
        return settlement.state
    return f"unsettled: {stopped_by}" if stopped_by and stopped_by != "settled" else "unsettled"


def with_settled(table: pd.DataFrame, cases: Mapping[Key, dict[str, Any]], facts: pd.DataFrame) -> pd.DataFrame:
    """``table`` (compare's rows) with each settled case's row on the run's interval: its ratio
    (the geometric mean of the paired ratios), interval, p value, significance, verdict, flags and
    MDE (the target where settled; else the cost its interval excludes), ``interval`` the name of the
    settlement's and
    ``settled`` its answer. ``facts``: the compared configurations with their bundle (a
    configuration measured in several bundles keeps its own interval)."""
    from ccbench.analysis.rows.compare import overhead_percent, verdict

    if not cases or table.empty:
        return table
    bundles_of = facts.groupby("config")["bundle"].nunique().to_dict()
    columns = ["workload", "metric", "params", "baseline", "config"]
    table = table.copy()
    table["flags"] = [list(flags) for flags in table["flags"]]
    for index, key in zip(table.index, zip(*(table[c] for c in columns))):
        case = cases.get(key)
        settlement = case["settlement"] if case else None
        if settlement is None or settlement.estimate is None:
            continue
        # a fleet's case pools its rounds' bundles by design (ccbench.analysis.settling.fleet_settle)
        if not case.get("across_bundles") and (bundles_of.get(key[3], 0) != 1 or bundles_of.get(key[4], 0) != 1):
            continue
        better = table.at[index, "better"]
        te = 1 + settlement.estimate
        ends = (1 + settlement.low, 1 + settlement.high) if settlement.low is not None else (math.nan, math.nan)
        ratio, low, high = (1 / te, 1 / ends[1], 1 / ends[0]) if better == "higher" else (te, *ends)
        significant = settlement.state in (COST, GAIN)
        if settlement.settled:
            mde = settlement.target
        else:
            mde = ends[1] - 1 if math.isfinite(ends[1]) else math.nan
        table.at[index, "ratio"], table.at[index, "ci_low"], table.at[index, "ci_high"] = ratio, low, high
        table.at[index, "p_value"] = case["p_value"]
        table.at[index, "overhead_percent"] = overhead_percent(ratio, better)
        table.at[index, "mde"] = mde
        table.at[index, "significant"] = significant
        table.at[index, "verdict"] = verdict(ratio, better, significant)
        flags = _flags(table.at[index, "flags"], significant)
        if not significant and case["stopped_by"] == SO_FAR and (ends[0] > 1 or ends[1] < 1):
            flags.insert(flags.index("not significant") + 1 if "not significant" in flags else len(flags), NOT_CALLED)
        medians = table.at[index, "baseline_median"], table.at[index, "median"]
        table.at[index, "flags"] = skew_flags(flags, significant, *medians, ratio)
        table.at[index, "interval"] = settlement.interval
        if "se" in table:
            # the paired rounds' own standard error (not the settle interval's width): what pools the row
            table.at[index, "se"] = settlement.se if settlement.se else math.nan
            table.at[index, "dof"] = settlement.rounds - 1
        table.at[index, "settled"] = answer(settlement, case["stopped_by"])
        if case.get("layer"):
            # a run settled by layer: its headline is what the verdict says of the layer in this workload
            if "layer_settled" not in table:
                table["layer_settled"] = pd.Series([None] * len(table), index=table.index, dtype=object)
            table.at[index, "layer_settled"] = case["layer"]
    table["significant"] = table["significant"].astype(bool)
    return table


def _flags(flags: list[str], significant: bool) -> list[str]:
    """The row's flags with "not significant" by the run's interval, where compare puts it."""
    kept = [flag for flag in flags if flag != "not significant"]
    if significant or "not enough samples" in kept:
        return kept
    at = int(np.sum([flag in ("not enough samples", "noisy") for flag in kept[:2]]))
    return [*kept[:at], "not significant", *kept[at:]]
