"""ccbench export: a real run's bundle and an imported one as one table, read back without ccbench
by pyarrow and by DuckDB, every column documented."""

import re
from pathlib import Path

import pytest
from conftest import DATA, REPO, only_bundle, run_ccbench

pa = pytest.importorskip("pyarrow", reason="pyarrow is a core dependency: bash scripts/setup.sh")
duckdb = pytest.importorskip("duckdb", reason="DuckDB is in the test extra: bash scripts/setup.sh --with test")
import pyarrow.csv as pcsv  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402


@pytest.fixture(scope="module")
def bundles(tmp_path_factory) -> list[Path]:
    """One bundle measured here (prime, two repetitions after a warmup) and one imported fio result."""
    root = tmp_path_factory.mktemp("export")
    plan = root / "plan.toml"
    plan.write_text(
        'name = "t"\n[defaults]\nrepetitions = 2\nwarmup = 1\ncooldown = 0\ntimeout = 60\n'
        '[[workloads]]\nkind = "prime"\nn = 2000\n'
    )
    done = run_ccbench("run", plan, "--out", root / "measured", "--workdir", root / "work")
    assert done.returncode == 0, done.stderr
    imported = run_ccbench(
        "import", "fio", DATA / "fio" / "randrw-4k.json", "--out", root / "imported", "--label", "cvm"
    )
    assert imported.returncode == 0, imported.stderr
    return [only_bundle(root / "measured"), only_bundle(root / "imported")]


def test_parquet_and_csv_hold_every_sample_with_its_machine(bundles, tmp_path):
    measured, imported = bundles
    parquet, csv = tmp_path / "samples.parquet", tmp_path / "samples.csv"
    for out in (parquet, csv):
        done = run_ccbench("export", *bundles, "-o", out, "--label", f"{measured}=plain")
        assert done.returncode == 0, done.stderr
    journal_lines = sum(len((b / "samples.jsonl").read_text().splitlines()) for b in bundles)
    by_arrow = pq.read_table(parquet).to_pylist()
    assert len(by_arrow) == journal_lines
    assert {row["label"] for row in by_arrow} == {"plain", "cvm"}
    assert any(row["warmup"] for row in by_arrow) and not all(row["warmup"] for row in by_arrow)
    plain = [row for row in by_arrow if row["label"] == "plain"]
    assert all(row["cpu_model"] and row["kernel_release"] and row["imported"] is False for row in plain)
    assert all(
        row["imported"] is True and row["tee_technology"] == "unknown" for row in by_arrow if row["label"] == "cvm"
    )
    # DuckDB reads the same rows from the Parquet file and from the CSV file, without ccbench
    query = "select label, workload, metric, value, warmup from '{}' order by label, workload, metric, value, warmup"
    from_parquet = duckdb.sql(query.format(parquet)).fetchall()
    from_csv = duckdb.sql(query.format(csv)).fetchall()
    assert from_parquet == from_csv
    assert sorted((r["label"], r["workload"], r["metric"], r["value"], r["warmup"]) for r in by_arrow) == from_parquet
    assert pcsv.read_csv(csv).num_rows == journal_lines


def test_every_column_is_documented(bundles, tmp_path):
    out = tmp_path / "samples.parquet"
    assert run_ccbench("export", *bundles, "-o", out).returncode == 0
    columns = pq.read_schema(out).names
    docs = (REPO / "docs" / "bundle-format.md").read_text()
    section = docs[docs.index("## Export") :]
    documented = set(re.findall(r"^\| `(\w+)` \|", section, re.MULTILINE))
    assert set(columns) == documented, (set(columns) - documented, documented - set(columns))


@pytest.mark.parametrize(
    "args, expected",
    [
        (["{bundle}", "-o", "{tmp}"], "is a directory"),
        (["{tmp}/missing", "-o", "{tmp}/x.parquet"], "missing"),
        (["{bundle}", "-o", "{tmp}/no/such/dir/x.parquet"], "does not exist"),
    ],
)
def test_bad_output_or_bundle_is_one_line(bundles, tmp_path, args, expected):
    done = run_ccbench("export", *[a.format(bundle=bundles[0], tmp=tmp_path) for a in args])
    assert done.returncode == 2 and expected in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
    assert not list(tmp_path.rglob("*.partial"))
