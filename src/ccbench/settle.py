"""Settle rounds: after a workload's repetitions, rounds of its baseline and the variants still
unsettled, until each variant's case is settled (ccbench.analysis.sequential) or a limit ends them
(``settle`` in the plan, ``ccbench run --settle 5% --budget 20m``; docs/plan-format.md).

A case is a variant against the workload's baseline (its first variant combination) on one series
of the workload's primary metrics (each of fio's block size and pattern, say). After every round
each case is looked at; a variant whose every case is settled leaves the rounds (its executions
measure all its cases at once). The baseline runs in every round while any case is unsettled, so every round
still pairs each variant with a baseline execution of the same round; the order within a round is
drawn as for any round (ccbench.schedule.round_order, from the seed, the workload, the round's number
and the combinations in it), and each execution has its cooldown before it. The limits:
``max_repetitions`` (per variant), ``max_time`` (the workload's time), and the plan's ``budget``
(the whole run's time since it started): a round that would pass one is not started, and the
cases still open are recorded as cut by it.
"""

from __future__ import annotations

import time
from typing import Any

from ccbench.schedule import Execution, WorkloadRun, round_order

SETTLED = "settled"


def _limit(runner: Any, job: WorkloadRun, repetition: int, started: float, round_s: float) -> str | None:
    """Which limit another round would pass (None: none)."""
    from ccbench.analysis.precision import DEFAULT_MAX_REPETITIONS

    spec, now = job.spec, time.monotonic()
    if repetition >= (spec.max_repetitions or max(DEFAULT_MAX_REPETITIONS, spec.repetitions)):
        return "max repetitions"
    if spec.max_time is not None and now - started + round_s > spec.max_time:
        return "max time"
    budget = runner.plan.budget
    if budget is not None and now - runner.started + round_s > budget:
        return "budget"
    return None


def _run_round(runner: Any, job: WorkloadRun, combos: list[dict[str, str]], repetition: int) -> None:
    spec = job.spec
    runner.reporter.extend(len(combos))
    for combo in round_order(combos, spec.name, False, repetition, runner.order.draw):
        execution = Execution(spec, combo, repetition, False)
        index = runner._next_position()
        if execution.key in runner._done:
            continue
        if job.stopped(execution):
            job.outcome.executions_skipped += 1
            continue
        runner._cool_down(job)
        runner.reporter.execution_started(execution, index)
        job.outcome.count(runner._execute(job, execution))


def settle_rounds(runner: Any, job: WorkloadRun, started: float) -> None:
    """Phase 4 with a settle target: rounds until every case is settled or a limit; each case's
    answer and why it stopped go into the outcome (``outcome.settled``)."""
    spec, outcome = job.spec, job.outcome
    combos = job.combinations()
    keys = [Execution(spec, combo, 0, False).variant_key for combo in combos]
    record: dict[str, Any] = {"target": spec.settle, "baseline": keys[0] if keys else None, "variants": {}}
    if len(keys) < 2:
        record["reason"] = "one variant combination: no case to settle; ran its repetitions"
        outcome.settled = record
        runner.reporter.message(f"{spec.name}: settle: {record['reason']}")
        return
    from ccbench.analysis.sequential import paired_log_costs, settle_all  # the analysis libraries when asked

    declared = getattr(job.workload, "primary_metrics", ())

    def look() -> dict:
        mine = [s for s in (*runner._earlier, *runner.samples) if s.workload == spec.name]
        return settle_all(paired_log_costs(mine, keys[0], keys, declared), spec.settle)

    def done(key: str) -> bool:
        return bool(cases[key]) and all(case.settled for case in cases[key].values())

    # before the first settle round, a round's length is estimated from the rounds run so far
    round_s = (time.monotonic() - started) / max(spec.repetitions + spec.warmup, 1)
    cases, repetition, stopped_by = look(), spec.repetitions, None
    while True:
        failed = set(outcome.repeating_failures)
        open_cases = [k for k in keys[1:] if not done(k) and k not in failed]
        if not open_cases:
            break
        if keys[0] in failed:
            stopped_by = "baseline failed"
            break
        stopped_by = _limit(runner, job, repetition, started, round_s)
        if stopped_by:
            break
        round_started = time.monotonic()
        _run_round(runner, job, [c for k, c in zip(keys, combos) if k == keys[0] or k in open_cases], repetition)
        round_s, repetition = time.monotonic() - round_started, repetition + 1
        cases = look()
    for key in keys[1:]:
        why = SETTLED if done(key) else ("failed" if key in outcome.repeating_failures else stopped_by)
        record["variants"][key] = {"stopped_by": why, "cases": {c: v.as_dict() for c, v in cases[key].items()}}
        for label, case in cases[key].items():
            runner.reporter.message(f"{spec.name} [{key}] {label}: {why}: {case.describe()}")
    record["rounds"] = repetition
    outcome.settled = record
