"""Layer-level A/A claims of settling by layer (ccbench.analysis.settling.layer_settle; docs/analysis.md
"Settling a layer").

Each simulated layer has ``cases`` no-cost cases run together for at most ``limit`` rounds; each
round the runner draws the order of the round's two executions (baseline, variant) once for all of
the layer's cases (they are parts of the same executions), and the executions' noise is one of
- normal, skewed (centred log-normal, shape 1), AR(1) 0.5 in run order (benchmarks/sim_noise.py);
- tied: normal noise on values reported at a coarse step (5% of the value: a p99 of about 20 ms
  in whole milliseconds), so that many paired values are exactly 0;
with half of each execution's noise shared by all of the layer's cases (the same machine state) and
half its own. The layer is looked at after each round from 3 on and stops at its headline's first
answer; a wrong claim is a cost or a gain (the headline's interval excluding 0). Also counted: a
case called by e-BH at the stop (every call is wrong in an A/A layer), and, for reference, a case
whose own interval excluded 0 at the stop (what per-case claims without e-BH would have said).

With ``--workloads 3`` a layer spans three workloads (settle_by = "layer" settles it across them:
ccbench.run.settle_layers): ``cases`` cases in each, each workload with its own shared noise, its
own order drawn each round and its own spread (1x, 0.5x and 2x ``--spread``).

    python benchmarks/sim_layers.py [--layers 2000] [--cases 8] [--workloads 1] [--limit 10] [--target 5%] [--seed 42]
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
from sim_noise import draw  # benchmarks/, beside this one

from ccbench.analysis.statistics.discovery import e_bh, e_values
from ccbench.analysis.statistics.repeated import repeated_interval
from ccbench.analysis.statistics.sequential import ALPHA, MIN_SPREAD, p_value
from ccbench.planning.plan import parse_precision

MODELS = ("normal", "skewed", "AR(1) 0.5", "tied")
#: the reporting step of the tied model, as a fraction of the value
TIED_STEP = 0.05


#: with several workloads, each one's paired spread as a multiple of ``--spread`` (in turn): a layer
#: over fio, compression and YCSB mixes quiet cases with noisy ones (a p99 on few operations)
WORKLOAD_SPREADS = (1.0, 0.5, 2.0)


def layer_values(
    model: str, rng: np.random.Generator, layers: int, cases: int, limit: int, sd: float, workloads: int = 1
) -> np.ndarray:
    """Paired log costs with no cost, shape (layers, cases x workloads, rounds): each workload's own
    (workload_values), side by side; with several, each at its own spread (WORKLOAD_SPREADS)."""
    if workloads == 1:
        return workload_values(model, rng, layers, cases, limit, sd)
    return np.concatenate(
        [
            workload_values(model, rng, layers, cases, limit, sd * WORKLOAD_SPREADS[w % len(WORKLOAD_SPREADS)])
            for w in range(workloads)
        ],
        axis=1,
    )


def workload_values(model: str, rng: np.random.Generator, layers: int, cases: int, limit: int, sd: float) -> np.ndarray:
    """One workload's paired log costs with no cost, shape (layers, cases, rounds): executions in run
    order with the order within each round drawn once per layer and round (each workload draws its
    own), half the noise shared across the workload's cases (the same machine state)."""
    base_model = "normal" if model == "tied" else model
    shape = (layers * cases, 2 * limit)
    shared = np.repeat(draw(base_model, rng, (layers, 2 * limit), None), cases, axis=0)
    runs = (shared + draw(base_model, rng, shape, None)) / math.sqrt(2) * sd / math.sqrt(2)
    runs = runs.reshape(layers, cases, 2 * limit)
    signs = rng.choice([-1.0, 1.0], (layers, 1, limit))
    first, second = runs[:, :, 0::2], runs[:, :, 1::2]
    if model == "tied":
        # values reported at a step: each execution's value rounded before the pairing
        value = 20.0
        first = np.log(np.maximum(np.round(value * np.exp(first) / (value * TIED_STEP)), 1) * value * TIED_STEP / value)
        second = np.log(
            np.maximum(np.round(value * np.exp(second) / (value * TIED_STEP)), 1) * value * TIED_STEP / value
        )
    return signs * (second - first)


def layer_aa(
    model: str, layers: int, cases: int, limit: int, target: float, seed: int, sd: float = 0.04, workloads: int = 1
) -> dict[str, float]:
    """The shares of A/A layers whose headline was claimed a cost or gain, in which e-BH called some
    case at the stop, and in which some case's own interval excluded 0 at the stop; and the mean
    rounds to the layer's stop."""
    rng = np.random.default_rng(seed)
    values = layer_values(model, rng, layers, cases, limit, sd, workloads)
    cases = values.shape[1]
    headline = values.mean(axis=1)
    floor = MIN_SPREAD
    if model == "tied":  # the rounding's spread on a mean of `cases` paired values (sequential.pair_floor)
        floor = max(math.sqrt(2 * TIED_STEP**2 / 12) / math.sqrt(cases), MIN_SPREAD)
    lows, highs = repeated_interval(headline, limit, floor)
    answer = np.zeros(lows.shape, dtype=int)
    answer[highs < math.log1p(target)] = 2
    answer[(lows > 0) | (highs < 0)] = 1
    answer[:, :2] = 0
    settled = answer != 0
    stop = np.where(settled.any(axis=1), settled.argmax(axis=1), limit - 1)
    claimed = answer[np.arange(layers), stop] == 1
    called, alone = np.zeros(layers, dtype=bool), np.zeros(layers, dtype=bool)
    case_floor = max(math.sqrt(2 * TIED_STEP**2 / 12), MIN_SPREAD) if model == "tied" else MIN_SPREAD
    for i in range(layers):
        at = stop[i] + 1
        own_low, own_high = repeated_interval(values[i, :, :at], limit, case_floor)
        alone[i] = bool(((own_low[:, -1] > 0) | (own_high[:, -1] < 0)).any())
        called[i] = bool(e_bh(e_values([p_value(row) for row in values[i, :, :at]]), ALPHA).any())
    return {
        "headline": float(claimed.mean()),
        "e-BH": float(called.mean()),
        "alone": float(alone.mean()),
        "rounds": float((stop + 1).mean()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layers", type=int, default=2000)
    parser.add_argument("--cases", type=int, default=8)
    parser.add_argument("--limit", type=int, default=10)
    parser.add_argument("--target", default="5%")
    parser.add_argument("--spread", default="4%")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--workloads", type=int, default=1, help="the layer across this many workloads")
    args = parser.parse_args()
    target, spread = parse_precision(args.target), parse_precision(args.spread)
    started = time.monotonic()
    across = ""
    if args.workloads > 1:
        spreads = ", ".join(f"{spread * WORKLOAD_SPREADS[w % 3]:.0%}" for w in range(args.workloads))
        across = f" in each of {args.workloads} workloads (paired spreads {spreads}; each draws its own order)"
    print(
        f"{args.layers} A/A layers of {args.cases} cases{across}, paired spread {spread:.0%}, target {target:.0%}, "
        f"limit {args.limit}, order drawn within each round"
    )
    print(f"{'noise':>10} {'headline wrong':>15} {'e-BH calls':>11} {'a case alone':>13} {'rounds':>7}")
    for model in MODELS:
        found = layer_aa(model, args.layers, args.cases, args.limit, target, args.seed, spread, args.workloads)
        print(
            f"{model:>10} {found['headline']:>15.2%} {found['e-BH']:>11.2%} {found['alone']:>13.2%}"
            f" {found['rounds']:>7.2f}"
        )
    print(f"({time.monotonic() - started:.0f} s)")


if __name__ == "__main__":
    main()
