"""The schedule of a workload: its executions in order, each named by a typed key, its outcome, and
what the runner holds for it on its way through the phases (WorkloadRun).

Warmups come first (one round per variant combination), then the repetitions with the variants
interleaved, so that a drift of the machine over time touches every variant alike. Within each round
the order of the variants is drawn from a seeded generator (``ORDER_RANDOM``, the default: a periodic
noise, a cron job every other execution, cannot then alias with one variant), or kept A B C A B C
(``ORDER_FIXED``). The draw of a round depends only on the seed, the workload's name, the phase and
the round's number, so a resumed run with the manifest's seed sees the same schedule.
"""

from __future__ import annotations

import itertools
import secrets
import zlib
from dataclasses import dataclass, field
from typing import Any

from ccbench.bundle import RAW
from ccbench.model import ExecutionKey, ExecutionStatus, OutcomeStatus
from ccbench.planning.plan import WorkloadSpec
from ccbench.variants.base import PreparedVariant
from ccbench.workloads.base import PrepareContext, Workload


def path_part(text: str) -> str:
    return text.replace("=", "-").replace(",", "_").replace(":", "-")


@dataclass
class Execution:
    spec: WorkloadSpec
    combo: dict[str, str]
    repetition: int
    warmup: bool
    #: the parts of the workload this execution runs (Workload.selectable), None for all of it; a
    #: settle round runs only the parts that hold open cases (ccbench.run.settle)
    parts: list[dict[str, str]] | None = None

    @property
    def variant_key(self) -> str:
        return ",".join(f"{axis}={value}" for axis, value in sorted(self.combo.items())) or "-"

    @property
    def key(self) -> str:
        return str(ExecutionKey(self.spec.name, self.variant_key, self.warmup, self.repetition))

    @property
    def raw_subdir(self) -> str:
        """Its raw directory relative to the bundle's raw/."""
        return f"{self.spec.name}/{path_part(self.variant_key)}/{'warmup' if self.warmup else 'rep'}-{self.repetition}"

    @property
    def raw_path(self) -> str:
        """Its raw directory relative to the bundle (what samples record)."""
        return f"{RAW}/{self.raw_subdir}"


def variant_combinations(spec: WorkloadSpec) -> list[dict[str, str]]:
    axes = sorted(spec.variants)
    return [dict(zip(axes, values)) for values in itertools.product(*(spec.variants[a] for a in axes))] or [{}]


ORDER_RANDOM = "random"
ORDER_FIXED = "fixed"
ORDERS = (ORDER_RANDOM, ORDER_FIXED)


def new_seed() -> int:
    """A seed for the order of a new run (kept in its manifest)."""
    return secrets.randbits(32)


@dataclass
class Order:
    """How the variants are ordered within each round: drawn from ``seed`` (ORDER_RANDOM; a new
    seed unless given) or A B A B (ORDER_FIXED); kept in the manifest as ``order``."""

    mode: str = ORDER_RANDOM
    seed: int | None = None

    def __post_init__(self) -> None:
        if self.mode == ORDER_RANDOM and self.seed is None:
            self.seed = new_seed()

    @property
    def draw(self) -> int | None:
        """The seed round_order draws from; None for the fixed order."""
        return self.seed if self.mode == ORDER_RANDOM else None

    def record(self) -> dict[str, Any]:
        return {"mode": self.mode, "seed": self.draw}

    @classmethod
    def recorded(cls, manifest: dict[str, Any]) -> Order:
        """The order a bundle was begun with (fixed for bundles from before the order was drawn)."""
        found = manifest.get("order") or {"mode": ORDER_FIXED}
        return cls(found["mode"], found.get("seed"))


def round_order(
    combos: list[dict[str, str]], workload: str, warmup: bool, index: int, seed: int | None
) -> list[dict[str, str]]:
    """The variant combinations of one round in the order they run: as given without a seed (fixed
    order), else a permutation drawn from a generator seeded by (seed, workload, phase, round)."""
    if seed is None or len(combos) < 2:
        return list(combos)
    import numpy as np

    rng = np.random.default_rng([seed, zlib.crc32(workload.encode()), int(warmup), index])
    return [combos[i] for i in rng.permutation(len(combos))]


def schedule(spec: WorkloadSpec, seed: int | None = None) -> list[Execution]:
    """Warmups first (one round per variant), then repetitions, variants interleaved: each round in
    the order round_order draws from ``seed``, or A B C A B C without one."""
    combos = variant_combinations(spec)
    plan = []
    for index in range(spec.warmup):
        plan.extend(Execution(spec, combo, index, True) for combo in round_order(combos, spec.name, True, index, seed))
    for index in range(spec.repetitions):
        plan.extend(
            Execution(spec, combo, index, False) for combo in round_order(combos, spec.name, False, index, seed)
        )
    return plan


@dataclass
class Outcome:
    status: OutcomeStatus = OutcomeStatus.PENDING
    reason: str | None = None
    executions_ok: int = 0
    executions_failed: int = 0
    #: executions not run because an earlier one of their variant combination failed for good
    executions_skipped: int = 0
    skipped_variants: dict[str, str] = field(default_factory=dict)
    #: variant key -> the failure that would repeat (workloads.base.RepeatingFailure)
    repeating_failures: dict[str, str] = field(default_factory=dict)
    #: with a precision target: why the workload stopped repeating (ccbench.analysis.statistics.precision.Decision)
    precision: dict[str, Any] | None = None
    #: with a settle target: each case's answer and why it stopped (ccbench.run.settle)
    settled: dict[str, Any] | None = None

    @classmethod
    def from_dict(cls, document: dict[str, Any]) -> Outcome:
        known = {k: v for k, v in document.items() if k in cls.__dataclass_fields__}
        known["status"] = OutcomeStatus(known.get("status", "pending"))
        return cls(**known)

    def as_dict(self) -> dict[str, Any]:
        document = {
            "status": self.status.value,
            "executions_ok": self.executions_ok,
            "executions_failed": self.executions_failed,
        }
        if self.reason:
            document["reason"] = self.reason
        if self.executions_skipped:
            document["executions_skipped"] = self.executions_skipped
        if self.skipped_variants:
            document["skipped_variants"] = self.skipped_variants
        if self.repeating_failures:
            document["repeating_failures"] = self.repeating_failures
        if self.precision:
            document["precision"] = self.precision
        if self.settled:
            document["settled"] = self.settled
        return document

    def skip(self, reason: str) -> None:
        self.status, self.reason = OutcomeStatus.SKIPPED, reason

    def count(self, status: ExecutionStatus) -> None:
        if status == ExecutionStatus.OK:
            self.executions_ok += 1
        else:
            self.executions_failed += 1

    def settle(self) -> None:
        """The workload's status once its executions are done."""
        if self.executions_failed and self.executions_ok:
            self.status = OutcomeStatus.PARTIAL
        elif self.executions_failed:
            self.status = OutcomeStatus.FAILED
        else:
            self.status = OutcomeStatus.OK


@dataclass
class WorkloadRun:
    """One workload on its way through the phases: what was set up for it, and what it holds."""

    spec: WorkloadSpec
    outcome: Outcome
    executions: list[Execution]
    workload: Workload | None = None
    #: (axis, value) -> the variant set up for it
    variants: dict[tuple[str, str], PreparedVariant] = field(default_factory=dict)
    #: variant key -> the context the workload was prepared in
    contexts: dict[str, PrepareContext] = field(default_factory=dict)
    #: the contexts whose prepare ran (each is cleaned up)
    prepared: list[PrepareContext] = field(default_factory=list)

    def stopped(self, execution: Execution) -> bool:
        """Whether an earlier execution of its variant combination failed in a way that repeats."""
        return execution.variant_key in self.outcome.repeating_failures

    def all_stopped(self) -> bool:
        return all(e.variant_key in self.outcome.repeating_failures for e in self.executions)

    def combinations(self) -> list[dict[str, str]]:
        """The variant combinations left to run, in the plan's order (A B C, whatever order a round
        drew: the precision rule takes the first as the baseline)."""
        scheduled = {execution.variant_key for execution in self.executions}
        return [
            c for c in variant_combinations(self.spec) if Execution(self.spec, c, 0, False).variant_key in scheduled
        ]

    def runnable(self) -> list[Execution]:
        """The executions whose every variant value was set up."""
        return [e for e in self.executions if all((a, v) in self.variants for a, v in e.combo.items())]
