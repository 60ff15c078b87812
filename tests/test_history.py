"""ccbench history: the results store (DuckDB file and Parquet partitions), change points found
by Apache Otava, validated by simulation, and the show/report commands on bundles."""

import importlib.util
import json
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from bundles import seal
from conftest import only_bundle, run_ccbench

from ccbench.bundle import BundleWriter
from ccbench.model import Sample
from ccbench.results.history import Series, find_change_points, otava_binary

needs_otava = pytest.mark.skipif(
    otava_binary() is None, reason="Apache Otava is not installed (bash scripts/setup.sh --with history)"
)
needs_duckdb = pytest.mark.skipif(
    importlib.util.find_spec("duckdb") is None, reason="DuckDB is in the test extra: bash scripts/setup.sh --with test"
)
START = datetime(2026, 1, 1, tzinfo=UTC)


def _series(values, contended=()) -> Series:
    points = pd.DataFrame(
        {
            "started_at": [pd.Timestamp(START + timedelta(days=i)) for i in range(len(values))],
            "median": values,
            "contended": [i in contended for i in range(len(values))],
            **{name: "same" for name in ("kernel_release", "ccbench_version", "cpu_model", "microcode")},
            "tee_technology": "none",
            "plan": "p",
        }
    )
    return Series(key={"label": "m", "config": "c", "workload": "w", "case": "", "metric": "t"}, unit="s",
                  better="lower", points=points)  # fmt: skip


@needs_otava
def test_a_5_percent_step_in_40_runs_at_1_percent_noise_is_found_at_its_run():
    rng = np.random.default_rng(20261124)
    trials = [_series(100 * np.where(np.arange(40) >= 20, 1.05, 1.0) * rng.normal(1, 0.01, 40)) for _ in range(60)]
    assert find_change_points(trials) is None
    found = sum(1 for s in trials if [cp.index for cp in s.change_points] == [20])
    assert found / len(trials) >= 0.90, f"found at run 20 in {found} of {len(trials)}"


@needs_otava
def test_a_flat_series_of_50_runs_rarely_shows_a_change_point():
    rng = np.random.default_rng(7)
    trials = [_series(100 * rng.normal(1, 0.01, 50)) for _ in range(100)]
    assert find_change_points(trials) is None
    false = sum(1 for s in trials if s.change_points)
    assert false / len(trials) <= 0.05, f"{false} of {len(trials)} flat series showed a change point"


@needs_otava
def test_a_contended_run_does_not_make_a_change_point_alone():
    rng = np.random.default_rng(11)
    values = 100 * rng.normal(1, 0.01, 30)
    values[14:16] *= 1.3  # two slow runs while the machine was busy...
    flagged = _series(values.copy(), contended={14, 15})
    assert find_change_points([flagged]) is None
    assert flagged.change_points == []
    # ... shown in the series all the same
    assert len(flagged.points) == 30 and flagged.points["contended"].sum() == 2


def _bundle(out: Path, day: int, value: float, kernel: str, contended: bool = False) -> Path:
    """A bundle of realistic shape for one nightly run of one machine (prime, 3 repetitions)."""
    started = (START + timedelta(days=day)).isoformat().replace("+00:00", "Z")
    probe = {"hostname": "nightly", "tee": {"technology": "sev-snp"}, "kernel": {"release": kernel},
             "cpu": {"model": "AMD EPYC 7763", "microcode": "0xa0011d1"}}  # fmt: skip
    writer = BundleWriter.create(
        out, {"plan": {"name": "quick"}, "environment": probe, "started_at": started, "status": "complete"},
        name=f"nightly-{day:03d}",
    )  # fmt: skip
    rng = np.random.default_rng(day)
    for repetition in range(3):
        writer.append_samples(
            [Sample(workload="prime", kind="prime", params={"n": 100000}, variant={}, metric="time", unit="s",
                    value=value * rng.normal(1, 0.005), repetition=repetition, warmup=False, timestamp=started,
                    execution=f"prime|-|rep|{repetition}", raw=f"raw/prime/rep-{repetition}", contended=contended)]
        )  # fmt: skip
    writer.close()
    return seal(writer.path)


@pytest.fixture
def nightly(tmp_path) -> Path:
    """24 nightly bundles; from night 14 the kernel changed and prime got 8% slower; night 6 was busy."""
    out = tmp_path / "nightly"
    for day in range(24):
        slow = day >= 14
        _bundle(
            out, day, 2.0 * (1.08 if slow else 1.0) * (1.3 if day == 6 else 1.0), "6.9" if slow else "6.8", day == 6
        )
    return out


@needs_otava
@pytest.mark.parametrize("store_name", [pytest.param("history.duckdb", marks=needs_duckdb), "parts/"])
def test_add_show_and_report_name_the_change_and_what_changed(nightly, tmp_path, store_name):
    store = f"{tmp_path}/{store_name}"  # a trailing "/" asks for Parquet partitions
    done = run_ccbench("history", "add", nightly, "--store", store)
    assert done.returncode == 0 and "24 bundle(s) added, 0 already there" in done.stdout, done.stdout + done.stderr
    again = run_ccbench("history", "add", nightly, "--store", store)
    assert "0 bundle(s) added, 24 already there" in again.stdout, again.stdout + again.stderr
    if store_name.endswith("/"):  # partitioned as Spark and Trino read it
        assert len(list(Path(store).glob("date=2026-01-*/label=nightly/*.parquet"))) == 24
    shown = run_ccbench("history", "show", "--store", store, "--json")
    assert shown.returncode == 0, shown.stderr
    (series,) = [json.loads(line) for line in shown.stdout.splitlines()]
    assert len(series["runs"]) == 24 and sum(r["contended"] for r in series["runs"]) == 1
    (change,) = series["change_points"]
    assert change["run"] == 14 and change["changed"] == {"kernel_release": ["6.8", "6.9"]}
    low, high = change["interval_percent"]
    assert low < 8 < high and change["change_percent"] == pytest.approx(8, abs=1.5)
    text = run_ccbench("history", "show", "--store", store, "--workload", "prime").stdout
    assert "kernel_release 6.8 -> 6.9" in text and "24 runs (1 contended)" in text
    page = tmp_path / "history.html"
    report = run_ccbench("history", "report", "--store", store, "-o", page)
    assert report.returncode == 0, report.stderr
    body = page.read_text()
    assert body.index("Verdict") < body.index("<svg") and "kernel_release 6.8 -&gt; 6.9" in body


@needs_duckdb
def test_real_runs_are_added_once(tmp_path, write_plan):
    plan = write_plan('[[workloads]]\nkind = "prime"\nn = 2000\n')
    done = run_ccbench("run", plan, "--out", tmp_path / "out", "--workdir", tmp_path / "work")
    assert done.returncode == 0, done.stderr
    bundle = only_bundle(tmp_path / "out")
    store = tmp_path / "h.duckdb"
    assert "1 bundle(s) added" in run_ccbench("history", "add", bundle, "--store", store).stdout
    # a copy of the same bundle is the same run (its digest list is the same)
    shutil.copytree(bundle, tmp_path / "copy")
    assert (
        "0 bundle(s) added, 1 already there"
        in run_ccbench("history", "add", tmp_path / "copy", "--store", store).stdout
    )
    shown = run_ccbench("history", "show", "--store", store, "--metric", "time", "--json")
    assert shown.returncode == 0, shown.stderr
    runs = [json.loads(line)["runs"] for line in shown.stdout.splitlines()]
    assert runs and all(len(r) == 1 for r in runs)


@needs_duckdb
def test_bad_store_and_empty_store_are_one_line(tmp_path):
    not_a_store = tmp_path / "x.duckdb"
    not_a_store.write_text("not a database")
    for args, expected in (
        (["show", "--store", not_a_store], "not a ccbench history store"),
        (["show", "--store", tmp_path / "none.duckdb"], "no runs in it yet"),
    ):
        done = run_ccbench("history", *args)
        assert done.returncode == 2 and expected in done.stderr, done.stderr
        assert len(done.stderr.strip().splitlines()) == 1


@needs_duckdb
def test_without_otava_the_series_are_shown_and_the_reason_given(nightly, tmp_path):
    store = tmp_path / "h.duckdb"
    run_ccbench("history", "add", nightly, "--store", store)
    shown = run_ccbench("history", "show", "--store", store, env={"CCBENCH_OTAVA": str(tmp_path / "no-otava")})
    assert shown.returncode == 0, shown.stderr
    assert "change points not computed" in shown.stdout or otava_binary() is not None
