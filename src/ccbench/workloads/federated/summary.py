"""The parties' timestamped events turned into samples: pure functions, tested on their own.

Every party appends one JSON object a line to the execution's ``events.jsonl`` (see
``workspace_files/party.py``): gRPC calls with their start, end and payload bytes, task and round
begin/end, the aggregator's round end with the validation metrics.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ccbench.model import Measurement

TRAIN_TASK = "train"
VALIDATION_TASKS = ("aggregated_model_validation", "locally_tuned_model_validation")

Event = dict[str, Any]


def read_events(path: Path) -> list[Event]:
    if not path.exists():
        return []
    events = []
    for line in path.read_text().splitlines():
        try:
            events.append(json.loads(line))
        except ValueError:
            continue  # a line cut short by a killed party
    return events


def completed_rounds(events: list[Event]) -> list[int]:
    """The rounds the aggregator closed, in order."""
    return sorted({e["round"] for e in events if e["ev"] == "round_end" and e.get("party") == "aggregator"})


def summarize(
    events: list[Event],
    collaborators: list[str],
    launched: float,
    finished: float,
) -> list[Measurement]:
    """Turn the parties' timestamped events into samples (pure: tested on its own)."""
    agg_round_end = {e["round"]: e for e in events if e["ev"] == "round_end" and e.get("party") == "aggregator"}
    rounds = sorted(agg_round_end)
    out = _federation_samples(events, launched, finished)
    out += _round_samples(events, rounds, agg_round_end)
    for name in collaborators:
        mine = [e for e in events if e.get("party") == name or e.get("collaborator") == name]
        for rnd in rounds:
            out += _collaborator_round_samples(mine, rnd, {"round": rnd, "collaborator": name})
    if rounds:
        out += _final_accuracy(agg_round_end[rounds[-1]], rounds[-1])
    return out


def _task_handed_out(event: Event) -> bool:
    """A GetTasks call that returned work (an idle poll is waiting, not the federation moving)."""
    return event["ev"] == "rpc" and event["method"] == "GetTasks" and not event["idle"]


def _federation_samples(events: list[Event], launched: float, finished: float) -> list[Measurement]:
    out = [
        Measurement(
            metric="wall_clock",
            unit="s",
            value=finished - launched,
            metadata={"what": "parties launched -> aggregator finished (all rounds)"},
        )
    ]
    handed_out = sorted(e["end"] for e in events if _task_handed_out(e))
    if handed_out:
        out.append(
            Measurement(
                metric="startup_time",
                unit="s",
                value=handed_out[0] - launched,
                metadata={
                    "what": "parties launched -> first task handed out (process start, imports, data load, connection)"
                },
            )
        )
    return out


def _round_samples(events: list[Event], rounds: list[int], agg_round_end: dict[int, Event]) -> list[Measurement]:
    """A round runs from the first collaborator handed its tasks to the aggregator's round end; a
    round whose hand-out was not recorded starts where the previous one ended."""
    out = []
    previous_end = None
    for rnd in rounds:
        starts = [e["end"] for e in events if _task_handed_out(e) and e.get("round") == rnd]
        begin = min(starts) if starts else previous_end
        if begin is not None:
            out.append(
                Measurement(
                    metric="round_time",
                    unit="s",
                    value=agg_round_end[rnd]["t"] - begin,
                    case={"round": rnd},
                    metadata={"what": "first collaborator handed the round's tasks -> aggregator's round end"},
                )
            )
        previous_end = agg_round_end[rnd]["t"]
    return out


def _collaborator_round_samples(mine: list[Event], rnd: int, case: dict[str, Any]) -> list[Measurement]:
    """One collaborator's round: training, validation and its gRPC calls (time and bytes)."""
    out = []
    begins = {e["task"]: e["t"] for e in mine if e["ev"] == "task_begin" and e["round"] == rnd}
    ends = {e["task"]: e["t"] for e in mine if e["ev"] == "task_end" and e["round"] == rnd}
    if TRAIN_TASK in begins and TRAIN_TASK in ends:
        out.append(Measurement(metric="train_time", unit="s", value=ends[TRAIN_TASK] - begins[TRAIN_TASK], case=case))
    validated = [t for t in VALIDATION_TASKS if t in begins and t in ends]
    if validated:
        out.append(
            Measurement(
                metric="validation_time",
                unit="s",
                value=sum(ends[t] - begins[t] for t in validated),
                case=case,
                metadata={"tasks": validated},
            )
        )
    calls = [e for e in mine if e["ev"] == "rpc" and e.get("round") == rnd and not e["idle"]]
    if calls:
        out += _communication_samples(calls, case)
    return out


def _communication_samples(calls: list[Event], case: dict[str, Any]) -> list[Measurement]:
    return [
        Measurement(
            metric="communication_time",
            unit="s",
            value=sum(e["end"] - e["start"] for e in calls),
            case=case,
            metadata={"calls": len(calls), "what": "sum of the collaborator's gRPC calls carrying tasks and tensors"},
        ),
        Measurement(metric="bytes_sent", unit="B", value=sum(e["sent"] for e in calls), better=None, case=case),
        Measurement(metric="bytes_received", unit="B", value=sum(e["recv"] for e in calls), better=None, case=case),
    ]


def _final_accuracy(last_round_end: Event, last_round: int) -> list[Measurement]:
    logs = last_round_end.get("logs", {})
    # the aggregator's weighted mean over collaborators first, a collaborator's own value otherwise
    accuracy = [
        v
        for k, v in sorted(logs.items(), key=lambda kv: not kv[0].startswith("aggregator"))
        if "aggregated_model_validation" in k and "accuracy" in k
    ]
    if not accuracy:
        return []
    return [
        Measurement(
            metric="final_accuracy",
            unit="fraction",
            value=accuracy[0],
            better=None,
            metadata={"round": last_round, "what": "aggregated model on the collaborators' validation shards"},
        )
    ]
