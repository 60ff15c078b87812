"""The settle rule's interval (ccbench.analysis.statistics.sequential): its closed form, its coverage under
looking after every round, the answers it gives, and the pairing of a bundle's samples."""

import math

import numpy as np
import pytest
from scipy import stats

from ccbench.analysis.statistics.sequential import (
    ALPHA,
    COST,
    GAIN,
    MIXTURE,
    NO_COST_ABOVE,
    interval,
    paired_log_costs,
    settle,
)
from ccbench.model import Sample


def bayes_factor(values: np.ndarray, m: float, c: float = MIXTURE) -> float:
    """Lai's mixture Bayes factor of 'mean != m', computed directly."""
    y = values - m
    n, s1, s2 = len(y), y.sum(), (y**2).sum()
    return math.sqrt(c / (n + c)) * (s2 / (s2 - s1**2 / (n + c))) ** (n / 2)


def test_the_interval_ends_where_the_bayes_factor_reaches_one_over_alpha():
    rng = np.random.default_rng(1)
    for n in (5, 8, 20, 100):
        values = rng.normal(0.03, 0.02, n)
        low, high = interval(n, values.sum(), (values**2).sum())
        assert bayes_factor(values, float(low)) == pytest.approx(1 / ALPHA, rel=1e-6)
        assert bayes_factor(values, float(high)) == pytest.approx(1 / ALPHA, rel=1e-6)
        assert bayes_factor(values, float(values.mean())) < 1 / ALPHA


def test_too_few_rounds_give_no_finite_interval():
    low, high = interval(2, 0.1, 0.02)
    assert math.isinf(low) and math.isinf(high)
    early = settle([0.5, 0.5001], 0.05)
    assert early.state is None and early.low is None and early.high is None
    assert "too few rounds for a finite interval: 2" in early.describe()
    assert settle([0.5, 0.5001, 0.4999], 0.05).state == COST  # finite, and a clear cost, from 3


def running(rng, trials: int, rounds: int, sd: float):
    diffs = rng.normal(0.0, sd, (trials, rounds))
    n = np.arange(1, rounds + 1)
    return diffs, n


def test_looking_after_every_round_keeps_the_error_under_alpha_where_a_t_interval_does_not():
    rng = np.random.default_rng(7)
    diffs, n = running(rng, 4000, 60, 0.03)
    low, high = interval(n, diffs.cumsum(axis=1), (diffs**2).cumsum(axis=1))
    ever_missed = ((low > 0) | (high < 0))[:, 2:].any(axis=1).mean()
    assert ever_missed <= ALPHA
    # the fixed-sample t interval, looked at as often, is wrong far more than 5% of the time
    mean = diffs.cumsum(axis=1) / n
    sd = np.sqrt(np.maximum((diffs**2).cumsum(axis=1) - n * mean**2, 0) / np.maximum(n - 1, 1))
    half = stats.t.ppf(0.975, np.maximum(n - 1, 1)) * sd / np.sqrt(n)
    naive = (np.abs(mean) > half)[:, 2:].any(axis=1).mean()
    assert naive > 3 * ALPHA


def test_a_large_cost_settles_with_its_size_and_a_null_one_as_no_cost_above_the_target():
    rng = np.random.default_rng(3)
    big = settle(np.log(3.0) + rng.normal(0, 0.01, 4), 0.05)
    assert big.state == COST and big.rounds == 4
    assert big.estimate == pytest.approx(2.0, abs=0.05) and big.low > 1.0
    assert big.describe().startswith(f"a cost: {1 + big.estimate:.1f}x slower [")  # the project's one convention
    null = settle(rng.normal(0, 0.01, 40), 0.05)
    assert null.state == NO_COST_ABOVE and null.high < 0.05 and null.low < 0
    assert "no cost above 5.0%" in null.describe()
    gain = settle(np.log(0.5) + rng.normal(0, 0.01, 5), 0.05)
    assert gain.state == GAIN and gain.describe().startswith(f"a gain: {1 / (1 + gain.estimate):.2f}x faster [")
    unsure = settle(rng.normal(0.05, 0.05, 6), 0.05)
    assert unsure.state is None and unsure.low < 0 < unsure.high


def test_settle_refuses_a_target_outside_zero_to_one():
    with pytest.raises(ValueError, match="settle target"):
        settle([0.1, 0.2, 0.3], 1.5)


def sample(variant: str, repetition: int, value: float, better: str = "lower", metric: str = "t") -> Sample:
    return Sample(
        workload="w",
        kind="command",
        params={},
        variant={"storage": variant},
        metric=metric,
        unit="s",
        value=value,
        better=better,
        repetition=repetition,
        warmup=False,
        timestamp="2026-01-01T00:00:00Z",
        execution=f"w|storage={variant}|rep|{repetition}",
    )


def test_paired_costs_pair_by_repetition_and_follow_the_metrics_direction():
    samples = [
        sample("disk", 0, 1.0),
        sample("tmpfs", 0, 2.0),
        sample("tmpfs", 1, 4.0),  # its baseline failed: no pair
        sample("disk", 2, 2.0),
        sample("tmpfs", 2, 1.0),
    ]
    costs = paired_log_costs(samples, "storage=disk", ["storage=disk", "storage=tmpfs"])
    assert costs == {"storage=tmpfs": {"t": pytest.approx([math.log(2.0), math.log(0.5)])}}
    higher = [sample(v, 0, x, better="higher") for v, x in (("disk", 100.0), ("tmpfs", 50.0))]
    costs = paired_log_costs(higher, "storage=disk", ["storage=disk", "storage=tmpfs"])
    assert costs["storage=tmpfs"]["t"] == pytest.approx([math.log(2.0)])  # half the throughput: twice the time


def test_every_case_of_the_declared_primary_metrics_is_a_case_of_its_own():
    samples = []
    for rep in range(3):
        for variant, slow in (("disk", 1.0), ("tmpfs", 3.0)):
            for bs, base in (("4k", 10.0), ("1m", 200.0)):
                s = sample(variant, rep, base / (slow if bs == "4k" else 1.0), better="higher", metric="throughput")
                samples.append(s.model_copy(update={"params": {"bs": bs}, "metadata": {"case": {"bs": bs}}}))
            samples.append(sample(variant, rep, 0.5, metric="latency"))  # not declared: not a case
    costs = paired_log_costs(samples, "storage=disk", ["storage=disk", "storage=tmpfs"], ("throughput",))
    assert set(costs["storage=tmpfs"]) == {"throughput bs=4k", "throughput bs=1m"}
    assert costs["storage=tmpfs"]["throughput bs=4k"] == pytest.approx([math.log(3.0)] * 3)
    assert costs["storage=tmpfs"]["throughput bs=1m"] == pytest.approx([0.0] * 3)


def test_a_workload_whose_result_is_measured_on_one_side_is_judged_on_what_its_verdict_is_made_of():
    # transport: its primary metric (the embedding's time) is measured on plain only, so it is never
    # paired; its verdict is made of the round trip at 1536 B and the handshake (its message costs)
    from ccbench.analysis.statistics.sequential import declares, judged
    from ccbench.workloads import declaration, workload_class

    declared = judged(declaration(workload_class("transport")))
    assert declared[0] == "embedding_time" and ("rtt_p50", {"payload": 1536}) in declared
    samples = []
    for rep in range(3):
        samples.append(sample("disk", rep, 0.009, metric="embedding_time"))
        for variant, slow in (("disk", 1.0), ("tmpfs", 2.0)):
            for payload in (1536, 4096):
                for pipe in ("duplex", "tcp"):
                    params = {"payload": payload, "pipe": pipe}
                    s = sample(variant, rep, 1e-6 * slow * payload / 1536, metric="rtt_p50")
                    samples.append(s.model_copy(update={"params": params, "metadata": {"case": params}}))
        handshake = sample("tmpfs", rep, 2e-4, metric="handshake_p50")  # plaintext has no handshake
        samples.append(handshake.model_copy(update={"params": {"pipe": "tcp"}}))
    costs = paired_log_costs(samples, "storage=disk", ["storage=disk", "storage=tmpfs"], declared)
    assert set(costs["storage=tmpfs"]) == {"rtt_p50 payload=1536 pipe=duplex", "rtt_p50 payload=1536 pipe=tcp"}
    assert costs["storage=tmpfs"]["rtt_p50 payload=1536 pipe=tcp"] == pytest.approx([math.log(2.0)] * 3)
    assert declares(declared, "rtt_p50", {"payload": 1536, "pipe": "tcp"})
    assert not declares(declared, "rtt_p50", {"payload": 4096, "pipe": "tcp"})
    assert judged(None) == () and judged({"primary_metrics": ["t"]}) == ("t",)
