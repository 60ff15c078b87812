"""The interval methods for replicas side by side, simulated (docs/analysis.md, "Replicas").

Each trial: two configurations, ``--machines`` machines each, every machine offset by a log-normal
draw of sd ``--spread``, measured ``--runs`` times with noise ``--noise``; A/A trials (no cost) and
trials where one side costs ``--cost``. Printed per method: the share of A/A comparisons called
significant and the share of cost trials detected (significant and slower).

- ccbench (the pooled two-sample t on machine means) and the per-execution interval (the same
  samples with each label taken as one machine) through ccbench.analysis.rows.compare itself;
- Welch's t on machine means (scipy);
- statsmodels' MixedLM (REML, random machine intercept, its Wald z test), only where statsmodels
  is installed (it is not a ccbench dependency) and on fewer trials (``--mixed-trials``: a model fit each).

    .venv/bin/python benchmarks/sim_replicas.py [--trials 10000] [--mixed-trials 600]
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from test_replicas import BASELINE, one_machine_a_side, simulated  # noqa: E402

from ccbench.analysis.rows.compare import compare  # noqa: E402


def machine_means(frame):
    """Per trial, the two sides' machine means of the logs: (plain, other), each trials x machines."""
    logs = frame.assign(log=np.log(frame["value"]), trial=frame["case"].astype(int))
    means = logs.groupby(["trial", "config", "machine_id"], sort=False)["log"].mean().reset_index()
    sides = [
        means[means["config"] == config].sort_values(["trial", "machine_id"])["log"].to_numpy()
        for config in (BASELINE, "other / no TEE")
    ]
    trials = logs["trial"].nunique()
    return sides[0].reshape(trials, -1), sides[1].reshape(trials, -1)


def mixed_model_rates(args, rng) -> tuple[float, float] | None:
    try:
        import statsmodels.formula.api as smf
    except ImportError:
        return None
    rates = []
    for cost in (1.0, args.cost):
        found = 0
        for _ in range(args.mixed_trials):
            frame = simulated(rng, 1, cost, (args.machines, args.machines), args.runs, args.spread, args.noise)
            frame = frame.assign(log=np.log(frame["value"]), other=(frame["machine"] == "other").astype(int))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # convergence notes on near-zero variance components
                fit = smf.mixedlm("log ~ other", frame, groups=frame["machine_id"]).fit(reml=True)
            found += fit.pvalues["other"] < 0.05 and (cost == 1.0 or fit.params["other"] > 0)
        rates.append(found / args.mixed_trials)
    return rates[0], rates[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=10_000)
    parser.add_argument("--mixed-trials", type=int, default=600)
    parser.add_argument("--machines", type=int, default=3)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--spread", type=float, default=0.03)
    parser.add_argument("--noise", type=float, default=0.01)
    parser.add_argument("--cost", type=float, default=1.10)
    parser.add_argument("--seed", type=int, default=24)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    machines = (args.machines, args.machines)
    rows = {}
    frames = {
        cost: simulated(rng, args.trials, cost, machines, args.runs, args.spread, args.noise)
        for cost in (1.0, args.cost)
    }
    for name, prepare in (("ccbench: pooled t on machine means", lambda f: f), ("per execution", one_machine_a_side)):
        aa = compare(prepare(frames[1.0]), BASELINE)["significant"].mean()
        found = compare(prepare(frames[args.cost]), BASELINE)
        rows[name] = (aa, (found["significant"] & (found["ratio"] > 1)).mean(), args.trials)
    welch = []
    for cost in (1.0, args.cost):
        plain, other = machine_means(frames[cost])
        test = stats.ttest_ind(other, plain, axis=1, equal_var=False)
        welch.append(np.mean((test.pvalue < 0.05) & ((cost == 1.0) | (test.statistic > 0))))
    rows["Welch's t on machine means"] = (welch[0], welch[1], args.trials)
    mixed = mixed_model_rates(args, rng)
    if mixed:
        rows["statsmodels MixedLM (Wald z)"] = (*mixed, args.mixed_trials)
    print(
        f"{args.machines} machines a side, spread {args.spread:.0%}, noise {args.noise:.0%}, {args.runs} runs each; "
        f"cost {args.cost - 1:.0%}"
    )
    print(f"{'method':40} {'A/A significant':>16} {'cost detected':>14} {'trials':>7}")
    for name, (aa, power, trials) in rows.items():
        print(f"{name:40} {aa:16.2%} {power:14.1%} {trials:7}")
    if not mixed:
        print("statsmodels not installed: MixedLM left out")


if __name__ == "__main__":
    main()
