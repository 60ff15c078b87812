"""The comparison table: per workload, case and metric, every configuration against the baseline."""

from __future__ import annotations


import numpy as np
import pandas as pd

from scipy import special

from ccbench.analysis.stats import CONFIDENCE, MIN_SAMPLES, NOISY_CV
from ccbench.errors import CCBenchError

GROUP = ["workload", "params", "case", "metric"]

COMPARE_COLUMNS = ["workload", "case", "params", "metric", "unit", "better", "baseline", "config",
                   "baseline_median", "median", "ratio", "ci_low", "ci_high", "p_value", "overhead_percent",
                   "significant", "verdict", "cv_baseline", "cv", "n_baseline", "n", "flags"]


def measured(frame: pd.DataFrame) -> pd.DataFrame:
    return frame[~frame["warmup"]]


def protection_count(row: pd.Series) -> int:
    count = 0 if row["tee"] in ("none", None) else 1
    count += 0 if row["storage"] in (None, "disk") or pd.isna(row["storage"]) else 1
    count += 0 if row["transport"] in (None, "plain") or pd.isna(row["transport"]) else 1
    return count


def configurations(frame: pd.DataFrame) -> list[str]:
    """Configurations in load order (first bundle first)."""
    return list(dict.fromkeys(frame["config"]))


def default_baseline(frame: pd.DataFrame) -> str:
    """The first bundle's configuration with the fewest active protection layers."""
    first = frame[frame["bundle"] == frame["bundle"].iloc[0]].drop_duplicates("config")
    ranked = sorted(first.itertuples(index=False), key=lambda r: protection_count(pd.Series(r._asdict())))
    return ranked[0].config


def resolve_baseline(frame: pd.DataFrame, baseline: str | None) -> str:
    configs = configurations(frame)
    if baseline is None:
        return default_baseline(frame)
    if baseline in configs:
        return baseline
    matches = [c for c in configs if baseline.lower() in c.lower()]
    if len(matches) == 1:
        return matches[0]
    hint = "; ".join(configs)
    if not matches:
        raise CCBenchError(f"--baseline {baseline!r}: no such configuration; the configurations are: {hint}")
    raise CCBenchError(f"--baseline {baseline!r} matches several configurations ({'; '.join(matches)}); give the full label")


def baseline_for_group(baseline: str, configs) -> str | None:
    """The baseline itself, or for a workload that uses fewer layers (prime has no storage variant) the
    configuration whose parts are all in the baseline's ("vm / no TEE" for baseline "vm / no TEE / disk")."""
    if baseline in configs:
        return baseline
    parts = set(baseline.split(" / "))
    candidates = [c for c in configs if set(c.split(" / ")) <= parts]
    if candidates:
        return max(candidates, key=lambda c: len(c.split(" / ")))
    # or the other way round: the baseline names fewer layers, the group adds only unprotected ones
    unprotected = {"disk", "plain"}
    extended = [c for c in configs if parts <= set(c.split(" / ")) and set(c.split(" / ")) - parts <= unprotected]
    return min(extended, key=lambda c: len(c.split(" / "))) if extended else None


def verdict(ratio: float, better: str | None, significant: bool) -> str:
    if not significant:
        return "not significant"
    if better is None:
        return "higher" if ratio > 1 else "lower"
    worse = ratio > 1 if better == "lower" else ratio < 1
    return "slower" if worse else "faster"


def overhead_percent(ratio: float, better: str | None) -> float:
    """How much worse (positive) or better (negative) than the baseline, as the cost in time."""
    if better == "higher":
        return (1 / ratio - 1) * 100 if ratio else float("inf")
    return (ratio - 1) * 100


def compare(frame: pd.DataFrame, baseline: str | None = None, noisy_cv: float = NOISY_CV) -> pd.DataFrame:
    """One row per (workload, params, case, metric) and configuration other than that group's baseline.

    The statistics of ccbench.analysis.stats.ratio_interval (Welch's t interval on log values),
    computed for all rows at once: per group and configuration the count, median, mean, standard
    deviation and the mean and variance of the logs, then each configuration against its group's
    baseline. tests/test_analysis.py checks every row against ratio_interval itself.
    """
    data = measured(frame)
    # facts (better = None: memory size, thread count) describe a machine; they are not compared
    data = data[data["better"].isin(["lower", "higher"])]
    if data.empty:
        return pd.DataFrame(columns=COMPARE_COLUMNS)
    baseline = resolve_baseline(data, baseline)
    configs = configurations(data)
    values = data["value"].to_numpy(dtype=float)
    positive = values > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        logs = np.where(positive, np.log(np.where(positive, values, 1.0)), np.nan)
    work = data[GROUP + ["config", "unit", "better"]].assign(value=values, log=logs, nonpositive=~positive)
    # group numbers in order of first appearance; sort=False keeps that order in the aggregate
    work["group"] = work.groupby(GROUP, sort=False, dropna=False).ngroup()
    grouped = work.groupby(["group", "config"], sort=False)
    stats = grouped.agg(n=("value", "size"), median=("value", "median"), mean=("value", "mean"),
                        std=("value", "std"), log_mean=("log", "mean"), log_var=("log", "var"),
                        nonpositive=("nonpositive", "any")).reset_index()
    # the group's label, unit and direction come from its first sample
    first = work.drop_duplicates("group").set_index("group")
    for column in ("workload", "params", "case", "metric", "unit", "better"):
        stats[column] = stats["group"].map(first[column])
    # each group's baseline: the baseline, or the configuration standing in for it (depends only on
    # which configurations the group has, so it is worked out once per distinct set)
    members = stats.groupby("group", sort=False)["config"].agg(tuple)
    choice = {key: baseline_for_group(baseline, key) for key in set(members)}
    stats["baseline"] = stats["group"].map(members.map(choice))
    stats = stats[stats["baseline"].notna()]
    base = stats[stats["config"] == stats["baseline"]].set_index("group")
    rows = stats[stats["config"] != stats["baseline"]].copy()
    if rows.empty:
        return pd.DataFrame(columns=COMPARE_COLUMNS)
    # report order: groups as they first appear, configurations in load order
    rows["order"] = rows["config"].map({c: i for i, c in enumerate(configs)})
    rows = rows.sort_values(["group", "order"], kind="stable")
    b = base.loc[rows["group"]]
    n_a, n_b = b["n"].to_numpy(dtype=float), rows["n"].to_numpy(dtype=float)
    cv_a = _cv(b["std"].to_numpy(), b["mean"].to_numpy(), n_a)
    cv_b = _cv(rows["std"].to_numpy(), rows["mean"].to_numpy(), n_b)
    median_a, median_b = b["median"].to_numpy(dtype=float), rows["median"].to_numpy(dtype=float)

    computable = (n_a >= 2) & (n_b >= 2) & ~b["nonpositive"].to_numpy(dtype=bool) & ~rows["nonpositive"].to_numpy(dtype=bool)
    with np.errstate(divide="ignore", invalid="ignore"):
        diff = rows["log_mean"].to_numpy() - b["log_mean"].to_numpy()
        var_a, var_b = b["log_var"].to_numpy() / n_a, rows["log_var"].to_numpy() / n_b
        se = np.sqrt(var_a + var_b)
        dof = (var_a + var_b) ** 2 / (np.where(var_a > 0, var_a**2 / (n_a - 1), 0) + np.where(var_b > 0, var_b**2 / (n_b - 1), 0))
        t = special.stdtrit(dof, 0.5 + CONFIDENCE / 2)
        spread = np.where(se > 0, t * se, 0.0)
        ratio = np.where(computable, np.exp(diff), np.where(median_a != 0, median_b / median_a, np.nan))
        low = np.where(computable, np.exp(diff - spread), np.nan)
        high = np.where(computable, np.exp(diff + spread), np.nan)
        p_value = np.where(computable, np.where(se > 0, 2 * special.stdtr(dof, -np.abs(diff / se)),
                                                np.where(diff != 0, 0.0, 1.0)), np.nan)
    few = (n_a < MIN_SAMPLES) | (n_b < MIN_SAMPLES)
    noisy = (np.nan_to_num(cv_a) > noisy_cv) | (np.nan_to_num(cv_b) > noisy_cv)
    significant = computable & ((low > 1.0) | (high < 1.0)) & ~few
    better = [None if v is None or (isinstance(v, float) and np.isnan(v)) else v for v in rows["better"]]
    flags = []
    for is_few, is_noisy, is_significant in zip(few, noisy, significant):
        row_flags = ["not enough samples"] if is_few else []
        if is_noisy:
            row_flags.append("noisy")
        if not is_significant and not is_few:
            row_flags.append("not significant")
        flags.append(row_flags)
    out = pd.DataFrame({
        "workload": rows["workload"].to_numpy(), "case": rows["case"].to_numpy(), "params": rows["params"].to_numpy(),
        "metric": rows["metric"].to_numpy(), "unit": rows["unit"].to_numpy(), "better": better,
        "baseline": rows["baseline"].to_numpy(), "config": rows["config"].to_numpy(),
        "baseline_median": median_a, "median": median_b, "ratio": ratio, "ci_low": low, "ci_high": high,
        "p_value": p_value,
        "overhead_percent": [overhead_percent(r, d) for r, d in zip(ratio, better)],
        "significant": significant.astype(bool),
        "verdict": [verdict(r, d, s) for r, d, s in zip(ratio, better, significant)],
        "cv_baseline": _optional(cv_a), "cv": _optional(cv_b),
        "n_baseline": n_a.astype(int), "n": n_b.astype(int), "flags": flags,
    })
    return out[COMPARE_COLUMNS].reset_index(drop=True)


def _cv(std: np.ndarray, mean: np.ndarray, n: np.ndarray) -> np.ndarray:
    """Coefficient of variation (sample standard deviation over mean); NaN below 2 samples or at mean 0."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where((n >= 2) & (mean != 0), std / mean, np.nan)


def _optional(values: np.ndarray) -> list[float | None]:
    return [None if np.isnan(v) else float(v) for v in values]


def summary_by_config(frame: pd.DataFrame) -> pd.DataFrame:
    """Median, quartiles, CV and n per group and configuration (for charts and the noisy list)."""
    data = measured(frame)
    grouped = data.groupby(GROUP + ["config", "unit", "better"], sort=False, dropna=False)["value"]
    table = grouped.agg(median="median", mean="mean", std="std", n="count")
    table["q1"] = grouped.quantile(0.25)
    table["q3"] = grouped.quantile(0.75)
    table = table.reset_index()
    table["cv"] = table["std"] / table["mean"]
    return table
