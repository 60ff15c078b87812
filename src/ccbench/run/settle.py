"""Settle rounds: after a workload's repetitions, rounds of its baseline and the variants still
unsettled, until each variant's case is settled (ccbench.analysis.statistics.sequential) or a limit ends them
(``settle`` in the plan, ``ccbench run --settle 5% --budget 20m``; docs/plan-format.md).

A case is a variant against the workload's baseline (its first variant combination) on one series
of the workload's primary metrics (each of fio's block size and pattern, say). After every round
each case is looked at; a case stops when it is settled or when no interval of the round limit
could answer it (``can_settle``: leaving for futility claims nothing), and a variant whose every case
has stopped leaves the rounds. Where the workload's executions are made of parts that run alone
(``Workload.selectable``: fio's jobs, ...), a round runs only the parts holding an open case, the
same parts in every execution of the round. Each round runs what its open cases are paired with (the
baseline; a cipher on a loop file, its twin, ccbench.analysis.rows.pairing), so every round still pairs
each variant with an execution of its pair in the same round; the order within a round is
drawn as for any round (ccbench.run.schedule.round_order, from the seed, the workload, the round's number
and the combinations in it), and each execution has its cooldown before it. The limits:
``max_repetitions`` (per variant), ``max_time`` (the workload's time), and the plan's ``budget``
(the whole run's time since it started): a round that would pass one is not started, and the
cases still open are recorded as cut by it. Settling by layer (``settle_by = "layer"``) settles
each layer across the workloads that ask for it, in ccbench.run.settle_layers.
"""

from __future__ import annotations

import time
from typing import Any

from ccbench.run.schedule import Execution, WorkloadRun, round_order

SETTLED = "settled"


def round_limit(spec: Any) -> int:
    """The most rounds settling runs (its intervals are built for it): ``max_repetitions``, else 10
    (ccbench.analysis.statistics.repeated.SETTLE_ROUNDS) or the plan's repetitions where those are more."""
    from ccbench.analysis.statistics.repeated import SETTLE_ROUNDS

    return spec.max_repetitions or max(SETTLE_ROUNDS, spec.repetitions)


def _limit(runner: Any, job: WorkloadRun, repetition: int, started: float, round_s: float) -> str | None:
    """Which limit another round would pass (None: none)."""
    spec, now = job.spec, time.monotonic()
    if repetition >= round_limit(spec):
        return "max repetitions"
    if spec.max_time is not None and now - started + round_s > spec.max_time:
        return "max time"
    budget = runner.plan.budget
    if budget is not None and now - runner.started + round_s > budget:
        return "budget"
    return None


def run_round(
    runner: Any,
    job: WorkloadRun,
    combos: list[dict[str, str]],
    repetition: int,
    parts: list[dict[str, str]] | None = None,
) -> None:
    """One round beyond the repetitions (settle's, or --precision/--detect's): the combinations in
    the drawn order of round ``repetition``, each after its cooldown, those done (a resumed run)
    or stopped (repeating failures) skipped; ``parts``: only these parts of the workload."""
    spec = job.spec
    runner.reporter.extend(len(combos))
    for combo in round_order(combos, spec.name, False, repetition, runner.order.draw):
        execution = Execution(spec, combo, repetition, False, parts)
        index = runner._next_position()
        if execution.key in runner._done:
            continue
        if job.stopped(execution):
            job.outcome.executions_skipped += 1
            continue
        runner._cool_down(job)
        runner.reporter.execution_started(execution, index)
        job.outcome.count(runner._execute(job, execution))


def open_parts(selectable: tuple[str, ...], open_cases: list[dict | None]) -> list[dict[str, str]] | None:
    """The parts a round runs for these open cases (each a case as its samples name it): one per
    distinct value of the workload's selectable keys, in first-seen order; None (all of the
    workload) when it has no selectable keys or a case lacks one."""
    if not selectable:
        return None
    parts: list[dict[str, str]] = []
    for case in open_cases:
        if not isinstance(case, dict) or any(key not in case for key in selectable):
            return None
        part = {key: str(case[key]) for key in selectable}
        if part not in parts:
            parts.append(part)
    return parts


def settle_rounds(runner: Any, job: WorkloadRun, started: float) -> None:
    """Phase 4 with a settle target: rounds until every case is settled, cannot settle by the round
    limit, or a limit ends them; each case's answer and why it stopped go into the outcome
    (``outcome.settled``)."""
    spec, outcome = job.spec, job.outcome
    combos = job.combinations()
    keys = [Execution(spec, combo, 0, False).variant_key for combo in combos]
    record: dict[str, Any] = {"target": spec.settle, "baseline": keys[0] if keys else None, "variants": {}}
    if len(keys) < 2:
        record["reason"] = "one variant combination: no case to settle; ran its repetitions"
        outcome.settled = record
        runner.reporter.message(f"{spec.name}: settle: {record['reason']}")
        return
    from ccbench.analysis.labels import REPEATED
    from ccbench.analysis.statistics import sequential as rule  # the settle rule
    from ccbench.analysis.statistics.repeated import FIRST_LOOK
    from ccbench.workloads import declaration

    declared = rule.judged(declaration(type(job.workload)))
    selectable = getattr(job.workload, "selectable", ())
    limit = round_limit(spec)
    # the intervals are built for this round limit (ccbench.analysis.statistics.repeated), and the record says so:
    # whatever reads the bundle reads its cases on the same interval (sequential.record_limit)
    # (a limit below its first look leaves the anytime-valid one, which the record then names by saying nothing)
    built_for = limit if limit >= FIRST_LOOK else None
    if built_for:
        record.update({"interval": REPEATED, "limit": built_for})

    against: dict[str, str] = {}

    def look() -> tuple[dict, dict, dict]:
        mine = [s for s in (*runner._earlier, *runner.samples) if s.workload == spec.name]
        # a cipher on a loop file is paired with the same loop file without it, as compare sets it
        against.update(rule.loop_twins(mine, keys))
        costs = rule.paired_against(mine, keys[0], keys, against, declared)
        return rule.settle_all(costs, spec.settle, built_for), costs, rule.case_of(mine)

    def reason(key: str, label: str) -> str | None:
        """Why a case takes no more rounds (None: it is open)."""
        more = limit - repetition  # at the limit, the limit is what stops it
        if cases[key][label].settled:
            return SETTLED
        return None if more <= 0 or rule.can_settle(costs[key][label], spec.settle, more, built_for) else rule.FUTILE

    # before the first settle round, a round's length is estimated from the rounds run so far
    round_s = (time.monotonic() - started) / max(spec.repetitions + spec.warmup, 1)
    (cases, costs, named), repetition, stopped_by, ran = look(), spec.repetitions, None, []
    while True:
        failed = set(outcome.repeating_failures)
        # a variant with no case yet (nothing paired) stays in the rounds whole
        open_cases = {k: [c for c in cases[k] if not reason(k, c)] for k in keys[1:] if k not in failed}
        open_cases = {k: labels for k, labels in open_cases.items() if labels or not cases[k]}
        if not open_cases:
            break
        if keys[0] in failed:
            stopped_by = "baseline failed"
            break
        stopped_by = _limit(runner, job, repetition, started, round_s)
        if stopped_by:
            break
        # every execution of the round runs the same parts (the union of the open cases' parts), so
        # a part's neighbours are the same for the baseline and each variant in the round
        parts = open_parts(selectable, [named.get(c) for labels in open_cases.values() for c in labels or [None]])
        round_started = time.monotonic()
        # each open variant runs with what it is paired with: the baseline, or a cipher on a loop
        # file its twin (whatever the twin's own cases say); the baseline only where a pair needs it
        running = {*open_cases, *(against.get(k, keys[0]) for k in open_cases)}
        run_round(runner, job, [c for k, c in zip(keys, combos) if k in running], repetition, parts)
        ran.append(
            {
                "round": repetition,
                "variants": sorted(running - {keys[0]}),
                "baseline": keys[0] in running,
                "parts": parts,
            }
        )
        round_s, repetition = time.monotonic() - round_started, repetition + 1
        cases, costs, named = look()
    outcome.settled = record
    _close(runner, job, keys, cases, reason, stopped_by, against)
    record["rounds"], record["settle_rounds"] = repetition, ran


def _close(
    runner: Any, job: WorkloadRun, keys: list[str], cases: dict, reason: Any, stopped_by: str | None, against: dict
) -> None:
    """Each variant's record (what stopped it, its pair, its cases' answers) and each case's closing
    line. ``reason(key, label)``: why a case stopped (None: open, cut by ``stopped_by``)."""
    outcome, record = job.outcome, job.outcome.settled
    for key in keys[1:]:
        failed = key in outcome.repeating_failures
        why = {c: ("failed" if failed else reason(key, c) or stopped_by) for c in cases[key]}
        record["variants"][key] = {
            "stopped_by": "failed" if failed else _variant_reason(why, stopped_by),
            **({"against": against[key]} if key in against else {}),
            "cases": {c: {**v.as_dict(), "stopped_by": why[c]} for c, v in cases[key].items()},
        }
        for label, case in cases[key].items():
            runner.reporter.message(f"{job.spec.name} [{key}] {label}: {why[label]}: {case.describe()}")


def _elapsed(seconds: float) -> str:
    """A run's time so far in words: "35 s", "4 min", "1 h 12 min"."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    minutes = round(seconds / 60)
    return f"{minutes} min" if minutes < 60 else f"{minutes // 60} h {minutes % 60} min"


def _variant_reason(why: dict[str, str | None], stopped_by: str | None) -> str | None:
    """What stopped a variant: settled when every case is; else what left its unsettled cases."""
    left = {w for w in why.values() if w != SETTLED}
    if not why or not left:
        return SETTLED if why else stopped_by
    return stopped_by if stopped_by in left else sorted(left, key=str)[0]
