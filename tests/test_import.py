"""ccbench import: fio, pyperf, hyperfine and seed-000 results made here by the real tools, turned
into bundles that show and compare read, with every sample saying where it came from."""

import gzip
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import DATA, run_ccbench

from ccbench.bundle import read_bundle

FIO_RECORDED = DATA / "fio" / "randrw-4k.json"


def _only(out: Path) -> Path:
    bundles = [p for p in out.iterdir() if (p / "manifest.json").exists()]
    assert len(bundles) == 1, bundles
    return bundles[0]


@pytest.fixture(scope="module")
def pyperf_result(tmp_path_factory) -> Path:
    """A small real pyperf run: 2 worker processes, 3 values each."""
    pytest.importorskip(
        "pyperf", reason="pyperf comes with the datascience component: bash scripts/setup.sh --with datascience"
    )
    out = tmp_path_factory.mktemp("pyperf") / "result.json"
    done = subprocess.run(
        [sys.executable, "-m", "pyperf", "timeit", "-q", "-p", "2", "-n", "3", "-l", "1", "-w", "1",
         "--name", "sum_range", "-o", str(out), "sum(range(100))"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return out


@pytest.fixture(scope="module")
def fio_live(tmp_path_factory) -> Path:
    """fio's json+ output of a tiny real job (4 MiB, one second at most)."""
    if not shutil.which("fio"):
        pytest.skip("fio is not installed (bash scripts/setup.sh)")
    directory = tmp_path_factory.mktemp("fio")
    out = directory / "fio.json"
    done = subprocess.run(
        ["fio", "--name=imported", "--rw=randread", "--bs=4k", "--size=4M", "--runtime=1", "--time_based=0",
         f"--directory={directory}", "--output-format=json+", f"--output={out}"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return out


def test_fio_json_becomes_the_samples_of_ccbenchs_own_fio_workload(tmp_path):
    done = run_ccbench("import", "fio", FIO_RECORDED, "--out", tmp_path, "--label", "plain-vm")
    assert done.returncode == 0, done.stderr
    bundle = read_bundle(_only(tmp_path))
    source = json.loads(FIO_RECORDED.read_text())
    job = source["jobs"][0]
    throughput = {s["params"]["direction"]: s["value"] for s in bundle.samples if s["metric"] == "throughput"}
    assert throughput["read"] == pytest.approx(job["read"]["bw_bytes"] / 1e6)
    assert throughput["write"] == pytest.approx(job["write"]["bw_bytes"] / 1e6)
    for sample in bundle.samples:
        assert sample["metadata"]["imported"] is True and sample["metadata"]["source"] == str(FIO_RECORDED)
        assert sample["params"]["bs"] and sample["params"]["rw"]
    manifest = bundle.manifest
    assert manifest["imported"]["format"] == "fio" and manifest["label"] == "plain-vm"
    assert manifest["environment"]["tee"]["technology"] == "unknown"
    assert any("TEE evidence" in line for line in manifest["environment"]["unknown"])
    # the source is kept inside the bundle, and the digest list covers it
    assert list((_only(tmp_path) / "raw").rglob(FIO_RECORDED.name))
    shown = run_ccbench("show", _only(tmp_path))
    assert shown.returncode == 0 and "imported from fio results, not measured by ccbench" in shown.stdout
    assert "None" not in shown.stdout  # what the source does not say is "unknown", never None
    verified = run_ccbench("verify", _only(tmp_path))
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert "imported" in verified.stdout and "not measured by ccbench" in verified.stdout


def test_fio_json_plus_of_a_real_run(fio_live, tmp_path):
    done = run_ccbench("import", "fio", fio_live, "--out", tmp_path)
    assert done.returncode == 0, done.stderr
    samples = read_bundle(_only(tmp_path)).samples
    iops = [s for s in samples if s["metric"] == "iops"]
    assert len(iops) == 1 and iops[0]["params"]["bs"] == "4k" and iops[0]["params"]["rw"] == "randread"
    assert iops[0]["value"] == pytest.approx(json.loads(fio_live.read_text())["jobs"][0]["read"]["iops"])


def test_pyperf_every_value_of_every_run(pyperf_result, tmp_path):
    compressed = tmp_path / "result.json.gz"
    compressed.write_bytes(gzip.compress(pyperf_result.read_bytes()))
    done = run_ccbench("import", "pyperf", compressed, "--out", tmp_path / "out", "--label", "cvm")
    assert done.returncode == 0, done.stderr
    bundle = read_bundle(_only(tmp_path / "out"))
    source = json.loads(pyperf_result.read_text())
    values = [v for run in source["benchmarks"][0]["runs"] for v in run.get("values", [])]
    assert sorted(s["value"] for s in bundle.samples) == sorted(values)
    assert {s["params"]["benchmark"] for s in bundle.samples} == {"sum_range"}
    assert len(bundle.executions) == 2  # one per pyperf worker process
    assert bundle.manifest["environment"]["cpu"]["model"] == source["metadata"]["cpu_model_name"]


@pytest.mark.skipif(not shutil.which("hyperfine"), reason="hyperfine is not installed (apt-get install hyperfine)")
def test_hyperfine_every_run(tmp_path):
    export = tmp_path / "hyperfine.json"
    done = subprocess.run(
        ["hyperfine", "-N", "--runs", "3", "--warmup", "1", "--export-json", str(export), "true", "sleep 0.01"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    source = json.loads(export.read_text())["results"]
    # under one machine's label: one bundle, each command a case
    imported = run_ccbench("import", "hyperfine", export, "--out", tmp_path / "out", "--label", "vm")
    assert imported.returncode == 0, imported.stderr
    samples = read_bundle(_only(tmp_path / "out")).samples
    for result in source:
        mine = [s["value"] for s in samples if s["params"]["command"] == result["command"]]
        assert mine == result["times"]
    # without a label: the same, labelled by the file's name
    imported = run_ccbench("import", "hyperfine", export, "--out", tmp_path / "commands")
    assert imported.returncode == 0, imported.stderr
    assert read_bundle(_only(tmp_path / "commands")).manifest["label"] == "hyperfine"


def _seed000_dir(directory: Path, pyperf_result: Path, fio_json: Path) -> dict:
    """A result directory as the seed-000 runner wrote it, from real tool output: two labels, fio JSON
    as written by fio, a notebook line per execution, and pyperf's own console summary."""
    directory.mkdir()
    shown = subprocess.run(
        [sys.executable, "-m", "pyperf", "show", "-q", str(pyperf_result)], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert shown.startswith("Mean +- std dev:")
    console = f"sum_range: {shown}\n"
    notebook_seconds = {"Intel-TDX": [12.5, 12.9, 13.1], "Intel-Non-TDX": [11.0, 11.2, 11.6]}
    for label, stamp in (("Intel-TDX", "20240301_1200"), ("Intel-Non-TDX", "20240302_0900")):
        (directory / f"{label}_{stamp}00_systeminfo.txt").write_text(
            f"System: Linux\nNode Name: {label.lower()}\nRelease: 6.5.0\nProcessor: x86_64\nCPU Model: Xeon {label}\n"
        )
        shutil.copy(fio_json, directory / f"{label}_{stamp}10_fio_4k_randomread.txt")
        for minute, seconds in enumerate(notebook_seconds[label]):
            (directory / f"{label}_{stamp}{20 + minute}_SimplePrime.ipynb.txt").write_text(
                f"Notebook execution time: {seconds} seconds\n"
            )
        (directory / f"{label}_{stamp}30_pyperformance default.txt").write_text(
            "Running benchmarks...\n" + console + "Done.\n"
        )
    (directory / "notes.md").write_text("not a result file\n")
    return notebook_seconds


def test_seed000_directory_one_bundle_per_label_and_compare_reproduces_the_source(pyperf_result, tmp_path):
    seconds = _seed000_dir(tmp_path / "results", pyperf_result, FIO_RECORDED)
    done = run_ccbench("import", "seed000", tmp_path / "results", "--out", tmp_path / "out")
    assert done.returncode == 0, done.stderr
    bundles = {read_bundle(p).manifest["label"]: read_bundle(p) for p in (tmp_path / "out").iterdir()}
    assert set(bundles) == {"Intel-TDX", "Intel-Non-TDX"}
    tdx = bundles["Intel-TDX"]
    assert tdx.manifest["environment"]["cpu"]["model"] == "Xeon Intel-TDX"
    notebook = [s for s in tdx.samples if s["workload"] == "SimplePrime"]
    assert sorted(s["value"] for s in notebook) == seconds["Intel-TDX"]
    assert [s["repetition"] for s in sorted(notebook, key=lambda s: s["timestamp"])] == [0, 1, 2]
    summary = [s for s in tdx.samples if s["kind"] == "pyperformance"]
    assert len(summary) == 1 and summary[0]["metadata"]["statistic"] == "mean"
    assert summary[0]["metadata"]["values"] is None  # unknown, not invented
    assert any("notes.md" in line for line in tdx.manifest["environment"]["unknown"])

    compared = run_ccbench("compare", *sorted((tmp_path / "out").iterdir()), "--baseline", "Intel-Non-TDX", "--json")
    assert compared.returncode == 0, compared.stderr
    rows = [json.loads(line) for line in compared.stdout.splitlines() if line.startswith("{")]
    prime = [r for r in rows if r.get("workload") == "SimplePrime" and "Intel-TDX" in str(r.get("config", ""))]
    assert prime, compared.stdout
    assert prime[0]["median"] == pytest.approx(12.9) and prime[0]["baseline_median"] == pytest.approx(11.2)
    pyperformance = [r for r in rows if r.get("workload") == "pyperformance-default" and r.get("metric") == "time_s"]
    assert pyperformance, compared.stdout
    for row in pyperformance:
        # one summary value per side: no interval, never called significant, and said so
        assert row.get("ci_low") is None and row.get("significant") in (False, None)
        assert "summary statistics" in json.dumps(row)


@pytest.mark.parametrize(
    "args, expected",
    [
        (["csvfile", "x"], "is not one of"),
        (["fio", "{missing}"], "no such file"),
        (["fio", "{truncated}"], "was the file cut short"),
        (["pyperf", "{fio}"], "not a pyperf"),
        (["seed000", "{empty_dir}"], "no seed-000 result file"),
        (["fio", "{fio}", "--label", "a,b"], "one label"),
    ],
)
def test_bad_input_is_one_line_and_writes_nothing(tmp_path, args, expected):
    truncated = tmp_path / "truncated.json"
    truncated.write_text(FIO_RECORDED.read_text()[:500])
    (tmp_path / "empty").mkdir()
    paths = {
        "missing": tmp_path / "missing.json",
        "truncated": truncated,
        "fio": FIO_RECORDED,
        "empty_dir": tmp_path / "empty",
    }
    out = tmp_path / "out"
    done = run_ccbench("import", *[a.format(**paths) for a in args], "--out", out)
    assert done.returncode == 2, done.stdout + done.stderr
    assert expected in done.stderr and "Traceback" not in done.stderr
    if args[0] in ("fio", "pyperf", "seed000"):  # ours (the unknown format is click's usage error)
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert not out.exists() or not any(out.iterdir())


def test_seed000_two_labels_under_one_label_is_refused(pyperf_result, tmp_path):
    _seed000_dir(tmp_path / "results", pyperf_result, FIO_RECORDED)
    done = run_ccbench("import", "seed000", tmp_path / "results", "--out", tmp_path / "out", "--label", "x")
    assert done.returncode == 2 and "several labels" in done.stderr
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())
