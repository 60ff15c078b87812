"""Is the minimum detectable effect that `ccbench compare` reports the effect it detects 4 times in 5?

For each noise level (CV of one execution) and design (executions per side, or machines per side
with 3 executions each for replicas): `--trials` A/A comparisons give the MDE a row would report
(ccbench.analysis.statistics.stats.reported_mde on each comparison's own spread; the median over trials is
"the reported MDE" of that design); then `--trials` fresh comparisons with a true cost of that size
are judged by the row's own test (Welch's t on logs, or the pooled t on machine means), and the
detection rate (significant and slower) is printed beside the target 80%. The fast form of this,
with a fixed seed and fewer trials, is tests/test_mde.py.

    python benchmarks/sim_mde.py [--trials 4000] [--seed 33]
"""

from __future__ import annotations

import argparse

import numpy as np
from scipy import special

from ccbench.analysis.statistics.stats import CONFIDENCE, reported_mde


def _welch(log_a: np.ndarray, log_b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per trial (rows): the difference of mean logs, its standard error and Welch's degrees of freedom."""
    n_a, n_b = log_a.shape[1], log_b.shape[1]
    var_a, var_b = log_a.var(axis=1, ddof=1) / n_a, log_b.var(axis=1, ddof=1) / n_b
    dof = (var_a + var_b) ** 2 / (var_a**2 / (n_a - 1) + var_b**2 / (n_b - 1))
    return log_b.mean(axis=1) - log_a.mean(axis=1), np.sqrt(var_a + var_b), dof


def _pooled(log_a: np.ndarray, log_b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The pooled two-sample t on machine means (ccbench.analysis.statistics.replicas)."""
    m_a, m_b = log_a.shape[1], log_b.shape[1]
    dof = np.full(len(log_a), float(m_a + m_b - 2))
    pooled = ((m_a - 1) * log_a.var(axis=1, ddof=1) + (m_b - 1) * log_b.var(axis=1, ddof=1)) / dof
    return log_b.mean(axis=1) - log_a.mean(axis=1), np.sqrt(pooled * (1 / m_a + 1 / m_b)), dof


def _draw(rng, trials: int, per_side: int, cv: float, effect: float, machine_cv: float | None):
    """Per trial, each side's values on the log scale: executions, or (replicas) machine means of 3
    executions on machines whose offsets spread by ``machine_cv``."""
    sigma = np.log1p(cv)
    shift = np.log1p(effect)
    if machine_cv is None:
        return rng.normal(0, sigma, (trials, per_side)), rng.normal(shift, sigma, (trials, per_side))
    spread = np.log1p(machine_cv)
    sides = []
    for offset in (0.0, shift):
        machines = rng.normal(offset, spread, (trials, per_side))
        sides.append(machines + rng.normal(0, sigma, (trials, per_side, 3)).mean(axis=2))
    return sides


def detection_at_reported_mde(
    cv: float, per_side: int, trials: int, rng, machine_cv: float | None = None
) -> tuple[float, float]:
    """(the median reported MDE of the design, the share of fresh comparisons with that cost detected)."""
    test = _welch if machine_cv is None else _pooled
    _, se, dof = test(*_draw(rng, trials, per_side, cv, 0.0, machine_cv))
    mde = float(np.median(reported_mde(se, dof, per_side)))
    diff, se, dof = test(*_draw(rng, trials, per_side, cv, mde, machine_cv))
    critical = special.stdtrit(dof, 0.5 + CONFIDENCE / 2)
    return mde, float(np.mean(diff / se > critical))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=4000)
    parser.add_argument("--seed", type=int, default=33)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    print(f"{'design':<34} {'CV':>5} {'reported MDE':>13} {'detected':>9}  (target 80% +/- 5)")
    for cv in (0.005, 0.02, 0.05, 0.10):
        for n in (3, 4, 5, 10, 20, 30):
            mde, rate = detection_at_reported_mde(cv, n, args.trials, rng)
            print(f"{f'{n} executions a side':<34} {cv:>5.1%} {mde:>13.2%} {rate:>9.1%}")
    for machine_cv in (0.01, 0.03):
        for m in (2, 3, 4, 5, 8):
            mde, rate = detection_at_reported_mde(0.01, m, args.trials, rng, machine_cv=machine_cv)
            label = f"{m} machines a side, spread {machine_cv:.0%}"
            print(f"{label:<34} {0.01:>5.1%} {mde:>13.2%} {rate:>9.1%}")


if __name__ == "__main__":
    main()
