"""Settling a case: an interval on a variant's cost against its baseline that stays valid however
often it is looked at (``ccbench run --settle 5%``, docs/analysis.md "Settling each case").

The method: Lai's confidence sequence for the mean of a normal sample with unknown variance (Lai
1976; Wang and Ramdas 2023, "Anytime-valid t-tests and confidence sequences for Gaussian means with
unknown variance"). Each round runs the baseline and the variant once, interleaved, so the round
gives one paired value: the log of the variant's time-equivalent cost against the baseline
(``log(variant / baseline)`` for a lower-is-better metric, its negative for a higher-is-better
one). Against a hypothesised mean cost m, the Bayes factor of "mean != m" (a normal prior of
precision ``c`` on the standardised effect, the scale-invariant prior 1/sigma on the spread) is

    B_n(m) = sqrt(c / (n + c)) * (S2 / (S2 - S1**2 / (n + c))) ** (n / 2)

with S1 and S2 the sum and the sum of squares of the n values minus m. Under "mean = m" it is a
nonnegative martingale starting at 1 whatever the spread (the prior on the spread is the
scale group's right Haar measure), so by Ville's inequality it ever reaches 1/alpha with
probability at most alpha: the set of m with B_n(m) < 1/alpha, an interval in closed form
(``interval``), covers the true mean cost at every round at once with probability 1 - alpha. A
case may therefore be looked at after every round and stopped the first time its interval
answers, and the answer is wrong at most alpha of the time.

Why this one: it needs no variance known in advance (a benchmark's spread is what it measures),
no planned number of looks (a group-sequential design with alpha spending needs the looks' count
or their information fractions fixed in advance, and the budget cuts rounds at times no design
foresaw), it is exact for normal noise on the log scale (what compare's Welch interval assumes
too), and it is scale-invariant: only the cost relative to the spread decides. scipy has no
confidence sequences and no maintained Python library implements this one (confseq implements
Howard et al.'s bounded and sub-Gaussian boundaries, which need the variance or bounds), and the
formula is a line.

A case is settled when its interval
- excludes no cost: it has a ``cost`` (the interval above 0) or a ``gain`` (below 0), with its size
  (the estimate is the mean of the paired logs, the interval's centre);
- or lies below the target: ``no cost above`` the target (every cost at or above it excluded).
``MIXTURE`` (c) sets the rounds where the interval is narrowest for its confidence; chosen by
benchmarks/sim_sequential.py.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from ccbench.analysis.labels import ANYTIME, COST, GAIN, NO_COST_ABOVE, REPEATED, interval_name

#: the chance that a case is ever settled wrongly (its interval ever misses the true cost)
ALPHA = 0.05
#: the prior precision of the standardised effect (c above); 0.1 gives a finite interval from 3 rounds
MIXTURE = 0.1
#: what stopped a case that no interval of the round limit could answer (can_settle), in a run's
#: settle rounds and a fleet's alike
FUTILE = "cannot settle within the round limit"
#: what a settled cost or gain says of its estimate: stopping the first time the interval excludes 0
#: selects the rounds that happened to land far from it (docs/analysis.md "Settling each case")
LEANS = "stopped when settled: the estimate leans away from zero"


#: the least spread (standard deviation on the log scale) a paired value is taken to have where its
#: resolution is not known (0.01%): values that all tie are never read as a certainty
MIN_SPREAD = 1e-4


class PairedCosts(list):
    """A case's paired log costs (a list of floats, in round order) with ``floor``: the standard deviation
    on the log scale that rounding the raw values adds to one paired value (pair_floor). Whatever settles
    them takes their spread as at least that, so ties never give an interval of zero width."""

    def __init__(
        self, values: Iterable[float] = (), floor: float = MIN_SPREAD, rounds: Sequence[int] | None = None
    ) -> None:
        super().__init__(values)
        self.floor = floor
        #: the repetition of each value, where known (a layer's headline pairs its cases by round)
        self.rounds = list(rounds) if rounds is not None else None


def pair_floor(baseline: Sequence[float], variant: Sequence[float]) -> float:
    """The spread rounding adds to one paired value log(variant / baseline): both values' rounding
    variance (ccbench.analysis.statistics.stats.resolution_variance at the step the case's values are reported in),
    averaged over the rounds; MIN_SPREAD at least."""
    from ccbench.analysis.statistics.stats import resolution, resolution_variance

    a, b = np.asarray(baseline, dtype=float), np.asarray(variant, dtype=float)
    if not len(a) or len(a) != len(b):
        return MIN_SPREAD
    step = np.nanmin(resolution(np.concatenate([a, b])))
    variance = float(np.mean(resolution_variance(a, step) + resolution_variance(b, step)))
    return max(math.sqrt(variance), MIN_SPREAD) if math.isfinite(variance) else MIN_SPREAD


def spread_floor(log_costs: Sequence[float]) -> float:
    """The least standard deviation the paired values are taken to have: their own floor (PairedCosts),
    else MIN_SPREAD."""
    return max(float(getattr(log_costs, "floor", MIN_SPREAD) or MIN_SPREAD), MIN_SPREAD)


def floored_squares(values: np.ndarray, floor: float) -> float:
    """The values' sum of squares, raised where their spread about their mean is below ``floor`` (a
    standard deviation) so that it is exactly that: the interval and the p value read the spread from it."""
    n = len(values)
    squares = float((values**2).sum())
    if n < 2:
        return squares
    deviations = squares - float(values.sum()) ** 2 / n
    return squares + max((n - 1) * floor**2 - deviations, 0.0)


def interval(
    count: np.ndarray | int,
    total: np.ndarray | float,
    squares: np.ndarray | float,
    alpha: float = ALPHA,
    mixture: float = MIXTURE,
) -> tuple[np.ndarray, np.ndarray]:
    """The interval on the mean after ``count`` values with this sum and sum of squares (arrays
    broadcast; vectorised for the simulation). Infinite where the values cannot yet bound it (too
    few of them for the confidence), nan below 2 values."""
    n = np.asarray(count, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        mean = np.asarray(total, dtype=float) / n
        spread = np.maximum(np.asarray(squares, dtype=float) - n * mean**2, 0.0)  # sum of squared deviations
        # B_n(m) < 1/alpha  <=>  n d^2 (1 - K c / (n + c)) < (K - 1) * spread, d = mean - m,
        # K = exp(2 (log(1/alpha) + log(sqrt((n + c) / c))) / n)
        level = math.log(1 / alpha) + 0.5 * np.log((n + mixture) / mixture)
        k = np.exp(2 * level / n)
        room = 1 - k * mixture / (n + mixture)
        half = np.where(room > 0, np.sqrt((k - 1) * spread / (n * np.where(room > 0, room, 1.0))), np.inf)
        half = np.where(n >= 2, half, np.nan)
    return mean - half, mean + half


@dataclass
class Settlement:
    """Where one case stands: its answer (``cost``, ``gain``, ``no cost above``, or None while
    unsettled), the estimate and the interval as time-equivalent fractions (0.05 = 5% slower; the
    interval None while it is not finite),
    the rounds (paired values) it rests on and the target."""

    state: str | None
    rounds: int
    target: float
    estimate: float | None = None
    low: float | None = None
    high: float | None = None
    #: the standard error of the mean paired log cost (its degrees of freedom: rounds - 1)
    se: float | None = None
    #: the interval it is read on (ccbench.analysis.labels.interval_name; a record without one: ANYTIME)
    interval: str = ANYTIME

    @property
    def settled(self) -> bool:
        return self.state is not None

    def describe(self) -> str:
        """One phrase: what the case's answer is, with its numbers in the project's one convention
        (ccbench.analysis.format.effect: "28.6% slower [18.0%, 40.1%]", "7.5x faster [5.8x, 9.7x]")."""
        from ccbench.analysis import format as fmt

        if self.estimate is None:
            return f"no interval yet ({self.rounds} paired rounds)"
        if self.low is None or self.high is None:
            return f"unsettled: {fmt.effect(1 + self.estimate)} (too few rounds for a finite interval: {self.rounds})"
        said = fmt.effect(1 + self.estimate, 1 + self.low, 1 + self.high)
        if self.state in (COST, GAIN):
            # a case stops the round its interval leaves 0, which favours rounds that happened to land far from 0
            return f"a {self.state}: {said} ({LEANS})"
        if self.state == NO_COST_ABOVE:
            return f"no cost above {fmt.mde(self.target)} (estimate {said})"
        return f"unsettled: {said}"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def settle(
    log_costs: Sequence[float], target: float, alpha: float = ALPHA, mixture: float = MIXTURE, limit: int | None = None
) -> Settlement:
    """The settlement of a case from its paired log costs (one a round, in round order). target:
    the cost (a fraction, 0.05 = 5%) below which "no cost above" it settles the case. With ``limit``
    (the round limit, known in advance) on the repeated interval built for looks 3..limit
    (ccbench.analysis.statistics.repeated: narrower), else, and past the limit, on the anytime-valid one."""
    if not (0 < target < 1):
        raise ValueError(f"settle target must be between 0 and 100% (exclusive), not {target:g}")
    values = np.asarray(log_costs, dtype=float)
    n = len(values)
    name = interval_name(limit if limit and n <= limit else None)
    if n < 2 or not np.isfinite(values).all():
        return Settlement(None, n, target, interval=name)
    squares = floored_squares(values, spread_floor(log_costs))
    if limit and n <= limit:
        from ccbench.analysis.statistics.repeated import repeated_interval

        lows, highs = repeated_interval(values[None, :], limit, spread_floor(log_costs), alpha)
        low, high = float(lows[0, -1]), float(highs[0, -1])
    else:
        low, high = (float(x) for x in interval(n, values.sum(), squares, alpha, mixture))
    estimate = float(values.mean())
    state = None
    if low > 0:
        state = COST
    elif high < 0:
        state = GAIN
    elif high < math.log1p(target):
        state = NO_COST_ABOVE
    # an interval not yet finite is kept as None (JSON has no infinity)
    bounds = (math.expm1(low), math.expm1(high)) if math.isfinite(high - low) else (None, None)
    # the paired values' own standard error of their mean (log scale), for whatever pools the case's row
    se = math.sqrt(max(squares - float(values.sum()) ** 2 / n, 0.0) / (n - 1) / n)
    return Settlement(state, n, target, math.expm1(estimate), *bounds, se=se, interval=name)


#: the quantile of the measured spread's sampling distribution taken as the spread when judging
#: whether more rounds could settle a case (reachable): a spread from 3-5 values is often far above
#: the true one, so a case is given up only when even a spread this much smaller would not answer;
#: 0.1, tuned on the repeated interval at a limit of 10 (benchmarks/sim_sequential.py --futility): it
#: keeps 80.9% of no-cost and at-target cases settled at a paired spread of 4% where 0.2 kept 78.7%
FUTILITY_QUANTILE = 0.1


def reachable(
    count: np.ndarray | int,
    mean: np.ndarray | float,
    sd: np.ndarray | float,
    target: float,
    more: np.ndarray | int,
    limit: int | None = None,
    quantile: float | None = None,
) -> np.ndarray:
    """Whether ``more`` further rounds could settle a case of ``count`` paired values with this
    mean and standard deviation (arrays broadcast): the interval after them (the repeated one for
    looks 3..``limit`` where given, as settle reads it), with the estimate as measured and the spread
    at its FUTILITY_QUANTILE lower bound (chi-square, ``count - 1`` degrees of freedom), would
    answer: a cost, a gain, or no cost above the target. ``quantile``: another lower bound of the
    spread than FUTILITY_QUANTILE (benchmarks/sim_sequential.py --noise tunes it)."""
    from scipy import special  # the settle rounds and the simulation, not compare

    n = np.asarray(count, dtype=float)
    df = np.maximum(n - 1, 1)
    low_sd = np.asarray(sd, dtype=float) * np.sqrt(2 * special.gammaincinv(df / 2, quantile or FUTILITY_QUANTILE) / df)
    total = n + np.maximum(np.asarray(more, dtype=float), 0)
    if limit:
        from ccbench.analysis.statistics.repeated import critical

        half = critical(total.astype(int), limit) * low_sd / np.sqrt(total)
        low, high = np.asarray(mean) - half, np.asarray(mean) + half
    else:
        low, high = interval(total, total * mean, total * np.asarray(mean, dtype=float) ** 2 + (total - 1) * low_sd**2)
    return (low > 0) | (high < math.log1p(target))


def can_settle(log_costs: Sequence[float], target: float, more: int, limit: int | None = None) -> bool:
    """Whether ``more`` further rounds could settle a case (reachable), from 3 paired values on
    (True below). A case that cannot leaves the rounds unsettled: a stop for futility claims
    nothing, so it cannot make an answer wrong, only cost power (docs/analysis.md;
    benchmarks/sim_sequential.py --limit measures how much)."""
    values = np.asarray(log_costs, dtype=float)
    if len(values) < 3 or not np.isfinite(values).all():
        return True
    spread = max(float(values.std(ddof=1)), spread_floor(log_costs))
    return bool(reachable(len(values), float(values.mean()), spread, target, more, limit))


def _label(sample: Any) -> str:
    """The metric and the case it measures (e.g. fio's ``throughput bs=4k rw=randread``)."""
    case = (sample.metadata or {}).get("case")
    if isinstance(case, dict):
        case = " ".join(f"{k}={v}" for k, v in case.items())
    return f"{sample.metric} {case}" if case else sample.metric


def case_of(samples: Iterable[Any]) -> dict[str, dict | None]:
    """Each case label (as paired_log_costs names them) and the case it measures, as its samples
    record it (e.g. ``{"bs": "4k", "rw": "randread", "direction": "read"}``; None without one)."""
    found: dict[str, dict | None] = {}
    for sample in samples:
        case = (sample.metadata or {}).get("case")
        found.setdefault(_label(sample), case if isinstance(case, dict) else None)
    return found


#: what settle judges a workload on (judged): a primary metric's name (every case of it) or a
#: (metric, case) pair (the series whose params hold the case)
Judged = Sequence["str | tuple[str, Mapping[str, Any]]"]


def judged(declaration: Mapping[str, Any] | None) -> tuple[str | tuple[str, dict], ...]:
    """What settle judges a workload on, from its declaration (a manifest's
    ``declarations.<workload>``, ccbench.workloads.declaration): every case of each primary metric,
    then, for a workload that sets per-message costs against application work (transport: the
    embedding, measured on the unprotected variant only, so never paired), the per-request and
    per-connection figures at their declared cases: the figures its verdict is made of. A series
    that some variant did not report (plaintext has no handshake) is not judged (paired_series)."""
    declaration = declaration or {}
    out: list[str | tuple[str, dict]] = [str(m) for m in declaration.get("primary_metrics") or ()]
    costs = declaration.get("message_costs") or {}
    for part in ("per_request", "per_connection"):
        spec = costs.get(part) or {}
        if spec.get("metric"):
            out.append((str(spec["metric"]), dict(spec.get("case") or {})))
    return tuple(out)


def declares(declared: Judged, metric: str, params: Mapping[str, Any]) -> bool:
    """Whether a series (its metric and params) is among what ``declared`` (judged) names."""
    for entry in declared:
        if isinstance(entry, str):
            if entry == metric:
                return True
        elif entry[0] == metric and all(params.get(k) == v for k, v in entry[1].items()):
            return True
    return False


def loop_twins(samples: Iterable[Any], keys: Sequence[str]) -> dict[str, str]:
    """{the variant key of a cipher on a loop file: its loop twin's key} among ``keys`` (the same
    axes with ``storage=ext4-loop``; ccbench.analysis.rows.pairing), from the samples' storage labels:
    settle pairs such a variant with its twin, as compare sets its rows against it."""
    from ccbench.analysis.labels import LOOP_CONTROL, ON_LOOP
    from ccbench.analysis.samples.load import storage_label
    from ccbench.model import ExecutionKey

    on_loop = {
        ExecutionKey.parse(s.execution).variant
        for s in samples
        if s.execution and storage_label(s.variant or {}) in ON_LOOP
    }
    twins = {}
    for key in keys[1:]:
        if key in on_loop:
            axes = [part.split("=", 1) for part in key.split(",")]
            twin = ",".join(f"{axis}={LOOP_CONTROL if axis == 'storage' else value}" for axis, value in axes)
            if twin in keys and twin != key:
                twins[key] = twin
    return twins


def by_pair(baseline: str, keys: Sequence[str], against: Mapping[str, str]) -> dict[str, list[str]]:
    """The variant keys other than the baseline grouped by what each is paired with: ``against[key]``
    (a loop twin, loop_twins) where given, else ``baseline``; {pair: [keys]}, in first-seen order."""
    groups: dict[str, list[str]] = {}
    for key in keys:
        if key != baseline:
            groups.setdefault(against.get(key, baseline), []).append(key)
    return groups


def paired_against(
    samples: Sequence[Any], baseline: str, keys: Sequence[str], against: Mapping[str, str], declared: Judged = ()
) -> dict[str, dict[str, list[float]]]:
    """paired_log_costs with each variant key against its own pair (by_pair)."""
    costs: dict[str, dict[str, list[float]]] = {}
    for pair, mine in by_pair(baseline, keys, against).items():
        costs.update(paired_log_costs(samples, pair, [pair, *mine], declared))
    return {key: costs.get(key, {}) for key in keys if key != baseline}


def paired_log_costs(
    samples: Iterable[Any], baseline: str, variants: Sequence[str], declared: Judged = ()
) -> dict[str, dict[str, list[float]]]:
    """Per variant key other than the baseline, per case (a series of the workload's primary
    metrics: every series ``declared`` names (judged), e.g. fio's throughput at 4k randread, that
    every variant reported; without one, the series
    ccbench.analysis.statistics.precision.primary_series chooses), the log time-equivalent costs against the
    baseline, paired by repetition (rounds where either is missing are left out), in repetition
    order. samples: ccbench.model.Sample of one workload."""
    keys = [baseline, *[v for v in variants if v != baseline]]
    costs: dict[str, dict[str, list[float]]] = {key: {} for key in keys[1:]}
    for _, label, per_key in paired_series(samples, baseline, variants, declared):
        for key in keys[1:]:
            costs[key][label] = per_key[key]
    return costs


def paired_series(
    samples: Iterable[Any], baseline: str, variants: Sequence[str], declared: Judged = ()
) -> list[tuple[tuple[str, str], str, dict[str, list[float]]]]:
    """paired_log_costs per series: (the series: its metric and its params as sorted-key JSON, the
    case's label, {variant key: the paired log costs against the baseline})."""
    from ccbench.analysis.statistics.precision import primary_series
    from ccbench.model import ExecutionKey

    keys = [baseline, *[v for v in variants if v != baseline]]
    mine = [s for s in samples if not s.warmup and s.execution]
    values: dict[tuple[str, str], dict[str, dict[int, float]]] = {}
    labels: dict[tuple[str, str], str] = {}
    higher: dict[tuple[str, str], bool] = {}
    for sample in mine:
        series = (sample.metric, json.dumps(sample.params, sort_keys=True))
        variant = ExecutionKey.parse(sample.execution).variant
        if variant in keys and sample.value > 0:
            values.setdefault(series, {}).setdefault(variant, {}).setdefault(sample.repetition, sample.value)
            labels[series], higher[series] = _label(sample), sample.better == "higher"
    chosen = [key for key in values if declares(declared, key[0], json.loads(key[1])) and set(keys) <= set(values[key])]
    if not chosen:
        primary = primary_series(mine, keys, [d for d in declared if isinstance(d, str)])
        chosen = [primary] if primary in values else []
    named = [labels[series] for series in chosen]
    for series in chosen:  # two series that the case does not tell apart are told by their parameters
        if named.count(labels[series]) > 1:
            labels[series] = f"{labels[series]} {series[1]}"
    out = []
    for series in chosen:
        base, sign = values[series].get(baseline, {}), -1.0 if higher[series] else 1.0
        per_key = {}
        for key in keys[1:]:
            mine_values = values[series].get(key, {})
            rounds = [r for r in sorted(mine_values) if r in base]
            per_key[key] = PairedCosts(
                [sign * math.log(mine_values[r] / base[r]) for r in rounds],
                pair_floor([base[r] for r in rounds], [mine_values[r] for r in rounds]),
                rounds,
            )
        out.append((series, labels[series], per_key))
    return out


def p_value(log_costs: Sequence[float], mixture: float = MIXTURE) -> float:
    """The anytime-valid p value of "no cost" (the mean paired log cost is 0): 1 / B_n(0), at most
    1 (the Bayes factor of the module's docstring). It is at most alpha exactly where the interval
    excludes 0; nan below 2 values."""
    values = np.asarray(log_costs, dtype=float)
    n = len(values)
    if n < 2 or not np.isfinite(values).all():
        return math.nan
    s1, s2 = float(values.sum()), floored_squares(values, spread_floor(log_costs))
    rest = s2 - s1**2 / (n + mixture)
    if s2 <= 0:
        return 1.0
    if rest <= 0:
        return 0.0
    log_b = 0.5 * math.log(mixture / (n + mixture)) + n / 2 * (math.log(s2) - math.log(rest))
    return float(min(1.0, math.exp(-log_b)))


def settle_all(
    costs: Mapping[str, Mapping[str, Sequence[float]]], target: float, limit: int | None = None
) -> dict[str, dict[str, Settlement]]:
    """settle() for each variant's cases (on the repeated interval for ``limit`` where given)."""
    return {
        name: {case: settle(values, target, limit=limit) for case, values in cases.items()}
        for name, cases in costs.items()
    }


def record_limit(record: Mapping[str, Any]) -> int | None:
    """The round limit a run's settle record says its intervals were built for (``interval``
    REPEATED, ``limit``); None for a record that names none (runs before it: the anytime-valid one)."""
    limit = record.get("limit")
    return int(limit) if record.get("interval") == REPEATED and limit else None


def case_p_value(log_costs: Sequence[float], limit: int | None = None) -> float:
    """A case's p value of "no cost" on the interval settle reads it on: the repeated one up to
    ``limit`` (ccbench.analysis.statistics.repeated.repeated_p_value), else the anytime-valid one (p_value)."""
    if limit and len(log_costs) <= limit:
        from ccbench.analysis.statistics.repeated import repeated_p_value

        return repeated_p_value(np.asarray(log_costs, dtype=float), limit, spread_floor(log_costs))
    return p_value(log_costs)
