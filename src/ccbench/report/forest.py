"""The rows of the report's forest plots: each configuration's cost against the baseline as a time
ratio (configuration / baseline, > 1 = slower) with its 95% interval, per workload case, on the
workloads' primary (application-level) metrics.

A workload with many cases (pyperformance's 92 benchmarks) is one pooled row in the first chart:
the geometric mean of its cases' ratios with a t interval from the spread between them (the cases
are the sample), and the range of the cases beside it; its own chart lists every case. A row
whose comparison had one value on a side has no interval, and says so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ccbench.analysis.judgement import impact
from ccbench.analysis.judgement.layer import layer_rank
from ccbench.analysis.rows import pairing

# the verdict's own conversions (ccbench.analysis.judgement.semantics, .verdict) are imported where they are
# used: a helper process that draws a Forest unpickles this module, and should not load scipy.stats
# (a third of a second) for charts that never call them

#: rows the first screen's chart holds before workloads are pooled, then hidden (and counted)
FIRST_SCREEN_ROWS = 28
#: rows (cases) a workload's own chart holds before the rest are hidden (and counted)
WORKLOAD_ROWS = 120


@dataclass
class Forest:
    """What a forest chart draws: ``rows`` (one per label and configuration: label, config, layer,
    te, te_low, te_high, range_low, range_high, cases, significant, kind in {"row", "pooled",
    "one value", "implausible"}), the labels and configurations in drawing order, and what was left
    out. An implausible row (the plausibility checks left it out of the verdict) is drawn as a grey
    cross, never counted significant, and never pooled."""

    rows: pd.DataFrame
    labels: list[str]
    configs: list[str]
    layers: dict[str, str]
    hidden: list[str] = field(default_factory=list)
    pooled: list[str] = field(default_factory=list)
    #: implausible cases of pooled workloads, left out of their pools
    left_out: int = 0

    @property
    def empty(self) -> bool:
        return self.rows.empty


def time_equivalent(comparison: pd.DataFrame) -> pd.DataFrame:
    """The rows with ``te``, ``te_low``, ``te_high``: the time ratio and its interval (a throughput
    ratio of 0.5 is a time ratio of 2); rows without a direction (facts) or a usable ratio dropped."""
    from ccbench.analysis.rows.compare import with_time_equivalent

    rows = with_time_equivalent(comparison[comparison["better"].isin(["lower", "higher"])])
    return rows[np.isfinite(rows["te"]) & (rows["te"] > 0)]


def primary(comparison: pd.DataFrame, samples: pd.DataFrame | None) -> pd.DataFrame:
    """Each workload's primary-metric rows; a workload that declares none (an import of an unknown
    kind) keeps every metric, a per-message benchmark (round trips, handshakes) none: the verdict
    states those as a share of application work instead."""
    declared = impact.declarations(samples)
    mask = impact.primary_mask(comparison, declared)
    has_primary = set(comparison.loc[mask, "workload"])

    def undeclared(workload) -> bool:
        known = declared.get(workload)
        return workload not in has_primary and not (known is not None and known.message_costs)

    return comparison[mask | comparison["workload"].map(undeclared).to_numpy(dtype=bool)]


def _case_label(row, several_metrics: bool) -> str:
    case = row["case"] if isinstance(row["case"], str) and row["case"] else ""
    parts = [str(row["workload"]), case, str(row["metric"]) if several_metrics or not case else ""]
    return " ".join(p for p in parts if p)


def pooled(te: np.ndarray) -> tuple[float, float, float]:
    """Geometric mean of ratios with a t interval from their spread (the cases are the sample): the
    verdict's own interval between workloads."""
    from ccbench.analysis.judgement.verdict import t_interval

    return t_interval(np.log(te))


def _implausible(data: pd.DataFrame) -> np.ndarray:
    """Which rows the plausibility checks left out of the verdict (ccbench.analysis.rows.plausibility)."""
    if "implausible" not in data:
        return np.zeros(len(data), dtype=bool)
    return data["implausible"].fillna("").astype(str).ne("").to_numpy()


def _case_rows(data: pd.DataFrame, several: dict) -> pd.DataFrame:
    out = data.copy()
    out["label"] = [_case_label(row, several[row["workload"]]) for row in out.to_dict(orient="records")]
    out["range_low"] = out["range_high"] = math.nan
    out["cases"] = 1
    one_value = ~(np.isfinite(out["te_low"]) & np.isfinite(out["te_high"]))
    implausible = _implausible(out)
    out["kind"] = np.where(implausible, "implausible", np.where(one_value, "one value", "row"))
    out["significant"] = out["significant"].astype(bool) & ~implausible
    return out


def _pooled_rows(data: pd.DataFrame, workload: str) -> pd.DataFrame:
    records = []
    # an implausible case measures no layer: it is left out of the pool (the caption counts it)
    for (config, metric), rows in data[~_implausible(data)].groupby(["config", "metric"], sort=False):
        te = rows["te"].to_numpy(dtype=float)
        typical, low, high = pooled(te)
        records.append(
            {
                "workload": workload,
                "metric": metric,
                "config": config,
                "layer": rows["layer"].iloc[0],
                "label": f"{workload} {metric}: {len(rows)} cases pooled",
                "te": typical,
                "te_low": low,
                "te_high": high,
                "range_low": float(te.min()),
                "range_high": float(te.max()),
                "cases": len(rows),
                # the interval from the spread between the cases leaves out 1x
                "significant": bool(np.isfinite(low) and (low > 1 or high < 1)),
                "kind": "pooled",
            }
        )
    return pd.DataFrame(records)


#: what own_columns adds to a configuration's name for its rows against its own machine's baseline
OWN = " (vs"


def measured_config(column: str) -> str:
    """The configuration a panel or column of own_columns draws (its colour and series are that
    configuration's)."""
    return column.split(OWN)[0]


def own_columns(data: pd.DataFrame) -> pd.DataFrame:
    """A configuration that stands against another machine's baseline and against its own machine's
    too (its own layers, ccbench.analysis.comparison) gets a panel for each: the rows against its own
    are drawn under "<config> (vs <what its own baseline has instead>)": "snp / SEV-SNP / fscrypt (vs
    disk)"."""
    if data.empty or "baseline" not in data:
        return data
    machine_of = {c: str(c).split(" / ")[0] for c in (*data["baseline"], *data["config"])}
    across = {c for b, c in zip(data["baseline"], data["config"]) if machine_of[b] != machine_of[c]}
    own = [c in across and machine_of[b] == machine_of[c] for b, c in zip(data["baseline"], data["config"])]
    if not any(own):
        return data
    data = data.copy()
    renamed = [
        f"{c}{OWN} {' / '.join(p for p in b.split(' / ') if p not in c.split(' / '))})"
        for b, c in zip(data["baseline"], data["config"])
    ]
    data["config"] = np.where(own, renamed, data["config"].to_numpy(dtype=object))
    return data


def build(
    comparison: pd.DataFrame | None,
    samples: pd.DataFrame | None,
    max_rows: int = FIRST_SCREEN_ROWS,
    workloads: list[str] | None = None,
    pool: bool = True,
) -> Forest:
    """The forest of ``comparison``'s primary rows (of ``workloads`` only, when given). Workloads
    are pooled into one row each, those with the most cases first, until the chart holds at most
    ``max_rows`` labels (with ``pool``); what still does not fit is hidden and counted."""
    empty = Forest(pd.DataFrame(), [], [], {})
    if comparison is None or comparison.empty:
        return empty
    data = own_columns(time_equivalent(primary(comparison, samples)))
    if workloads is not None:
        data = data[data["workload"].isin(workloads)]
    if data.empty:
        return empty
    several = data.groupby("workload")["metric"].nunique().gt(1).to_dict()
    labels_of = {
        workload: list(dict.fromkeys(_case_rows(rows, several)["label"]))
        for workload, rows in data.groupby("workload", sort=False)
    }
    pooled_workloads: list[str] = []
    if pool:
        by_size = sorted(labels_of, key=lambda w: -len(labels_of[w]))
        for workload in by_size:
            if sum(len(labels_of[w]) if w not in pooled_workloads else 1 for w in labels_of) <= max_rows:
                break
            if len(labels_of[workload]) > 1:
                pooled_workloads.append(workload)
    parts = []
    for workload, rows in data.groupby("workload", sort=False):
        parts.append(_pooled_rows(rows, workload) if workload in pooled_workloads else _case_rows(rows, several))
    frame = pd.concat(parts, ignore_index=True)
    frame["significant"] = frame["significant"].astype(bool)
    labels = list(dict.fromkeys(frame["label"]))
    hidden = labels[max_rows:]
    labels = labels[:max_rows]
    frame = frame[frame["label"].isin(labels)]
    layers = frame.drop_duplicates("config").set_index("config")["layer"].astype(str).to_dict()
    # a panel whose every row stands against its loop twin says so under its heading
    if {"baseline", "config"} <= set(data.columns):
        twin = pd.Series(pairing.against_twin(data), index=data.index).groupby(data["config"]).all()
        layers = {
            c: f"{layer} (against {pairing.LOOP_CONTROL})" if twin.get(c) else layer for c, layer in layers.items()
        }
    configs = sorted(layers, key=lambda c: (layer_rank(layers[c]), list(layers).index(c)))
    left_out = int(_implausible(data[data["workload"].isin(pooled_workloads)]).sum())
    return Forest(frame.reset_index(drop=True), labels, configs, layers, hidden, pooled_workloads, left_out)


def _significant_means(rows: pd.DataFrame) -> str:
    """What "significant" means in the chart: its interval clear of 1x; with rows of a run settled by
    layer, called across its layer (e-BH), so a faint row's own interval may be clear of 1x."""
    if "layer_settled" in rows and rows["layer_settled"].notna().any():
        return (
            "interval clear of 1x; in a run settled by layer, called across its layer by e-BH: a faint row's "
            "own interval may be clear of 1x"
        )
    return "interval clear of 1x"


def caption(data: Forest, baseline: str | None) -> str:
    """What the chart shows, in words that match it: how many rows are significant (interval clear
    of 1x) and which way, what a diamond and an open circle mean, and what was pooled or hidden."""
    rows = data.rows
    left_out = int(data.left_out)
    implausible = int((rows["kind"] == "implausible").sum())
    # the counts are of the rows the verdict judged: the grey crosses are in none of them
    judged = rows[rows["kind"] != "implausible"]
    significant = judged[judged["significant"].astype(bool)]
    slower, faster = int((significant["te"] > 1).sum()), int((significant["te"] < 1).sum())
    twins = pairing.baselines(rows)[1].strip(" ()") if {"baseline", "config"} <= set(rows.columns) else ""
    against = f"{baseline}; {twins}" if twins else f"{baseline}"
    parts = [
        f"Time of each configuration against the baseline ({against}) per workload case, primary metrics, "
        "95% interval; 1x = the same, right of it slower (log scale). "
        f"{len(significant)} of {len(judged)} rows significant ({_significant_means(rows)}): {slower} slower, "
        f"{faster} faster; solid rows are significant, faint ones are not."
    ]
    if implausible:
        parts.append(
            f"Grey crosses ({implausible}): implausible rows (the lint says why), left out of the verdict "
            "and of the counts above; they do not set the axis: one beyond it sits at the edge, its ratio beside it."
        )
    one_value = int((rows["kind"] == "one value").sum())
    if one_value:
        parts.append(f"Open circles ({one_value}): one value on a side, so no interval.")
    if data.pooled:
        counts = rows[rows["kind"] == "pooled"].groupby("workload")["cases"].max()
        listed = ", ".join(f"{workload} ({int(counts.get(workload, 0))} cases)" for workload in data.pooled)
        parts.append(
            f"Diamonds: {listed} pooled, the geometric mean with an interval from the spread between cases; "
            "the dotted line spans the cases; each case is in the workload's own chart below."
        )
    if left_out:
        parts.append(f"{left_out} implausible cases left out of the pooled rows.")
    if data.hidden:
        parts.append(f"{len(data.hidden)} more rows not shown here (the comparison table below has them).")
    return " ".join(parts)
