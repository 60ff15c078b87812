"""Simulation of the settle rule (ccbench.analysis.statistics.sequential; docs/analysis.md "Settling each case").

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
(ccbench.analysis.statistics.sequential.reachable, as the settle rounds judge it): the "left" column gives the
share that left so, and the power shows what the rule costs against the same limit without it
(run both ways to compare).

With ``--noise`` it instead compares the intervals under the four noise models of
benchmarks/sim_noise.py (normal, skewed, AR(1) 0.5, residuals of real bundles given with
``--bundle``), each on the paired values and on executions whose order within a round is drawn: the
A/A error (an interval ever excluding 0 at the looks 3..limit) side by side for today's anytime-valid
interval and the repeated interval built for the round limit (ccbench.analysis.statistics.repeated, with and
without its lag-1 correction, and in Wang and Tsiatis's shapes 0.25 and 0, O'Brien-Fleming's, beside the
default Pocock's); then, for normal paired values of spread ``--spread`` (4%), the
half-widths, the mean rounds to settle at true costs 0, T, 2T and 10T, the share of no-cost and
at-target cases settled by the limit and the wrong "no cost above T" at a cost of T.

    python benchmarks/sim_sequential.py [--trials 2000] [--target 5%] [--seed 42] [--limit N]
    python benchmarks/sim_sequential.py --noise [--limit 10] [--trials 20000] [--bundle DIR ...]
    python benchmarks/sim_sequential.py --futility [--limit 10] [--trials 20000] [--spread 4%]
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

import numpy as np
from scipy import special, stats
from sim_noise import MODELS, aa_error, bundle_residuals, paired_noise, settle_path  # benchmarks/, beside this one

from ccbench.analysis.statistics.repeated import repeated_interval
from ccbench.analysis.statistics.sequential import ALPHA, interval, reachable
from ccbench.planning.plan import parse_precision

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
    parser.add_argument("--noise", action="store_true", help="compare the intervals under four noise models")
    parser.add_argument("--futility", action="store_true", help="only the futility rule's table (its quantile)")
    parser.add_argument("--spread", default="4%", help="with --noise: the paired spread of the settling table")
    parser.add_argument(
        "--bundle", type=Path, action="append", default=[], help="with --noise: a bundle whose paired residuals to draw"
    )
    args = parser.parse_args()
    target = parse_precision(args.target)
    if args.futility:
        futility_table(
            np.random.default_rng(args.seed), args.trials, target, parse_precision(args.spread), args.limit or 10
        )
        return
    if args.noise:
        noise_study(args.trials, target, parse_precision(args.spread), args.limit or 10, args.bundle, args.seed)
        return
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


def methods(limit: int) -> dict:
    """The intervals compared, each a function of the paired values (one row a case) to each look's
    (low, high)."""
    n = np.arange(1, limit + 1)
    return {
        "anytime (before)": lambda d: interval(n, d.cumsum(axis=1), (d**2).cumsum(axis=1)),
        "repeated": lambda d: repeated_interval(d, limit),
        "repeated+lag-1": lambda d: repeated_interval(d, limit, autocorrelation=True),
        "repeated, WT 0.25": lambda d: repeated_interval(d, limit, shape=0.25),
        "repeated, OBF": lambda d: repeated_interval(d, limit, shape=0.0),
    }


def noise_study(trials: int, target: float, spread: float, limit: int, bundles: list[Path], seed: int) -> None:

    started = time.monotonic()
    rng = np.random.default_rng(seed)
    pool = bundle_residuals(bundles) if bundles else None
    compared = methods(limit)
    print(f"A/A error: an interval ever excluding 0 at rounds 3..{limit}; {trials} cases per cell; alpha {ALPHA}")
    if pool is not None:
        print(f"bundle residuals: {len(pool)} paired residuals from {len(bundles)} bundle(s)")
    print(f"{'noise':>10} {'on':>17} " + " ".join(f"{name:>17}" for name in compared))
    for model in MODELS:
        if model == "bundle" and pool is None:
            print(f"{model:>10}: no bundle given (--bundle DIR)")
            continue
        for order_drawn in (False, True):
            values = paired_noise(model, order_drawn, rng, trials, limit, 1.0, pool)
            rates = [aa_error(*interval_of(values)) for interval_of in compared.values()]
            where = "order drawn" if order_drawn else "paired values"
            print(f"{model:>10} {where:>17} " + " ".join(f"{rate:>17.2%}" for rate in rates))
    settling_table(compared, rng, trials, target, spread, limit)
    futility_table(rng, trials, target, spread, limit)
    layer_table(rng, max(trials // 40, 100), target, limit)
    print(f"\n{time.monotonic() - started:.1f} s")


def settling_table(compared: dict, rng, trials: int, target: float, spread: float, limit: int) -> None:
    """Per interval, for normal paired values: its half-widths, the mean rounds to settle at true costs
    0, T, 2T and 10T, the share of no-cost and at-target cases settled by the limit, the wrong answers
    and power at T, and the mean estimate of the cases settled as a cost at T (stopping leans it)."""
    fixed = next((k for k in range(2, 1000) if _t_power(k, spread, target) >= 0.8), None)
    print(f"\nnormal paired values of spread {spread:.1%}, target T {target:.0%}, round limit {limit}:")
    print(
        f"{'':>17} {'half-width/sd':>13} {'mean rounds at':>29} {'/fixed':>13} {'settled by':>11} "
        f"{'wrong':>6} {'power':>6} {'estimate'}"
    )
    print(
        f"{'':>17} {'at 3':>6} {'at ' + str(limit):>6} {'0':>7} {'T':>7} {'2T':>7} {'10T':>7} {'mean':>6} {'worst':>6} "
        f"{'0 and T':>11} {'at T':>6} {'at T':>6} {'of costs at T'}"
    )
    for name, interval_of in compared.items():
        noise = rng.standard_normal((trials, limit)) * spread
        lows, highs = interval_of(noise)
        halves = np.mean((highs - lows) / 2, axis=0) / spread  # nan before round 2, inf before 3
        rounds, settled = [], []
        for multiple in (0.0, 1.0, 2.0, 10.0):
            values = noise + math.log1p(multiple * target)
            answer, spent = settle_path(*interval_of(values), target)
            rounds.append(spent.mean())
            if multiple <= 1:
                settled.append(np.mean(answer != 0))
            if multiple == 1:
                wrong, power = np.mean((answer == 2) | (answer == -1)), np.mean(answer == 1)
                at_stop = values.cumsum(axis=1)[np.arange(trials), spent - 1] / spent
                leaned = math.expm1(float(np.mean(at_stop[answer == 1])))
            noise = rng.standard_normal((trials, limit)) * spread
        print(
            f"{name:>17} {halves[2]:>6.2f} {halves[limit - 1]:>6.2f} "
            + " ".join(f"{r:>7.2f}" for r in rounds)
            + f" {np.mean(rounds) / fixed:>6.2f} {max(rounds) / fixed:>6.2f}"
            + f" {np.mean(settled):>11.1%} {wrong:>6.2%} {power:>6.1%} {leaned:>8.2%}"
        )
    print(f"/fixed: against a fixed paired t test with 80% power at T: {fixed} rounds at this spread")


def futility_table(rng, trials: int, target: float, spread: float, limit: int) -> None:
    """The futility rule's quantile (sequential.FUTILITY_QUANTILE: the spread's lower bound a case is
    judged at when it asks whether the limit could still settle it), for normal paired values on the
    repeated interval: per quantile the mean rounds at true costs 0, T, 2T and 10T, the share of
    no-cost and at-target cases settled (not left), and the power at T and 2T. A futility stop claims
    nothing, so no quantile changes the error rate: the choice is rounds against cases answered."""
    n = np.arange(1, limit + 1)
    print(f"\nthe futility rule, normal paired values of spread {spread:.1%}, target T {target:.0%}, limit {limit}:")
    fixed = next((k for k in range(2, 1000) if _t_power(k, spread, target) >= 0.8), None)
    print(f"{'quantile':>9} {'rounds at 0':>12} {'T':>6} {'2T':>6} {'10T':>6} {'mean':>6} {'/fixed':>6} {'worst':>6} "
          f"{'settled 0,T':>12} {'power T':>8} {'2T':>6}")  # fmt: skip
    draws = {m: rng.standard_normal((trials, limit)) * spread + math.log1p(m * target) for m in (0.0, 1.0, 2.0, 10.0)}
    paths = {m: settle_path(*repeated_interval(v, limit), target) for m, v in draws.items()}
    for quantile in (None, 0.05, 0.1, 0.2, 0.35, 0.5):
        rounds, settled, power = [], [], []
        for multiple, values in draws.items():
            answer, spent = paths[multiple]
            if quantile is not None:
                total, squares = values.cumsum(axis=1), (values**2).cumsum(axis=1)
                with np.errstate(invalid="ignore", divide="ignore"):
                    mean = total / n
                    sd = np.sqrt(np.maximum(squares - n * mean**2, 0) / np.maximum(n - 1, 1))
                hopeless = ~reachable(n, mean, sd, target, limit - n, limit, quantile) & (n >= 3)
                left = np.where(hopeless.any(axis=1), hopeless.argmax(axis=1) + 1, limit + 1)
                gone = left < spent  # it leaves before the look that would have settled it
                answer, spent = np.where(gone, 0, answer), np.where(gone, left, spent)
            rounds.append(spent.mean())
            if multiple <= 1:
                settled.append(np.mean(answer != 0))
            if multiple in (1.0, 2.0):
                power.append(np.mean(answer == 1))
        name = "none" if quantile is None else f"{quantile:g}"
        print(f"{name:>9} " + " ".join(f"{r:>{12 if i == 0 else 6}.2f}" for i, r in enumerate(rounds))
              + f" {np.mean(rounds):>6.2f} {np.mean(rounds) / fixed:>6.2f} {max(rounds) / fixed:>6.2f}"
              + f" {np.mean(settled):>12.1%} {power[0]:>8.1%} {power[1]:>6.1%}")  # fmt: skip
    print(f"/fixed: against a fixed paired t test with 80% power at T: {fixed} rounds at this spread")


def layer_table(rng, layers: int, target: float, limit: int) -> None:
    """Layers of 40 no-cost cases, each run as settle runs it (stopped at its first settled round):
    how often some case is called a cost or gain on its own, and how often e-BH on the cases' e-values
    (1 / their anytime-valid p values at the round they stopped) calls one."""
    from ccbench.analysis.statistics.discovery import e_bh, e_values
    from ccbench.analysis.statistics.sequential import p_value

    cases = 40
    values = rng.standard_normal((layers * cases, limit)) * 0.04
    n = np.arange(1, limit + 1)
    lows, highs = interval(n, values.cumsum(axis=1), (values**2).cumsum(axis=1))
    settled = ((lows > 0) | (highs < math.log1p(target)))[:, 2:]
    stop = np.where(settled.any(axis=1), settled.argmax(axis=1) + 3, limit)
    e = e_values([p_value(row[:at]) for row, at in zip(values, stop)]).reshape(layers, cases)
    alone = float(np.mean((e >= 1 / ALPHA).any(axis=1)))
    controlled = float(np.mean([e_bh(layer).any() for layer in e]))
    print(
        f"\n{layers} layers of {cases} no-cost cases (anytime interval): some case called {alone:.1%} case by case, "
        f"{controlled:.2%} with e-BH at {ALPHA:.0%}"
    )


def _t_power(n: int, sd: float, target: float) -> float:
    crit = stats.t.ppf(0.975, n - 1)
    return float(1 - special.nctdtr(n - 1, math.log1p(target) / (sd / math.sqrt(n)), crit))


if __name__ == "__main__":
    main()
