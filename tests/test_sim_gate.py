"""The nightly gate with confirmation, simulated: the fast form of benchmarks/sim_gate.py (seeded)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np


def _sim_gate():
    spec = importlib.util.spec_from_file_location("sim_gate", Path(__file__).parents[1] / "benchmarks" / "sim_gate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_two_percent_steps_are_found_and_confirmation_removes_false_alerts():
    sim = _sim_gate()
    rng = np.random.default_rng(5)
    # night-to-night spread 0.2%, executions 0.5%, 10 a night: a 2% step is 5x the night median's spread
    confirmed = sim.simulate(rng, 200, between=0.002, within=0.005, executions=10, step=0.02)
    assert confirmed["recall"] >= 0.90, confirmed
    assert confirmed["false_share"] <= 0.05, confirmed
    # without confirmation a single night's alarm is false far more often
    single = sim.simulate(rng, 200, between=0.002, within=0.005, executions=10, step=0.02, confirm=False)
    assert single["false_share"] > confirmed["false_share"] + 0.05, single
