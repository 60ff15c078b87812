"""Simulation of the settle rule (ccbench.analysis.sequential; docs/analysis.md "Settling each case").

Each simulated case runs paired rounds (baseline and variant once each, log-normal noise of the
given CV on every execution), is looked at after every round from ``--min-rounds`` on, and stops
the first time its interval settles it, or at the cap (4x the floor, at least 30 rounds). Per CV
and true cost (none, the target, 2x and 100x the target), it prints
- settled wrongly: for no cost, a cost or gain called (A/A false positive, per case; goal <= 5%);
  for a true cost, "no cost above" the target or a gain called;
- power: the share of true costs called a cost (goal >= 80% at the target);
- rounds / floor: the mean rounds spent against the floor, the rounds a fixed design needs for 80%
  power at the target with the spread known in advance (z test on the paired logs); the goal is at
  most 1.3x averaged over the four costs;
and then what fixed designs spend against the same floor (a t test sized for 80% power at the
target, which has to estimate the spread; and the fixed counts plans use), and the chance that a
study of k A/A cases calls at least one of them.

With ``--limit N`` the cap is N rounds and a case leaves for futility once it cannot settle by it
(ccbench.analysis.sequential.reachable, as the settle rounds judge it): the "left" column gives the
share that left so, and the power shows what the rule costs against the same limit without it
(run both ways to compare).

    python benchmarks/sim_sequential.py [--trials 2000] [--target 5%] [--seed 42] [--limit N]
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
from scipy import special, stats

from ccbench.analysis.sequential import ALPHA, interval, reachable
from ccbench.plan import parse_precision

CVS = (0.005, 0.01, 0.02, 0.05, 0.10, 0.20)
EFFECTS = (("none", 0.0), ("at the target", 1.0), ("2x target", 2.0), ("100x target", 100.0))
Z = stats.norm.ppf(0.975) + stats.norm.ppf(0.8)


def floor_rounds(cv: float, target: float) -> int:
    """Paired rounds a fixed design needs for 80% power at the target, the spread known."""
    sd = math.sqrt(2) * math.log1p(cv)
    return max(1, math.ceil((Z * sd / math.log1p(target)) ** 2))


def fixed_t_rounds(cv: float, target: float) -> int:
    """Paired rounds a fixed paired t test needs for 80% power at the target (spread estimated)."""
    sd = math.sqrt(2) * math.log1p(cv)
    for n in range(2, 100_000):
        crit = stats.t.ppf(0.975, n - 1)
        nc = math.log1p(target) / (sd / math.sqrt(n))
        if 1 - special.nctdtr(n - 1, nc, crit) >= 0.8:
            return n
    raise RuntimeError("no fixed design found")


def simulate(
    cv: float, cost: float, target: float, trials: int, cap: int, min_rounds: int, rng, futility: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """Per trial: the answer (0 unsettled, 1 cost, -1 gain, 2 no cost above, 3 left for futility:
    it could not settle by the cap, as the settle rounds judge it) and the rounds spent."""
    sigma = math.log1p(cv)
    diffs = rng.normal(math.log1p(cost), sigma, (trials, cap)) - rng.normal(0.0, sigma, (trials, cap))
    n = np.arange(1, cap + 1)
    total, squares = diffs.cumsum(axis=1), (diffs**2).cumsum(axis=1)
    low, high = interval(n, total, squares)
    answer = np.zeros((trials, cap), dtype=int)
    if futility:
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = total / n
            sd = np.sqrt(np.maximum(squares - n * mean**2, 0) / np.maximum(n - 1, 1))
            answer[~reachable(n, mean, sd, target, cap - n) & (n >= 3)] = 3
    answer[high < math.log1p(target)] = 2
    answer[high < 0] = -1
    answer[low > 0] = 1
    answer[:, : min_rounds - 1] = 0
    settled = answer != 0
    first = np.where(settled.any(axis=1), settled.argmax(axis=1), cap - 1)
    return answer[np.arange(trials), first], first + 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=2000)
    parser.add_argument("--target", default="5%")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--min-rounds", type=int, default=3)
    parser.add_argument(
        "--limit",
        type=int,
        help="the round limit of a plan (max_repetitions): with it, the cap is the limit and a case that "
        "cannot settle by it leaves for futility, as in the settle rounds; prints the share that left so",
    )
    args = parser.parse_args()
    target = parse_precision(args.target)
    rng = np.random.default_rng(args.seed)
    started = time.monotonic()
    print(f"settle {target:.0%}, alpha {ALPHA}, {args.trials} cases per line, looks after every round")
    if args.limit:
        print(f"round limit {args.limit}: a case that cannot settle by it leaves for futility ('left' column)")
    print(
        f"{'CV':>5} {'cost':>14} {'floor':>6} {'wrong':>7} {'power':>7} {'rounds':>8} {'/floor':>7} {'left':>6} {'w/o rule':>9}"
    )
    ratios, worst_fp, worst_power, aa, against_t, futile, saved = [], 0.0, 1.0, {}, [], [], []
    for cv in CVS:
        floor = floor_rounds(cv, target)
        cap = args.limit or max(30, 4 * floor)
        for label, multiple in EFFECTS:
            cost = multiple * target
            answer, rounds = simulate(cv, cost, target, args.trials, cap, args.min_rounds, rng, bool(args.limit))
            futile.append(float(np.mean(answer == 3)))
            without = np.nan
            if args.limit and cost:  # the same limit without the futility rule: what the rule costs in power
                plain, spent = simulate(cv, cost, target, args.trials, cap, args.min_rounds, rng)
                without = float(np.mean(plain == 1))
                saved.append(spent.mean() / max(rounds.mean(), 1e-9))
            called = (answer == 1) | (answer == -1) if cost == 0 else (answer == 2) | (answer == -1)
            wrong = np.mean(called)
            power = np.mean(answer == 1) if cost else float("nan")
            ratio = rounds.mean() / floor
            ratios.append(ratio)
            against_t.append(rounds.mean() / fixed_t_rounds(cv, target))
            if cost == 0:
                worst_fp = max(worst_fp, wrong)
                aa[cv] = float(wrong)
            if multiple == 1.0:
                worst_power = min(worst_power, power)
            print(
                f"{cv:>5.1%} {label:>14} {floor:>6} {wrong:>7.2%} "
                f"{'' if cost == 0 else f'{power:.1%}':>7} {rounds.mean():>8.1f} {ratio:>7.2f} {futile[-1]:>6.1%} "
                f"{'' if np.isnan(without) else f'{without:.1%}':>9}"
            )
    if saved:
        print(f"\nfutility rule: rounds without it / with it, mean over the true costs: {np.mean(saved):.2f}x")
    print(f"\nworst A/A false positives per case: {worst_fp:.2%} (goal <= 5%)")
    print(f"worst power at the target: {worst_power:.1%} (goal >= 80%)")
    print(f"mean rounds / floor over CVs and costs: {np.mean(ratios):.2f} (goal <= 1.3)")
    per_cv = [np.mean(ratios[i : i + len(EFFECTS)]) for i in range(0, len(ratios), len(EFFECTS))]
    print("  per CV: " + ", ".join(f"{cv:.1%} {r:.2f}" for cv, r in zip(CVS, per_cv)))
    sized = [r for r, cv in zip(ratios, np.repeat(CVS, len(EFFECTS))) if floor_rounds(cv, target) >= 10]
    print(f"  where the floor is 10 rounds or more: {np.mean(sized):.2f}")
    print(f"mean rounds / the fixed t test's rounds (80% power at the target): {np.mean(against_t):.2f}")
    print("\nfixed designs against the same floor (the same rounds whatever the cost):")
    for cv in CVS:
        floor = floor_rounds(cv, target)
        t_rounds = fixed_t_rounds(cv, target)
        counts = ", ".join(f"{n} -> {n / floor:.2f}" for n in (5, 10, 30))
        print(f"  CV {cv:>5.1%}: t test for 80% power {t_rounds} rounds = {t_rounds / floor:.2f}x; fixed {counts}")
    print("\nstudies of k A/A cases with at least one cost or gain called (from the per-case rates):")
    for k in (1, 10, 50):
        print(f"  k = {k:>2}: " + ", ".join(f"CV {cv:.1%} {1 - (1 - p) ** k:.1%}" for cv, p in aa.items()))
    print(f"\n{time.monotonic() - started:.1f} s")


if __name__ == "__main__":
    main()
