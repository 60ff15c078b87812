"""The comparison table: per workload, case and metric, every configuration against the baseline."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from scipy import special

from ccbench.analysis.rows import pairing, plausibility
from ccbench.analysis.rows.baselines import (
    baseline_for_group,
    configurations,
    resolve_baseline,
)
from ccbench.analysis.rows.layers import layer_labels
from ccbench.analysis.rows.reduce import optional, reduced
from ccbench.analysis.samples import engine
from ccbench.analysis.statistics import replicas
from ccbench.analysis.statistics.stats import (
    CONFIDENCE,
    MIN_SAMPLES,
    NOISY_CV,
    coefficients_of_variation,
    reported_mde,
    resolution,
    resolution_variance,
    skew_flags,
)

COMPARE_COLUMNS = [
    "workload",
    "case",
    "params",
    "metric",
    "unit",
    "better",
    "baseline",
    "config",
    "baseline_median",
    "median",
    "ratio",
    "ci_low",
    "ci_high",
    "p_value",
    "se",
    "dof",
    "overhead_percent",
    "mde",
    "significant",
    "verdict",
    "cv_baseline",
    "cv",
    "n_baseline",
    "n",
    "machines_baseline",
    "machines",
    "interval_from",
    "interval",
    "settled",
    "contended_baseline",
    "contended",
    "layer",
    "flags",
    "implausible",
]


def records(table: pd.DataFrame) -> list[dict[str, Any]]:
    """``table.to_dict(orient="records")``, the same dicts with the same values (numpy's scalars as
    Python's, a missing string as its column's NA value), made a column at a time: pandas reads an
    Arrow string column one Python object at a time (as_py), which at a fleet's 40,000 rows of 30
    columns took seconds."""
    from pandas.core.dtypes.cast import maybe_box_native

    columns = table.columns.tolist()
    if len(set(columns)) != len(columns):
        return table.to_dict(orient="records")
    values = []
    for index in range(len(columns)):
        column = table.iloc[:, index]
        dtype = column.dtype
        if isinstance(dtype, np.dtype) and dtype.kind == "O":
            values.append([maybe_box_native(value) for value in column.to_numpy()])
        elif isinstance(dtype, np.dtype) and dtype.kind in "biuf":
            values.append(column.to_numpy().tolist())
        elif isinstance(dtype, pd.StringDtype):
            values.append(column.to_numpy(dtype=object, na_value=dtype.na_value).tolist())
        else:
            values.append(list(column))
    if not columns:
        return [{} for _ in range(len(table))]
    return [dict(zip(columns, row)) for row in zip(*values)]  # every list as long as the table


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


def compare(
    frame: pd.DataFrame | engine.SampleSet,
    baseline: str | None = None,
    noisy_cv: float = NOISY_CV,
    exclude_contended: bool = False,
    machines: dict[str, dict[str, Any]] | None = None,
    statistics: tuple[pd.DataFrame, pd.DataFrame] | None = None,
) -> pd.DataFrame:
    """One row per (workload, params, case, metric) and configuration other than that group's baseline.

    ``frame``: the per-sample frame (ccbench.analysis.samples.load) or the engine's SampleSet of the same
    bundles (what the commands pass: no per-sample frame needed); the table is the same.

    ``exclude_contended`` leaves out samples of executions flagged contended (others' CPU or steal
    time during the measured interval). Otherwise they stay in, counted per side in
    ``contended_baseline``/``contended`` and flagged "contended".

    ``machines`` ({the frame's ``bundle``: that bundle's probe}) lets each row be flagged "confounded
    by <what>" where the machines behind its two sides differ in CPU model, vCPUs, memory, SMT or
    kernel (ccbench.analysis.rows.sides.confounded_flags).

    The statistics of ccbench.analysis.statistics.stats.ratio_interval (Welch's t interval on log values),
    computed for all rows at once: per group and configuration the count, median, mean, standard
    deviation and the mean and variance of the logs (in DuckDB: ccbench.analysis.samples.engine), then each
    configuration against its group's baseline. tests/test_analysis.py checks every row against
    ratio_interval itself. Where the two sides are on different machines and several machines stand
    behind a side (replicas: one label, several machine ids), the interval is taken between the
    machines' means instead (the engine's machines, m_log_mean and m_log_var; ccbench.analysis.statistics.replicas;
    tests/test_replicas.py checks those rows against scipy).
    """
    # ``statistics``: reduced(frame, exclude_contended) computed once for several baselines
    stats, facts = statistics if statistics is not None else reduced(frame, exclude_contended)
    stats = stats.copy()  # the baselines are set on it
    if stats.empty:
        return pd.DataFrame(columns=COMPARE_COLUMNS)
    baseline = resolve_baseline(facts, baseline)
    # a cipher on a loop file stands against the same loop file without it, where measured
    stats = pairing.cipher_baselines(_with_group_baselines(stats, baseline))
    base, rows = _against_baseline(stats, configurations(facts))
    if rows.empty:
        return pd.DataFrame(columns=COMPARE_COLUMNS)
    intervals = _ratio_intervals(base, rows, replicas.across_machines(facts, base, rows))
    judged = _judge(base, rows, intervals, noisy_cv, _confounded(facts, rows, machines))
    return pairing.twin_layers(_table(facts, base, rows, intervals, judged), facts, machines)


def _with_group_baselines(stats: pd.DataFrame, baseline: str) -> pd.DataFrame:
    """``stats`` with each group's baseline: the baseline, or the configuration standing in for it;
    groups with neither are left out."""
    # it depends only on which configurations the group has, so it is worked out once per distinct set
    # (one stable sort of the rows by group, not a Python function called per group)
    groups = stats["group"].to_numpy()
    order = np.argsort(groups, kind="stable")
    configs = stats["config"].to_numpy(dtype=object)[order].tolist()
    starts = np.flatnonzero(np.r_[True, groups[order][1:] != groups[order][:-1]]) if len(order) else order
    firsts, ends = starts.tolist(), [*starts[1:].tolist(), len(order)][: len(starts)]
    members = pd.Series(
        [tuple(configs[start:end]) for start, end in zip(firsts, ends, strict=True)],
        index=pd.Index(groups[order][firsts], name="group"),
        name="config",
        dtype=object,
    )
    choice = {key: baseline_for_group(baseline, key) for key in set(members)}
    stats["baseline"] = stats["group"].map(members.map(choice))
    return stats[stats["baseline"].notna()]


def _against_baseline(stats: pd.DataFrame, configs: list[str]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(the baselines' statistics, the other configurations' statistics) row for row: each row of
    the second beside its own baseline in its group (``baseline``: the group's, or a cipher's loop
    twin) in the first, in report order (groups as they first appear, configurations in load order)."""
    keyed = stats.set_index(["group", "config"])
    rows = stats[stats["config"] != stats["baseline"]].copy()
    if rows.empty:
        return keyed.iloc[0:0].reset_index(level="config"), rows
    rows["order"] = rows["config"].map({c: i for i, c in enumerate(configs)})
    rows = rows.sort_values(["group", "order"], kind="stable")
    base = keyed.loc[list(zip(rows["group"], rows["baseline"], strict=True))]
    return base.reset_index(level="config"), rows  # indexed by group, as the group's baseline was


def _ratio_intervals(base: pd.DataFrame, rows: pd.DataFrame, across: np.ndarray) -> dict[str, np.ndarray]:
    """Per row, the ratio with its 95% interval and p value, and what the interval covers
    (``interval_from``, see ccbench.analysis.statistics.replicas.interval_kinds): where the sides are on different
    machines and one of them has replicas, the interval between machines (replicas.machine_intervals);
    otherwise the per-execution one (_execution_intervals)."""
    executions = _execution_intervals(base, rows)
    kinds = replicas.interval_kinds(base, rows, across)
    machines = replicas.machine_intervals(base, rows)
    # without an interval between machines (a value not positive) the ratio of medians stands, as for executions
    between = (kinds == replicas.BETWEEN_MACHINES) & machines["computable"]
    out = {name: np.where(between, machines[name], executions[name]) for name in executions}
    out["computable"] = out["computable"].astype(bool)
    out["interval_from"] = kinds
    return out


def _execution_intervals(base: pd.DataFrame, rows: pd.DataFrame) -> dict[str, np.ndarray]:
    """Ratio of geometric means with Welch's t interval on the logs, its p value and its minimum
    detectable effect (stats.reported_mde from the Welch degrees of freedom), per row; where
    the interval cannot be computed (fewer than 2 samples a side, a value not positive) the ratio of
    medians and no interval."""
    n_a, n_b = base["n"].to_numpy(dtype=float), rows["n"].to_numpy(dtype=float)
    median_a, median_b = base["median"].to_numpy(dtype=float), rows["median"].to_numpy(dtype=float)
    computable = (
        (n_a >= 2) & (n_b >= 2) & ~base["nonpositive"].to_numpy(dtype=bool) & ~rows["nonpositive"].to_numpy(dtype=bool)
    )
    # a side's spread is never below what rounding adds (stats.resolution_variance): values that tie
    # (whole milliseconds, a low IOPS rate) give a narrow interval, never one of zero width
    step = np.fmin(resolution(median_a), resolution(median_b))
    with np.errstate(divide="ignore", invalid="ignore"):
        diff = rows["log_mean"].to_numpy() - base["log_mean"].to_numpy()
        log_var_a = np.fmax(base["log_var"].to_numpy(dtype=float), resolution_variance(median_a, step))
        log_var_b = np.fmax(rows["log_var"].to_numpy(dtype=float), resolution_variance(median_b, step))
        var_a, var_b = log_var_a / n_a, log_var_b / n_b
        se = np.sqrt(var_a + var_b)
        dof = (var_a + var_b) ** 2 / (
            np.where(var_a > 0, var_a**2 / (n_a - 1), 0) + np.where(var_b > 0, var_b**2 / (n_b - 1), 0)
        )
        t = special.stdtrit(dof, 0.5 + CONFIDENCE / 2)
        spread = np.where(se > 0, t * se, 0.0)
        ratio = np.where(computable, np.exp(diff), np.where(median_a != 0, median_b / median_a, np.nan))
        low = np.where(computable, np.exp(diff - spread), np.nan)
        high = np.where(computable, np.exp(diff + spread), np.nan)
        p_value = np.where(
            computable,
            np.where(se > 0, 2 * special.stdtr(dof, -np.abs(diff / se)), np.where(diff != 0, 0.0, 1.0)),
            np.nan,
        )
        # both sides without spread: nothing but an exact repeat would pass unseen (an MDE of 0)
        mde = np.where(
            computable,
            np.where(se > 0, reported_mde(se, np.where(se > 0, dof, np.nan), np.minimum(n_a, n_b)), 0.0),
            np.nan,
        )
    return {
        "computable": computable,
        "ratio": ratio,
        "ci_low": low,
        "ci_high": high,
        "p_value": p_value,
        "mde": mde,
        # the row's own standard error of its log ratio and its degrees of freedom, for whatever pools it
        "se": np.where(computable & (se > 0), se, np.nan),
        "dof": np.where(computable & (se > 0), dof, np.nan),
    }


def _confounded(data: pd.DataFrame, rows: pd.DataFrame, machines: dict[str, dict[str, Any]] | None) -> list | None:
    if not machines:
        return None
    from ccbench.analysis.rows.sides import confounded_flags

    return confounded_flags(data, rows["baseline"], rows["config"], machines)


def _judge(
    base: pd.DataFrame,
    rows: pd.DataFrame,
    intervals: dict[str, np.ndarray],
    noisy_cv: float,
    confounded: list[str | None] | None = None,
) -> dict[str, Any]:
    """Per row: each side's CV and contended count, whether the difference is significant, and the flags."""
    n_a, n_b = base["n"].to_numpy(dtype=float), rows["n"].to_numpy(dtype=float)
    cv_a = coefficients_of_variation(base["std"].to_numpy(), base["mean"].to_numpy(), n_a)
    cv_b = coefficients_of_variation(rows["std"].to_numpy(), rows["mean"].to_numpy(), n_b)
    contended_a, contended_b = base["contended"].to_numpy(dtype=int), rows["contended"].to_numpy(dtype=int)
    few = (n_a < MIN_SAMPLES) | (n_b < MIN_SAMPLES)
    noisy = (np.nan_to_num(cv_a) > noisy_cv) | (np.nan_to_num(cv_b) > noisy_cv)
    significant = intervals["computable"] & ((intervals["ci_low"] > 1.0) | (intervals["ci_high"] < 1.0)) & ~few
    return {
        "cv_a": cv_a,
        "cv_b": cv_b,
        "contended_a": contended_a,
        "contended_b": contended_b,
        "significant": significant,
        # rows that can never be called significant can detect nothing
        "can_detect": ~few & ~(base["summary"].to_numpy(dtype=bool) | rows["summary"].to_numpy(dtype=bool)),
        "flags": _flags(
            few,
            noisy,
            significant,
            (contended_a + contended_b) > 0,
            base["summary"].to_numpy(dtype=bool) | rows["summary"].to_numpy(dtype=bool),
            confounded,
        ),
    }


def _flags(
    few: np.ndarray,
    noisy: np.ndarray,
    significant: np.ndarray,
    contended: np.ndarray,
    summary: np.ndarray,
    confounded: list[str | None] | None = None,
) -> list[list[str]]:
    confounded = confounded if confounded is not None else [None] * len(few)
    flags = []
    for is_few, is_noisy, is_significant, is_contended, is_summary, confounded_by in zip(
        few, noisy, significant, contended, summary, confounded, strict=True
    ):
        row_flags = ["not enough samples"] if is_few else []
        if is_noisy:
            row_flags.append("noisy")
        if not is_significant and not is_few:
            row_flags.append("not significant")
        if is_contended:
            row_flags.append("contended")
        if is_summary:
            # an imported console log's mean and standard deviation: how many values stand behind
            # each is unknown, so no interval can honestly be built from them
            row_flags.append("summary statistics (number of values unknown)")
        if confounded_by:
            # the machines behind the two sides differ in more than the layer (ccbench.analysis.rows.sides)
            row_flags.append(confounded_by)
        flags.append(row_flags)
    return flags


def _table(
    data: pd.DataFrame,
    base: pd.DataFrame,
    rows: pd.DataFrame,
    intervals: dict[str, np.ndarray],
    judged: dict[str, Any],
) -> pd.DataFrame:
    """The comparison table's columns (COMPARE_COLUMNS), one row per row of ``rows``."""
    ratio, significant = intervals["ratio"], judged["significant"]
    better = [None if v is None or (isinstance(v, float) and np.isnan(v)) else v for v in rows["better"]]
    layers = layer_labels(data, zip(rows["baseline"], rows["config"]))
    out = pd.DataFrame(
        {
            "workload": rows["workload"].to_numpy(),
            "case": rows["case"].to_numpy(),
            "params": rows["params"].to_numpy(),
            "metric": rows["metric"].to_numpy(),
            "unit": rows["unit"].to_numpy(),
            "better": better,
            "baseline": rows["baseline"].to_numpy(),
            "config": rows["config"].to_numpy(),
            "baseline_median": base["median"].to_numpy(dtype=float),
            "median": rows["median"].to_numpy(dtype=float),
            "ratio": ratio,
            "ci_low": intervals["ci_low"],
            "ci_high": intervals["ci_high"],
            "p_value": intervals["p_value"],
            "se": intervals["se"],
            "dof": intervals["dof"],
            "overhead_percent": [overhead_percent(r, d) for r, d in zip(ratio, better)],
            "mde": np.where(judged["can_detect"], intervals["mde"], np.nan),
            "significant": significant.astype(bool),
            "verdict": [verdict(r, d, s) for r, d, s in zip(ratio, better, significant)],
            "cv_baseline": optional(judged["cv_a"]),
            "cv": optional(judged["cv_b"]),
            "n_baseline": base["n"].to_numpy(dtype=float).astype(int),
            "n": rows["n"].to_numpy(dtype=float).astype(int),
            "machines_baseline": base["machines"].to_numpy(dtype=float).astype(int),
            "machines": rows["machines"].to_numpy(dtype=float).astype(int),
            "interval_from": intervals["interval_from"],
            # the interval the row uses; a settled case's (ccbench.analysis.settling.settled) is set after
            "interval": replicas.interval_names(intervals["interval_from"]),
            "settled": None,
            "contended_baseline": judged["contended_a"],
            "contended": judged["contended_b"],
            "layer": [layers[pair] for pair in zip(rows["baseline"], rows["config"])],
            "flags": judged["flags"],
        }
    )
    # numbers that cannot be what they claim (ccbench.analysis.rows.plausibility): the reason on the row, a
    # flag beside the others; the verdict leaves these rows out of its headline
    out["implausible"] = plausibility.implausible(out, data)
    out["flags"] = [
        [*flags, "implausible"] if reason else flags
        for flags, reason in zip(out["flags"], out["implausible"], strict=True)
    ]
    values = zip(out["flags"], significant, out["baseline_median"], out["median"], ratio, strict=True)
    out["flags"] = [skew_flags(*row) for row in values]
    return out[COMPARE_COLUMNS].reset_index(drop=True)


def with_time_equivalent(comparison: pd.DataFrame) -> pd.DataFrame:
    """A copy of comparison rows with ``te``, ``te_low``, ``te_high`` (a throughput's ratio inverted)."""
    data = comparison.copy()
    higher = (data["better"] == "higher").to_numpy()
    ratio = data["ratio"].to_numpy(dtype=float)
    low, high = data["ci_low"].to_numpy(dtype=float), data["ci_high"].to_numpy(dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        data["te"] = np.where(higher, 1 / ratio, ratio)
        data["te_low"] = np.where(higher, 1 / high, low)
        data["te_high"] = np.where(higher, 1 / low, high)
    return data
