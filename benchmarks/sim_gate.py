"""Would a nightly `ccbench gate --against STORE --confirm` find 2% steps, and how many alarms are false?

A nightly series per trial: each night one run of `--executions` executions; its level moves from
night to night by `--between` (CV of the run medians: what a machine's state, its neighbours and a
reboot change between nights) and its executions scatter by `--within` (CV within a run). From a
random night between 25 and 45 the level is `--step` higher (a new image that costs 2%). Each night
the gate judges the run's median against the last 20 accepted nights (ccbench.analysis.settling.gate.predict,
the store's rule: a t prediction interval on the logs; a failure is significant, worse and beyond
the row's MDE); a failure is rerun once (`--confirm`: a new run of the same image, fresh noise) and
alerts only if the rerun fails too. A passing or unconfirmed night joins the store; the first
confirmed alert ends the series (someone looks at it).

Printed per noise level: recall (the step alerted within 3 nights of it), the share of alert groups
that are false (an alert before the step), and both without confirmation. The noise levels default
to the spreads measured in real bundles of the bundled quick plan on this machine (docs/analysis.md);
`--bundles DIR...` measures them from other bundles (several runs of one plan).

    python benchmarks/sim_gate.py [--trials 2000] [--seed 5] [--bundles results/*/]
"""

from __future__ import annotations

import argparse

import numpy as np

from ccbench.analysis.settling.gate import predict

HISTORY = 20
MIN_HISTORY = 3
NIGHTS = 60
WITHIN_NIGHTS = 3


def _gate_fails(past: np.ndarray, new_log: float) -> bool:
    prediction = predict(past, new_log)
    change = prediction.ratio - 1
    return prediction.significant and change > 0 and change > prediction.mde


def _run_median(rng, level: float, between: float, within: float, executions: int) -> float:
    night = level + rng.normal(0, np.log1p(between))
    return float(np.median(night + rng.normal(0, np.log1p(within), executions)))


def simulate(
    rng, trials: int, between: float, within: float, executions: int, step: float, confirm: bool = True
) -> dict[str, float]:
    """Recall of the steps and the share of false alert groups over ``trials`` nightly series."""
    found = false_groups = groups = 0
    for _ in range(trials):
        step_night = int(rng.integers(25, 46))
        accepted: list[float] = []
        for night in range(NIGHTS):
            level = np.log1p(step) if night >= step_night else 0.0
            median = _run_median(rng, level, between, within, executions)
            if len(accepted) < MIN_HISTORY:
                accepted.append(median)
                continue
            past = np.array(accepted[-HISTORY:])
            alert = _gate_fails(past, median)
            if alert and confirm:
                alert = _gate_fails(past, _run_median(rng, level, between, within, executions))
            if not alert:
                accepted.append(median)
                continue
            groups += 1
            if night < step_night:
                false_groups += 1
            elif night < step_night + WITHIN_NIGHTS:
                found += 1
            break
    return {"recall": found / trials, "false_share": false_groups / groups if groups else 0.0, "groups": groups}


def spreads_from_bundles(paths: list[str]) -> tuple[float, float, int]:
    """(the median CV between runs, the median CV within a run, the median executions) over the
    primary metric cases of several runs of one plan."""
    import ccbench
    from ccbench.analysis.judgement import impact

    frame = ccbench.load(paths)
    frame = frame[~frame["warmup"] & frame["better"].isin(["lower", "higher"])]
    frame = frame[impact.primary_mask(frame, impact.declarations(frame))]
    keys = ["workload", "params", "case", "metric", "config"]
    per_run = frame.groupby([*keys, "bundle"])["value"].agg(["median", "std", "mean", "count"]).reset_index()
    within = float((per_run["std"] / per_run["mean"]).median())
    between = per_run.groupby(keys)["median"].agg(lambda v: v.std(ddof=1) / v.mean()).median()
    return float(between), within, int(per_run["count"].median())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--step", type=float, nargs="+", default=[0.02], help="step sizes (fractions)")
    parser.add_argument("--bundles", nargs="*", help="measure the noise from these bundles (several runs of one plan)")
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    levels = [
        (0.001, 0.005, 5),
        (0.002, 0.005, 10),
        (0.002, 0.01, 5),
        (0.002, 0.01, 20),
        (0.005, 0.01, 5),
        (0.005, 0.02, 5),
    ]
    if args.bundles:
        levels = [spreads_from_bundles(args.bundles)]
    header = f"{'between':>8} {'within':>7} {'execs':>5} {'step':>5} {'recall':>7} {'false groups':>13}"
    print(f"{header} {'unconfirmed: recall':>20} {'false':>6}")
    for between, within, executions in levels:
        for step in args.step:
            confirmed = simulate(rng, args.trials, between, within, executions, step)
            single = simulate(rng, args.trials, between, within, executions, step, confirm=False)
            print(
                f"{between:>8.2%} {within:>7.2%} {executions:>5} {step:>5.0%} {confirmed['recall']:>7.1%} "
                f"{confirmed['false_share']:>13.1%} {single['recall']:>20.1%} {single['false_share']:>6.1%}",
                flush=True,
            )


if __name__ == "__main__":
    main()
