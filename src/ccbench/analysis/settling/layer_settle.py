"""Settling a layer's headline (``settle_by = "layer"``, ``run --settle 5% --settle-by layer``;
docs/analysis.md "Settling a layer").

A user asks what a protection layer costs (fscrypt against the loop file under it, say), not what
each of its 40 cases costs. A layer is one variant against its pair (the baseline, or a cipher's
loop twin: ccbench.analysis.statistics.sequential.by_pair) across the workloads of the plan settled
by layer (fscrypt over fio, compression and YCSB: ``across``, its cases named "workload: case" where
it spans more than one), and its headline is the mean over all of its cases of their paired log
costs: the geometric mean of the cases' costs, what the verdict pools where they agree. Every round
runs all of the layer's cases together (round r of each workload, ccbench.run.settle_layers), so
each round gives one value of that mean, ``headline_values``; the repeated interval for the round limit (or the anytime-valid
one without it) on that per-round series is the headline's interval, valid at every look for the
same reason a case's is: the rounds are independent of each other, and however the cases of one
round depend on each other (the same machine state, the same drawn order) the round's mean is one
value. The layer stops when its headline is settled: a cost with its size, a gain, or no cost above
the target; or when it cannot be by the round limit (futility: it claims nothing).

Case-level claims within the layer are controlled across it: a case is called (a cost or a gain)
only where e-BH (ccbench.analysis.statistics.discovery) at 5% calls it on the cases' e-values (the anytime
Bayes factor of no cost, an e-value at whatever round the layer stopped), so the share of wrong calls
among a layer's called cases is at most 5% whatever their dependence. Every other case is reported
"so far", with its current interval, never as settled. The costliest case is always named, so a
mean cannot hide it, and where the called cases disagree in direction the layer's answer is their
range, not the mean.

What it assumes: the rounds are exchangeable under no cost (the runner draws the order within each
round), and the cases are the same in every round (a case missing from a round leaves that round out
of the headline). The mean weights each case alike; a layer whose cases differ wildly in size says so
through its range and its costliest case, not through the mean.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ccbench.analysis.labels import COST, GAIN, NO_COST_ABOVE
from ccbench.analysis.statistics.sequential import (
    ALPHA,
    MIN_SPREAD,
    PairedCosts,
    Settlement,
    can_settle,
    p_value,
    settle,
    spread_floor,
)

#: a layer whose called cases go both ways: its answer is their range
DISAGREE = "cases disagree"
#: a case's claim where it is left out of its layer as implausible
LEFT_OUT = "left out"


def headline_values(cases: Mapping[str, Sequence[float]]) -> PairedCosts:
    """Per round, the mean over the cases of their paired log costs (the rounds every case has: by
    the rounds a PairedCosts names, else by position), with the floor of a mean of k values (their
    floors' root sum of squares over k)."""
    series = [values for values in cases.values() if len(values)]
    if not series:
        return PairedCosts()
    named = [getattr(values, "rounds", None) for values in series]
    if all(rounds is not None and len(rounds) == len(values) for rounds, values in zip(named, series)):
        common = sorted(set.intersection(*(set(rounds) for rounds in named)))
        rows = [[dict(zip(rounds, values))[r] for r in common] for rounds, values in zip(named, series)]
    else:
        common = list(range(min(len(values) for values in series)))
        rows = [list(values)[: len(common)] for values in series]
    floor = math.sqrt(sum(spread_floor(values) ** 2 for values in series)) / len(series)
    return PairedCosts(np.mean(np.asarray(rows, dtype=float), axis=0), max(floor, MIN_SPREAD), rounds=common)


@dataclass
class LayerSettlement:
    """Where one layer stands: its headline (a Settlement of the per-round mean), each case on its own
    interval, the cases e-BH calls (their claims), the costliest case and the state: the headline's
    answer (cost, gain, no cost above), DISAGREE where the called cases go both ways, None while open."""

    headline: Settlement
    cases: dict[str, Settlement] = field(default_factory=dict)
    called: list[str] = field(default_factory=list)
    costliest: str | None = None
    #: the workloads whose cases it holds (one, or none where not known: a workload's own layer)
    workloads: list[str] = field(default_factory=list)
    #: the cases left out as implausible (ccbench.analysis.settling.plausible): {case: why}
    left_out: dict[str, str] = field(default_factory=dict)

    @property
    def state(self) -> str | None:
        if self.headline.state is None:
            return None
        directions = {self.cases[c].estimate > 0 for c in self.called if self.cases[c].estimate is not None}
        return DISAGREE if len(directions) > 1 else self.headline.state

    @property
    def settled(self) -> bool:
        return self.state is not None

    @property
    def kept_workloads(self) -> list[str]:
        """The workloads holding a case of the headline (those whose every case is left out hold none)."""
        if len(self.workloads) <= 1:
            return list(self.workloads)
        return [w for w in self.workloads if any(name.startswith(f"{w}: ") for name in self.cases)]

    def describe(self) -> str:
        """The layer's answer in the project's convention, with its costliest case ("11x slower [9.8x,
        12x] (mean of 4 cases; costliest: ...)"); an open one "so far"."""
        from ccbench.analysis import format as fmt

        head = self.headline
        if not self.cases and self.left_out:
            return f"no case to settle: {self.left_out_text()}"
        if head.estimate is None:
            return f"no interval yet ({head.rounds} paired rounds)"
        said = fmt.effect(1 + head.estimate, *((1 + head.low, 1 + head.high) if head.low is not None else ()))
        mean = f"mean of {len(self.cases)} case{'s' if len(self.cases) != 1 else ''}"
        if len(self.kept_workloads) > 1:
            mean += f" in {len(self.kept_workloads)} workloads"
        if self.state == DISAGREE:
            ends = sorted(self.called, key=lambda c: self.cases[c].estimate or 0.0)
            lo, hi = (self.cases[c] for c in (ends[0], ends[-1]))
            text = f"{DISAGREE}: {ends[0]} {fmt.effect(1 + lo.estimate)} to {ends[-1]} {fmt.effect(1 + hi.estimate)}"
        elif self.state == NO_COST_ABOVE:
            text = f"no cost above {fmt.mde(head.target)} (estimate {said}, {mean})"
        elif self.state in (COST, GAIN):
            text = f"{said} ({mean})"
        else:
            text = f"open, so far {said} ({mean})"
        if self.costliest is not None and len(self.cases) > 1:
            case = self.cases[self.costliest]
            word = "called" if self.costliest in self.called else "so far"
            # every case faster: the costliest is the one that gains least, and is named so
            which = "smallest gain" if (case.estimate or 0.0) < 0 else "costliest"
            text += f"; {which}: {self.costliest} {word} {case_effect(case)}"
        if self.left_out:
            text += f"; {self.left_out_text()}"
        return text

    def left_out_text(self) -> str:
        """ "15 cases left out as implausible (direct I/O served buffered on fscrypt)": how many, and
        each kind of reason once (a reason's words before its figures)."""
        n = len(self.left_out)
        kinds = []
        for why in self.left_out.values():  # "reason; baseline: reason: figures" (plausibility.implausible)
            for part in why.split("; "):
                side = "baseline: " if part.startswith("baseline: ") else ""
                kinds.append(side + part.removeprefix(side).split(":")[0].strip())
        kinds = list(dict.fromkeys(kinds))
        every = "all " if not self.cases else ""
        return f"{every}{n} case{'s' if n != 1 else ''} left out as implausible ({'; '.join(kinds)})"

    @classmethod
    def from_record(cls, variant: Mapping[str, Any]) -> LayerSettlement:
        """From a settle record's variant (its ``layer`` and its cases: the layer's own across its
        workloads, ``layer.cases``, else the variant's, as the run wrote them)."""
        fields = Settlement.__dataclass_fields__
        layer = variant.get("layer") or {}
        cases = {
            label: Settlement(**{k: v for k, v in case.items() if k in fields})
            for label, case in (layer.get("cases") or variant.get("cases") or {}).items()
        }
        head = Settlement(**{k: v for k, v in (layer.get("headline") or {}).items() if k in fields})
        workloads = list(layer.get("workloads") or [])
        left = {str(k): str(v) for k, v in (layer.get("left_out") or {}).items()}
        return cls(head, cases, list(layer.get("called") or []), layer.get("costliest"), workloads, left)

    def as_dict(self) -> dict[str, Any]:
        return {
            "state": self.state,
            "headline": self.headline.as_dict(),
            "called": list(self.called),
            "costliest": self.costliest,
            "workloads": list(self.workloads),
            "cases": {label: case.as_dict() for label, case in self.cases.items()},
            **({"left_out": dict(self.left_out)} if self.left_out else {}),
        }

    def claim(self, workload: str, label: str) -> str:
        """A workload's case's claim in this layer: "called" (e-BH), "left out" (implausible) or "so far"."""
        name = case_label(workload, label, self.workloads)
        return "called" if name in self.called else LEFT_OUT if name in self.left_out else "so far"


def case_effect(case: Settlement) -> str:
    from ccbench.analysis import format as fmt

    if case.estimate is None:
        return "(no interval yet)"
    if case.low is None or case.high is None:
        return fmt.effect(1 + case.estimate)
    return fmt.effect(1 + case.estimate, 1 + case.low, 1 + case.high)


def case_label(workload: str, label: str, workloads: Sequence[str]) -> str:
    """A case's name in its layer: "workload: case" where the layer spans workloads, else the case's."""
    return f"{workload}: {label}" if len(workloads) > 1 else label


def across(
    costs: Mapping[str, Mapping[str, Mapping[str, Sequence[float]]]],
    pairs: Mapping[str, Mapping[str, str]],
    left: Mapping[str, Mapping[str, Mapping[str, str]]] | None = None,
) -> dict[tuple[str, str], tuple[list[str], dict[str, Sequence[float]], dict[str, str]]]:
    """The layers of the workloads settled by layer together: {(variant key, its pair's key): (its
    workloads, {its cases' names (case_label): paired log costs}, {the cases left out: why})}, from
    each workload's paired_against (``costs[workload]``), each variant's pair
    (``pairs[workload][key]``) and the cases the comparison leaves out as implausible
    (``left[workload][key]``: {case: why}, ccbench.analysis.settling.plausible.left_out). The same
    variant against the same pair in several workloads is one layer (fscrypt against ext4-loop over
    fio, compression and YCSB)."""
    found: dict[tuple[str, str], dict[str, dict[str, Sequence[float]]]] = {}
    for workload, variants in costs.items():
        for key, cases in variants.items():
            found.setdefault((key, pairs[workload][key]), {})[workload] = cases
    out = {}
    for layer, mine in found.items():
        names = list(mine)
        kept, dropped = {}, {}
        for workload, cases in mine.items():
            why = ((left or {}).get(workload) or {}).get(layer[0]) or {}
            for label, values in cases.items():
                name = case_label(workload, label, names)
                if label in why:
                    dropped[name] = why[label]
                else:
                    kept[name] = values
        out[layer] = (names, kept, dropped)
    return out


def settle_layer(
    cases: Mapping[str, Sequence[float]],
    target: float,
    limit: int | None = None,
    alpha: float = ALPHA,
    workloads: Sequence[str] = (),
    left_out: Mapping[str, str] | None = None,
) -> LayerSettlement:
    """A layer's settlement from its cases' paired log costs (each in round order): the headline on
    the per-round mean (headline_values; the repeated interval for ``limit`` where given), each case
    on its own, e-BH at ``alpha`` over the cases' e-values (1 / the anytime-valid p value) for the
    case-level calls, and the case with the largest estimated cost; ``left_out``: the cases kept out
    of all of it as implausible ({case: why}, recorded and said with the answer)."""
    from ccbench.analysis.statistics.discovery import e_bh, e_values

    labels = list(cases)
    own = {label: settle(cases[label], target, alpha, limit=limit) for label in labels}
    e = e_values([p_value(cases[label]) for label in labels])
    called = [label for label, yes in zip(labels, e_bh(e, alpha)) if yes]
    known = [label for label in labels if own[label].estimate is not None]
    costliest = max(known, key=lambda label: own[label].estimate or 0.0) if known else None
    head = settle(headline_values(cases), target, alpha, limit=limit)
    return LayerSettlement(head, own, called, costliest, list(workloads), dict(left_out or {}))


def can_settle_layer(cases: Mapping[str, Sequence[float]], target: float, more: int, limit: int | None = None) -> bool:
    """Whether ``more`` rounds could settle the layer's headline (sequential.can_settle on its series)."""
    return can_settle(headline_values(cases), target, more, limit)


def layer_title(variant: Mapping[str, Any], against: Mapping[str, Any], key: str, pair: str = "") -> str:
    """The layer a variant (its key) adds to its pair (``pair``, its key), as the verdict names it
    ("storage encryption: fscrypt", "in-memory storage: tmpfs", "TLS"), from the two sides' variants
    as their samples record them; its key where an axis other than storage or transport differs."""
    from ccbench.analysis.rows.baselines import UNPROTECTED
    from ccbench.analysis.rows.layers import storage_layer, transport_layer
    from ccbench.analysis.samples.load import storage_label

    parts = []
    mine, theirs = storage_label(dict(variant)), storage_label(dict(against))
    if mine != theirs and mine:
        parts.append(storage_layer(mine) if mine not in UNPROTECTED else f"storage removed: {theirs}")
    if variant.get("transport") != against.get("transport") and variant.get("transport"):
        transport = str(variant["transport"])
        parts.append(transport_layer(transport) if transport not in UNPROTECTED else "transport removed")
    axes = [dict(part.split("=", 1) for part in k.split(",") if "=" in part) for k in (key, pair)]
    others = {a for a in set(axes[0]) | set(axes[1]) if axes[0].get(a) != axes[1].get(a)} - {"storage", "transport"}
    return parts[0] if len(parts) == 1 and not others else key


def with_layers(bundle: Any, found: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """recorded.bundle_settlements' records (``found``) with, for the workloads its run settled by
    layer, each variant's layer recomputed from the bundle's samples with the run's rule, across
    those workloads (``across``: its ``layer``, and each case's ``claim``: "called", "left out" as
    implausible, or "so far"), as the run wrote them."""
    from ccbench.analysis.settling.plausible import left_out
    from ccbench.analysis.settling.recorded import settled_workloads
    from ccbench.analysis.statistics.sequential import paired_against, record_limit
    from ccbench.model import ExecutionKey

    layered = [name for name, record in found.items() if record.get("by") == "layer"]
    if not layered:
        return found
    _, declared, samples = settled_workloads(bundle)
    costs, pairs, left = {}, {}, {}
    for name in layered:
        record = found[name]
        against = {k: v["against"] for k, v in record["variants"].items() if v.get("against")}
        keys = [record["baseline"], *record["variants"]]
        costs[name] = paired_against(samples[name], record["baseline"], keys, against, declared.get(name, ()))
        costs[name] = {key: costs[name].get(key, {}) for key in record["variants"]}
        pairs[name] = {key: against.get(key, record["baseline"]) for key in record["variants"]}
        left[name] = left_out(samples[name], record["baseline"], keys, against, declared.get(name, ()))
    # each variant as its samples record it: the layer's title is made from them with today's rule (a
    # record's title is the one its run's version wrote: "in-memory storage" for a plain directory
    # named tmpfs, before directories were layered by what they are)
    recorded: dict[str, dict] = {}
    for name in layered:
        for sample in samples[name]:
            if sample.execution:
                recorded.setdefault(ExecutionKey.parse(sample.execution).variant, dict(sample.variant or {}))
    for (key, pair), (workloads, cases, dropped) in across(costs, pairs, left).items():
        # the run settled them together, on one target and round limit (every record says the same)
        record = found[workloads[0]]
        layer = settle_layer(cases, record["target"], record_limit(record), workloads=workloads, left_out=dropped)
        known = key in recorded and pair in recorded
        for name in workloads:
            variant = found[name]["variants"][key]
            title = layer_title(recorded[key], recorded[pair], key, pair) if known else None
            title = title or ((variant.get("layer") or {}).get("title")) or key
            variant["layer"] = {**layer.as_dict(), "title": title}
            for label, case in variant["cases"].items():
                case["claim"] = layer.claim(name, label)
    return found
