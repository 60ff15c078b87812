"""When to stop repeating: the rule behind ``ccbench run --precision 2%``.

After the minimum repetitions, the runner keeps running interleaved rounds (every variant once) of
a workload and asks ``decide`` after each round whether to go on. It stops when the 95% interval of
the workload's primary metric is within the target for every variant, or when ``max_repetitions``
or ``max_time`` is reached, and records why (``Decision.as_dict()``).

What "within the target" means: the relative half-width of the interval that compare will report.
With two or more variants that is the ratio of each variant to the baseline (the first variant
unless named): ``exp((log(high) - log(low)) / 2) - 1`` of ``ratio_interval(baseline, other)``,
the same Welch interval on log values that compare uses. The ratio, not each variant's own mean, is
what the user reads, and its interval is wider than either variant's own (about sqrt(2) times for
equal noise), so a target on the variants' own intervals would not bound it. With one variant, the
interval of its geometric mean.

The sequential correction. Stopping the first time the interval looks narrow picks moments when
the sample variance happens to be low; the interval computed then is too narrow, and an A/A
comparison comes out "significant" more often than 5% (7.2% in simulation when the noise equals
the target, stopping at the first narrow interval from n = 3). The rule therefore
- checks after every round from ``FIRST_CHECK`` (3) executions per variant on, and
- stops only when the target held at the last ``CONSECUTIVE`` (3) checks, so never before 5
  executions per variant.
A narrow interval must then survive two more rounds of fresh data. Simulated (20,000 A/A pairs per
noise level, log-normal and skewed noise, target 2%): the false-positive rate stays at or below
5.9% at every noise level (worst when the noise equals the target), against 4.4-4.9% for fixed
counts; a stricter stopping confidence alone (99%) did not bring it under 6% and cost 30-60%
more executions. See docs/trust.md and tests/test_precision.py.

``--detect 2%`` (``PrecisionRule(detect=True)``) asks the same rounds for a different measure: the
minimum detectable effect compare will report for each variant against the baseline
(stats.reported_mde: the cost it would see 4 times in 5), instead of the interval's half-width.
With one variant: the MDE of a comparison with a twin run of the same size and spread (what a gate
against this run would see). The same stopping rule (three checks in a row) applies.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from scipy import special

from ccbench.analysis.statistics.stats import CONFIDENCE, ratio_interval, reported_mde

FIRST_CHECK = 3
CONSECUTIVE = 3
#: the earliest stop the rule allows (FIRST_CHECK + CONSECUTIVE - 1)
EARLIEST_STOP = FIRST_CHECK + CONSECUTIVE - 1
DEFAULT_MAX_REPETITIONS = 30


@dataclass(frozen=True)
class PrecisionRule:
    """target: relative half-width of the 95% interval (0.02 = within +-2%).
    min_repetitions: executions per variant before the rule may stop (the workload's repetitions);
    the rule itself never stops before EARLIEST_STOP. max_repetitions: per variant. max_time_s:
    wall time of the workload's executions (cooldowns included), None = no limit."""

    target: float
    min_repetitions: int = 3
    max_repetitions: int = DEFAULT_MAX_REPETITIONS
    max_time_s: float | None = None
    confidence: float = CONFIDENCE
    consecutive: int = CONSECUTIVE
    first_check: int = FIRST_CHECK
    #: the target is a minimum detectable effect (``--detect``), not an interval's half-width
    detect: bool = False

    @property
    def measure(self) -> str:
        """What the target bounds, as the messages name it."""
        return "MDE" if self.detect else "+-"

    def __post_init__(self) -> None:
        if not (0 < self.target < 1):
            raise ValueError(f"precision must be between 0 and 100% (exclusive), not {self.target:g}")
        if self.min_repetitions < 1 or self.max_repetitions < self.min_repetitions:
            raise ValueError(
                f"max_repetitions ({self.max_repetitions}) must be at least the minimum repetitions "
                f"({self.min_repetitions})"
            )
        if self.max_time_s is not None and self.max_time_s <= 0:
            raise ValueError(f"max_time must be positive, not {self.max_time_s:g}")


@dataclass
class Decision:
    more: bool
    #: "precision reached", "max repetitions", "max time", "not computable", or None while going on
    stopped_by: str | None
    reason: str
    repetitions: int
    #: relative half-width per variant (ratio to the baseline; the baseline's own when alone)
    half_widths: dict[str, float | None] = field(default_factory=dict)
    #: how many consecutive checks, ending with this one, had every interval within the target
    streak: int = 0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _own_half_width(values: np.ndarray, confidence: float) -> float | None:
    if len(values) < 2 or (values <= 0).any():
        return None
    logs = np.log(values)
    se = logs.std(ddof=1) / math.sqrt(len(logs))
    return math.expm1(float(special.stdtrit(len(logs) - 1, 0.5 + confidence / 2)) * se)


def half_widths(
    samples: Mapping[str, Sequence[float]], baseline: str | None = None, confidence: float = CONFIDENCE
) -> dict[str, float | None]:
    """Relative half-width per variant: of its ratio to the baseline, or (alone) of its own geometric mean."""
    names = list(samples)
    if not names:
        return {}
    base = baseline if baseline is not None else names[0]
    if base not in samples:
        raise ValueError(f"baseline {base!r} is not one of the variants: {', '.join(names)}")
    arrays = {name: np.asarray(values, dtype=float) for name, values in samples.items()}
    if len(names) == 1:
        return {base: _own_half_width(arrays[base], confidence)}
    widths: dict[str, float | None] = {}
    for name in names:
        if name == base:
            continue
        interval = ratio_interval(arrays[base], arrays[name], confidence)
        widths[name] = None if interval is None else math.expm1((math.log(interval.high) - math.log(interval.low)) / 2)
    return widths


def _welch_mde(base: np.ndarray, other: np.ndarray) -> float | None:
    """compare's reported MDE of ``other`` against ``base`` (Welch on logs); None below 2 values a side."""
    if len(base) < 2 or len(other) < 2 or (base <= 0).any() or (other <= 0).any():
        return None
    log_a, log_b = np.log(base), np.log(other)
    var_a, var_b = log_a.var(ddof=1) / len(log_a), log_b.var(ddof=1) / len(log_b)
    if var_a + var_b == 0:
        return 0.0
    dof = (var_a + var_b) ** 2 / (
        (var_a**2 / (len(log_a) - 1) if var_a else 0) + (var_b**2 / (len(log_b) - 1) if var_b else 0)
    )
    return float(reported_mde(math.sqrt(var_a + var_b), dof, min(len(base), len(other))))


def detectable_effects(samples: Mapping[str, Sequence[float]], baseline: str | None = None) -> dict[str, float | None]:
    """The minimum detectable effect per variant against the baseline (a fraction), or alone, against
    a twin run of its own size and spread."""
    names = list(samples)
    if not names:
        return {}
    base = baseline if baseline is not None else names[0]
    arrays = {name: np.asarray(values, dtype=float) for name, values in samples.items()}
    if len(names) == 1:
        return {base: _welch_mde(arrays[base], arrays[base])}
    return {name: _welch_mde(arrays[base], arrays[name]) for name in names if name != base}


def _met(samples: Mapping[str, Sequence[float]], rule: PrecisionRule, baseline: str | None) -> tuple[bool, dict]:
    widths = detectable_effects(samples, baseline) if rule.detect else half_widths(samples, baseline, rule.confidence)
    return bool(widths) and all(w is not None and w <= rule.target for w in widths.values()), widths


def decide(
    samples: Mapping[str, Sequence[float]],
    rule: PrecisionRule,
    *,
    elapsed_s: float = 0.0,
    round_s: float | None = None,
    baseline: str | None = None,
    previous: Decision | None = None,
) -> Decision:
    """Whether to run another round. samples: variant -> the primary metric's values in execution order
    (repetitions only, no warmups). elapsed_s: time spent on the workload so far; round_s: how long the
    last round took (to stop before a round would pass max_time). previous: the decision after the
    previous round (saves recomputing the earlier checks; without it they are recomputed from prefixes)."""
    counts = [len(v) for v in samples.values()]
    n = min(counts) if counts else 0
    met, widths = _met(samples, rule, baseline) if n >= 2 else (False, {})
    streak = 0
    if n >= rule.first_check and previous is not None and previous.repetitions == n - 1:
        streak = previous.streak + 1 if met else 0
    elif n >= rule.first_check:
        # the target must have held at the last `consecutive` checks: this round's and the previous ones'
        for back in range(rule.consecutive):
            if n - back < rule.first_check:
                break
            prefix = {name: list(values)[: len(values) - back] for name, values in samples.items()}
            if not (met if back == 0 else _met(prefix, rule, baseline)[0]):
                break
            streak += 1
    if n < rule.min_repetitions:
        return Decision(True, None, f"{n} of the minimum {rule.min_repetitions} repetitions", n, widths, streak)
    if not counts or any(len(v) and (np.asarray(v, dtype=float) <= 0).any() for v in samples.values()):
        return Decision(
            False,
            "not computable",
            "the primary metric has values <= 0 (or no variant): no interval "
            "on the log scale; stopped at the minimum repetitions",
            n,
            widths,
            streak,
        )
    # a workload without variants has the one variant key "-": call it the run
    labels = {name: "the run" if name == "-" else name for name in widths}
    shown = ", ".join(
        f"{labels[name]} {rule.measure}{' ' if rule.detect else ''}{w:.2%}" if w is not None else f"{labels[name]} n/a"
        for name, w in widths.items()
    )
    goal = f"{'an MDE of ' if rule.detect else '+-'}{rule.target:.2%}"
    if streak >= rule.consecutive:
        return Decision(
            False,
            "precision reached",
            f"every {'MDE' if rule.detect else 'interval'} within {goal} at the last "
            f"{rule.consecutive} checks ({shown}) after {n} repetitions",
            n,
            widths,
            streak,
        )
    if n >= rule.max_repetitions:
        return Decision(False, "max repetitions", f"{n} repetitions reached before {goal} ({shown})", n, widths, streak)
    if rule.max_time_s is not None:
        upcoming = elapsed_s + (round_s or 0.0)
        if upcoming > rule.max_time_s:
            return Decision(
                False,
                "max time",
                f"{'another round would pass' if elapsed_s <= rule.max_time_s else 'past'} "
                f"max_time {rule.max_time_s:g} s after {elapsed_s:.0f} s and {n} repetitions "
                f"before {goal} ({shown})",
                n,
                widths,
                streak,
            )
    waiting = f"held at the last {streak} of {rule.consecutive} checks needed" if met else "not within the target"
    return Decision(True, None, f"{goal} {waiting} ({shown})", n, widths, streak)


def _series(sample: Any) -> tuple[str, str]:
    import json

    return sample.metric, json.dumps(sample.params, sort_keys=True)


def _variant_of(sample: Any) -> str | None:
    from ccbench.model import ExecutionKey

    return ExecutionKey.parse(sample.execution).variant if sample.execution else None


def primary_series(samples: Sequence[Any], variants: Sequence[str], declared: Sequence[str]) -> tuple[str, str] | None:
    """The (metric, params as JSON) of a workload's primary metric among its measured ``samples``:
    the first reported among those it declares as its application-level result (``declared``: its
    ``primary_metrics``) that every variant reported, else the first it reported; None without samples."""
    if not samples:
        return None
    reported: dict[tuple[str, str], set] = {}
    for sample in samples:
        reported.setdefault(_series(sample), set()).add(_variant_of(sample))
    every = set.union(*reported.values()) & set(variants)
    return next(
        (key for key, seen in reported.items() if key[0] in declared and every <= seen),
        _series(samples[0]),
    )


def primary_values(samples: Sequence[Any], variants: Sequence[str], declared: Sequence[str]) -> dict[str, list[float]]:
    """Per variant key (in the order given), the values of a workload's primary metric
    (primary_series) among its measured ``samples`` (ccbench.model.Sample, in execution order)."""
    values: dict[str, list[float]] = {variant: [] for variant in variants}
    primary = primary_series(samples, variants, declared)
    for sample in samples:
        variant = _variant_of(sample)
        if variant in values and _series(sample) == primary:
            values[variant].append(sample.value)
    return values


def rule_for(spec: Any) -> PrecisionRule:
    """The rule of a plan's workload (a ccbench.planning.plan.WorkloadSpec: its precision or detect target, its
    repetitions as the minimum, max_repetitions and max_time)."""
    return PrecisionRule(
        spec.detect if spec.detect is not None else spec.precision,
        min_repetitions=spec.repetitions,
        max_repetitions=spec.max_repetitions or max(DEFAULT_MAX_REPETITIONS, spec.repetitions),
        max_time_s=spec.max_time,
        detect=spec.detect is not None,
    )
