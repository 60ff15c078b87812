"""The comparison table: per workload, case and metric, every configuration against the baseline."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ccbench.analysis.stats import MIN_SAMPLES, NOISY_CV, coefficient_of_variation, ratio_interval
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
    data = measured(frame)
    # facts (better = None: memory size, thread count) describe a machine; they are not compared
    data = data[data["better"].isin(["lower", "higher"])]
    if data.empty:
        return pd.DataFrame(columns=COMPARE_COLUMNS)
    baseline = resolve_baseline(data, baseline)
    configs = configurations(data)
    rows: list[dict[str, Any]] = []
    grouped = {key: group for key, group in data.groupby(GROUP, sort=False)}
    for key, group in grouped.items():
        workload, params, case, metric = key
        by_config = {c: g["value"].to_numpy() for c, g in group.groupby("config", sort=False)}
        group_baseline = baseline_for_group(baseline, by_config)
        if group_baseline is None:
            continue
        base = by_config[group_baseline]
        unit = group["unit"].iloc[0]
        better = group["better"].iloc[0]
        better = None if better is None or (isinstance(better, float) and np.isnan(better)) else better
        cv_base = coefficient_of_variation(base)
        for config in configs:
            if config == group_baseline or config not in by_config:
                continue
            values = by_config[config]
            cv = coefficient_of_variation(values)
            flags = []
            if len(base) < MIN_SAMPLES or len(values) < MIN_SAMPLES:
                flags.append("not enough samples")
            if (cv_base or 0) > noisy_cv or (cv or 0) > noisy_cv:
                flags.append("noisy")
            interval = ratio_interval(base, values)
            if interval is None:
                ratio = float(np.median(values) / np.median(base)) if np.median(base) else float("nan")
                low = high = p_value = float("nan")
                significant = False
            else:
                ratio, low, high, p_value = interval.ratio, interval.low, interval.high, interval.p_value
                significant = interval.significant and "not enough samples" not in flags
            if not significant and "not enough samples" not in flags:
                flags.append("not significant")
            rows.append({
                "workload": workload, "case": case, "params": params, "metric": metric, "unit": unit, "better": better,
                "baseline": group_baseline, "config": config, "baseline_median": float(np.median(base)),
                "median": float(np.median(values)), "ratio": ratio, "ci_low": low, "ci_high": high, "p_value": p_value,
                "overhead_percent": overhead_percent(ratio, better), "significant": bool(significant),
                "verdict": verdict(ratio, better, significant), "cv_baseline": cv_base, "cv": cv,
                "n_baseline": len(base), "n": len(values), "flags": flags,
            })
    return pd.DataFrame(rows, columns=COMPARE_COLUMNS)


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
