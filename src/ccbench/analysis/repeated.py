"""An interval built for a known round limit: a repeated confidence interval (Jennison and Turnbull,
"Group Sequential Methods", ch. 9) for the mean paired log cost, valid together at the looks
``first..limit`` (docs/analysis.md "Settling each case"; ccbench.analysis.sequential.settle with
``limit``).

Why: the anytime-valid confidence sequence (ccbench.analysis.sequential.interval) holds at every
round there will ever be, so at round 10 it pays for rounds 11, 12, ... that a plan with a limit
never runs; an interval that only has to hold at the looks 3..limit is narrower at every one of them.
A run that skips looks (a budget, a case stopped early) only makes it conservative.

The shape is Wang and Tsiatis's: at look n the boundary on the standardised mean is
``C * (n / limit) ** (shape - 1/2)``: ``shape`` 0.5 is Pocock's (the same at every look), 0 is
O'Brien and Fleming's (wide early, narrow at the limit). The spread is estimated, so each look's
boundary is read on the t scale at the same two-sided level the normal boundary has there (Jennison
and Turnbull's significance-level approach), and C is set so that, for normal paired values, the
chance that any look's interval misses the true mean is alpha: by a simulation with a fixed seed,
cached per limit (the normal-theory recursion alone leaves the t intervals about 0.7 points over
alpha at a limit of 10, because their spreads are estimated from few rounds).

Lag-1 autocorrelation of the paired values (a drift that the pairing does not cancel) makes the
values' spread understate the mean's: ``autocorrelation_inflation`` widens the spread by
(1 + r) / (1 - r), r the measured lag-1 autocorrelation corrected for its bias toward -1/n at few
rounds and shrunk to 0 where it is negative. It is an option, not the default: it removes about
two fifths of the excess where the noise is tied to the label, but costs about a tenth of the cases
settled by the limit where the values are independent (benchmarks/sim_sequential.py --noise).
"""

from __future__ import annotations

import functools

import numpy as np
from scipy import optimize, stats

#: the standardised-mean boundary shape (Wang and Tsiatis's Delta): Pocock's, narrowest early,
#: where most cases settle; chosen by benchmarks/sim_sequential.py
POCOCK = 0.5
#: the first look: the fewest paired rounds from which an interval is drawn (the plans' 3 repetitions)
FIRST_LOOK = 3
#: the round limit of ``run --settle`` where the plan sets no ``max_repetitions``: the intervals are
#: built for it, so a larger limit than a study needs only widens every one of them
SETTLE_ROUNDS = 10
#: the most the lag-1 autocorrelation is taken to be (the spread is then widened 19 times at most)
MAX_AUTOCORRELATION = 0.9
#: the values the simulation that sets C draws (a fixed seed: the same boundary every time), as
#: cases of ``limit`` rounds: 200,000 cases at a limit of 10 (the error rate it reaches is then within
#: about 0.05 points of alpha)
CALIBRATION_VALUES = 2_000_000


def _standardised(values: np.ndarray) -> np.ndarray:
    """Per row of normal values, each look's |mean| / (sd / sqrt(n)) (looks 1..columns; nan at 1)."""
    n = np.arange(1, values.shape[1] + 1)
    total, squares = values.cumsum(axis=1), (values**2).cumsum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = total / n
        sd = np.sqrt(np.maximum(squares - n * mean**2, 0) / (n - 1))
        return np.abs(mean) / (sd / np.sqrt(n))


def t_boundaries(scale: float, limit: int, shape: float, first: int) -> np.ndarray:
    """The t critical value of each look first..limit for a Wang-Tsiatis boundary of this scale (C)."""
    looks = np.arange(first, limit + 1)
    z = scale * (looks / limit) ** (shape - 0.5)
    return stats.t.isf(stats.norm.sf(z), looks - 1)


@functools.lru_cache(maxsize=64)
def boundaries(limit: int, alpha: float = 0.05, shape: float = POCOCK, first: int = FIRST_LOOK) -> tuple[float, ...]:
    """The t critical values of the looks first..limit (a tuple, look ``first`` first) such that normal
    paired values have every look's interval cover their mean with probability 1 - alpha."""
    if limit < first:
        raise ValueError(f"a round limit of {limit} leaves no look from round {first} on")
    rng = np.random.default_rng(20261202)
    stat = _standardised(rng.standard_normal((CALIBRATION_VALUES // limit, limit)))[:, first - 1 :]

    def excess(scale: float) -> float:
        return float(np.mean((stat > t_boundaries(scale, limit, shape, first)).any(axis=1))) - alpha

    scale = optimize.brentq(excess, 0.5, 12.0, xtol=1e-4)
    return tuple(float(x) for x in t_boundaries(scale, limit, shape, first))


def lag1_autocorrelation(values: np.ndarray) -> np.ndarray:
    """Each look's lag-1 autocorrelation of the values so far (rows of values; arrays broadcast):
    sum (d_i - m)(d_i+1 - m) / sum (d_i - m)^2 with m the mean so far; 0 where the spread is 0."""
    values = np.atleast_2d(values)
    n = np.arange(1, values.shape[1] + 1)
    total, squares = values.cumsum(axis=1), (values**2).cumsum(axis=1)
    mean = total / n
    products = np.concatenate([np.zeros((len(values), 1)), (values[:, 1:] * values[:, :-1]).cumsum(axis=1)], axis=1)
    # the sums of d_1..d_n-1 and d_2..d_n, for the cross terms of the mean
    head, tail = total - values, total - values[:, :1]
    lagged = products - mean * (head + tail) + (n - 1) * mean**2
    spread = squares - n * mean**2
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(spread > 0, lagged / np.where(spread > 0, spread, 1.0), 0.0)


def autocorrelation_inflation(count: np.ndarray | int, r: np.ndarray | float) -> np.ndarray:
    """(1 + r') / (1 - r'): what the variance of a mean of AR(1) values is against its independent
    reading, with r' the measured r corrected for its bias at ``count`` values (Marriott and Pope:
    about -(1 + 4 rho) / n), at least 0 and at most MAX_AUTOCORRELATION."""
    n = np.asarray(count, dtype=float)
    r = np.asarray(r, dtype=float)
    corrected = np.clip(r + (1 + 4 * np.maximum(r, 0)) / n, 0.0, MAX_AUTOCORRELATION)
    return (1 + corrected) / (1 - corrected)


def repeated_interval(
    values: np.ndarray,
    limit: int,
    floor: float = 0.0,
    alpha: float = 0.05,
    shape: float = POCOCK,
    autocorrelation: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """Each look's interval on the mean of the paired values (rows of values, one column a round;
    looks 1..columns), valid together at the looks FIRST_LOOK..limit: infinite before the first look
    and after the limit (no boundary was spent there). The spread is at least ``floor`` (a standard
    deviation: what rounding adds, ccbench.analysis.sequential.pair_floor) and widened for lag-1
    autocorrelation (autocorrelation_inflation) where ``autocorrelation`` is set (not by default: the
    runner draws the order within each round, which leaves the paired values of no cost uncorrelated,
    and the correction costs a tenth of the cases settled by the limit; benchmarks/sim_sequential.py)."""
    values = np.atleast_2d(np.asarray(values, dtype=float))
    n = np.arange(1, values.shape[1] + 1)
    total, squares = values.cumsum(axis=1), (values**2).cumsum(axis=1)
    mean = total / n
    with np.errstate(invalid="ignore", divide="ignore"):
        variance = np.maximum(np.maximum(squares - n * mean**2, 0) / (n - 1), floor**2)
    if autocorrelation:
        variance = variance * autocorrelation_inflation(n, lag1_autocorrelation(values))
    critical = np.full(values.shape[1], np.inf)
    bounds = boundaries(limit, alpha, shape)
    looks = np.arange(FIRST_LOOK, min(limit, values.shape[1]) + 1)
    critical[looks - 1] = bounds[: len(looks)]
    with np.errstate(invalid="ignore"):
        half = critical * np.sqrt(variance / n)
    return mean - half, mean + half


def critical(count: np.ndarray | int, limit: int, alpha: float = 0.05, shape: float = POCOCK) -> np.ndarray:
    """The t critical value at each of these looks (arrays broadcast): infinite before FIRST_LOOK and
    past the limit."""
    n = np.asarray(count, dtype=int)
    table = np.concatenate([np.full(FIRST_LOOK, np.inf), boundaries(limit, alpha, shape), [np.inf]])
    return table[np.clip(n, 0, limit + 1)]


@functools.lru_cache(maxsize=8)
def _largest_z(limit: int, first: int = FIRST_LOOK) -> np.ndarray:
    """Sorted, per case of the calibration's normal values, the largest over the looks first..limit of
    each look's t statistic read as a normal deviate at the same one-sided level: a case's Pocock
    repeated interval ever excludes its mean exactly where this passes the boundary's C."""
    rng = np.random.default_rng(20261202)
    stat = _standardised(rng.standard_normal((CALIBRATION_VALUES // limit, limit)))[:, first - 1 :]
    looks = np.arange(first, limit + 1)
    return np.sort(stats.norm.isf(stats.t.sf(stat, looks - 1)).max(axis=1))


def repeated_p_value(values: np.ndarray, limit: int, floor: float = 0.0) -> float:
    """The repeated p value of "no cost" after these paired values (Pocock's shape): the least alpha at
    which the repeated interval for looks FIRST_LOOK..limit excludes 0 (the share of the calibration's
    no-cost cases whose statistic ever reaches this one's); 1 before the first look or past the limit."""
    values = np.asarray(values, dtype=float)
    n = len(values)
    if n < FIRST_LOOK or n > limit or limit < FIRST_LOOK:
        return 1.0
    sd = max(float(values.std(ddof=1)), floor)
    if sd <= 0:
        return 1.0
    z = float(stats.norm.isf(stats.t.sf(abs(float(values.mean())) / (sd / np.sqrt(n)), n - 1)))
    table = _largest_z(limit)
    return float(max(len(table) - np.searchsorted(table, z, side="left"), 1) / len(table))
