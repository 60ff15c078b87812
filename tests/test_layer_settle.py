"""Settling a layer's headline (ccbench.analysis.settling.layer_settle) on made data: the per-round mean of a
layer's cases, its repeated interval, e-BH over its cases and the costliest case named. The fuller
simulation is benchmarks/sim_layers.py; the runner's plumbing is in tests/test_settle.py."""

import math

import numpy as np
import pytest

from ccbench.analysis.settling.layer_settle import DISAGREE, headline_values, layer_title, settle_layer
from ccbench.analysis.statistics.sequential import PairedCosts

LIMIT, CASES, TARGET, SD = 10, 8, 0.05, 0.04


def aa_layers(model: str, rng: np.random.Generator, layers: int) -> np.ndarray:
    """No-cost paired values (layers, cases, rounds) as the runner makes them: two executions a round
    whose order is drawn once for the layer's cases, half their noise shared across the cases."""

    def noise(shape):
        if model == "skewed":  # centred log-normal, shape 1
            return (np.exp(rng.standard_normal(shape)) - math.exp(0.5)) / math.sqrt((math.e - 1) * math.e)
        if model == "AR(1) 0.5":
            out = rng.standard_normal(shape)
            for i in range(1, shape[-1]):
                out[..., i] = 0.5 * out[..., i - 1] + math.sqrt(0.75) * out[..., i]
            return out
        return rng.standard_normal(shape)

    runs = (noise((layers, 1, 2 * LIMIT)) + noise((layers, CASES, 2 * LIMIT))) / 2 * SD
    if model == "tied":  # reported in steps of 5% of the value: many paired values exactly 0
        runs = np.log(np.maximum(np.round(np.exp(runs) / 0.05), 1) * 0.05)
    signs = rng.choice([-1.0, 1.0], (layers, 1, LIMIT))
    return signs * (runs[:, :, 1::2] - runs[:, :, 0::2])


def run_layer(values: np.ndarray, floor: float):
    """The layer looked at after each round from 3 on, stopped at its first answer (or the limit)."""
    for at in range(3, LIMIT + 1):
        layer = settle_layer({f"c{i}": PairedCosts(row[:at], floor) for i, row in enumerate(values)}, TARGET, LIMIT)
        if layer.settled:
            break
    return layer


@pytest.mark.parametrize("model", ["normal", "skewed", "AR(1) 0.5", "tied"])
def test_a_layer_of_no_cost_is_claimed_a_cost_or_gain_at_most_5_percent_of_the_time(model):
    rng = np.random.default_rng(55)
    floor = math.sqrt(2 * 0.05**2 / 12) if model == "tied" else 1e-4
    layers = [run_layer(values, floor) for values in aa_layers(model, rng, 250)]
    wrong = np.mean([layer.state is not None and layer.state != "no cost above" for layer in layers])
    called = np.mean([bool(layer.called) for layer in layers])
    # 250 layers: the 5% with room for the draw (a binomial's two standard errors: 2.8 points)
    assert wrong <= 0.078 and called <= 0.078, (wrong, called)
    # and the claim it replaces could fail: some case's own interval excluding 0 at the layer's stop
    alone = np.mean(
        [any(c.low is not None and (c.low > 0 or c.high < 0) for c in layer.cases.values()) for layer in layers]
    )
    if model == "normal":
        assert alone > 0.078


def test_the_headline_is_the_per_round_mean_of_the_cases_and_the_costliest_case_is_named():
    rng = np.random.default_rng(1)
    cheap = PairedCosts(np.log(1.02) + rng.normal(0, 0.01, 6), rounds=range(6))
    dear = PairedCosts(np.log(1.5) + rng.normal(0, 0.01, 6), rounds=range(6))
    missing = PairedCosts(
        [v for r, v in enumerate(np.log(1.02) + rng.normal(0, 0.01, 6)) if r != 2], rounds=[0, 1, 3, 4, 5]
    )
    series = headline_values({"a": cheap, "b": dear, "c": missing})
    assert series.rounds == [0, 1, 3, 4, 5]  # a round a case lacks is left out of the headline
    assert series[0] == pytest.approx((cheap[0] + dear[0] + missing[0]) / 3)
    layer = settle_layer({"a": cheap, "b": dear}, TARGET, LIMIT)
    assert layer.state == "cost" and layer.costliest == "b"
    assert layer.headline.estimate == pytest.approx(math.expm1(np.mean([*cheap, *dear])))
    assert "costliest: b" in layer.describe() and "mean of 2 cases" in layer.describe()


def test_called_cases_that_go_both_ways_make_the_layer_a_range_not_a_mean():
    rng = np.random.default_rng(2)
    cases = {
        "4k randread": PairedCosts(np.log(3.0) + rng.normal(0, 0.01, 5)),
        "4k randwrite": PairedCosts(np.log(1 / 2.5) + rng.normal(0, 0.01, 5)),
    }
    layer = settle_layer(cases, TARGET, LIMIT)
    assert set(layer.called) == set(cases) and layer.state == DISAGREE
    assert layer.describe().startswith(f"{DISAGREE}: 4k randwrite 2.5x faster to 4k randread 3.0x slower")


def test_an_open_layer_says_so_far_and_a_layer_title_is_the_verdicts():
    layer = settle_layer({"a": PairedCosts([0.05, -0.08, 0.1])}, TARGET, LIMIT)
    assert layer.state is None and layer.describe().startswith("open, so far ")
    assert layer_title({"storage": "encrypted", "storage_mechanism": "fscrypt"}, {"storage": "ext4-loop"},
                       "storage=encrypted", "storage=ext4-loop") == "storage encryption: fscrypt"  # fmt: skip
    assert layer_title({"transport": "tls"}, {"transport": "plain"}, "transport=tls", "transport=plain") == "TLS"
    assert layer_title({}, {}, "storage=tmpfs,tee=x", "storage=disk,tee=y") == "storage=tmpfs,tee=x"


def test_a_variant_against_the_same_pair_in_two_workloads_is_one_layer():
    from ccbench.analysis.settling.layer_settle import across

    rng = np.random.default_rng(3)
    values = {label: PairedCosts(np.log(1.5) + rng.normal(0, 0.01, 4)) for label in ("4k", "1m", "lz4")}
    costs = {
        "fio": {"storage=encrypted": {"4k": values["4k"], "1m": values["1m"]}, "storage=tmpfs": {"4k": values["4k"]}},
        "compression": {"storage=encrypted": {"lz4": values["lz4"]}},
    }
    pairs = {
        "fio": {"storage=encrypted": "storage=ext4-loop", "storage=tmpfs": "storage=disk"},
        "compression": {"storage=encrypted": "storage=ext4-loop"},
    }
    layers = across(costs, pairs)
    assert set(layers) == {("storage=encrypted", "storage=ext4-loop"), ("storage=tmpfs", "storage=disk")}
    workloads, cases, dropped = layers[("storage=encrypted", "storage=ext4-loop")]
    assert workloads == ["fio", "compression"] and list(cases) == ["fio: 4k", "fio: 1m", "compression: lz4"]
    assert dropped == {}  # nothing left out as implausible (tests/test_layer_settle_plausible.py)
    assert layers[("storage=tmpfs", "storage=disk")] == (["fio"], {"4k": values["4k"]}, {})  # one workload: bare names
    # against another pair it is another layer (a cipher on a loop file against its twin, not the disk)
    pairs["compression"]["storage=encrypted"] = "storage=disk"
    assert len(across(costs, pairs)) == 3
    layer = settle_layer(cases, TARGET, LIMIT, workloads=workloads)
    assert layer.headline.estimate == pytest.approx(0.5, rel=0.02) and "in 2 workloads" in layer.describe()
    assert {layer.claim("fio", "4k"), layer.claim("compression", "lz4")} <= {"called", "so far"}
    assert layer.claim("fio", "4k") == ("called" if "fio: 4k" in layer.called else "so far")


def test_a_layer_whose_every_case_is_faster_names_its_smallest_gain_not_its_costliest():
    """issue 55 trial: "costliest: ... 7.5x faster" read as a cost. Every case faster: the case that
    gains least is named, as such; one case slower: it is the costliest."""
    rng = np.random.default_rng(5)
    faster = {c: PairedCosts(np.log(f) + rng.normal(0, 0.01, 6), 0.01) for c, f in (("a", 0.2), ("b", 0.8))}
    layer = settle_layer(faster, TARGET, LIMIT)
    assert layer.state == "gain" and layer.costliest == "b"
    assert "; smallest gain: b " in layer.describe() and "costliest" not in layer.describe()
    faster["b"] = PairedCosts(np.log(1.3) + rng.normal(0, 0.01, 6), 0.01)
    assert "; costliest: b " in settle_layer(faster, TARGET, LIMIT).describe()
