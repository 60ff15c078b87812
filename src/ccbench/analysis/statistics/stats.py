"""The interval method: Welch's t interval on log values, reported as a ratio.

For a configuration B against a baseline A, with samples a_1..a_n and b_1..b_m (all > 0):
the difference of the mean logs, d = mean(log b) - mean(log a), gets Welch's t interval
(unequal variances, Welch-Satterthwaite degrees of freedom); exp(d) is the ratio of geometric
means and exp(interval) its 95% interval. Multiplicative noise (the usual case for run times and
throughputs) is additive and close to normal on the log scale, so the interval is close to exact
even at n = 3, where resampling methods cannot reach 95%. The method is validated by simulation
in tests/test_analysis.py (A/A false-positive rate, power for a 5% slowdown) and in
benchmarks/bench_analysis.py.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

# scipy.special (the t distributions, without importing all of scipy.stats: 0.5 s) is imported where
# it is used: the run summary takes only coefficient_of_variation from here, and a fleet host gets
# scipy only when its plan has a precision or detect target (ccbench.fleet.wheelhouse)

CONFIDENCE = 0.95
MIN_SAMPLES = 3
NOISY_CV = 0.05
#: the flag of a row whose medians and reported ratio disagree in direction
SKEWED = "skewed (the medians move the other way)"
#: the chance of detecting a cost of the minimum detectable effect (docs/analysis.md, "Minimum
#: detectable effect")
POWER = 0.80


@dataclass
class RatioInterval:
    ratio: float
    low: float
    high: float
    p_value: float

    @property
    def significant(self) -> bool:
        return self.low > 1.0 or self.high < 1.0


def ratio_interval(baseline: np.ndarray, other: np.ndarray, confidence: float = CONFIDENCE) -> RatioInterval | None:
    """Ratio other/baseline (geometric means) with its interval; None when it cannot be computed."""
    baseline = np.asarray(baseline, dtype=float)
    other = np.asarray(other, dtype=float)
    if len(baseline) < 2 or len(other) < 2 or (baseline <= 0).any() or (other <= 0).any():
        return None
    log_a, log_b = np.log(baseline), np.log(other)
    diff = log_b.mean() - log_a.mean()
    # a side's spread is never below what rounding its values adds (no interval of zero width)
    step = float(np.nanmin(resolution(np.concatenate([baseline, other]))))
    floor_a = float(resolution_variance(np.median(baseline), step))
    floor_b = float(resolution_variance(np.median(other), step))
    var_a = max(log_a.var(ddof=1), floor_a) / len(log_a)
    var_b = max(log_b.var(ddof=1), floor_b) / len(log_b)
    se = math.sqrt(var_a + var_b)
    dof = (var_a + var_b) ** 2 / (
        (var_a**2 / (len(log_a) - 1) if var_a else 0) + (var_b**2 / (len(log_b) - 1) if var_b else 0)
    )
    from scipy import special

    t = special.stdtrit(dof, 0.5 + confidence / 2)
    p_value = 2 * special.stdtr(dof, -abs(diff / se))
    return RatioInterval(math.exp(diff), math.exp(diff - t * se), math.exp(diff + t * se), float(p_value))


#: the finest step a value is taken to be reported in, relative to itself: the floor of resolution()
#: where a value has more digits than a measurement carries (a float's last digits are not measured)
FINEST_STEP = 1e-6


def resolution(values) -> np.ndarray:
    """Per value, the step it was reported in: the coarsest power of ten it is a multiple of, at most
    a tenth of the value's own order of magnitude and at least FINEST_STEP of the value (17 -> 1, 0.0724 ->
    0.0001, 100 -> 10, 3 -> 0.1). Values that tie (a p99 in whole milliseconds, an IOPS figure at a low rate)
    carry no spread of their own; the step says how far apart they could be (resolution_variance)."""
    values = np.abs(np.asarray(values, dtype=float))
    out = np.full(values.shape, np.nan)
    usable = np.isfinite(values) & (values > 0)
    if not usable.any():
        return out
    v = values[usable]
    top = np.floor(np.log10(v)) - 1  # at most a tenth of the value's order: "100" is not taken as 100 +- 50
    finest = np.floor(np.log10(v * FINEST_STEP))
    step = 10.0**finest
    for exponent in range(int(finest.min()), int(top.max()) + 1):
        unit = 10.0**exponent
        multiple = np.abs(v / unit - np.round(v / unit)) < 1e-6
        step = np.where(multiple & (exponent <= top) & (exponent >= finest), unit, step)
    out[usable] = step
    return out


def resolution_variance(median, step) -> np.ndarray:
    """The variance on the log scale that rounding to ``step`` adds to one value near ``median``
    (Sheppard: step^2 / 12, relative to the value): the floor of a side's spread, so that values that tie
    never give an interval of zero width."""
    median, step = np.asarray(median, dtype=float), np.asarray(step, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where((median > 0) & np.isfinite(step), (step / median) ** 2 / 12, 0.0)


def coefficient_of_variation(values: np.ndarray) -> float | None:
    """The one coefficient of variation of ccbench: sample standard deviation (n - 1) over the mean,
    as a fraction (0.05 = 5%); None below 2 values or at mean 0. Everything that shows a CV (run
    summary, ``show``, ``compare``, the report) uses this or its array form below."""
    values = np.asarray(values, dtype=float)
    if len(values) < 2:
        return None
    mean = values.mean()
    return float(values.std(ddof=1) / mean) if mean else None


def coefficients_of_variation(std: np.ndarray, mean: np.ndarray, n: np.ndarray) -> np.ndarray:
    """coefficient_of_variation for many groups at once from their moments (std with ddof=1, mean,
    count): a fraction per group, NaN where the scalar form gives None."""
    std, mean, n = (np.asarray(a, dtype=float) for a in (std, mean, n))
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where((n >= 2) & (mean != 0), std / mean, np.nan)


def minimum_detectable_effect(se, dof, confidence: float = CONFIDENCE, power: float = POWER):
    """The smallest relative effect a two-sided t test on log values (standard error ``se`` of the
    difference of the mean logs, ``dof`` degrees of freedom, level 1 - ``confidence``) detects with
    probability ``power``: exp(nc * se) - 1, where nc is the noncentrality at which a noncentral t with
    ``dof`` degrees of freedom exceeds the critical value with probability ``power`` (the far tail,
    below -t, adds under 0.1 point at 80% and is left out). A fraction (0.021 for 2.1%), the same
    either way on the log scale: a ratio of 1.021 for a lower-is-better metric, 1/1.021 for a
    higher-is-better one. Arrays in, arrays out; NaN where se or dof is not finite or dof < 1."""
    from scipy import special

    se, dof = np.broadcast_arrays(np.asarray(se, dtype=float), np.asarray(dof, dtype=float))
    usable = np.isfinite(se) & np.isfinite(dof) & (dof >= 1) & (se >= 0)
    out = np.full(se.shape, np.nan)
    # the noncentrality is a root found per element: only where there is one to find
    with np.errstate(invalid="ignore", over="ignore"):
        critical = special.stdtrit(dof[usable], 0.5 + confidence / 2)
        noncentrality = special.nctdtrinc(dof[usable], 1 - power, critical)
        out[usable] = np.expm1(noncentrality * se[usable])
    return out if out.ndim else float(out)


def reported_mde(se, dof, smaller_side):
    """The minimum detectable effect a comparison row reports: minimum_detectable_effect at degrees
    of freedom halfway between the test's (``dof``) and their lower bound, one side's alone
    (``smaller_side`` - 1: the fewer executions, or machines, of the two sides). Why: the row knows
    only its estimated spread, whose median lies below the true one at few degrees of freedom, and
    Welch's degrees of freedom are themselves estimated; with the test's own the reported MDE is
    detected in 72% (n = 3) to 79% (n = 20) of trials instead of 80%. Halfway was chosen by
    simulation (benchmarks/sim_mde.py; docs/analysis.md, "Minimum detectable effect")."""
    dof = np.asarray(dof, dtype=float)
    lower = np.maximum(np.asarray(smaller_side, dtype=float) - 1, 0)
    return minimum_detectable_effect(se, np.maximum((dof + lower) / 2, 1.0))


def detection_power(effect, se, dof, confidence: float = CONFIDENCE):
    """The chance that the two-sided t test above finds a relative ``effect`` (a fraction) significant
    in the direction of the effect: the inverse of minimum_detectable_effect, for the simulations."""
    from scipy import special

    effect, se, dof = (np.asarray(a, dtype=float) for a in (effect, se, dof))
    critical = special.stdtrit(dof, 0.5 + confidence / 2)
    return 1 - special.nctdtr(dof, np.log1p(effect) / se, critical)


def skew_flags(flags: list[str], significant: bool, baseline_median: float, median: float, ratio: float) -> list[str]:
    """``flags`` with SKEWED where a significant row's medians move one way and its ratio (of
    geometric means, or a settled case's paired ratios) the other: a few executions carry the cost
    the row reports, which its medians do not show."""
    kept = [flag for flag in flags if flag != SKEWED]
    with np.errstate(invalid="ignore"):
        against = np.sign(median - baseline_median) * np.sign(ratio - 1) < 0
    return [*kept, SKEWED] if significant and against else kept
