"""Settling each case across the fleet's labels (``ccbench fleet run --mode rounds --settle 5%``).

The controller looks after every round (round k: every host ran the plan once with ``--repeat 1``).
For each case (a series settle judges a workload on, sequential.judged, on one variant
combination) of each label against the baseline label it computes the anytime-valid interval on the per-round paired values
(ccbench.analysis.settling.fleet_settle, the code ``compare`` recomputes it with), and settles the case as a
cost, a gain or "no cost above" the target. A settled case keeps the answer it had at the round it
settled at. The finest the run command selects is a workload (``ccbench run --only``): a workload
leaves the rounds when all its cases are settled (or it has none to settle), and the next round
runs the workloads left on every host alike, the baseline's too, so every host's conditions stay
the same (the fleet-level form of "an unsettled case never runs alone").

The limits: a workload's round limit (``--max-rounds``, else its ``max_repetitions``, else the
runner's default), and ``--budget`` (the fleet's wall time since the command started: no round
starts that the last round's length says would pass it). What stopped each case is kept in
fleet.json's ``settling`` record.
"""

from __future__ import annotations

import time
from typing import Any

from ccbench.analysis.labels import ANYTIME
from ccbench.analysis.settling.fleet_settle import (
    QUANTITY,
    case_id,
    case_record,
    judge,
    minimum_rounds,
    paired_costs,
    round_table,
)
from ccbench.analysis.statistics.sequential import FUTILE, can_settle
from ccbench.basics.errors import CCBenchError
from ccbench.fleet.records import FleetRun, HostRun

SETTLED = "settled"
BUDGET = "budget"
MAX_ROUNDS = "max rounds"
NO_CASE = "no case to settle"
INTERRUPTED = "interrupted"
BASELINE_FAILED = "baseline failed"
HOST_FAILED = "every host of the label failed"


def new_record(
    plan: Any, *, target: float, budget_s: float | None, max_rounds: int | None, baseline: str, labels: set[str]
) -> dict:
    """fleet.json's ``settling`` record for a new run of ``plan`` (a ccbench.planning.plan.Plan) on hosts of
    ``labels``; bad input is a one-line error."""
    from ccbench.analysis.statistics.precision import DEFAULT_MAX_REPETITIONS

    if not set(labels) - {baseline}:
        raise CCBenchError(
            f"--settle with --mode rounds compares each label with the baseline label {baseline!r}, and every "
            "host has that label: give the hosts to compare another ccbench_label (and the baseline ccbench_baseline=true)"
        )
    own = [w.name for w in plan.workloads if w.settle is not None or w.precision is not None or w.detect is not None]
    if own:
        raise CCBenchError(
            f"--mode rounds --settle: plan {plan.name!r} gives {', '.join(own)} a target of its own (settle, "
            "precision or detect), which every host would pursue within each round; use a plan without them and give the "
            "limits here (--max-rounds, --budget)"
        )
    least = minimum_rounds()
    if max_rounds is not None and max_rounds < least:
        raise CCBenchError(
            f"--max-rounds {max_rounds}: the anytime-valid interval is finite only from {least} rounds on, "
            f"so no case could settle; give {least} or more"
        )
    workloads = {}
    for spec in plan.workloads:
        limit = max_rounds or spec.max_repetitions or max(DEFAULT_MAX_REPETITIONS, spec.repetitions)
        workloads[spec.name] = {"min_rounds": min(max(least, spec.repetitions), limit), "max_rounds": limit}
    first = min(least, max(w["max_rounds"] for w in workloads.values()))
    rounds = {
        f"round-{k}": [name for name, w in workloads.items() if k <= w["max_rounds"]] for k in range(1, first + 1)
    }
    return {
        "target": target,
        "budget_s": budget_s,
        "max_rounds": max_rounds,
        "minimum_rounds": least,
        "baseline": baseline,
        "interval": ANYTIME,
        "quantity": QUANTITY,
        "granularity": "workload (ccbench run --only): a workload leaves when all its cases are settled",
        "workloads": workloads,
        "rounds": rounds,
        "round_seconds": {},
        "cases": [],
        "ended_by": None,
    }


def only_args(fleet: FleetRun, round_name: str) -> list[str]:
    """``--only`` for a round that runs some of the plan's workloads."""
    record = fleet.settling
    if not record or round_name not in record["rounds"]:
        return []
    chosen = record["rounds"][round_name]
    return [] if set(chosen) == set(record["workloads"]) else ["--only", ",".join(chosen)]


def _alive(fleet: FleetRun, upto: int) -> set[str]:
    """The labels with a host that neither failed nor was unreachable in the rounds so far."""
    return {
        fleet.label_of(key)
        for key, rounds in fleet.runs.items()
        if not any(run.outcome in ("unreachable", "failed") for run in list(rounds.values())[:upto])
    }


def _members(fleet: FleetRun, k: int) -> list[tuple[str, int, Any]]:
    """(label, round number, bundle path) of the bundles gathered in rounds 1..k."""
    return [
        (fleet.label_of(key), fleet.rounds.index(name) + 1, fleet.directory / run.bundle)
        for key, rounds in fleet.runs.items()
        for name, run in rounds.items()
        if run.bundle and run.outcome in ("ok", "failed") and fleet.rounds.index(name) < k
    ]


def _look(record: dict, table: dict, info: dict, k: int) -> None:
    """Each case's settlement after round k (a case settled earlier keeps its answer)."""
    known = {(case_id(c), c["label"]): c for c in record["cases"]}
    baseline = record["baseline"]
    for case, per_label in table.items():
        if baseline not in per_label:
            continue
        for label in per_label:
            if label == baseline:
                continue
            entry = known.get((case, label))
            if entry is None:
                entry = case_record(case, info[case], label, baseline)
                record["cases"].append(entry)
                known[(case, label)] = entry
            if entry.get("settled_at"):
                continue
            higher = entry["better"] == "higher"
            settlement, p, _ = judge(table, case, label, baseline, higher, record["target"])
            entry.update(settlement.as_dict(), answer=settlement.state, p_value=p, describe=settlement.describe())
            entry.pop("state", None)
            if settlement.settled:
                entry["settled_at"], entry["stopped_by"] = k, SETTLED
                continue
            # a case that cannot settle by the round limit stops, unsettled (looked at again while its
            # workload runs on for others: more rounds may bring it back within reach)
            values = [v for _, v in paired_costs(per_label, baseline, label, higher)]
            more = record["workloads"][entry["workload"]]["max_rounds"] - k
            if more > 0 and not can_settle(values, record["target"], more):  # at the limit, the limit stops it
                entry["stopped_by"] = FUTILE
            elif entry.get("stopped_by") == FUTILE:
                del entry["stopped_by"]


def decide(
    record: dict, table: dict, info: dict, k: int, alive: set[str], elapsed_s: float, round_s: float
) -> list[str]:
    """The controller's decision after round k, on the per-round values (ccbench.analysis.settling.fleet_settle's
    ``round_table``): each case's settlement and what stopped it, each workload's state, recorded in
    ``record``; the workloads the next round runs ([]: the rounds end). ``alive``: the labels with a
    host still running; ``elapsed_s``: the fleet's wall time so far; ``round_s``: the last round's."""
    _look(record, table, info, k)
    for entry in record["cases"]:
        if not entry.get("stopped_by") and entry["label"] not in alive:
            entry["stopped_by"] = HOST_FAILED
    going = []
    for name, workload in record["workloads"].items():
        if workload.get("stopped_by"):
            continue
        mine = [c for c in record["cases"] if c["workload"] == name]
        workload["rounds"] = k
        if record["baseline"] not in alive:
            workload["stopped_by"] = BASELINE_FAILED
        elif k < workload["min_rounds"]:
            going.append(name)
        elif not mine:
            workload["stopped_by"] = NO_CASE
        elif all(c.get("stopped_by") for c in mine):
            workload["stopped_by"] = SETTLED if all(c["stopped_by"] == SETTLED for c in mine) else FUTILE
        elif k >= workload["max_rounds"]:
            workload["stopped_by"] = MAX_ROUNDS
        else:
            going.append(name)
    if going and record["budget_s"] is not None and elapsed_s + round_s > record["budget_s"]:
        for name in going:
            record["workloads"][name]["stopped_by"] = BUDGET
        going = []
    for entry in record["cases"]:
        if not entry.get("stopped_by") and record["workloads"][entry["workload"]].get("stopped_by"):
            entry["stopped_by"] = record["workloads"][entry["workload"]]["stopped_by"]
    if not going:
        record["ended_by"] = _ended_by(record)
    return going


def after_round(fleet: FleetRun, round_name: str, echo) -> bool:
    """Look at every case after ``round_name`` (``decide``); list the next round with the workloads
    it runs, or end the rounds (the rounds listed but not run are dropped). True: a round follows."""
    record = fleet.settling
    k = fleet.rounds.index(round_name) + 1
    now = time.time()
    round_s = record["round_seconds"][round_name] = round(now - record.get("looked_at", fleet.command_started), 3)
    record["looked_at"] = now
    table, info = round_table(_members(fleet, k))
    going = decide(record, table, info, k, _alive(fleet, k), now - fleet.command_started, round_s)
    if not going:
        for name in fleet.rounds[k:]:
            record["rounds"].pop(name, None)
            for rounds in fleet.runs.values():
                rounds.pop(name, None)
        del fleet.rounds[k:]
        return False
    following = f"round-{k + 1}"
    if following not in fleet.rounds:
        fleet.rounds.append(following)
        for rounds in fleet.runs.values():
            rounds[following] = HostRun(round=following)
    record["rounds"][following] = going
    settled = sum(1 for c in record["cases"] if c.get("settled_at"))
    echo(f"after {round_name}: {settled} of {len(record['cases'])} case(s) settled; next round: {', '.join(going)}")
    return True


def _ended_by(record: dict) -> str:
    reasons = {c.get("stopped_by") for c in record["cases"]} - {SETTLED}
    if not reasons:
        return "every case settled"
    return ", ".join(sorted(r for r in reasons if r))


def close(fleet: FleetRun, interrupted: bool) -> None:
    """After the rounds: an interrupted run's open cases are recorded as cut by the interruption."""
    record = fleet.settling
    if not record or not interrupted:
        return
    for entry in record["cases"]:
        if not entry.get("stopped_by"):
            entry["stopped_by"] = INTERRUPTED
    record["ended_by"] = record.get("ended_by") or INTERRUPTED


def summary_lines(fleet: FleetRun) -> list[str]:
    """The terminal's account: each case's answer, the round it settled at, and what cut the others."""
    record = fleet.settling
    if not record:
        return []
    cases = record["cases"]
    settled = [c for c in cases if c.get("settled_at")]
    lines = [
        f"settled across labels (anytime-valid interval on paired rounds, target {record['target']:.1%}, against "
        f"{record['baseline']}): {len(settled)} of {len(cases)} case(s) in {len(fleet.rounds)} round(s); "
        f"ended: {record.get('ended_by') or 'running'}"
    ]
    for c in cases:
        at = f", settled at round {c['settled_at']}" if c.get("settled_at") else ""
        lines.append(
            f"  {c['workload']} [{c['variant']}] {c['case']}, {c['label']}: {c.get('describe', 'no interval yet')} "
            f"({c.get('rounds', 0)} rounds{at}; {c.get('stopped_by') or 'open'})"
        )
    cut = [c for c in cases if not c.get("settled_at")]
    if cut:
        named = "; ".join(f"{c['workload']} {c['case']} ({c['label']}: {c.get('stopped_by') or 'open'})" for c in cut)
        lines.append(f"  not settled ({len(cut)}): {named}")
    for name, workload in record["workloads"].items():
        if workload.get("stopped_by") == NO_CASE:
            lines.append(f"  {name}: no case measured on both the baseline and another label; ran its rounds")
    return lines
