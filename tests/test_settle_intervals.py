"""The repeated interval built for a known round limit (ccbench.analysis.statistics.repeated), its use by settle,
the false discovery rate across a layer (ccbench.analysis.statistics.discovery) and what a settled figure says
of its estimate. Fewer cases than benchmarks/sim_sequential.py --noise, which measures the same."""

import math

import numpy as np
import pytest

from ccbench.analysis.statistics.discovery import e_bh, e_values
from ccbench.analysis.statistics.repeated import boundaries, repeated_interval
from ccbench.analysis.statistics.sequential import ALPHA, COST, GAIN, LEANS, interval, p_value, settle

LIMIT = 10


def ever_excludes_zero(lows, highs) -> float:
    return float(((lows > 0) | (highs < 0))[:, 2:].any(axis=1).mean())


def test_the_repeated_interval_holds_its_error_at_every_look_to_the_limit_and_is_narrower_than_the_anytime_one():
    rng = np.random.default_rng(11)
    values = rng.normal(0.0, 0.04, (20_000, LIMIT))
    lows, highs = repeated_interval(values, LIMIT)
    assert ever_excludes_zero(lows, highs) <= ALPHA + 0.004  # calibrated to 5% (simulation error about 0.15%)
    n = np.arange(1, LIMIT + 1)
    any_lows, any_highs = interval(n, values.cumsum(axis=1), (values**2).cumsum(axis=1))
    narrower = (highs - lows)[:, 2:] / (any_highs - any_lows)[:, 2:]
    assert (narrower < 0.85).all()  # at every look 3..10, for every case (0.68 at 3, 0.75 at 10)
    assert ever_excludes_zero(any_lows, any_highs) < ever_excludes_zero(lows, highs)  # the anytime one is conservative
    # before the first look and after the limit no boundary was spent: no finite interval
    longer = repeated_interval(rng.normal(0, 0.04, (3, LIMIT + 2)), LIMIT)
    assert not np.isfinite(longer[1][:, :2]).any() and not np.isfinite(longer[1][:, LIMIT:]).any()


def test_with_the_order_drawn_within_rounds_skewed_and_autocorrelated_noise_keep_the_error_under_alpha():
    rng = np.random.default_rng(5)
    trials, k = 8_000, 1.0
    skewed = (np.exp(k * rng.standard_normal((trials, 2 * LIMIT))) - math.exp(k * k / 2)) / 2.16
    ar = np.empty((trials, 2 * LIMIT))
    ar[:, 0] = rng.standard_normal(trials)
    for i in range(1, 2 * LIMIT):
        ar[:, i] = 0.5 * ar[:, i - 1] + math.sqrt(0.75) * rng.standard_normal(trials)
    for runs in (skewed, ar):  # each execution's noise in run order; each round's order a coin
        signs = rng.choice([-1.0, 1.0], (trials, LIMIT))
        paired = signs * (runs[:, 1::2] - runs[:, 0::2])
        assert ever_excludes_zero(*repeated_interval(paired, LIMIT)) <= ALPHA


def test_the_lag1_correction_widens_autocorrelated_values():
    rng = np.random.default_rng(2)
    drift = np.cumsum(rng.normal(0, 0.01, (200, LIMIT)), axis=1)  # a drift the pairing did not cancel
    plain = repeated_interval(drift, LIMIT)
    corrected = repeated_interval(drift, LIMIT, autocorrelation=True)
    widths = (corrected[1] - corrected[0])[:, -1] / (plain[1] - plain[0])[:, -1]
    assert np.median(widths) > 1.5 and (widths >= 1 - 1e-12).all()


def test_boundaries_are_pocock_shaped_and_refuse_a_limit_below_the_first_look():
    bounds = boundaries(LIMIT)
    assert len(bounds) == LIMIT - 2 and bounds[0] > bounds[-1] > 2.0  # one z level, t quantiles at fewer dof
    with pytest.raises(ValueError, match="round limit of 2"):
        boundaries(2)


def test_settle_with_the_limit_uses_the_repeated_interval_and_keeps_the_spread_floor():
    values = [0.04, 0.06, 0.05, 0.03, 0.07, 0.05]
    anytime, limited = settle(values, 0.05), settle(values, 0.05, limit=LIMIT)
    assert limited.high - limited.low < 0.8 * (anytime.high - anytime.low)
    assert limited.estimate == pytest.approx(anytime.estimate)
    ties = settle([math.log(1.06)] * 3, 0.05, limit=LIMIT)  # three identical values: no zero-width certainty
    assert ties.high > ties.low
    assert settle(values * 2, 0.05, limit=LIMIT).high == pytest.approx(settle(values * 2, 0.05).high)  # past it


def test_a_settled_cost_or_gain_says_its_estimate_leans_away_from_zero():
    rng = np.random.default_rng(3)
    cost = settle(np.log(3.0) + rng.normal(0, 0.01, 4), 0.05)
    gain = settle(np.log(0.5) + rng.normal(0, 0.01, 4), 0.05)
    assert (cost.state, gain.state) == (COST, GAIN)
    assert cost.describe().endswith(f"] ({LEANS})") and gain.describe().endswith(f"] ({LEANS})")
    assert LEANS not in settle(rng.normal(0, 0.01, 40), 0.05).describe()  # no cost above: no such lean


def layer_e_values(rng, layers: int, cases: int, cost: float = 0.0, run_on: bool = False) -> np.ndarray:
    """Each case of each layer run as settle runs it: stopped at its first settled round, at most 10
    (or, ``run_on``, all 10); its e-value (1 / its anytime-valid p value) at the round it stopped."""
    values = rng.normal(cost, 0.04, (layers * cases, LIMIT))
    n = np.arange(1, LIMIT + 1)
    lows, highs = interval(n, values.cumsum(axis=1), (values**2).cumsum(axis=1))
    settled = ((lows > 0) | (highs < math.log1p(0.05)))[:, 2:]
    stop = np.where(settled.any(axis=1) & (not run_on), settled.argmax(axis=1) + 3, LIMIT)
    return e_values([p_value(row[:at]) for row, at in zip(values, stop)]).reshape(layers, cases)


def test_e_bh_holds_a_layer_of_forty_no_cost_cases_to_about_five_percent_where_case_by_case_does_not():
    rng = np.random.default_rng(40)
    e = layer_e_values(rng, 300, 40)
    per_case = (e >= 1 / ALPHA).any(axis=1).mean()  # each case's own test: some case called in many layers
    controlled = np.mean([e_bh(layer).any() for layer in e])
    assert per_case > 0.25
    assert controlled <= 0.05


def test_e_bh_calls_the_cases_with_a_cost_among_many_without_once_they_run_past_three_rounds():
    rng = np.random.default_rng(8)
    nulls = layer_e_values(rng, 1, 35)[0]
    stopped = layer_e_values(rng, 1, 5, cost=math.log(2.0))[0]
    # at 3 rounds the Bayes factor is at most ((3 + c) / c) = 31 (c = 0.1): a case settled there cannot
    # reach the 40 / (5 x 0.05) = 160 that five calls among 40 cases need
    assert (stopped >= 1 / ALPHA).all() and stopped.max() <= 31.0 + 1e-9 and not e_bh([*nulls, *stopped]).any()
    ran_on = layer_e_values(rng, 1, 5, cost=math.log(2.0), run_on=True)[0]
    assert e_bh([*nulls, *ran_on]).tolist() == [False] * 35 + [True] * 5


def test_e_bh_follows_its_definition():
    # K = 4: the 2 largest are called when the 2nd largest is at least 4 / (2 alpha) = 40
    assert e_bh([100.0, 1.0, 41.0, 2.0]).tolist() == [True, False, True, False]
    assert e_bh([100.0, 1.0, 39.0, 2.0]).tolist() == [True, False, False, False]  # 100 >= 4 / 0.05 = 80
    assert e_bh([39.0, float("nan")]).tolist() == [False, False] and e_bh([]).size == 0
    assert np.isnan(e_values([math.nan]))[0] and e_values([0.5, 0.0]).tolist() == [2.0, math.inf]
    with pytest.raises(ValueError, match="false discovery rate"):
        e_bh([1.0], alpha=0)


def test_futility_under_the_round_limit_reads_the_interval_settle_would_use():
    from ccbench.analysis.statistics.repeated import critical
    from ccbench.analysis.statistics.sequential import can_settle, reachable

    assert np.isinf(critical([2, LIMIT + 1], LIMIT)).all() and critical(3, LIMIT) == pytest.approx(boundaries(LIMIT)[0])
    # mean 3%, spread 5%, 5 rounds of 10: the repeated interval at 10 rounds (with the spread's futility quantile)
    # could answer, the anytime-valid one could not; at 6% neither
    assert reachable(5, 0.03, 0.05, 0.05, 5, LIMIT) and not reachable(5, 0.03, 0.05, 0.05, 5)
    assert not reachable(5, 0.03, 0.06, 0.05, 5, LIMIT)
    # a stricter quantile (a smaller spread assumed) keeps more cases: what --futility tunes
    assert reachable(5, 0.03, 0.04, 0.05, 5, quantile=0.1) and not reachable(5, 0.03, 0.04, 0.05, 5, quantile=0.3)
    values = [0.03 + 0.05 * z for z in (-1.26, 1.26, -0.63, 0.63, 0.0)]
    assert can_settle(values, 0.05, 5, limit=LIMIT) and not can_settle(values, 0.05, 5)
