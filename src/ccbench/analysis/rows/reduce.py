"""The samples reduced to statistics per group (workload, params, case, metric) and configuration:
n, median, mean, the logs' mean and variance, the machine level, in DuckDB (ccbench.analysis.samples.engine),
from a SampleSet or a per-sample frame; the summary per configuration (median, quartiles, CV) the
report's tables show."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ccbench.analysis.samples import engine
from ccbench.analysis.statistics.stats import coefficients_of_variation

GROUP = ["workload", "params", "case", "metric"]


def measured(frame: pd.DataFrame) -> pd.DataFrame:
    return frame[~frame["warmup"]]


def reduced(frame: pd.DataFrame | engine.SampleSet, exclude_contended: bool) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(the statistics per group and configuration, the facts of the configurations compared: a frame
    with config, bundle, machine, tee, storage and transport, in order of first appearance)."""
    if isinstance(frame, engine.SampleSet):
        first = "first_quiet" if exclude_contended else "first"
        facts = frame.facts[np.isfinite(frame.facts[first].to_numpy(dtype=float))].sort_values(first, kind="stable")
        if facts.empty:
            return pd.DataFrame(), facts
        return set_statistics(frame, exclude_contended), facts.reset_index(drop=True)
    data = _comparable(frame, exclude_contended)
    if data.empty:
        return pd.DataFrame(), data
    return frame_statistics(data), data


def _comparable(frame: pd.DataFrame, exclude_contended: bool) -> pd.DataFrame:
    """The measured samples of metrics with a direction, each with its ``contended`` flag (False
    where the bundle has none), the contended ones left out with ``exclude_contended``."""
    data = measured(frame)
    # facts (better = None: memory size, thread count) describe a machine; they are not compared
    data = data[data["better"].isin(["lower", "higher"])]
    if "contended" not in data:
        data = data.assign(contended=False)
    if exclude_contended:
        data = data[~data["contended"].astype(bool)]
    return data


def frame_statistics(data: pd.DataFrame) -> pd.DataFrame:
    """Per group (in order of first appearance) and configuration: n, median, mean, standard
    deviation, the mean and variance of the logs, whether any value was not positive (no log), the
    contended samples, the group's labels, unit and direction, and the machine level (machines,
    m_log_mean, m_log_var: ccbench.analysis.samples.engine.group_statistics), computed in DuckDB."""
    rows, codes = engine.frame_rows(data, GROUP)
    connection = engine.connect()
    try:
        connection.register("frame_rows", rows)
        stats = engine.group_statistics(connection, "SELECT * FROM frame_rows")
    finally:
        connection.close()
    return _labelled(stats, codes["groups"], codes["configs"], codes["strings"])


def set_statistics(samples: engine.SampleSet, exclude_contended: bool) -> pd.DataFrame:
    """frame_statistics over a SampleSet's measured rows."""
    connection = samples.connection()
    try:
        stats = engine.group_statistics(connection, engine.set_rows(samples, exclude_contended))
    finally:
        connection.close()
    return _labelled(stats, dict(enumerate(samples.groups)), samples.configs, samples.strings)


def _labelled(stats: pd.DataFrame, groups: dict, configs: list[str], strings: list) -> pd.DataFrame:
    """The engine's statistics with the codes replaced by what they stand for; ``group`` numbered in
    order of first appearance of the group."""
    if stats.empty:
        return stats
    first = stats.groupby("grp")["first"].transform("min")
    stats["group"] = first.rank(method="dense").astype(int) - 1
    labels = pd.DataFrame([groups[g] for g in stats["grp"]], columns=GROUP, index=stats.index)
    for column in GROUP:
        stats[column] = labels[column]
    stats["config"] = [configs[c] for c in stats["cfg"]]
    stats["unit"] = [strings[c] for c in stats["unit"]]
    stats["better"] = [strings[c] for c in stats["better"]]
    stats["n"] = stats["n"].astype(int)
    stats["contended"] = stats["contended"].astype(int)
    stats["machines"] = stats["machines"].astype(int)
    return stats.drop(columns=["grp", "cfg", "first"]).reset_index(drop=True)


def optional(values: np.ndarray) -> list[float | None]:
    return [None if np.isnan(v) else float(v) for v in values]


def summary_by_config(frame: pd.DataFrame | engine.SampleSet, exclude_contended: bool = False) -> pd.DataFrame:
    """Median, quartiles, CV and n per group and configuration (for charts and the noisy list);
    ``exclude_contended`` leaves the contended samples out."""
    if isinstance(frame, engine.SampleSet):
        return _set_summary(frame, exclude_contended)
    data = measured(frame)
    if exclude_contended:
        data = data[~data["contended"].astype(bool)]
    grouped = data.groupby(GROUP + ["config", "unit", "better"], sort=False, dropna=False)["value"]
    table = grouped.agg(median="median", mean="mean", std="std", n="count")
    table["q1"] = grouped.quantile(0.25)
    table["q3"] = grouped.quantile(0.75)
    table = table.reset_index()
    table["cv"] = coefficients_of_variation(table["std"], table["mean"], table["n"])
    return table


def _set_summary(samples: engine.SampleSet, exclude_contended: bool) -> pd.DataFrame:
    connection = samples.connection()
    try:
        rows = engine.set_rows(samples, exclude_contended, directed_only=False)
        table = engine.summary_statistics(connection, rows)
    finally:
        connection.close()
    labels = pd.DataFrame([samples.groups[g] for g in table["grp"]], columns=GROUP, index=table.index)
    out = labels.assign(
        config=[samples.configs[c] for c in table["cfg"]],
        unit=[samples.strings[c] for c in table["unit"]],
        better=[samples.strings[c] for c in table["better"]],
    )
    for column in ("median", "mean", "std"):
        out[column] = table[column]
    out["n"] = table["n"].astype(int)
    out["q1"], out["q3"] = table["q1"], table["q3"]
    out["cv"] = coefficients_of_variation(out["std"], out["mean"], out["n"])
    return out.reset_index(drop=True)
