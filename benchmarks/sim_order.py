"""Does a fixed order within rounds alias with periodic noise, and does the drawn order cure it?

A/A comparisons (two variants that cost the same) on a machine with periodic noise: a neighbour's
job that slows every execution in every `period`-th slot by `amplitude` (a cron job, a batch at a
fixed interval), plus log-normal run-to-run noise. The executions run in the order the runner's
schedule gives (ccbench.run.schedule.schedule with no seed: A B A B; with a seed: each round drawn), and
each comparison is judged by ccbench's interval (Welch's t on logs, stats.ratio_interval). The share
of A/A comparisons called significant is the false-positive rate (nominal 5%). The fast form is
tests/test_order.py.

    python benchmarks/sim_order.py [--trials 2000] [--seed 7]
"""

from __future__ import annotations

import argparse

import numpy as np

from ccbench.analysis.statistics.stats import ratio_interval
from ccbench.planning.plan import plan_from_dict
from ccbench.run.schedule import schedule


def _spec(repetitions: int, variants: int):
    names = ["disk", "tmpfs", "encrypted"][:variants]
    document = {
        "defaults": {"warmup": 0},
        "workloads": [
            {
                "kind": "command",
                "name": "c",
                "command": "true",
                "repetitions": repetitions,
                "variants": {"storage": names},
            }
        ],
    }
    return plan_from_dict(document, "sim").workloads[0]


def false_positive_rate(
    rng, trials: int, repetitions: int, period: int, amplitude: float, cv: float, randomized: bool, variants: int = 2
) -> float:
    """The share of A/A comparisons (first variant against the second) called significant."""
    spec = _spec(repetitions, variants)
    significant = 0
    fixed = schedule(spec)
    for _ in range(trials):
        order = schedule(spec, int(rng.integers(2**32))) if randomized else fixed
        slots = np.arange(len(order))
        # the phase of the neighbour's job relative to the run is unknown: drawn per trial
        phase = int(rng.integers(period))
        values = np.exp(rng.normal(0, np.log1p(cv), len(order))) * (1 + amplitude * ((slots + phase) % period == 0))
        variant = np.array([e.combo["storage"] for e in order])
        interval = ratio_interval(values[variant == "disk"], values[variant == "tmpfs"])
        significant += interval.significant
    return significant / trials


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    print(f"{'variants':>8} {'reps':>5} {'period':>6} {'amplitude':>9} {'CV':>5} {'fixed':>7} {'random':>7}")
    for variants, repetitions, period, amplitude in (
        (2, 10, 2, 0.03),
        (2, 10, 4, 0.03),
        (2, 30, 2, 0.01),
        (3, 10, 3, 0.03),
        (2, 10, 5, 0.03),
        (2, 10, 2, 0.0),
    ):
        rates = [
            false_positive_rate(rng, args.trials, repetitions, period, amplitude, 0.01, randomized, variants)
            for randomized in (False, True)
        ]
        print(
            f"{variants:>8} {repetitions:>5} {period:>6} {amplitude:>9.0%} {0.01:>5.0%} {rates[0]:>7.1%} {rates[1]:>7.1%}"
        )


if __name__ == "__main__":
    main()
