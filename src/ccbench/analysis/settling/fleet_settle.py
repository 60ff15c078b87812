"""Settling each case across a fleet's labels (``ccbench fleet run --mode rounds --settle 5%``):
the per-round values the fleet's controller looks at after every round, the case's settlement on
them (ccbench.analysis.statistics.sequential's anytime-valid interval, the same code ``run --settle`` uses),
and the rows compare takes from a fleet's record (docs/fleet.md, "Settling each case on a fleet").

The quantity: a case is one series of what settle judges a workload on (sequential.judged: the
primary metrics it declares, e.g. fio's throughput at 4k randread) of one variant combination,
measured on a label against the same series of the baseline label. Round k (every host ran the plan
once, ``--repeat 1``) gives each label one value: the geometric mean of its hosts' values in that
round (replicas averaged on the log scale), and the case one paired value: ``log(label / baseline)``
of round k, negated for a higher-is-better metric (the time-equivalent cost), only where both sides
measured it in that round. Pairs come from one round, so drift between rounds (the day's heat, a
neighbour) hits both sides of a pair and cancels.

compare recomputes each case from the gathered samples (``fleet.json`` says which bundles, the
baseline, the target and the round each case settled at; its numbers are not copied), so the
fleet's verdict and compare's agree and a hand-edited fleet.json cannot change a row's numbers.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ccbench.analysis.statistics.sequential import MIXTURE, PairedCosts, interval, p_value, pair_floor, settle
from ccbench.basics.errors import CCBenchError

#: the fleet's record, beside its label directories
FLEET_FILE = "fleet.json"
#: (workload, variant key, metric, params as sorted-key JSON)
CaseId = tuple[str, str, str, str]
#: what fleet.json's ``settling`` says about the quantity (docs/fleet.md)
QUANTITY = (
    "per round, log(label / baseline label) of each case's value (a label's replicas averaged on the log "
    "scale within the round), negated for higher-is-better metrics; pairs only from the same round"
)


def minimum_rounds(mixture: float = MIXTURE) -> int:
    """The fewest paired values for which the anytime-valid interval can be finite (3 with the
    interval's mixture): before it no case can settle."""
    n = 2
    while not math.isfinite(float(interval(n, 0.0, float(n))[1])):
        n += 1
    return n


def bundle_values(path: str | Path, exclude_contended: bool = False) -> tuple[dict[CaseId, float], dict[CaseId, dict]]:
    """One gathered bundle's measured value per case (the geometric mean where a case was measured
    more than once) and what describes each case: its label text, whether higher is better, the
    variant's axes. The series: what ``run --settle`` judges the workload on (sequential.judged,
    from its manifest's ``declarations``: the primary metrics, and transport's round trip at its
    declared size), else ccbench.analysis.statistics.precision.primary_series's choice."""
    from ccbench.analysis.statistics.precision import primary_series
    from ccbench.analysis.statistics.sequential import _label, declares, judged
    from ccbench.bundle.reader import read_bundle
    from ccbench.model import ExecutionKey, Sample

    bundle = read_bundle(path, samples=False)
    # what settle judges each workload on (its primary metrics, and the per-message costs'
    # declared cases for a kind whose verdict is made of them): the same series as ``run --settle``
    declared = {name: judged(spec) for name, spec in (bundle.manifest.get("declarations") or {}).items()}
    by_workload: dict[str, list[Sample]] = {}
    for chunk in bundle.sample_chunks():
        for record in chunk:
            if record.get("warmup") or not record.get("execution") or not (record.get("value") or 0) > 0:
                continue
            if exclude_contended and record.get("contended"):
                continue
            by_workload.setdefault(record["workload"], []).append(Sample(**record))
    logs: dict[CaseId, list[float]] = {}
    info: dict[CaseId, dict] = {}
    for name, samples in by_workload.items():
        keys = sorted({ExecutionKey.parse(s.execution).variant for s in samples})
        chosen = {
            (s.metric, json.dumps(s.params, sort_keys=True))
            for s in samples
            if declares(declared.get(name, ()), s.metric, s.params)
        }
        if not chosen:
            metrics = tuple(m for m in declared.get(name, ()) if isinstance(m, str))
            primary = primary_series(samples, keys, metrics)
            chosen = {primary} if primary else set()
        for sample in samples:
            series = (sample.metric, json.dumps(sample.params, sort_keys=True))
            if series not in chosen:
                continue
            case = (name, ExecutionKey.parse(sample.execution).variant, *series)
            logs.setdefault(case, []).append(math.log(sample.value))
            info.setdefault(case, {"case": _label(sample), "better": sample.better, "variant": sample.variant})
    return {case: float(np.exp(np.mean(values))) for case, values in logs.items()}, info


def round_table(
    bundles: Iterable[tuple[str, int, str | Path]], exclude_contended: bool = False
) -> tuple[dict[CaseId, dict[str, dict[int, float]]], dict[CaseId, dict]]:
    """Per case, per label, per round: the label's value (its hosts' values in that round averaged
    on the log scale). ``bundles``: (label, round number, bundle path), replicas sharing a label; a
    bundle that cannot be read is left out."""
    logs: dict[CaseId, dict[str, dict[int, list[float]]]] = {}
    info: dict[CaseId, dict] = {}
    for label, round_number, path in bundles:
        try:
            values, described = bundle_values(path, exclude_contended)
        except (CCBenchError, OSError, ValueError):
            continue  # a bundle that cannot be read adds no value to its round (compare leaves it out alike)
        for case, value in values.items():
            logs.setdefault(case, {}).setdefault(label, {}).setdefault(round_number, []).append(math.log(value))
            info.setdefault(case, described[case])
    table = {
        case: {
            label: {r: float(math.exp(sum(v) / len(v))) for r, v in sorted(rounds.items())}
            for label, rounds in labels.items()
        }
        for case, labels in logs.items()
    }
    return table, info


def paired_costs(
    per_label: Mapping[str, Mapping[int, float]], baseline: str, label: str, higher: bool
) -> list[tuple[int, float]]:
    """(round, the label's log time-equivalent cost against the baseline in that round), in round
    order, for the rounds where both measured the case."""
    base, mine, sign = per_label.get(baseline, {}), per_label.get(label, {}), -1.0 if higher else 1.0
    return [(r, sign * math.log(mine[r] / base[r])) for r in sorted(mine) if r in base]


def case_record(case: CaseId, described: dict, label: str, baseline: str) -> dict[str, Any]:
    """A case as fleet.json's ``settling.cases`` names it."""
    workload, variant, metric, params = case
    return {
        "workload": workload,
        "variant": variant,
        "metric": metric,
        "params": json.loads(params),
        "case": described["case"],
        "better": described["better"],
        "variant_axes": described["variant"],
        "label": label,
        "baseline": baseline,
    }


def case_id(record: Mapping[str, Any]) -> CaseId:
    return (record["workload"], record["variant"], record["metric"], json.dumps(record["params"], sort_keys=True))


def judge(
    table: Mapping[CaseId, Mapping[str, Mapping[int, float]]],
    case: CaseId,
    label: str,
    baseline: str,
    higher: bool,
    target: float,
    until: int | None = None,
) -> tuple[Any, float, int]:
    """The case's settlement (ccbench.analysis.statistics.sequential.Settlement), its anytime-valid p value and
    the last round it rests on, from the rounds up to ``until`` (all when None)."""
    pairs = [
        (r, v) for r, v in paired_costs(table.get(case, {}), baseline, label, higher) if until is None or r <= until
    ]
    # with the spread rounding adds to the raw values (sequential.pair_floor): ties are no certainty
    per_label = table.get(case, {})
    rounds = [r for r, _ in pairs]
    floor = pair_floor([per_label.get(baseline, {})[r] for r in rounds], [per_label.get(label, {})[r] for r in rounds])
    values = PairedCosts([v for _, v in pairs], floor)
    return settle(values, target), p_value(values), (pairs[-1][0] if pairs else 0)


# ------------------------------------------------------------------------------------ compare's side


def fleet_documents(bundle_paths: Iterable[str | Path]) -> dict[Path, dict]:
    """The fleet records (``fleet.json`` with a ``settling`` record) the bundles were gathered into:
    a bundle lies at most three directories below its fleet's (``<label>[/<host>]/round-k/<bundle>``)."""
    found: dict[Path, dict] = {}
    for path in bundle_paths:
        for parent in list(Path(path).resolve().parents)[:4]:
            candidate = parent / FLEET_FILE
            if parent in found or not candidate.is_file():
                continue
            try:
                document = json.loads(candidate.read_text())
            except (OSError, ValueError):
                continue
            if document.get("format") == "ccbench-fleet" and document.get("settling"):
                found[parent] = document
    return found


def member(directory: Path, relative: Any) -> Path:
    """A bundle a fleet record names, which must lie inside the fleet's directory: a record's text
    never becomes a path elsewhere (an absolute path or ``..`` is refused in one line)."""
    bundle = (directory / str(relative)).resolve()
    if not bundle.is_relative_to(directory.resolve()):
        raise CCBenchError(
            f"{directory / FLEET_FILE}: bundle {relative!r} lies outside the fleet directory; "
            "the record was altered: restore it or pass the bundles themselves"
        )
    return bundle


def fleet_bundles(directory: Path, document: Mapping[str, Any]) -> list[tuple[str, int, Path]]:
    """(label, round number, bundle path) of every gathered bundle of a fleet run."""
    out = []
    for key, host in document.get("hosts", {}).items():
        for name, run in (host.get("rounds") or {}).items():
            if run.get("bundle") and run.get("outcome") in ("ok", "failed") and name in document["rounds"]:
                bundle = member(directory, run["bundle"])
                out.append((host.get("label") or key, document["rounds"].index(name) + 1, bundle))
    return out


def fleet_paths(paths: Iterable[str | Path]) -> tuple[list[str], dict[str, str]]:
    """The paths compare reads, each fleet directory among them (one holding a ``fleet.json``)
    replaced by its gathered bundles, the baseline label's first (as the fleet's own compare orders
    them: compare's default baseline is the first bundle's least protected configuration), and
    {bundle path: its host's ccbench_label}, so that ``ccbench compare FLEETDIR`` compares what the
    fleet's compare.txt compares."""
    out: list[str] = []
    labels: dict[str, str] = {}
    for path in paths:
        try:
            document = json.loads((Path(path) / FLEET_FILE).read_text())
        except (OSError, ValueError):
            document = None
        if not isinstance(document, dict) or document.get("format") != "ccbench-fleet":
            out.append(str(path))
            continue
        hosts = document.get("hosts") or {}
        order = sorted(hosts, key=lambda key: (hosts[key].get("label") or key) != document.get("baseline"))
        for key in order:
            for run in (hosts[key].get("rounds") or {}).values():
                if run.get("bundle") and run.get("outcome") in ("ok", "failed"):
                    bundle = member(Path(path), run["bundle"])
                    out.append(str(bundle))
                    labels[str(bundle.resolve())] = hosts[key].get("label") or key
    return out, labels


def _recomputed(directory: Path, document: Mapping[str, Any], exclude_contended: bool):
    """Each case of a fleet's record recomputed from its gathered samples: (record, settlement, p value)."""
    settling = document["settling"]
    members = tuple((label, k, str(path)) for label, k, path in fleet_bundles(directory, document))
    table = _member_table(members, exclude_contended)
    out = []
    for record in settling.get("cases", []):
        settlement, p, _ = judge(
            table,
            case_id(record),
            record["label"],
            record["baseline"],
            record.get("better") == "higher",
            settling["target"],
            record.get("settled_at"),
        )
        out.append((record, settlement, p))
    return out


@functools.lru_cache(maxsize=4)
def _member_table(members: tuple[tuple[str, int, str], ...], exclude_contended: bool) -> dict:
    """round_table of a fleet's gathered bundles, read once per compare: its rows and its printed
    lines both need it (the bundles were verified before, and do not change within a process)."""
    return round_table(members, exclude_contended)[0]


def fleet_settled_cases(
    bundles: Iterable[Any], labels: Mapping[str, str] | None = None, exclude_contended: bool = False
) -> dict[tuple[str, str, str, str, str], dict[str, Any]]:
    """compare's rows a fleet settled across its labels, keyed as ccbench.analysis.settling.settled keys a
    run's (workload, metric, params, baseline configuration, configuration): the settlement
    recomputed from the fleet's bundles up to the round it settled at. A fleet whose bundles are not
    all among ``bundles``, or a label whose bundles do not form one configuration, keeps compare's
    own interval."""
    from ccbench.analysis.samples.load import canonical_params, config_label, storage_label
    from ccbench.probe.facts import machine_of

    bundles = list(bundles)
    loaded = {Path(b.path).resolve(): b for b in bundles}
    out: dict[tuple[str, str, str, str, str], dict[str, Any]] = {}
    for directory, document in fleet_documents(loaded).items():
        members = fleet_bundles(directory, document)
        if not members or any(Path(path).resolve() not in loaded for _, _, path in members):
            continue
        machines: dict[str, set[tuple[str, str]]] = {}
        for label, _, path in members:
            bundle = loaded[Path(path).resolve()]
            machine, _, tee = machine_of(bundle.probe, bundle.path, labels or {})
            machines.setdefault(label, set()).add((machine, tee))
        for record, settlement, p in _recomputed(directory, document, exclude_contended):
            sides = [machines.get(record["baseline"], set()), machines.get(record["label"], set())]
            if any(len(side) != 1 for side in sides):
                continue
            axes = record.get("variant_axes") or {}
            configs = [config_label(*next(iter(side)), storage_label(axes), axes.get("transport")) for side in sides]
            key = (record["workload"], record["metric"], canonical_params(json.dumps(record["params"])), *configs)
            out[key] = {
                "settlement": settlement,
                "p_value": p,
                "stopped_by": record.get("stopped_by"),
                "bundle": str(directory),
                "across_bundles": True,
            }
    return out


def fleet_settlement_lines(bundle_paths: Iterable[str | Path], cases: bool = True) -> list[str]:
    """compare's lines for each fleet run that settled its cases across labels: what each case's
    answer is, recomputed from the samples, and which cases a limit cut. Without ``cases`` (compare
    --summary): how many settled, and which a limit cut, in place of a line per case."""
    lines = []
    for directory, document in fleet_documents(bundle_paths).items():
        settling = document["settling"]
        lines.append(
            f"settled across the fleet {directory.name} (anytime-valid interval on paired rounds, target "
            f"{settling['target']:.1%}, against {settling['baseline']}):"
        )
        cut, count = [], 0
        for record, settlement, _ in _recomputed(directory, document, False):
            why = record.get("stopped_by") or "open"
            at = f", settled at round {record['settled_at']}" if record.get("settled_at") else ""
            count += 1
            if cases:
                lines.append(
                    f"  {record['workload']} [{record['variant']}] {record['case']}, {record['label']}: "
                    f"{settlement.describe()} ({settlement.rounds} rounds{at}; {why})"
                )
            if not settlement.settled:
                cut.append(f"{record['workload']} {record['case']} ({record['label']}: {why})")
        if not cases:
            lines.append(f"  {count - len(cut)} of {count} case(s) settled (compare without --summary: each one)")
        if cut:
            lines.append(f"  not settled ({len(cut)}): {'; '.join(cut)}")
    return lines
