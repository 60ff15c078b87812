"""ccbench history: the results store (DuckDB file and Parquet partitions), change points found
by Apache Otava, validated by simulation, and the show/report commands on bundles."""

import importlib.util
import json
import re
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from bundles import seal
from conftest import DATA, ccbench_in_process, only_bundle, run_ccbench

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
    assert body.index("Verdict") < body.index("id='chart'")
    (shown_series,) = _page_data(body)["series"]
    assert [c["changed"] for c in shown_series["changes"]] == [{"kernel_release": ["6.8", "6.9"]}]


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
    assert "change points not computed: Otava is not installed" in shown.stdout  # the path given is the only one
    assert "24 runs (1 contended)" in shown.stdout


def _measured_and_imported(tmp_path, write_plan) -> tuple[Path, Path]:
    plan = write_plan('[[workloads]]\nkind = "prime"\nn = 2000\n')
    done = run_ccbench("run", plan, "--out", tmp_path / "measured", "--workdir", tmp_path / "work")
    assert done.returncode == 0, done.stderr
    imported = run_ccbench("import", "fio", DATA / "fio" / "randrw-4k.json", "--out", tmp_path / "imported")
    assert imported.returncode == 0, imported.stderr
    return only_bundle(tmp_path / "measured"), only_bundle(tmp_path / "imported")


def _runs(store) -> dict[str, int]:
    shown = run_ccbench("history", "show", "--store", store, "--json")
    assert shown.returncode == 0, shown.stderr
    return {s["workload"] + "/" + s["metric"]: len(s["runs"]) for s in map(json.loads, shown.stdout.splitlines())}


@needs_duckdb
@pytest.mark.parametrize("store_name", ["h.duckdb", "parts/"])
def test_an_imported_bundle_then_a_measured_one_then_more(tmp_path, write_plan, store_name):
    """An imported bundle (kernel and CPU unknown) first no longer fixes the store's types."""
    measured, imported = _measured_and_imported(tmp_path, write_plan)
    store = f"{tmp_path}/{store_name}"
    for bundle in (imported, measured):
        done = run_ccbench("history", "add", bundle, "--store", store)
        assert done.returncode == 0 and "1 bundle(s) added" in done.stdout, done.stderr
    copy = shutil.copytree(measured, tmp_path / "later" / measured.name)
    manifest = json.loads((copy / "manifest.json").read_text())
    manifest["started_at"] = "2030-01-01T00:00:00Z"
    (copy / "manifest.json").write_text(json.dumps(manifest))
    seal(copy)  # a later run of the same plan, sealed as its run would have sealed it
    assert "1 bundle(s) added" in run_ccbench("history", "add", copy, "--store", store).stdout
    runs = _runs(store)
    assert runs["prime/time"] == 2 and runs["fio/iops"] == 1


@needs_duckdb
def test_a_tampered_copy_added_first_does_not_hide_the_genuine_bundle(tmp_path, write_plan):
    measured, _ = _measured_and_imported(tmp_path, write_plan)
    assert (measured / "attestation.json").exists()
    tampered = shutil.copytree(measured, tmp_path / "tampered" / measured.name)
    lines = (tampered / "samples.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    first["value"] *= 10
    (tampered / "samples.jsonl").write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n")
    store = tmp_path / "h.duckdb"
    refused = run_ccbench("history", "add", tampered, "--store", store)
    assert refused.returncode == 3 and "changed: samples.jsonl" in refused.stderr, refused.stderr
    # a user who lets it in anyway: its run id comes from its content, not from its attestation.json
    forced = run_ccbench("history", "add", tampered, "--store", store, "--allow-unverified")
    assert "1 bundle(s) added" in forced.stdout, forced.stdout + forced.stderr
    genuine = run_ccbench("history", "add", measured, "--store", store)
    assert "1 bundle(s) added, 0 already there" in genuine.stdout, genuine.stdout + genuine.stderr


@needs_duckdb
def test_a_bundle_whose_manifest_was_changed_is_refused_as_compare_refuses_it(tmp_path, capsys):
    """A user trial: a bundle whose manifest was edited into text that is not JSON: before, `history
    add` exited 2 "its run has not ended (status 'unreadable')" while compare exited 3 "files differ
    from its digest list"; now both refuse it the same way, named or found under a directory."""
    from bundles import sample, write

    bundle = write(tmp_path / "b", "ci", "none",
                   [sample(workload="p", variant={}, metric="time", value=1 + r / 100, repetition=r) for r in range(3)])  # fmt: skip
    manifest = bundle / "manifest.json"
    manifest.write_text(manifest.read_text()[:-5])
    said = f"ccbench: error: {bundle}: not read: its files differ from its digest list (changed: manifest.json)"
    code, _, err = ccbench_in_process(capsys, "compare", bundle)
    assert code == 3 and err.startswith(said), err
    for path in (bundle, tmp_path / "b"):
        code, out, err = ccbench_in_process(capsys, "history", "add", path, "--store", tmp_path / "h.duckdb")
        assert code == 3 and err.startswith(said) and "has not ended" not in err, out + err


@needs_duckdb
def test_a_digest_that_is_a_glob_makes_no_extra_runs(nightly, tmp_path):
    """attestation.json's digest is never a file name: four bundles claiming `*` are four runs."""
    bundles = sorted(nightly.iterdir())[:4]
    for bundle in bundles:
        (bundle / "attestation.json").write_text(json.dumps({"digest": "*", "status": "digests"}))
    store = f"{tmp_path}/parts/"
    refused = run_ccbench("history", "add", *bundles, "--store", store)
    assert refused.returncode != 0 and not Path(store).exists(), refused.stdout + refused.stderr
    done = run_ccbench("history", "add", *bundles, "--store", store, "--allow-unverified")
    assert "4 bundle(s) added" in done.stdout, done.stdout + done.stderr
    assert _runs(store) == {"prime/time": 4}
    assert not [p for p in Path(store).rglob("*") if "*" in p.name]


@needs_duckdb
def test_an_unfinished_bundle_is_refused_and_left_out_of_a_directory(nightly, tmp_path):
    running = sorted(nightly.iterdir())[0]
    manifest = json.loads((running / "manifest.json").read_text())
    (running / "manifest.json").write_text(json.dumps({**manifest, "status": "running"}))
    shutil.copytree(sorted(nightly.iterdir())[1], nightly / ".importing" / "half")
    store = tmp_path / "h.duckdb"
    named = run_ccbench("history", "add", running, "--store", store)
    assert named.returncode == 2 and "has not ended" in named.stderr and len(named.stderr.splitlines()) == 1
    under = run_ccbench("history", "add", nightly, "--store", store)
    assert "23 bundle(s) added, 0 already there" in under.stdout, under.stdout + under.stderr


@needs_duckdb
def test_a_path_that_is_not_a_store_is_one_line_and_never_written(nightly, tmp_path):
    import duckdb

    bundle = sorted(nightly.iterdir())[0]
    foreign = tmp_path / "photos"
    foreign.mkdir()
    (foreign / "cat.jpg").write_bytes(b"jpeg")
    other = tmp_path / "other.duckdb"
    with duckdb.connect(str(other)) as db:
        db.execute("create table orders (id integer)")
    wrong = tmp_path / "wrong.duckdb"
    with duckdb.connect(str(wrong)) as db:
        db.execute("create table runs (id integer)")
    empty_partition = tmp_path / "parts" / "date=2026-01-01" / "label=nightly" / f"journal-{'0' * 64}.parquet"
    empty_partition.parent.mkdir(parents=True)
    empty_partition.touch()
    (tmp_path / "parts" / "ccbench-history.json").write_text('{"schema_version": 2}')
    before = sorted(p.name for p in bundle.rglob("*"))
    for verb, store, expected in (
        ("add", foreign, "not a ccbench history store"),
        ("add", bundle, "inside the bundle"),
        ("add", bundle / "h.duckdb", "inside the bundle"),
        ("add", other, "a DuckDB file of something else"),
        ("show", wrong, "not a history store's"),
        ("show", f"{tmp_path}/parts/", "not a readable partition"),
    ):
        done = run_ccbench("history", verb, *([bundle] if verb == "add" else []), "--store", store)
        assert done.returncode == 2 and expected in done.stderr, (store, done.stderr)
        assert len(done.stderr.strip().splitlines()) == 1
    assert [p.name for p in foreign.iterdir()] == ["cat.jpg"] and sorted(p.name for p in bundle.rglob("*")) == before


@needs_duckdb
def test_a_store_of_the_layout_before_versions_is_read_and_migrated(nightly, tmp_path):
    """Version 1 (ccbench before the declared schema): the runs table made from the first bundle's pandas
    types (an imported bundle's unknown kernel: the null type), Parquet files of the same columns."""
    import duckdb
    import pyarrow as pa
    import pyarrow.parquet as pq

    from ccbench.results.history_store import V1_COLUMNS

    v1_row = {name: None for name in V1_COLUMNS} | {
        "run_id": "journal-" + "1" * 64, "bundle": "/gone/imported", "label": "nightly", "config": "nightly / SEV-SNP",
        "workload": "prime", "case": "", "params": "{}", "metric": "time", "unit": "s", "better": "lower",
        "started_at": pd.Timestamp("2025-12-01", tz="UTC"), "median": 2.0, "n": 3, "contended": False,
    }  # fmt: skip
    points = pd.DataFrame([v1_row])
    database = tmp_path / "v1.duckdb"
    with duckdb.connect(str(database)) as db:  # what ccbench 0.x did
        db.register("points", points)
        db.execute("create table runs as select * from points limit 0")
        db.execute("insert into runs select * from points")
    parts = tmp_path / "v1parts"
    day = parts / "date=2025-12-01" / "label=nightly"
    day.mkdir(parents=True)
    pq.write_table(pa.Table.from_pandas(points, preserve_index=False), day / f"{v1_row['run_id']}.parquet")
    for store in (database, f"{parts}/"):
        assert _runs(store) == {"prime/time": 1}
        done = run_ccbench("history", "add", nightly, "--store", store)
        assert done.returncode == 0 and "24 bundle(s) added" in done.stdout, done.stdout + done.stderr
        # the version-1 row names no plan: it is read, and stays a series of its own (a series is one
        # plan's and one set of parameters'; the nightly runs are plan quick's with n = 100000)
        shown = [
            json.loads(line) for line in run_ccbench("history", "show", "--store", store, "--json").stdout.splitlines()
        ]
        assert sorted((s["plan"], len(s["runs"])) for s in shown) == [("", 1), ("quick", 24)]
    with duckdb.connect(str(database), read_only=True) as db:
        assert db.sql("select value from ccbench_history where key = 'schema_version'").fetchall() == [("3",)]
        types = dict(
            db.sql("select column_name, data_type from information_schema.columns where table_name = 'runs'").fetchall()
        )
    assert types["kernel_release"] == "VARCHAR" and types["kernel_cmdline"] == "VARCHAR"
    assert types["clocksource"] == "VARCHAR" and types["swiotlb_dynamic"] == "VARCHAR"
    assert json.loads((parts / "ccbench-history.json").read_text())["schema_version"] == 3


@needs_duckdb
def test_a_killed_adds_leftover_is_never_read_and_removed_once_its_writer_is_gone(nightly, tmp_path):
    import subprocess
    import sys

    store = Path(f"{tmp_path}/parts/")
    bundles = sorted(nightly.iterdir())
    assert run_ccbench("history", "add", bundles[0], "--store", f"{store}/").returncode == 0
    (partition,) = store.glob("date=*/label=nightly/*.parquet")
    ended = subprocess.run([sys.executable, "-c", "import os, psutil; print(os.getpid(), int(psutil.Process().create_time() * 1000))"],
                           capture_output=True, text=True).stdout.split()  # fmt: skip
    leftover = partition.parent / f".journal-{'2' * 64}.parquet.ccbench-{ended[0]}-{ended[1]}-0badcafe.partial"
    shutil.copy(partition, leftover)
    assert _runs(f"{store}/") == {"prime/time": 1}
    assert (
        "0 bundle(s) added, 1 already there" in run_ccbench("history", "add", bundles[0], "--store", f"{store}/").stdout
    )
    assert not leftover.exists()


def test_a_change_point_names_every_provenance_field_that_moved():
    from ccbench.results.history import _change_point

    s = _series([1.0] * 4 + [1.1] * 4)
    s.points["kernel_cmdline"] = ["quiet"] * 4 + ["quiet swiotlb=force"] * 4
    s.points["tdx_mrseam"] = [None] * 8
    s.points["snp_reported_tcb"] = ['{"microcode": 68}'] * 4 + ['{"microcode": 72}'] * 4
    change = {"mean_before": 1.0, "mean_after": 1.1, "stddev_before": 0, "stddev_after": 0, "pvalue": 0.0}
    cp = _change_point(s, 4, change)
    assert cp.changed == {
        "kernel_cmdline": ("quiet", "quiet swiotlb=force"),
        "snp_reported_tcb": ('{"microcode": 68}', '{"microcode": 72}'),
    }


def _page_data(body: str) -> dict:
    start = body.index("<script id='data' type='application/json'>") + len("<script id='data' type='application/json'>")
    return json.loads(body[start : body.index("</script>", start)])


def _page_series() -> list[Series]:
    """Three series of 12 runs (two machines, two workloads); the odd-named one moved at run 6 when the
    kernel command line changed."""
    from ccbench.results.history import _change_point

    out = []
    cases = (("cvm $x$ </script><b>", "fio", "iops"), ("plain", "fio", "iops"), ("plain", "prime", "time"))
    for number, (label, workload, metric) in enumerate(cases):
        s = _series([1.0] * 6 + [1.2 if label.startswith("cvm") else 1.0] * 6)
        s.key = {"label": label, "config": f"{label} / SEV-SNP", "workload": workload, "case": "4k", "metric": metric}
        s.points["run_id"] = [f"journal-{number * 100 + i:064x}" for i in range(12)]
        s.points["bundle"] = [f"/results/{label}/run-{i}" for i in range(12)]
        s.points["n"] = 3
        s.points["kernel_cmdline"] = ["quiet"] * 6 + ["quiet swiotlb=force" if label.startswith("cvm") else "quiet"] * 6
        if label.startswith("cvm"):
            change = {"mean_before": 1.0, "mean_after": 1.2, "stddev_before": 0, "stddev_after": 0, "pvalue": 0.0}
            s.change_points = [_change_point(s, 6, change)]
        out.append(s)
    return out


def test_the_history_page_is_one_offline_file_with_the_changes_first_and_labels_kept_as_text(tmp_path):
    from ccbench.results.history_report import render

    body = render(_page_series(), None, tmp_path / "h.duckdb")
    data = _page_data(body)
    assert len(data["series"]) == 3 and len(data["runs"]) == 12 * 3
    (moved,) = [s for s in data["series"] if s["changes"]]
    assert moved["label"] == "cvm $x$ </script><b>"
    assert moved["changes"][0]["changed"] == {"kernel_cmdline": ["quiet", "quiet swiotlb=force"]}
    assert moved["changes"][0]["index"] == 6 and moved["changes"][0]["percent"] == pytest.approx(20)
    assert "<b>" not in body and body.count("</script>") == 3  # uPlot, the data, the page's code
    assert "<script src" not in body and "<link" not in body and "https://cdn" not in body  # nothing fetched
    assert body.index("Verdict") < body.index("id='picker'") < body.index("id='chart'")
    assert len(body) < 200_000


@pytest.mark.skipif(
    shutil.which("chromium") is None, reason="chromium is not installed (bash scripts/setup.sh --with browser)"
)
def test_the_history_page_works_in_headless_chromium(tmp_path):
    """Loaded in the real browser: no script error, the series listed, the moved one shown first with a
    chart, and a filter (given in the link, set through the same control) changes what is listed."""
    import re
    import subprocess

    from ccbench.results.history_report import render

    page = tmp_path / "history.html"
    page.write_text(render(_page_series(), None, tmp_path / "h.duckdb"))

    def dom(fragment: str) -> tuple[str, str]:
        done = subprocess.run(
            ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1280,1600", "--enable-logging=stderr",
             "--v=0", "--dump-dom", page.as_uri() + fragment],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        return done.stdout, done.stderr

    shown, log = dom("")
    errors = [line for line in log.splitlines() if "CONSOLE" in line or "Uncaught" in line]
    assert not errors, errors
    assert 'data-ready="1"' in shown and "<canvas" in shown
    assert re.search(r'id="count"[^>]*>3 of 3 series<', shown), shown[-3000:]
    assert re.search(r'id="title"[^>]*>cvm \$x\$ &lt;/script&gt;&lt;b&gt; / ', shown)  # the one that moved
    assert "kernel_cmdline quiet -&gt; quiet swiotlb=force" in shown  # what moved, as history show says it
    filtered, log = dom("#workload=prime")
    assert not [line for line in log.splitlines() if "Uncaught" in line]
    assert re.search(r'id="count"[^>]*>1 of 3 series<', filtered)
    assert re.search(r'id="title"[^>]*>plain / SEV-SNP / prime / 4k / time<', filtered)
    only_moved, _ = dom("#metric=iops&moved=1")
    assert re.search(r'id="count"[^>]*>1 of 3 series<', only_moved)
    hovered, _ = dom("#series=0&point=7")  # the cursor on run 8 of the moved series, as a hover puts it
    assert re.search(r'id="hover"[^>]*><b>run 8 of 12</b>', hovered), hovered[-2000:]
    assert (
        f"<dd>journal-{7:064x}</dd>" in hovered
        and "<dd>/results/cvm $x$ &lt;/script&gt;&lt;b&gt;/run-7</dd>" in hovered
    )
    assert "<dt>kernel_cmdline</dt><dd>quiet swiotlb=force</dd>" in hovered
    nothing, _ = dom("#workload=prime&moved=1")
    assert re.search(r'id="count"[^>]*>0 of 3 series<', nothing) and "no series matches these filters" in nothing
    # machines imported once: their one-run series are counted, not listed or drawn, until asked for
    page.write_text(render(_one_run_series(6, 40), None, tmp_path / "h.duckdb"))
    once, log = dom("")
    assert not [line for line in log.splitlines() if "Uncaught" in line]
    assert re.search(r'id="count"[^>]*>0 of 240 series; 240 of one run not listed', once), once[-3000:]
    assert "every series has one run: nothing to draw over time yet" in once and "<canvas" not in once
    listed, _ = dom("#single=1&label=vm-2")
    assert re.search(r'id="count"[^>]*>40 of 240 series<', listed)
    assert '<optgroup label="vm-2 / TDX"><option value="80">pyperf / bench_0 / time</option>' in listed


def test_an_add_hashes_each_journal_once(tmp_path, monkeypatch):
    """The check before reading, the run id and the columnar reader all need the journal's SHA-256:
    one read of it serves the three (remembered by the file's identity), a second add none; the
    run id is still the digest over the bundle's files, as a fresh full read gives it."""
    from bundles import write

    from ccbench.attestation import digests as listed
    from ccbench.attestation.digests import digest_list, list_digest
    from ccbench.attestation.onread import check_before_reading
    from ccbench.bundle import digests
    from ccbench.results.history import Store, add_bundles

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    samples = [
        Sample(workload="prime", kind="prime", params={"n": i % 7}, variant={}, metric="time", unit="s",
               value=1.0 + i / 1e4, better="lower", repetition=i, warmup=False, timestamp="2026-01-01T00:00:00Z")
        for i in range(6000)
    ]  # fmt: skip
    bundle = write(tmp_path / "runs", "host", "none", samples)
    assert (bundle / "samples.jsonl").stat().st_size > digests.REMEMBER_FROM  # a journal whose digest is remembered
    reads = []
    hash_file = digests.sha256_file

    def counted(path):
        reads.append(Path(path).name)
        return hash_file(path)

    monkeypatch.setattr(digests, "sha256_file", counted)
    monkeypatch.setattr(listed, "sha256_file", counted)
    store = Store(tmp_path / "history.duckdb")
    for expected_added in (1, 0):
        check_before_reading([bundle], finished_only=True)
        assert add_bundles([bundle], store) == (expected_added, 1 - expected_added)
    assert reads.count("samples.jsonl") == 1, reads
    monkeypatch.setattr(digests, "sha256_file", hash_file)
    monkeypatch.setattr(listed, "sha256_file", hash_file)
    run_ids = set(store.frame()["run_id"])
    assert run_ids == {"bundle-" + list_digest(digest_list(bundle, remembered=False))}


@needs_duckdb
def test_machines_imported_once_read_as_machines_not_one_point_series(tmp_path):
    """seed 000's machines imported once: one line per machine (its series counted, none listed:
    none can move with one run), labels not repeated, numbers without scientific notation."""
    tees = ["--tee", "TDX-Encrypted=tdx", "--tee", "TDX-Non-Encrypted=tdx", "--tee", "Intel-Non-TDX=none"]
    done = run_ccbench("import", "seed000", DATA / "import" / "seed000-azure", "--out", tmp_path / "b", *tees)
    assert done.returncode == 0, done.stderr
    store = tmp_path / "h.duckdb"
    added = run_ccbench("history", "add", *sorted((tmp_path / "b").iterdir()), "--store", store)
    assert added.returncode == 0, added.stderr
    shown = run_ccbench("history", "show", "--store", store)
    assert shown.returncode == 0, shown.stderr
    lines = [line for line in shown.stdout.splitlines() if not line.startswith("change points not computed")]
    series = [json.loads(s) for s in run_ccbench("history", "show", "--store", store, "--json").stdout.splitlines()]
    assert len(series) > 3
    assert (
        lines[0]
        == f"3 configurations, {len(series)} series (plan imported-seed000: {len(series)}), 0 with a change point"
    )
    heads = [line for line in lines[1:] if not line.startswith(" ")]
    assert len(heads) == 3 and len(lines) <= 1 + 2 * 3, lines
    for machine in ("Intel-Non-TDX", "TDX-Encrypted", "TDX-Non-Encrypted"):
        (head,) = [h for h in heads if h.startswith(f"{machine} /")]
        assert "1 run (0 contended) each; 0 moved" in head
        assert sum(machine in line for line in lines) == 1  # the label once
    assert not re.search(r"\de[+-]\d", shown.stdout)


def _overview(body: str) -> str:
    return body[body.index("<ul id='overview'>") : body.index("<h2>Series</h2>")]


def _one_run_series(machines: int, per_machine: int) -> list[Series]:
    """Machines imported once: every series one run (none can move), times of a few microseconds."""
    out = []
    for machine in range(machines):
        for number in range(per_machine):
            s = _series([1.5e-5 * (1 + number)])
            s.key = {"label": f"vm-{machine}", "config": f"vm-{machine} / TDX", "workload": "pyperf",
                     "case": f"bench_{number}", "metric": "time"}  # fmt: skip
            s.points["run_id"], s.points["bundle"], s.points["n"] = f"run-{machine}", f"/b/{machine}", 1
            s.note = "fewer than 4 uncontended runs: no change point can be found"
            out.append(s)
    return out


def test_the_history_page_says_what_moved_as_history_show_does(tmp_path):
    """One line per configuration, the configuration named once; under it one line per series that
    moved with its change point; the series that did not move counted, not listed."""
    import html as html_module

    from ccbench.results.history_report import render
    from ccbench.results.history_show import show_lines

    series = _page_series()
    overview = _overview(render(series, None, tmp_path / "h.duckdb"))
    assert overview.count("<li class='config'>") == 2  # the odd-named machine; plain (its two series)
    lines = [line for line in re.sub(r"<[^>]+>", "\n", overview).splitlines() if line.strip()]
    # the page's lines are history show's, line for line
    assert [html_module.unescape(line) for line in lines] == [line.strip() for line in show_lines(series, None)[1:]]
    assert "fio 4k iops (s): 12 runs (0 contended), last 1.20 s" in lines
    assert re.findall(r"<li class='pick' data-series='(\d+)'>", overview) == ["0"]  # the one that moved: its chart
    assert overview.count(html_module.escape("cvm $x$ </script><b>")) == 1  # its label once, as text


def test_machines_imported_once_are_machines_on_the_history_page(tmp_path):
    """Six machines of one run each: six lines, none of the one-run series listed in the picker or drawn,
    and times in microseconds, never in scientific notation."""
    from ccbench.results.history_report import render
    from ccbench.results.history_show import show_lines

    series = _one_run_series(6, 40)
    body = render(series, None, tmp_path / "h.duckdb")
    overview = _overview(body)
    assert overview.count("<li class='config'>") == 6
    for machine in range(6):
        assert overview.count(f"vm-{machine} / TDX") == 1
    assert "40 series, 1 run (0 contended) each; 0 moved" in overview
    assert "data-series" not in overview  # nothing moved: no series listed
    hover = _page_data(body)["series"][1]["ytext"]
    assert hover == ["30.0 µs"]
    assert not re.search(r"\de[+-]\d", "\n".join(show_lines(series, None)) + overview + json.dumps(hover))


def test_a_change_in_microseconds_is_written_in_microseconds():
    from ccbench.results.history import _change_point
    from ccbench.results.history_show import show_lines

    s = _series([2e-5] * 6 + [2.4e-5] * 6)
    s.points["run_id"], s.points["bundle"], s.points["n"] = "r", "/b", 3
    change = {"mean_before": 2e-5, "mean_after": 2.4e-5, "stddev_before": 0, "stddev_after": 0, "pvalue": 0.0}
    s.change_points = [_change_point(s, 6, change)]
    text = "\n".join(show_lines([s], None))
    assert "(20.0 µs -> 24.0 µs, p 0.0000)" in text and "last 24.0 µs" in text
    assert not re.search(r"\de[+-]\d", text)


# ---- what a plan of the bundled kinds puts in a store, old runs, and what add leaves out (issues 54, 59) ----


def _strict_json(text: str):
    """JSON as the standard reads it: NaN and Infinity are not JSON."""
    return json.loads(text, parse_constant=lambda name: pytest.fail(f"{name} in JSON"))


@needs_duckdb
def test_a_store_of_systeminfo_prime_and_a_command_is_shown_and_reported(tmp_path, write_plan):
    """systeminfo's facts have no direction ("better" missing): history report ended in "ValueError: Out
    of range float values are not JSON compliant" and show --json wrote NaN."""
    plan = write_plan(
        '[[workloads]]\nkind = "systeminfo"\nrepetitions = 1\n[[workloads]]\nkind = "prime"\nn = 2000\n'
        '[[workloads]]\nkind = "command"\nname = "nothing"\ncommand = "true"\n',
        name="mixed",
    )
    store = tmp_path / "h.duckdb"
    for night in range(2):
        done = run_ccbench("run", plan, "--out", tmp_path / f"n{night}", "--workdir", tmp_path / "work")
        assert done.returncode == 0, done.stderr
        assert run_ccbench("history", "add", tmp_path / f"n{night}", "--store", store).returncode == 0
    page = tmp_path / "h.html"
    report = run_ccbench("history", "report", "--store", store, "-o", page)
    assert report.returncode == 0 and "Traceback" not in report.stderr, report.stderr
    body = page.read_text()
    data = _strict_json(re.search(r"<script id='data' type='application/json'>(.*?)</script>", body).group(1))
    facts = [s for s in data["series"] if s["metric"] == "memory_total"]
    assert facts and facts[0]["better"] is None
    shown = run_ccbench("history", "show", "--store", store, "--json")
    assert shown.returncode == 0, shown.stderr
    series = [_strict_json(line) for line in shown.stdout.splitlines()]
    assert {s["plan"] for s in series} == {"mixed"} and all(len(s["runs"]) == 2 for s in series)


def _rate_bundle(out: Path, started: datetime, value: float, plan: str = "quick") -> Path:
    """A nightly fio-like throughput run (higher is better) started at ``started``."""
    stamp = started.isoformat().replace("+00:00", "Z")
    probe = {"hostname": "nightly", "tee": {"technology": "tdx"}, "kernel": {"release": "6.8"}, "cpu": {"model": "x"}}
    writer = BundleWriter.create(
        out, {"plan": {"name": plan}, "environment": probe, "started_at": stamp, "status": "complete"},
        name=f"{plan}-{started:%Y%m%d}",
    )  # fmt: skip
    writer.append_samples(
        [Sample(workload="fio", kind="fio", params={"bs": "1m", "rw": "read"}, variant={"storage": "disk"},
                metric="throughput", unit="MB/s", better="higher", value=value * (1 + 0.002 * (r - 1)),
                repetition=r, warmup=False, timestamp=stamp, execution=f"fio|-|rep|{r}")
         for r in range(3)]
    )  # fmt: skip
    writer.close()
    return seal(writer.path)


@needs_otava
@needs_duckdb
def test_runs_dated_2023_are_looked_at_and_the_step_is_said_as_the_gate_says_it(tmp_path):
    """16 nightly runs in November 2023, a 30% throughput drop (0.104 -> 0.0724 MB/s) from the 9th:
    Otava's default window of 365 days left them all out (no change point); and the step is said in
    compare's convention, the gate's words on the same values ("-30.4%" before, the gate "43.6% slower")."""
    from ccbench.analysis import format as fmt

    start = datetime(2023, 11, 1, 2, 17, tzinfo=UTC)
    rng = np.random.default_rng(23)
    out = tmp_path / "nights"
    for night in range(16):
        level = (0.104 if night < 8 else 0.0724) * (1 + rng.normal(0, 0.003))
        _rate_bundle(out, start + timedelta(days=night), level)
    store = tmp_path / "h.duckdb"
    assert run_ccbench("history", "add", out, "--store", store).returncode == 0
    shown = run_ccbench("history", "show", "--store", store)
    assert shown.returncode == 0, shown.stderr
    (line,) = [x for x in shown.stdout.splitlines() if x.strip().startswith("change point 2023-11-09")]
    (series,) = [
        _strict_json(x) for x in run_ccbench("history", "show", "--store", store, "--json").stdout.splitlines()
    ]
    (change,) = series["change_points"]
    words = fmt.effect(change["mean_before"] / change["mean_after"])
    assert change["effect"].startswith(words) and f": {words} [" in line and "slower" in words, (words, line)
    # the gate on a run at the new level against the eight before it says the same step the same way
    before = tmp_path / "before.duckdb"
    assert run_ccbench("history", "add", *sorted(out.iterdir())[:8], "--store", before).returncode == 0
    new = _rate_bundle(tmp_path / "new", start + timedelta(days=30), 0.0724)
    gate = run_ccbench("gate", new, "--against", before)
    assert gate.returncode == 1 and "FAIL fio throughput on TDX / disk" in gate.stdout, gate.stdout + gate.stderr
    mean = float(np.exp(np.mean(np.log([s["median"] for s in series["runs"][:8]]))))
    assert fmt.effect(mean / 0.0724) in gate.stdout


@needs_duckdb
def test_history_add_names_what_it_left_out_and_stores_absolute_paths(tmp_path, write_plan):
    """A directory with a finished run, an interrupted one and one whose every execution failed: before,
    "1 bundle(s) added, 0 already there" and nothing about the other two; paths relative to the
    directory add ran in."""
    import signal

    from conftest import start_run, wait_for_samples

    work = tmp_path / "work"
    runs = tmp_path / "runs"
    good = write_plan('[[workloads]]\nkind = "prime"\nn = 2000\n', filename="good.toml")
    assert run_ccbench("run", good, "--out", runs / "good", "--workdir", work).returncode == 0
    failing = write_plan('[[workloads]]\nkind = "command"\nname = "no"\ncommand = "false"\n', filename="bad.toml")
    assert run_ccbench("run", failing, "--out", runs / "failed", "--workdir", work).returncode == 1
    slow = write_plan(
        '[[workloads]]\nkind = "command"\nname = "slow"\nrepetitions = 3\ncommand = "sleep 1"\n', filename="slow.toml"
    )
    process = start_run(slow, runs / "cut", work)
    wait_for_samples(runs / "cut", 4)
    process.send_signal(signal.SIGINT)
    process.communicate(timeout=60)
    store = tmp_path / "h.duckdb"
    added = run_ccbench("history", "add", "runs", "--store", store, cwd=tmp_path)
    assert added.returncode == 0, added.stderr
    assert "1 bundle(s) added, 0 already there, 2 left out" in added.stdout, added.stdout
    cut, failed = only_bundle(runs / "cut"), only_bundle(runs / "failed")
    lines = added.stdout.splitlines()
    assert any(f"runs/cut/{cut.name}: its run has not ended (status 'interrupted')" in x for x in lines), lines
    assert any(f"runs/failed/{failed.name}: no measured sample in it" in x for x in lines), lines
    shown = run_ccbench("history", "show", "--store", store, "--json")
    (series,) = [_strict_json(x) for x in shown.stdout.splitlines() if '"metric": "time"' in x]
    assert series["runs"][0]["bundle"] == str(only_bundle(runs / "good").resolve())


@needs_duckdb
def test_show_counts_the_series_of_each_plan_and_keeps_plans_apart(tmp_path):
    start = datetime(2026, 3, 1, tzinfo=UTC)
    for night in range(3):
        _rate_bundle(tmp_path / "a", start + timedelta(days=night), 0.1, plan="alpha")
        _rate_bundle(tmp_path / "b", start + timedelta(days=night, hours=1), 0.2, plan="beta")
    store = tmp_path / "h.duckdb"
    assert run_ccbench("history", "add", tmp_path / "a", tmp_path / "b", "--store", store).returncode == 0
    shown = run_ccbench("history", "show", "--store", store)
    lines = [x for x in shown.stdout.splitlines() if not x.startswith("change points not computed")]
    assert lines[0] == "1 configuration, 2 series (plan alpha: 1, plan beta: 1), 0 with a change point", lines
    assert "nightly / TDX / disk (plan alpha): 1 series, 3 runs (0 contended); 0 moved" in lines


@needs_duckdb
def test_every_imported_kind_in_one_store_is_shown_reported_and_gated_without_a_traceback(tmp_path):
    """fio, pyperformance, hyperfine (command), iperf3 and ping (network) and seed 000 (systeminfo, fio,
    notebooks) imported from the tests' files into one store: show, show --json (strict JSON), report,
    and the gate of each against it end without a traceback."""
    sources = [
        ("fio", DATA / "import" / "fio-2.17-randread-4k.json"),
        ("fio", DATA / "fio" / "randrw-4k.json"),
        ("pyperf", DATA / "import" / "perf-0.8.3-format5.json"),
        ("hyperfine", DATA / "import" / "hyperfine-failures.json"),
        ("iperf3", DATA / "network" / "iperf3-udp-client.json"),
        ("ping", DATA / "network" / "ping-iputils-ipv6.txt"),
        ("seed000", DATA / "import" / "seed000-azure"),
    ]
    bundles = []
    for number, (kind, path) in enumerate(sources):
        out = tmp_path / f"import{number}"
        extra = [] if kind == "seed000" else ["--label", "m"]
        done = run_ccbench("import", kind, path, "--out", out, *extra)
        assert done.returncode == 0, done.stderr
        bundles += sorted(p for p in out.iterdir() if (p / "manifest.json").exists())
    store = tmp_path / "h.duckdb"
    assert run_ccbench("history", "add", *bundles, "--store", store).returncode == 0
    outputs = [
        run_ccbench("history", "show", "--store", store),
        run_ccbench("history", "report", "--store", store, "-o", tmp_path / "h.html"),
    ]
    shown = run_ccbench("history", "show", "--store", store, "--json")
    assert [_strict_json(line) for line in shown.stdout.splitlines()]
    outputs += [run_ccbench("gate", bundle, "--against", store) for bundle in bundles]
    for done in [*outputs, shown]:
        assert "Traceback" not in done.stderr and done.returncode in (0, 1), done.args[3:] + [done.stderr]


@needs_duckdb
def test_history_add_of_only_runs_that_did_not_end_adds_nothing_and_says_why(tmp_path, capsys):
    """issue 59: a CI night whose only run was interrupted: `history add results/nightly` exited 2 ("no
    finished bundle in it"), failing the job's last step; now exit 0, "nothing added; 1 left out" and
    the reason, and a named interrupted bundle is still refused."""
    from bundles import probe, sample

    writer = BundleWriter.create(tmp_path / "nightly" / "ci", {"plan": {"name": "t"}, "environment": probe("ci", "none"),
                                                                "status": "interrupted"})  # fmt: skip
    writer.append_samples([sample(workload="prime", variant={}, metric="time", value=1.0, repetition=0)])
    writer.close()
    cut = seal(writer.path)
    store = tmp_path / "h.duckdb"
    code, out, err = ccbench_in_process(capsys, "history", "add", tmp_path / "nightly", "--store", store)
    assert code == 0, out + err
    assert out.splitlines() == [
        f"{store}: nothing added; 1 left out",
        f"  left out {cut}: its run has not ended (status 'interrupted')",
    ], out
    code, out, err = ccbench_in_process(capsys, "history", "add", cut, "--store", store)
    assert code == 2 and err.startswith(f"ccbench: error: {cut}: its run has not ended"), out + err
