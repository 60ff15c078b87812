"""What the gate compares: a new run's primary metrics against a baseline of bundles, or against
the runs a history store holds (ccbench.analysis.settling.gate judges the rows).

Against bundles, each configuration of the new run (its machine label set aside: "vm / no TEE /
disk" is "no TEE / disk" on either side) is compared with the same configuration of the baseline by
``ccbench compare``'s own interval (Welch's t on the executions' logs, or between machines for
replicas), so the row's MDE is compare's.

Against a store, each series of the new run (ccbench.results.history_store.SERIES_KEY: label, plan,
configuration, workload and its parameters, case, metric) is compared with the last runs of that
series in the store (up to ``HISTORY_RUNS``, at least ``MIN_HISTORY``): the new run's median against
the past run medians by a t prediction interval on logs (se = s * sqrt(1 + 1/m), m - 1 degrees of
freedom), which is what the spread from run to run allows for one new run.

Every case the baseline has is accounted for: one the new run lacks is a row judged LOST; one that
cannot be judged (against bundles, fewer than MIN_SAMPLES executions on a side, what compare flags
"not enough samples"; a median of 0; too few earlier runs in the store: building the baseline) is a
row judged NOT_JUDGED with its reason.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

# a row's ``judgement`` besides "" (judged by its interval): LOST, a case the baseline has and the
# new run lacks; NOT_JUDGED, one that cannot be judged (its ``reason`` says why)
from ccbench.analysis.settling.gate import BUILDING, LOST, MIN_HISTORY, NOT_JUDGED
from ccbench.basics.errors import CCBenchError
from ccbench.results.gate_runs import differences, refuse_several_runs, why_lost

HISTORY_RUNS = 20
NEW, BASELINE = "new", "baseline"
CASE_KEY = ["workload", "case", "metric", "config"]
#: where a lost case of a store was
STORE_HAD = "in the store's runs of this plan"


def is_store(path: str) -> bool:
    """Whether ``--against`` names a history store (a DuckDB file, or a directory of Parquet
    partitions without bundles) rather than bundles; a path that does not exist yet is an empty
    store when it is named as one (``*.duckdb``, or a directory ending in '/' whose parent exists):
    the first night of a CI job, before any run was added."""
    target = Path(path)
    if not target.exists() and target.parent.is_dir() and (target.suffix == ".duckdb" or str(path).endswith("/")):
        return True
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
    from ccbench.analysis.judgement import impact

    declared = impact.declarations(frame)
    mask = impact.primary_mask(rows, declared)
    return rows[mask] if mask.any() else rows


def _text(value) -> str:
    return value if isinstance(value, str) else ""


def refuse_itself(new_paths, baseline_paths) -> None:
    """A one-line error when a new bundle is also a baseline bundle (the same content): a run
    gated against itself would pass without having been compared with anything."""
    from ccbench.bundle import find_bundles
    from ccbench.results.history import run_id_of

    baseline = {run_id_of(p): p for p in find_bundles(baseline_paths)}
    for path in find_bundles(new_paths):
        same = baseline.get(run_id_of(path))
        if same is not None:
            raise CCBenchError(
                f"{path}: the new run is also in the baseline ({same}, the same content); "
                "gate a run against earlier runs, not against itself"
            )


def rows_against_bundles(new_paths, baseline_paths, labels=None, exclude_contended: bool = False) -> pd.DataFrame:
    """Comparison rows (ccbench.analysis.rows.compare columns) of each configuration of the new bundles
    against the same configuration of the baseline bundles; ``config`` names it without a machine.
    A primary metric case of the baseline that the new run lacks is a row judged LOST."""
    from ccbench.analysis.rows.compare import compare
    from ccbench.analysis.samples.load import frame_from_bundles, load_bundles

    refuse_several_runs(new_paths, labels)
    refuse_itself(new_paths, baseline_paths)
    bundles = load_bundles(new_paths, samples=False)
    baseline = load_bundles(baseline_paths, samples=False)
    new = _relabelled(frame_from_bundles(bundles, labels or {}), NEW)
    base = _relabelled(frame_from_bundles(baseline, labels or {}), BASELINE)
    shared = [c for c in pd.unique(new["rest"]) if c in set(base["rest"])]
    if new.empty and not base.empty:
        # no sample in the new run (every execution failed): each case of the baseline is lost
        return _primary(base, _lost(base, new, pd.DataFrame(columns=CASE_KEY), bundles, baseline))
    if not shared:
        raise CCBenchError(
            f"the configurations differ: the new run's ({'; '.join(pd.unique(new['rest']))}) against the "
            f"baseline's ({'; '.join(pd.unique(base['rest']))}); a gate judges a run against an earlier run of "
            "the same configuration: give one as the baseline, or use `ccbench compare` to compare the two"
        )
    unmatched = _not_in_baseline(base, new, shared)
    both = pd.concat([base, new], ignore_index=True)
    tables = []
    for rest in shared:
        part = both[both["rest"] == rest].drop(columns=["rest"])
        table = compare(part, f"{BASELINE} / {rest}", exclude_contended=exclude_contended)
        tables.append(table.assign(config=rest))
    rows = _too_few(pd.concat(tables, ignore_index=True).assign(judgement="", reason=""))
    rows = pd.concat([rows, _lost(base, new, rows, bundles, baseline)], ignore_index=True)
    out = _primary(both, rows)
    if unmatched:
        # a case the baseline never measured is no regression: named, never judged against another case
        out.attrs["notes"] = [f"not in the baseline (not judged): {'; '.join(unmatched)}"]
    return out


def _too_few(rows: pd.DataFrame) -> pd.DataFrame:
    """The rows with fewer than MIN_SAMPLES executions on a side (what compare flags "not enough
    samples", never significant) judged NOT_JUDGED, the reason naming the counts: a comparison that
    could not judge a case must not pass it."""
    from ccbench.analysis.statistics.stats import MIN_SAMPLES

    def executions(count: int) -> str:
        return f"{count} execution{'s' if count != 1 else ''}"

    out = rows.copy()
    for index, row in out.iterrows():
        n, n_baseline = int(row["n"]), int(row["n_baseline"])
        sides = [f"{executions(n)} in the new run"] if n < MIN_SAMPLES else []
        sides += [f"{executions(n_baseline)} in the baseline"] if n_baseline < MIN_SAMPLES else []
        if sides:
            out.loc[index, "judgement"] = NOT_JUDGED
            out.loc[index, "reason"] = f"{' and '.join(sides)}: too few to judge, the gate needs {MIN_SAMPLES}"
    return out


def _case_words(key) -> str:
    workload, case, metric, config = key
    return f"{workload} {case!r} {metric} on {config}" if case else f"{workload} {metric} on {config}"


def _not_in_baseline(base: pd.DataFrame, new: pd.DataFrame, shared: list[str]) -> list[str]:
    """The new run's measured cases (of the configurations both sides have) that the baseline does not
    measure, in words; none of them in the baseline is an error: the two runs measured different things
    (two hyperfine files of different commands), and no case may be judged against another."""
    had = set(map(tuple, _cases(base)[CASE_KEY].itertuples(index=False)))
    has = _cases(new)
    has = has[has["config"].isin(shared)]
    keys = list(map(tuple, has[CASE_KEY].itertuples(index=False)))
    missing = [k for k in keys if k not in had]
    if keys and len(missing) == len(keys):
        theirs = sorted(had, key=str)
        more = f" and {len(theirs) - 5} more" if len(theirs) > 5 else ""
        raise CCBenchError(
            f"no case of the new run is in the baseline: not in the baseline: "
            f"{'; '.join(map(_case_words, missing[:5]))}{' ...' if len(missing) > 5 else ''} (the baseline "
            f"measured {'; '.join(map(_case_words, theirs[:5]))}{more}); give a baseline that measured the same cases"
        )
    named = pd.DataFrame(missing, columns=CASE_KEY) if missing else pd.DataFrame(columns=CASE_KEY)
    primary = _primary(pd.concat([base, new], ignore_index=True), named) if missing else named
    return [_case_words(k) for k in primary[CASE_KEY].itertuples(index=False)]


def _cases(frame: pd.DataFrame) -> pd.DataFrame:
    """The measured cases of a relabelled frame: one row per workload, case, metric and configuration
    (without its machine), with its unit, direction, median and count."""
    measured = frame[~frame["warmup"].astype(bool) & frame["better"].isin(["lower", "higher"])]
    if measured.empty:
        return pd.DataFrame(columns=[*CASE_KEY, "unit", "better", "median", "n"])
    measured = measured.assign(case=measured["case"].map(_text), config=measured["rest"])
    return (
        measured.groupby(CASE_KEY, sort=False, dropna=False)
        .agg(unit=("unit", "first"), better=("better", "first"), median=("value", "median"), n=("value", "size"))
        .reset_index()
    )


def _lost(base: pd.DataFrame, new: pd.DataFrame, rows: pd.DataFrame, bundles, baseline=None) -> pd.DataFrame:
    """A row per case of the baseline with no comparison row: LOST where the new run (``bundles``)
    has no measured sample of it (its executions failed, the run was interrupted before it, or the
    plan no longer has it: the reason says which), NOT_JUDGED where it has (every execution of a
    side contended and left out)."""
    had, has = _cases(base), _cases(new)
    measured = set(map(tuple, has[CASE_KEY].itertuples(index=False)))
    compared = {(r["workload"], _text(r["case"]), r["metric"], r["config"]) for r in rows.to_dict("records")}
    gone = had[[tuple(k) not in compared for k in had[CASE_KEY].itertuples(index=False)]]
    if gone.empty:
        return pd.DataFrame()
    out = gone.rename(columns={"median": "baseline_median", "n": "n_baseline"}).assign(median=math.nan, n=0)
    keys = [tuple(k) for k in out[CASE_KEY].itertuples(index=False)]
    kept = [k in measured for k in keys]
    return out.assign(
        judgement=[NOT_JUDGED if k else LOST for k in kept],
        reason=[
            _why_not_compared(base, new, key) if k else why_lost(bundles, key[0], key[3], baseline=baseline)
            for k, key in zip(kept, keys, strict=True)
        ],
    )


#: why a case both runs measured is not judged where their parameters differ
OTHER_PARAMETERS = "the new run measured it with other parameters"


def params_differ(now: set[str], was: set[str]) -> str:
    """The parameters that differ between the two runs' cases ("size 32M, was 64M"), from their
    parameters as JSON; every one of them where a side holds several sets."""
    import json

    def load(text: str) -> dict:
        try:
            value = json.loads(text)
        except ValueError:
            return {}
        return value if isinstance(value, dict) else {}

    if len(now) == 1 and len(was) == 1:
        said = differences(load(next(iter(now))), load(next(iter(was))))
        if said:
            return said
    return f"{'; '.join(sorted(now))}, was {'; '.join(sorted(was))}"


def _why_not_compared(base: pd.DataFrame, new: pd.DataFrame, key: tuple) -> str:
    """Why a case both runs measured has no comparison row: other parameters (a series of its own),
    or every execution of a side contended and left out."""
    if "params" in base and "params" in new:

        def params(frame: pd.DataFrame) -> set:
            cases = frame.assign(case=frame["case"].map(_text), config=frame["rest"])
            match = (cases[CASE_KEY] == pd.Series(key, index=CASE_KEY)).all(axis=1)
            return set(cases.loc[match, "params"].astype(str))

        was, now = params(base), params(new)
        if was and now and was != now:
            return f"{OTHER_PARAMETERS} ({params_differ(now, was)}): not compared"
    return "every execution of a side contended and left out (--exclude-contended)"


def rows_against_store(new_paths, store_path: str, labels=None, exclude_contended: bool = False) -> pd.DataFrame:
    """Rows of each series of the new bundles against the last runs of the same series in the store
    (contended runs among them unless ``exclude_contended``); a series with fewer than MIN_HISTORY
    earlier runs is NOT_JUDGED (BUILDING), one the new run lacks, among the plans it ran, LOST."""
    from ccbench.analysis.samples.load import load_bundles
    from ccbench.results.history import Store, run_id_of, run_points
    from ccbench.results.history_store import SERIES_KEY, with_series_key

    refuse_several_runs(new_paths, labels)
    # an empty store (or one not made yet) is no error: every series is building its baseline
    past = Store(store_path).frame()
    bundles = load_bundles(new_paths, samples=False)
    run_ids = [run_id_of(Path(b.path)) for b in bundles]
    new = with_series_key(run_points(bundles, labels or {}, run_ids))
    if exclude_contended:
        quiet = with_series_key(run_points(bundles, labels or {}, run_ids, exclude_contended=True))
        new = _quiet_points(new, quiet)
    already = past["run_id"].isin(set(new["run_id"]))
    past = with_series_key(past[~already])
    if exclude_contended:
        past = past[~past["contended"].astype(bool)]
    history = {key: group.sort_values("started_at") for key, group in past.groupby(SERIES_KEY, sort=False)}
    points = new[new["better"].isin(["lower", "higher"])]
    records = [
        _store_row(point, history.get(tuple(point[k] for k in SERIES_KEY))) for point in points.to_dict("records")
    ]
    rows = pd.DataFrame(records) if records else pd.DataFrame(columns=["workload", "metric"])
    # what the new run's plan declares, its workloads without a measured sample among them
    declared = pd.DataFrame(
        [
            {"bundle": str(b.path), "workload": name, "kind": (d or {}).get("kind")}
            for b in bundles
            for name, d in (b.manifest.get("declarations") or {}).items()
        ],
        columns=["bundle", "workload", "kind"],
    )
    lost = _lost_series(past, new, history, bundles, set(declared["workload"]))
    judged = _primary(pd.concat([new, declared], ignore_index=True), pd.concat([rows, lost], ignore_index=True))
    # a lost series of a workload the new plan no longer has: kept, whatever its metric (nothing says
    # which of its metrics were primary, and a case must not vanish unsaid)
    gone = lost[~lost["workload"].isin(set(declared["workload"]) | set(new["workload"]))] if len(lost) else lost
    out = pd.concat([judged, gone], ignore_index=True)
    if already.any():
        # added before it was gated: judged against the other runs, never against itself
        out.attrs["notes"] = ["the new run is already in the store: judged against the other runs in it"]
    if not Path(store_path).exists():
        # a first night, or a path typed wrong: the latter would build its baseline every night, said so
        out.attrs["notes"] = [
            *out.attrs.get("notes", []),
            f"no store at {store_path} yet: nothing to judge against until runs are added to it "
            "(ccbench history add); a path that stays missing night after night is a typo",
        ]
    return out


def _quiet_points(every: pd.DataFrame, quiet: pd.DataFrame) -> pd.DataFrame:
    """The new run's points of its uncontended executions (``quiet``), and of ``every`` point the
    series whose executions were all contended, their median missing (not judged, said why)."""
    from ccbench.results.history_store import SERIES_KEY

    have = set(map(tuple, quiet[SERIES_KEY].itertuples(index=False)))
    gone = every[[tuple(k) not in have for k in every[SERIES_KEY].itertuples(index=False)]]
    return pd.concat([quiet, gone.assign(median=math.nan, n=0)], ignore_index=True)


def _store_row(point: dict, runs: pd.DataFrame | None) -> dict:
    """One series of the new run against its earlier runs (None: none in the store)."""
    row = {
        **{k: point[k] for k in ("workload", "metric", "unit", "better")},
        "case": _text(point["case"]),
        "config": point["config"].split(" / ", 1)[-1],
        "median": float(point["median"]),
        "n": int(point["n"]),
        "contended": int(bool(point["contended"])),
        "judgement": "",
        "reason": "",
    }
    count = 0 if runs is None else len(runs)
    medians = np.array([]) if runs is None else runs["median"].to_numpy(dtype=float)[-HISTORY_RUNS:]
    row.update(n_baseline=min(count, HISTORY_RUNS), runs_in_store=count)
    row["contended_baseline"] = 0 if runs is None else int(runs["contended"].astype(bool).iloc[-HISTORY_RUNS:].sum())
    if row["n"] == 0:
        reason = "every execution of the new run contended and left out (--exclude-contended)"
        return {**row, "baseline_median": math.nan, "judgement": NOT_JUDGED, "reason": reason}
    if count < MIN_HISTORY:
        reason = f"{BUILDING}: {count} of {MIN_HISTORY} earlier runs of this series in the store"
        return {**row, "baseline_median": math.nan, "judgement": NOT_JUDGED, "reason": reason}
    if not (row["median"] > 0 and (medians > 0).all()):
        reason = "a median that is not a positive number (here or in an earlier run): a ratio on logs needs one"
        return {**row, "baseline_median": float(np.median(medians)), "judgement": NOT_JUDGED, "reason": reason}
    from ccbench.analysis.settling.gate import predict

    logs = np.log(medians)
    prediction = predict(logs, math.log(row["median"]))
    worse_ratio = 1 / prediction.ratio if point["better"] == "higher" else prediction.ratio
    return {
        **row,
        "baseline_median": float(np.exp(logs.mean())),
        "ratio": prediction.ratio,
        "ci_low": prediction.low,
        "ci_high": prediction.high,
        "overhead_percent": (worse_ratio - 1) * 100,
        "significant": prediction.significant,
        "mde": prediction.mde,
    }


def _lost_series(past: pd.DataFrame, new: pd.DataFrame, history: dict, bundles, declared=frozenset()) -> pd.DataFrame:
    """A row per series of the store that the new run lacks, among the series of the new run's
    machine labels and plans whose last stored run had it (a case dropped from the plan long ago is
    not lost again every night). For a workload the new run's plan declares (``declared``), the last
    stored run that measured that workload: a run of part of the plan (``--only``) does not make
    the rest look dropped."""
    from ccbench.results.history_store import SERIES_KEY

    present = set(map(tuple, new[SERIES_KEY].itertuples(index=False)))
    names = [k for k in SERIES_KEY if k != "fingerprint"]
    renamed = set(map(tuple, new[names].itertuples(index=False)))  # measured, with other parameters
    scope = set(zip(new["label"], new["plan"], strict=True))
    lost = []
    for key, runs in history.items():
        point = dict(zip(SERIES_KEY, key, strict=True))
        if (
            key in present
            or (point["label"], point["plan"]) not in scope
            or runs["better"].iloc[-1] not in ("lower", "higher")
        ):
            continue
        same = (past["label"] == point["label"]) & (past["plan"] == point["plan"])
        if point["workload"] in declared:
            same &= past["workload"] == point["workload"]
        last_run = past[same]["started_at"].max()
        if runs["started_at"].iloc[-1] < last_run:
            continue
        other = tuple(point[k] for k in names) in renamed
        # named apart from the new run's series of the same names: by its parameters
        earlier = f"(earlier parameters {runs['params'].iloc[-1]})" if other else ""
        lost.append(
            {
                **{k: point[k] for k in ("workload", "metric")},
                "case": " ".join(p for p in (point["case"], earlier) if p),
                "unit": runs["unit"].iloc[-1],
                "better": runs["better"].iloc[-1],
                "config": point["config"].split(" / ", 1)[-1],
                "baseline_median": float(runs["median"].iloc[-1]),
                "median": math.nan,
                "n": 0,
                "n_baseline": len(runs),
                "judgement": NOT_JUDGED if other else LOST,
                "reason": f"{OTHER_PARAMETERS}: a series of its own, not compared"
                if other
                else why_lost(bundles, point["workload"], point["config"].split(" / ", 1)[-1], STORE_HAD),
            }
        )
    return pd.DataFrame(lost)


def case_logs(paths, labels: dict[str, str] | None = None) -> dict[tuple[str, str, str, str], tuple[str, np.ndarray]]:
    """Per case of the bundles at ``paths`` (workload, case, metric and configuration without its
    machine, as the gate names a case): its direction and the logs of its measured values, every
    bundle's pooled (what --confirm settles on)."""
    from ccbench.analysis.samples.load import frame_from_bundles, load_bundles

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
