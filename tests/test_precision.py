"""The --precision stopping rule: behaviour, and its statistics validated by simulation.

The simulations feed the rule's own ``decide`` round by round, as the runner does, and judge the
comparison where it stopped with ``ratio_interval`` (what compare reports).
"""

import numpy as np
import pytest

from ccbench.analysis.statistics.precision import (
    EARLIEST_STOP,
    PrecisionRule,
    decide,
    half_widths,
)
from ccbench.analysis.statistics.stats import ratio_interval
from ccbench.planning.plan import parse_duration, parse_precision

TARGET = 0.02
MAX_N = 30


def _run_rule(a, b, rule):
    """Feed rounds until the rule stops; return the number of executions per variant and the decision."""
    decision = None
    for n in range(1, MAX_N + 1):
        decision = decide({"A": a[:n], "B": b[:n]}, rule, previous=decision)
        if not decision.more:
            return n, decision
    return MAX_N, decision


def _simulate(cv, trials, seed, rules, skewed=False):
    """A/A pairs (no true difference): per rule, the share of significant comparisons at the stop, the
    mean executions per variant, and the share that stopped because the target was reached."""
    rng = np.random.default_rng(seed)
    results = {name: [0, 0, 0] for name in rules}
    for _ in range(trials):
        if skewed:  # run times with a slow tail: a shifted gamma, not log-normal
            a, b = (10 + rng.gamma(2.0, cv * 10 / np.sqrt(2), MAX_N) for _ in range(2))
        else:
            a, b = (10 * np.exp(rng.normal(0, cv, MAX_N)) for _ in range(2))
        for name, rule in rules.items():
            n, decision = _run_rule(a, b, rule)
            results[name][0] += ratio_interval(a[:n], b[:n]).significant
            results[name][1] += n
            results[name][2] += decision.stopped_by == "precision reached"
    return {name: (fp / trials, total / trials, reached / trials) for name, (fp, total, reached) in results.items()}


RULE = PrecisionRule(TARGET, min_repetitions=3, max_repetitions=MAX_N)
# the plain sequential rule: stop at the first narrow interval, from 3 executions on
NAIVE = PrecisionRule(TARGET, min_repetitions=3, max_repetitions=MAX_N, consecutive=1)


def test_aa_false_positive_rate_stays_near_5_percent_where_the_naive_rule_inflates_it():
    # the worst case: noise (cv) equal to the target, where stopping on a lucky low variance is most likely
    # (20,000-pair runs: this rule 5.85%, the naive one 7.2%, fixed counts 4.4-4.9%)
    results = _simulate(cv=TARGET, trials=1500, seed=5, rules={"rule": RULE, "naive": NAIVE})
    rule_rate, naive_rate = results["rule"][0], results["naive"][0]
    assert rule_rate <= 0.065, results  # nominal 5%; simulation SE ~0.6% at 1500 pairs
    assert naive_rate > rule_rate, results  # the correction is what keeps it down
    assert results["rule"][2] >= 0.95  # and the target is still reached (max 30 executions)


def test_aa_false_positive_rate_with_skewed_noise_and_low_noise():
    results = _simulate(cv=0.015, trials=800, seed=9, rules={"rule": RULE}, skewed=True)
    assert results["rule"][0] <= 0.065, results
    low = _simulate(cv=0.005, trials=800, seed=2, rules={"rule": RULE})
    assert low["rule"][0] <= 0.065, low


def test_low_noise_reaches_the_target_with_fewer_executions_than_a_fixed_count():
    # the fixed count a user would need, without knowing the noise, to reach +-2% in 95% of runs at a
    # realistic 2% cv; the rule adapts: low-noise workloads stop after EARLIEST_STOP executions
    rng = np.random.default_rng(4)

    def reaches(n, cv, trials=400):
        hits = 0
        for _ in range(trials):
            a, b = (10 * np.exp(rng.normal(0, cv, n)) for _ in range(2))
            hits += half_widths({"A": a, "B": b})["B"] <= TARGET
        return hits / trials

    fixed = next(n for n in range(3, MAX_N + 1) if reaches(n, 0.02) >= 0.95)
    assert fixed >= 10  # for scale: a fixed count for 2% noise is large
    for cv in (0.005, 0.01):
        _, mean_n, reached = _simulate(cv=cv, trials=300, seed=11, rules={"rule": RULE})["rule"]
        assert reached >= 0.99
        assert mean_n < fixed / 1.5, (cv, mean_n, fixed)
    # at 2% noise it still needs no more than the fixed count, on average
    assert _simulate(cv=0.02, trials=300, seed=12, rules={"rule": RULE})["rule"][1] <= fixed


def test_decide_explains_each_outcome():
    rule = PrecisionRule(0.02, min_repetitions=3, max_repetitions=8, max_time_s=100)
    tight = {"disk": [10.0, 10.01, 9.99, 10.0, 10.02], "fscrypt": [20.0, 20.02, 19.98, 20.01, 20.0]}
    first = decide({k: v[:2] for k, v in tight.items()}, rule)
    assert first.more and "minimum 3" in first.reason
    assert decide({k: v[:3] for k, v in tight.items()}, rule).more  # the target held at one check only
    done = decide(tight, rule)
    assert not done.more and done.stopped_by == "precision reached" and done.repetitions == EARLIEST_STOP
    assert set(done.half_widths) == {"fscrypt"} and done.half_widths["fscrypt"] < 0.02
    noisy = {"disk": [10, 13, 8, 12, 9, 11, 10, 14], "fscrypt": [20, 25, 17, 22, 19, 26, 18, 21]}
    stop = decide(noisy, rule)
    assert not stop.more and stop.stopped_by == "max repetitions" and "8 repetitions" in stop.reason
    going = decide({k: v[:5] for k, v in noisy.items()}, rule, elapsed_s=60, round_s=30)
    assert going.more and going.stopped_by is None
    timed = decide({k: v[:5] for k, v in noisy.items()}, rule, elapsed_s=80, round_s=30)
    assert not timed.more and timed.stopped_by == "max time" and "another round would pass" in timed.reason
    zero = decide({"a": [0.0, 1, 1], "b": [1, 1, 1]}, rule)
    assert not zero.more and zero.stopped_by == "not computable"
    assert done.as_dict()["stopped_by"] == "precision reached"


def test_previous_decision_gives_the_same_answer_as_recomputing():
    rng = np.random.default_rng(1)
    a, b = 10 * np.exp(rng.normal(0, 0.012, MAX_N)), 10 * np.exp(rng.normal(0, 0.012, MAX_N))
    decision = None
    for n in range(1, MAX_N + 1):
        decision = decide({"A": a[:n], "B": b[:n]}, RULE, previous=decision)
        fresh = decide({"A": a[:n], "B": b[:n]}, RULE)
        assert (decision.more, decision.streak) == (fresh.more, fresh.streak), n
        if not decision.more:
            break


def test_one_variant_uses_its_own_interval_and_a_named_baseline():
    alone = half_widths({"only": [10.0, 10.1, 9.9, 10.0]})
    assert set(alone) == {"only"} and 0 < alone["only"] < 0.02
    widths = half_widths({"a": [1.0, 1.1, 0.9], "b": [2.0, 2.2, 1.8], "c": [3, 3.1, 2.9]}, baseline="b")
    assert set(widths) == {"a", "c"}
    with pytest.raises(ValueError, match="baseline 'x'"):
        half_widths({"a": [1.0, 2.0]}, baseline="x")


@pytest.mark.parametrize("text, value", [("2%", 0.02), ("0.5%", 0.005), ("0.02", 0.02), ("2", 0.02), (5, 0.05)])
def test_parse_precision(text, value):
    assert parse_precision(text) == pytest.approx(value)


@pytest.mark.parametrize("text", ["", "abc", "0%", "100%", "-2%"])
def test_parse_precision_rejects(text):
    with pytest.raises(ValueError, match="precision"):
        parse_precision(text)


def test_parse_duration_and_rule_validation():
    assert parse_duration("90s") == 90 and parse_duration("30m") == 1800 and parse_duration("1h30m") == 5400
    assert parse_duration(12) == 12 and parse_duration("45") == 45
    for bad in ("soon", "0", "10x"):
        with pytest.raises(ValueError, match="duration"):
            parse_duration(bad)
    with pytest.raises(ValueError, match="max_repetitions"):
        PrecisionRule(0.02, min_repetitions=10, max_repetitions=5)
    with pytest.raises(ValueError, match="precision"):
        PrecisionRule(1.5)


# ---- --detect: rounds until a cost of the target size would be seen --------------------------------


def test_detect_repeats_until_the_mde_is_below_the_target_or_says_what_it_reached():
    from ccbench.analysis.statistics.precision import detectable_effects

    rng = np.random.default_rng(12)
    rule = PrecisionRule(0.02, min_repetitions=3, max_repetitions=40, detect=True)
    quiet = {"a": [], "b": []}
    decision = None
    while decision is None or decision.more:
        for values in quiet.values():
            values.append(float(np.exp(rng.normal(0, 0.01))))
        decision = decide(quiet, rule, previous=decision)
    assert decision.stopped_by == "precision reached" and "every MDE within an MDE of 2.00%" in decision.reason
    assert detectable_effects(quiet)["b"] <= 0.02 == rule.target
    # with 1% noise an MDE of 2% needs more rounds than a +-2% interval does
    assert decision.repetitions > 5
    # 10% noise cannot reach 2% in 8 rounds: it stops there and says what it reached
    loud = {name: list(np.exp(rng.normal(0, 0.10, 8))) for name in ("a", "b")}
    stopped = decide(loud, PrecisionRule(0.02, min_repetitions=3, max_repetitions=8, detect=True))
    assert stopped.stopped_by == "max repetitions"
    assert "before an MDE of 2.00% (b MDE " in stopped.reason and stopped.half_widths["b"] > 0.05


def test_run_with_detect_reaches_it_or_says_what_it_reached(tmp_path, ccbench, workdir, write_plan):
    plan = write_plan('[[workloads]]\nkind = "prime"\nn = 2000\nrepetitions = 3\nmax_repetitions = 8\n')
    done = ccbench("run", plan, "--detect", "2%", "--out", tmp_path / "out", "--workdir", workdir)
    assert done.returncode == 0, done.stderr
    from conftest import only_bundle

    from ccbench.bundle import read_bundle

    outcome = read_bundle(only_bundle(tmp_path / "out"), samples=False).manifest["outcomes"]["prime"]["precision"]
    assert outcome["measure"] == "mde" and outcome["target"] == 0.02
    assert outcome["stopped_by"] in ("precision reached", "max repetitions")
    assert "(target an MDE of 2.0%)" in done.stdout and "MDE" in outcome["reason"]
    bad = ccbench("run", plan, "--detect", "lots", "--out", tmp_path / "out", "--workdir", workdir)
    assert bad.returncode == 2 and "--detect lots" in bad.stderr
