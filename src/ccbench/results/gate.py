"""What the gate compares: a new run's primary metrics against a baseline of bundles, or against
the runs a history store holds (ccbench.analysis.gate judges the rows).

Against bundles, each configuration of the new run (its machine label set aside: "vm / no TEE /
disk" is "no TEE / disk" on either side) is compared with the same configuration of the baseline by
``ccbench compare``'s own interval (Welch's t on the executions' logs, or between machines for
replicas), so the row's MDE is compare's.

Against a store, each series of the new run (label, configuration, workload, case, metric) is
compared with the last runs of that series in the store (up to ``HISTORY_RUNS``, contended runs left
out, at least ``MIN_HISTORY``): the new run's median against the past run medians by a t prediction
interval on logs (se = s * sqrt(1 + 1/m), m - 1 degrees of freedom), which is what the spread from
run to run allows for one new run.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from ccbench.errors import CCBenchError

HISTORY_RUNS = 20
MIN_HISTORY = 3
NEW, BASELINE = "new", "baseline"


def is_store(path: str) -> bool:
    """Whether ``--against`` names a history store (a DuckDB file, or a directory of Parquet
    partitions without bundles) rather than bundles."""
    target = Path(path)
    if target.is_file():
        return target.suffix != ".json"
    if target.is_dir():
        has_bundles = any(target.rglob("manifest.json"))
        return not has_bundles and any(target.rglob("*.parquet"))
    raise CCBenchError(f"--against {path}: no such file or directory; give baseline bundles or a history store")


def _relabelled(frame: pd.DataFrame, side: str) -> pd.DataFrame:
    """The frame with its machine label replaced by ``side``: configurations named without their machine."""
    rest = frame["config"].str.split(" / ", n=1).str[1].fillna("")
    return frame.assign(machine=side, config=side + " / " + rest, rest=rest)


def _primary(frame: pd.DataFrame, rows: pd.DataFrame) -> pd.DataFrame:
    """The rows of the workloads' primary metrics (all rows where no workload declares any)."""
    from ccbench.analysis import impact

    declared = impact.declarations(frame)
    mask = impact.primary_mask(rows, declared)
    return rows[mask] if mask.any() else rows


def rows_against_bundles(new_paths, baseline_paths, labels: dict[str, str] | None = None) -> pd.DataFrame:
    """Comparison rows (ccbench.analysis.compare columns) of each configuration of the new bundles
    against the same configuration of the baseline bundles; ``config`` names it without a machine."""
    from ccbench.analysis.compare import compare
    from ccbench.analysis.load import frame_from_bundles, load_bundles

    new = _relabelled(frame_from_bundles(load_bundles(new_paths, samples=False), labels or {}), NEW)
    base = _relabelled(frame_from_bundles(load_bundles(baseline_paths, samples=False), labels or {}), BASELINE)
    shared = [c for c in pd.unique(new["rest"]) if c in set(base["rest"])]
    if not shared:
        raise CCBenchError(
            f"the new run's configurations ({'; '.join(pd.unique(new['rest']))}) are not in the baseline "
            f"({'; '.join(pd.unique(base['rest']))}); give a baseline of the same plan"
        )
    both = pd.concat([base, new], ignore_index=True)
    tables = []
    for rest in shared:
        part = both[both["rest"] == rest].drop(columns=["rest"])
        table = compare(part, f"{BASELINE} / {rest}")
        tables.append(table.assign(config=rest))
    rows = pd.concat(tables, ignore_index=True)
    return _primary(both, rows)


def rows_against_store(new_paths, store_path: str, labels: dict[str, str] | None = None) -> pd.DataFrame:
    """Rows of each series of the new bundles against the last runs of the same series in the store."""
    from ccbench.analysis.gate import predict
    from ccbench.analysis.load import load_bundles
    from ccbench.results.history import SERIES_KEY, Store, run_id_of, run_points

    past = Store(store_path).frame()
    if past.empty:
        raise CCBenchError(
            f"--against {store_path}: the history store holds no runs; add some with ccbench history add"
        )
    bundles = load_bundles(new_paths, samples=False)
    new = run_points(bundles, labels or {}, [run_id_of(Path(b.path)) for b in bundles])
    past = past[~past["run_id"].isin(set(new["run_id"])) & ~past["contended"].astype(bool)]
    history = {key: group.sort_values("started_at") for key, group in past.groupby(SERIES_KEY, dropna=False)}
    records = []
    for point in new[new["better"].isin(["lower", "higher"])].to_dict(orient="records"):
        runs = history.get(tuple(point[k] for k in SERIES_KEY))
        if runs is None or len(runs) < MIN_HISTORY:
            continue
        logs = np.log(runs["median"].to_numpy(dtype=float)[-HISTORY_RUNS:])
        prediction = predict(logs, math.log(point["median"]))
        ratio = prediction.ratio
        worse_ratio = 1 / ratio if point["better"] == "higher" else ratio
        records.append(
            {
                **{k: point[k] for k in ("workload", "case", "metric", "unit", "better")},
                "config": point["config"].split(" / ", 1)[-1],
                "baseline_median": float(np.exp(logs.mean())),
                "median": float(point["median"]),
                "ratio": ratio,
                "ci_low": prediction.low,
                "ci_high": prediction.high,
                "overhead_percent": (worse_ratio - 1) * 100,
                "significant": prediction.significant,
                "mde": prediction.mde,
                "n_baseline": len(logs),
                "n": int(point["n"]),
            }
        )
    if not records:
        labels_there = ", ".join(sorted(map(str, pd.unique(past["label"])))) or "none"
        raise CCBenchError(
            f"--against {store_path}: no series of the new run has {MIN_HISTORY} or more earlier runs in the store "
            f"(its labels: {labels_there}); add earlier runs of this machine and plan with ccbench history add"
        )
    rows = pd.DataFrame(records)
    return _primary(new, rows)


def case_logs(paths, labels: dict[str, str] | None = None) -> dict[tuple[str, str, str, str], tuple[str, np.ndarray]]:
    """Per case of the bundles at ``paths`` (workload, case, metric and configuration without its
    machine, as the gate names a case): its direction and the logs of its measured values, every
    bundle's pooled (what --confirm settles on)."""
    from ccbench.analysis.load import frame_from_bundles, load_bundles

    frame = _relabelled(frame_from_bundles(load_bundles(paths, samples=False), labels or {}), NEW)
    frame = frame[~frame["warmup"] & frame["better"].isin(["lower", "higher"]) & (frame["value"] > 0)]
    out = {}
    for (workload, case, metric, rest, better), group in frame.groupby(
        ["workload", "case", "metric", "rest", "better"], sort=False, dropna=False
    ):
        out[(str(workload), case if isinstance(case, str) else "", str(metric), str(rest))] = (
            str(better),
            np.log(group["value"].to_numpy(dtype=float)),
        )
    return out
