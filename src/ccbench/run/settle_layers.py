"""Settle rounds by layer, across workloads (``settle_by = "layer"``, ``run --settle 5% --settle-by
layer``; docs/analysis.md "Settling a layer").

A layer is one variant against its pair (the baseline, or a cipher's loop twin) in every workload
of the plan settled by layer: fscrypt against the loop file under fio, compression and YCSB is one
layer, and its headline the mean over all of its cases in all of those workloads
(ccbench.analysis.settling.layer_settle.across). So the runner holds those workloads open: each runs
its warm-ups and repetitions at its place in the plan (``hold``: set up and prepared, its clean-up
put off), and once the plan's other workloads have run, rounds go across them (``settle_held``):
round r runs, in plan order, each held workload's open variants and their pairs (only the parts of
the workload holding an open case, as for settling by case, ccbench.run.settle), and after each
round every layer is looked at on the rounds all of its workloads have. A variant leaves the rounds
when its layer's headline is settled, or cannot be by the round limit (futility: it claims nothing).
A control (the loop file without a cipher, the twin a cipher on a loop file is set against) holds no
round for its own layer: it runs as its cipher's pair while that layer is open, its own layer is
looked at all the while, and where the rounds end before it settles it is said open, "so far" (the
run answers the protection layers; the control is there so a cipher's cost is the cipher's).
The workloads held together settle at the smallest of their targets and round limits (every record
says that one). The limits: the round limit; a workload's ``max_time`` (its own time: its phases
and its rounds) ends its rounds alone; the plan's ``budget`` ends them all (a round that would pass
it is not started, by the last round's length). Every held workload is cleaned up at the end, or
where the run is cut. What it costs: the held workloads' variants are set up at the same time (each
its own directory: a tmpfs or loop file per workload and value, disk and memory for all of them).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from ccbench.run.schedule import Execution, OutcomeStatus, WorkloadRun
from ccbench.run.settle import SETTLED, _elapsed, _variant_reason, open_parts, round_limit, run_round

#: why a control's own layer took no round of its own (the settle record's ``stopped_by``)
CONTROL = "a control, not waited for: it ran as its cipher's pair"


@dataclass
class _Held:
    """One workload held for settling by layer: what its rounds need and what they found."""

    job: WorkloadRun
    #: its own time so far (its phases and rounds), and a round's length (the last, or estimated)
    spent: float
    round_s: float
    keys: list[str] = field(default_factory=list)
    combos: list[dict[str, str]] = field(default_factory=list)
    record: dict[str, Any] = field(default_factory=dict)
    against: dict[str, str] = field(default_factory=dict)
    costs: dict[str, dict[str, Any]] = field(default_factory=dict)
    named: dict[str, Any] = field(default_factory=dict)
    variants: dict[str, dict] = field(default_factory=dict)
    #: {variant key: {case: why}}: the cases the comparison will leave out as implausible
    left: dict[str, dict[str, str]] = field(default_factory=dict)
    ran: list[dict[str, Any]] = field(default_factory=list)
    stopped_by: str | None = None

    @property
    def name(self) -> str:
        return self.job.spec.name

    def pair(self, key: str) -> str:
        return self.against.get(key, self.keys[0])

    def look(self, runner: Any) -> None:
        """Its paired log costs from the samples so far (each variant against its pair)."""
        from ccbench.analysis.settling.plausible import left_out
        from ccbench.analysis.statistics import sequential as rule
        from ccbench.model import ExecutionKey
        from ccbench.workloads import declaration

        mine = [s for s in (*runner._earlier, *runner.samples) if s.workload == self.name]
        self.against.update(rule.loop_twins(mine, self.keys))
        declared = rule.judged(declaration(type(self.job.workload)))
        costs = rule.paired_against(mine, self.keys[0], self.keys, self.against, declared)
        self.costs = {key: costs.get(key, {}) for key in self.keys[1:]}
        self.left = left_out(mine, self.keys[0], self.keys, self.against, declared)
        self.named = rule.case_of(mine)
        for sample in mine:
            if sample.execution:
                self.variants.setdefault(ExecutionKey.parse(sample.execution).variant, dict(sample.variant or {}))


def hold(runner: Any, job: WorkloadRun, started: float) -> bool:
    """Hold a workload settled by layer, its repetitions run, for the rounds across workloads."""
    spent = time.monotonic() - started
    runner._held.append(_Held(job, spent, spent / max(job.spec.repetitions + job.spec.warmup, 1)))
    return True


def release(runner: Any) -> None:
    """Clean up every held workload not cleaned up yet (the run is cut, or its rounds are done)."""
    while runner._held:
        runner._clean_up(runner._held.pop().job)


def settle_held(runner: Any) -> None:
    """The rounds across the held workloads, then each one's status, record and clean-up."""
    held = [h for h in runner._held if h.job.outcome.status == OutcomeStatus.RUNNING]
    try:
        if held:
            _Rounds(runner, held).run()
        for one in runner._held:
            one.job.outcome.settle()
            runner._writer.manifest["outcomes"][one.name] = one.job.outcome.as_dict()
        runner._writer.write_manifest()
    finally:
        release(runner)


class _Rounds:
    """The rounds of the held workloads: their layers after each look, the running answer, the records."""

    def __init__(self, runner: Any, held: list[_Held]) -> None:
        from ccbench.analysis.labels import REPEATED
        from ccbench.analysis.statistics.repeated import FIRST_LOOK

        self.runner, self.members, self.layers, self.said = runner, [], {}, set()
        for one in held:
            spec = one.job.spec
            one.combos = one.job.combinations()
            one.keys = [Execution(spec, combo, 0, False).variant_key for combo in one.combos]
            one.record = {"target": spec.settle, "baseline": one.keys[0] if one.keys else None, "variants": {}}
            if len(one.keys) < 2:
                one.record["reason"] = "one variant combination: no case to settle; ran its repetitions"
                one.job.outcome.settled = one.record
                runner.reporter.message(f"{spec.name}: settle: {one.record['reason']}")
                continue
            self.members.append(one)
        specs = [one.job.spec for one in self.members]
        # one layer spans workloads: they settle together at the smallest target and round limit
        self.target = min((spec.settle for spec in specs), default=None)
        self.limit = min((round_limit(spec) for spec in specs), default=0)
        self.built_for = self.limit if self.limit >= FIRST_LOOK else None
        for one in self.members:
            one.record.update({"target": self.target, "by": "layer"})
            if self.built_for:
                one.record.update({"interval": REPEATED, "limit": self.built_for})

    def look(self) -> None:
        from ccbench.analysis.settling.layer_settle import across, settle_layer

        for one in self.members:
            one.look(self.runner)
        costs = {one.name: one.costs for one in self.members}
        pairs = {one.name: {key: one.pair(key) for key in one.keys[1:]} for one in self.members}
        # the cases the comparison will leave out as implausible are in no headline (nor its costliest)
        self.cases = across(costs, pairs, {one.name: one.left for one in self.members})
        self.layers = {
            layer: settle_layer(cases, self.target, self.built_for, workloads=workloads, left_out=dropped)
            for layer, (workloads, cases, dropped) in self.cases.items()
        }

    def reason(self, one: _Held, key: str, more: int) -> str | None:
        """Why a variant's layer takes no more rounds (None: open): settled, futile, or a control."""
        from ccbench.analysis.settling.layer_settle import can_settle_layer
        from ccbench.analysis.statistics.sequential import FUTILE

        layer = (key, one.pair(key))
        if not one.costs[key]:
            return None  # nothing paired yet: it stays in the rounds whole
        if self.layers[layer].settled:
            return SETTLED
        if more > 0 and not can_settle_layer(self.cases[layer][1], self.target, more, self.built_for):
            return FUTILE
        # a control's layer holds no round: the control runs as its cipher's pair while that is open
        # (where the round limit ends the rounds, that is what stopped it, as for any layer)
        return CONTROL if more > 0 and self.control(key) else None

    def control(self, key: str) -> bool:
        """Whether the variant is a control: the loop twin some cipher on a loop file is set against."""
        return any(key in one.against.values() for one in self.members)

    def open_variants(self, one: _Held, repetition: int) -> list[str]:
        failed = set(one.job.outcome.repeating_failures)
        return [k for k in one.keys[1:] if k not in failed and not self.reason(one, k, self.limit - repetition)]

    def run(self) -> None:
        if not self.members:
            return
        repetition = min(one.job.spec.repetitions for one in self.members)
        # a resumed run counts the rounds its bundle holds already: it goes on from the last one (which
        # the cut may have left short; run again, its done executions are skipped), not from round 1
        names = {one.name for one in self.members}
        earlier = [s.repetition for s in self.runner._earlier if s.workload in names and not s.warmup]
        repetition = max([repetition, *earlier])
        self.look()
        self.announce(repetition)
        stopped_by = None
        while True:
            waiting = {one.name: self.open_variants(one, repetition) for one in self.members if not one.stopped_by}
            if not any(waiting.values()):
                break
            stopped_by = self._limit(repetition, [one for one in self.members if waiting.get(one.name)])
            if stopped_by:
                break
            try:
                for one in self.members:
                    if waiting.get(one.name) and not one.stopped_by and repetition >= one.job.spec.repetitions:
                        self._round(one, waiting[one.name], repetition)
            except BaseException as exc:
                # cut (Ctrl-C, a signal): every line said stays true, in the records too (the runner
                # writes them to the manifest): each layer as last looked at, the round cut not counted
                self.announce(repetition, "open")
                cut = "interrupted" if not isinstance(exc, Exception) else "error"
                try:
                    for one in self.members:
                        self._close(one, one.stopped_by or cut, repetition)
                except Exception:  # the records are a courtesy here: never hide the cut behind them
                    pass
                raise
            repetition += 1
            self.look()
            self.announce(repetition)
        self.announce(repetition, "open")
        for one in self.members:
            self._close(one, one.stopped_by or stopped_by, repetition)

    def _limit(self, repetition: int, running: list[_Held]) -> str | None:
        """Which limit the next round would pass, for all of them (None: none); a workload whose
        ``max_time`` it would pass, or whose baseline failed, leaves the rounds alone."""
        if repetition >= self.limit:
            return "max repetitions"
        for one in running:
            spec = one.job.spec
            if one.keys[0] in one.job.outcome.repeating_failures:
                one.stopped_by = "baseline failed"
            elif spec.max_time is not None and one.spent + one.round_s > spec.max_time:
                one.stopped_by = "max time"
        budget = self.runner.plan.budget
        round_s = sum(one.round_s for one in running if not one.stopped_by)
        if budget is not None and time.monotonic() - self.runner.started + round_s > budget:
            return "budget"
        return None if any(not one.stopped_by for one in running) else "stopped"

    def _round(self, one: _Held, variants: list[str], repetition: int) -> None:
        """One workload's part of a round: its open variants with their pairs, only the parts
        holding their cases."""
        selectable = getattr(one.job.workload, "selectable", ())
        labels = [label for key in variants for label in one.costs[key] or [None]]
        parts = open_parts(selectable, [one.named.get(label) if label else None for label in labels])
        running = {*variants, *(one.pair(key) for key in variants)}
        started = time.monotonic()
        run_round(self.runner, one.job, [c for k, c in zip(one.keys, one.combos) if k in running], repetition, parts)
        one.round_s = time.monotonic() - started
        one.spent += one.round_s
        variants_run, baseline = sorted(running - {one.keys[0]}), one.keys[0] in running
        one.ran.append({"round": repetition, "variants": variants_run, "baseline": baseline, "parts": parts})

    def title(self, layer: tuple[str, str]) -> str:
        from ccbench.analysis.settling.layer_settle import layer_title

        key, pair = layer
        one = next(one for one in self.members if one.name == self.cases[layer][0][0])
        return layer_title(one.variants.get(key, {}), one.variants.get(pair, {}), key, pair)

    def announce(self, repetition: int, word: str = "settled") -> None:
        """The running answer: one line for each layer settled since the last look (``word`` "open":
        each layer still open, so far, where the rounds end or are cut)."""
        elapsed = _elapsed(time.monotonic() - self.runner.started)
        if self.runner.resume:
            elapsed += " into the resumed run"
        for layer, settlement in self.layers.items():
            if layer in self.said or (word == "settled") != settlement.settled:
                continue
            self.said.add(layer)
            names = ", ".join(self.cases[layer][0])
            where = f"{word} after round {repetition}, {elapsed}"
            control = f" ({CONTROL})" if not settlement.settled and self.control(layer[0]) else ""
            self.runner.reporter.message(f"{where}: {names}: {self.title(layer)}: {settlement.describe()}{control}")

    def _close(self, one: _Held, stopped_by: str | None, repetition: int) -> None:
        """The workload's record: per variant what stopped it, its pair, its layer and each case's
        answer and claim ("called" by e-BH, "left out" as implausible, or "so far")."""
        from ccbench.analysis.statistics.sequential import settle_all

        outcome = one.job.outcome
        cases = settle_all(one.costs, self.target, self.built_for)
        for key in one.keys[1:]:
            failed = key in outcome.repeating_failures
            layer = (key, one.pair(key))
            answer = "failed" if failed else self.reason(one, key, self.limit - repetition) or stopped_by
            why = {label: answer for label in cases[key]}
            variant = {
                "stopped_by": "failed" if failed else _variant_reason(why, stopped_by),
                **({"against": one.against[key]} if key in one.against else {}),
                "cases": {c: {**v.as_dict(), "stopped_by": why[c]} for c, v in cases[key].items()},
            }
            if layer in self.layers:
                settlement = self.layers[layer]
                variant["layer"] = {**settlement.as_dict(), "title": self.title(layer)}
                for label, case in variant["cases"].items():
                    case["claim"] = settlement.claim(one.name, label)
            one.record["variants"][key] = variant
        one.record["rounds"], one.record["settle_rounds"] = repetition, one.ran
        outcome.settled = one.record
