"""The cost over time: a results store of run medians, and where a series changed.

``ccbench history add`` reduces each bundle to one point per series (configuration, workload,
case, metric): the median of its measured samples (warmups left out), with the facts that may
explain a change (kernel, ccbench version, CPU model and microcode, TEE technology, plan, and every
field of the CC provenance). A store is one embedded DuckDB file, or a directory of Parquet files
partitioned by date and machine label (``DIR/date=YYYY-MM-DD/label=NAME/<run>.parquet``, the layout
Spark, Trino or BigQuery read), of the declared schema in ``history_store``. A bundle is known by
its digest recomputed from its content (the digest over its files for an attested bundle, else the
journal's SHA-256): adding it twice adds nothing. Only finished bundles are added.

Change points are found by Apache Otava (E-divisive means with a significance test), driven
through its command line in its own environment (it pins numpy 2.2 and pulls cloud clients; see
scripts/setup.d/65-history.sh). A run flagged contended is shown but left out of the detection:
a busy machine's run must not make a change point alone.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ccbench.basics.errors import CCBenchError, EnvironmentProblem
from ccbench.probe.facts import machine_of
from ccbench.results.history_store import COLUMNS, PROVENANCE, SERIES_KEY, Store, points_table, with_series_key

__all__ = ["COLUMNS", "Store", "add_bundles", "history", "run_id_of"]

#: the run facts that may explain a change point, compared across it
EXPLAINING = ["kernel_release", "ccbench_version", "cpu_model", "microcode", "tee_technology", "plan", *PROVENANCE]
#: Otava's significance threshold (0.001, its default, gave 3.7% false change points in flat series of
#: 50 runs at 1% noise; 0.0001 gave none in 300, and found a 5% step at its run in 96%; docs/analysis.md)
#: and the window of its sliding E-divisive pass
P_VALUE = 0.0001
WINDOW = 50


def default_store() -> Path:
    base = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    return base / "ccbench" / "history.duckdb"


def otava_binary() -> Path | None:
    """Otava's command in its own environment (made by ``setup.sh --with history``)."""
    given = os.environ.get("CCBENCH_OTAVA")
    candidate = Path(given) if given else Path(sys.prefix) / "otava" / "bin" / "otava"
    return candidate if candidate.exists() else None  # a path given is the only one tried


# ------------------------------------------------------------------------------------------- points


def run_id_of(bundle_path: Path) -> str:
    """The run's identity, recomputed from the bundle's content (never read from what attestation.json
    claims, which a tampered copy could share with the genuine bundle): the digest over every file
    (attestation's list digest) for an attested bundle, else the journal's SHA-256. A large file's
    digest is the one remembered by its identity (ccbench.bundle.digests.remembered_sha256: the
    same file, unchanged since), so the journal that the check before reading and the columnar
    reader hash too is read once per ``history add``, not three times; a tampered copy is another
    file, hashed anew."""
    from ccbench.attestation.digests import ATTESTATION_FILE, digest_list, list_digest
    from ccbench.bundle.digests import journal_sha256

    if (bundle_path / ATTESTATION_FILE).exists():
        return "bundle-" + list_digest(digest_list(bundle_path, remembered=True))
    return "journal-" + journal_sha256(bundle_path)


def run_points(bundles, labels: dict[str, str], run_ids: list[str], exclude_contended: bool = False) -> pd.DataFrame:
    """The bundles' series points, read and reduced by the analysis engine (DuckDB): the median of
    each series' measured samples (the contended ones left out with ``exclude_contended``), with the
    run's facts and its CC provenance (as text: what a change point compares); the rows of each
    bundle together, in the order of ``bundles``."""
    from ccbench.analysis.samples.engine import sample_set

    samples = sample_set(bundles, labels, frame=False)
    connection = samples.connection()
    quiet = "WHERE NOT coalesce(contended, false) " if exclude_contended else ""
    try:
        medians = connection.sql(
            "SELECT bundle, grp, cfg, unit, better, median(value) AS median, count(*) AS n, "
            f"bool_or(contended) AS contended, min(row) AS first FROM measured {quiet}"
            "GROUP BY bundle, grp, cfg, unit, better ORDER BY bundle, first"
        ).df()
    finally:
        connection.close()
    if medians.empty:
        return pd.DataFrame(columns=COLUMNS)
    groups = pd.DataFrame(samples.groups, columns=["workload", "params", "case", "metric"], dtype=object)
    strings = np.array([*samples.strings, None], dtype=object)
    points = groups.iloc[medians["grp"].to_numpy()].reset_index(drop=True)
    points["config"] = np.array(samples.configs, dtype=object)[medians["cfg"].to_numpy()]
    points["unit"] = strings[medians["unit"].to_numpy()]
    points["better"] = strings[medians["better"].to_numpy()]
    points["median"] = medians["median"].to_numpy()
    points["n"] = medians["n"].to_numpy()
    points["contended"] = medians["contended"].to_numpy().astype(bool)
    points["position"] = medians["bundle"].to_numpy()
    facts = pd.DataFrame([{"position": i, **_run_facts(b, run_ids[i], labels)} for i, b in enumerate(bundles)]).astype(
        {"position": points["position"].dtype}
    )
    return points.merge(facts, on="position", how="left", validate="many_to_one")[COLUMNS]


def _run_facts(bundle, run_id: str, labels: dict[str, str]) -> dict[str, Any]:
    from ccbench.probe.facts import recorded_facts
    from ccbench.results.export import provenance_columns

    manifest, recorded = bundle.manifest, recorded_facts(bundle.probe)
    facts = {
        "run_id": run_id,
        # where the bundle is, for anyone who reads a shared store: never relative to where add ran
        "bundle": str(Path(bundle.path).resolve()),
        "label": machine_of(bundle.probe, bundle.path, labels)[0],
        "started_at": pd.to_datetime(manifest.get("started_at"), utc=True),
        "ccbench_version": (manifest.get("tool") or {}).get("version"),
        "plan": (manifest.get("plan") or {}).get("name"),
        **{name: recorded[name] for name in ("kernel_release", "cpu_model", "microcode", "tee_technology")},
    }
    provenance = provenance_columns(bundle)
    facts.update({name: _text(provenance.get(name)) for name in PROVENANCE})
    return facts


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)


def add_bundles(
    paths, store: Store, labels: dict[str, str] | None = None, left_out: list[str] | None = None
) -> tuple[int, int]:
    """Add each finished bundle's points in one step (one DuckDB transaction, or one staged file per
    run in a Parquet store); returns (added, already there). ``left_out``, when given, gets one
    line per bundle under ``paths`` that was not added and is not already there, with why: a run
    that has not ended, or one without a measured sample (every execution failed)."""
    from ccbench.analysis.samples.load import load_bundles
    from ccbench.bundle import find_bundles
    from ccbench.results.export import distinct_bundles

    known = store.run_ids()  # also checks that the store is one
    found = find_bundles(paths)
    # only runs that did not end (a CI job's Ctrl-C'd night): nothing to add, each said, no error
    finished = distinct_bundles(paths) if any(_finished(p) for p in found) else []
    if left_out is not None:
        done = {p.resolve() for p in finished}
        left_out += [f"{p}: its run has not ended ({_status(p)})" for p in found if p.resolve() not in done]
    new, run_ids, skipped = [], [], 0
    for bundle in load_bundles(finished, samples=False):
        run_id = run_id_of(Path(bundle.path))
        if run_id in known or run_id in run_ids:
            skipped += 1
            continue
        new.append(bundle)
        run_ids.append(run_id)
    tables = []
    everything = points_table(run_points(new, labels or {}, run_ids)) if new else None
    if everything is not None and everything.num_rows:
        runs = everything.column("run_id").to_numpy(zero_copy_only=False)
        starts = [0, *np.flatnonzero(runs[1:] != runs[:-1]) + 1, len(runs)]  # each run's rows are together
        tables = [everything.slice(start, end - start) for start, end in zip(starts, starts[1:])]
    if left_out is not None:
        with_points = {t.column("run_id")[0].as_py() for t in tables}
        left_out += [
            f"{b.path}: no measured sample in it (did every execution fail?)"
            for b, run_id in zip(new, run_ids, strict=True)
            if run_id not in with_points
        ]
    added = store.add(tables)
    return added, skipped + len(tables) - added  # a run another add put in meanwhile is already there


def _finished(bundle: Path) -> bool:
    from ccbench.bundle.layout import FINISHED_STATUSES

    try:
        return json.loads((bundle / "manifest.json").read_text(encoding="utf-8")).get("status") in FINISHED_STATUSES
    except (OSError, ValueError, AttributeError):
        return True  # read, and said, by whoever reads it


def _status(bundle: Path) -> str:
    try:
        return f"status {json.loads((bundle / 'manifest.json').read_text(encoding='utf-8')).get('status')!r}"
    except (OSError, ValueError, AttributeError):
        return "its manifest is unreadable"


# ------------------------------------------------------------------------------------ change points


@dataclass
class ChangePoint:
    """Where a series' level moved: the first run of the new level, its size and what changed."""

    index: int
    started_at: str
    change_percent: float
    mean_before: float
    mean_after: float
    stddev_before: float
    stddev_after: float
    p_value: float
    changed: dict[str, tuple[Any, Any]] = field(default_factory=dict)
    #: the 95% interval of change_percent (None with fewer than two runs on a side)
    interval: tuple[float, float] | None = None


@dataclass(eq=False)  # a series is itself: its points are a DataFrame
class Series:
    key: dict[str, str]
    unit: str
    better: str | None
    points: pd.DataFrame
    change_points: list[ChangePoint] = field(default_factory=list)
    note: str | None = None


def series_of(frame: pd.DataFrame, label=None, workload=None, metric=None) -> list[Series]:
    selected = with_series_key(frame)
    for column, wanted in (("label", label), ("workload", workload), ("metric", metric)):
        if wanted:
            selected = selected[selected[column] == wanted]
    out = []
    for key, points in selected.groupby(SERIES_KEY, sort=True, dropna=False):
        points = points.sort_values("started_at").reset_index(drop=True)
        out.append(
            Series(
                key=dict(zip(SERIES_KEY, key, strict=True)),
                unit=_missing_as_none(points["unit"].iloc[0]),
                better=_missing_as_none(points["better"].iloc[0]),
                points=points,
            )
        )
    return out


def find_change_points(series: list[Series], p_value: float = P_VALUE) -> str | None:
    """Fill each series' change points with Otava (one invocation for all of them); returns why
    they could not be computed, or None."""
    otava = otava_binary()
    if otava is None:
        return "Otava is not installed (bash scripts/setup.sh --with history)"
    work = [s for s in series if (~s.points["contended"].astype(bool)).sum() >= 4]
    for s in series:
        if all(s is not w for w in work):
            s.note = "fewer than 4 uncontended runs: no change point can be found"
    if not work:
        return None
    with tempfile.TemporaryDirectory(prefix="ccbench-otava-") as scratch:
        config = ["tests:"]
        for number, s in enumerate(work):
            kept = s.points[~s.points["contended"].astype(bool)]
            csv = Path(scratch) / f"s{number}.csv"
            pd.DataFrame(
                {
                    "time": [t.isoformat() for t in kept["started_at"]],
                    "value": kept["median"].to_numpy(),
                    "row": kept.index.to_numpy(),
                }
            ).to_csv(csv, index=False)
            config += [
                f"  s{number}:",
                "    type: csv",
                f"    file: {csv}",
                "    time_column: time",
                "    metrics: [value]",
                "    attributes: [row]",
            ]
        (Path(scratch) / "otava.yaml").write_text("\n".join(config) + "\n")
        done = subprocess.run(
            [
                str(otava),
                "analyze",
                *[f"s{i}" for i in range(len(work))],
                "--output",
                "json",
                "-P",
                str(p_value),
                "--window",
                str(WINDOW),
                *_whole_span(work),
            ],
            capture_output=True,
            text=True,
            env={**os.environ, "OTAVA_CONFIG": str(Path(scratch) / "otava.yaml")},
            timeout=600,
        )
    if done.returncode != 0:
        raise EnvironmentProblem(f"Otava failed ({otava}): {(done.stderr.strip().splitlines() or ['?'])[-1]}")
    found: dict[str, list] = {}
    for line in done.stdout.splitlines():
        if line.startswith("{"):
            found.update(json.loads(line))
    for number, s in enumerate(work):
        for group in found.get(f"s{number}", []):
            row = int(float(group["attributes"]["row"]))
            for change in group["changes"]:
                s.change_points.append(_change_point(s, row, change))
    return None


def _whole_span(series: list[Series]) -> list[str]:
    """Otava's --since and --until covering every run of ``series`` (a day either side): without
    them Otava looks at the last 365 days only, and a store of older runs would show no change."""
    times = pd.concat([s.points["started_at"] for s in series])
    first, last = times.min() - pd.Timedelta(days=1), times.max() + pd.Timedelta(days=1)
    return ["--since", first.isoformat(), "--until", last.isoformat()]


def _change_point(s: Series, row: int, change: dict[str, Any]) -> ChangePoint:
    points = s.points
    before = points[(points.index < row) & ~points["contended"].astype(bool)]
    previous = before.iloc[-1] if len(before) else None
    current = points.loc[row]
    changed = {}
    if previous is not None:
        for name in EXPLAINING:
            before, after = _missing_as_none(previous.get(name)), _missing_as_none(current.get(name))
            if before != after:
                changed[name] = (before, after)
    mean_before, mean_after = float(change["mean_before"]), float(change["mean_after"])
    return ChangePoint(
        index=row,
        started_at=current["started_at"].isoformat(),
        change_percent=(mean_after / mean_before - 1) * 100 if mean_before else float("nan"),
        mean_before=mean_before,
        mean_after=mean_after,
        stddev_before=float(change["stddev_before"]),
        stddev_after=float(change["stddev_after"]),
        p_value=float(change["pvalue"]),
        changed=changed,
    )


def _missing_as_none(value: Any) -> Any:
    return None if value is None or (isinstance(value, float) and value != value) or value is pd.NA else value


def add_intervals(s: Series) -> None:
    """The 95% interval of each change's size (after/before, Welch's t on the uncontended run
    medians of the two segments it separates), in percent."""
    from scipy import stats

    kept = s.points[~s.points["contended"].astype(bool)]
    bounds = [cp.index for cp in sorted(s.change_points, key=lambda c: c.index)]
    for position, cp in enumerate(sorted(s.change_points, key=lambda c: c.index)):
        start = bounds[position - 1] if position else -1
        end = bounds[position + 1] if position + 1 < len(bounds) else len(s.points)
        before = kept[(kept.index > start) & (kept.index < cp.index)]["median"].to_numpy(dtype=float)
        after = kept[(kept.index >= cp.index) & (kept.index < end)]["median"].to_numpy(dtype=float)
        if len(before) >= 2 and len(after) >= 2 and before.mean():
            var_b, var_a = before.var(ddof=1) / len(before), after.var(ddof=1) / len(after)
            se = (var_b + var_a) ** 0.5
            dof = (var_b + var_a) ** 2 / (var_b**2 / (len(before) - 1) + var_a**2 / (len(after) - 1)) if se else 1
            spread = stats.t.ppf(0.975, dof) * se if se else 0.0
            difference = after.mean() - before.mean()
            cp.interval = (
                (difference - spread) / before.mean() * 100,
                (difference + spread) / before.mean() * 100,
            )


def history(store: Store, label=None, workload=None, metric=None) -> tuple[list[Series], str | None]:
    """The selected series with their change points (and why none could be computed, if so)."""
    frame = store.frame()
    if frame.empty:
        raise CCBenchError(f"--store {store.path}: no runs in it yet (ccbench history add BUNDLE... --store ...)")
    frame["started_at"] = pd.to_datetime(frame["started_at"], utc=True)
    series = series_of(frame, label, workload, metric)
    if not series:
        wanted = ", ".join(f"{k} {v}" for k, v in (("label", label), ("workload", workload), ("metric", metric)) if v)
        raise CCBenchError(f"no series in {store.path} for {wanted}: see ccbench history show without filters")
    reason = find_change_points(series)
    for s in series:
        add_intervals(s)
    return series, reason
