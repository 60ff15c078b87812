"""Randomized order within rounds against periodic noise: the fast form of benchmarks/sim_order.py
(A/A comparisons in the order ccbench.run.schedule gives, judged by ccbench's interval; seeded)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np


def _sim_order():
    spec = importlib.util.spec_from_file_location(
        "sim_order", Path(__file__).parents[1] / "benchmarks" / "sim_order.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_fixed_order_aliases_with_periodic_noise_and_the_drawn_order_does_not():
    sim = _sim_order()
    rng = np.random.default_rng(7)
    # a neighbour's job every 4th execution slot, 3% slower there, over 1% run-to-run noise, 10 rounds
    fixed = sim.false_positive_rate(rng, 300, 10, period=4, amplitude=0.03, cv=0.01, randomized=False)
    drawn = sim.false_positive_rate(rng, 300, 10, period=4, amplitude=0.03, cv=0.01, randomized=True)
    assert fixed >= 0.30, fixed
    assert drawn <= 0.11, drawn
    # without periodic noise both orders keep the nominal rate
    quiet = sim.false_positive_rate(rng, 300, 10, period=4, amplitude=0.0, cv=0.01, randomized=True)
    assert quiet <= 0.10, quiet
