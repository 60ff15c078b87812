"""Imports keep what their sources state and compare them as the peers' own tools do (issue 54,
items 8 and 9), on real files made by the tools: two pyperf files of Python 3.10 and 3.11 with one
value per benchmark (``pyperf timeit -p 1 -n 1``), a hyperfine file of two commands, and the
seed-000-shaped systeminfo files."""

from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import DATA, run_ccbench

from ccbench.bundle import read_bundle
from ccbench.probe.facts import machine_facts

IMPORT = DATA / "import"
PYTHONS = [IMPORT / "pyperf-2.11-python3.10-one-value.json", IMPORT / "pyperf-2.11-python3.11-one-value.json"]
TWO_COMMANDS = IMPORT / "hyperfine-1.15-two-commands.json"
SEED = IMPORT / "seed000-azure"


def _bundles(out: Path) -> list:
    return [read_bundle(p) for p in sorted(out.iterdir()) if (p / "manifest.json").exists()]


def _printed(stdout: str) -> list[Path]:
    """The bundles an import printed, in its order (notes follow, indented)."""
    return [Path(line) for line in stdout.splitlines() if line and not line[0].isspace()]


# ---- pyperf ----------------------------------------------------------------------------------------


def test_two_pythons_on_one_host_are_two_bundles_that_keep_the_machine_facts(tmp_path):
    """Imported together, the files of two Pythons are two configurations (not one bundle whose
    benchmarks mix both), and each keeps the CPU model, cpu_count and hostname pyperf recorded."""
    done = run_ccbench("import", "pyperf", *PYTHONS, "--out", tmp_path)
    assert done.returncode == 0, done.stderr
    bundles = _bundles(tmp_path)
    assert len(bundles) == 2
    for source, bundle in zip(PYTHONS, sorted(bundles, key=lambda b: b.manifest["label"]), strict=True):
        metadata = json.loads(source.read_text())["metadata"]
        environment = bundle.manifest["environment"]
        assert bundle.manifest["label"] == source.stem
        assert environment["tools"]["python_version"] == metadata["python_version"]
        assert environment["cpu"]["model"] == metadata["cpu_model_name"]
        assert machine_facts(environment)["vCPUs"] == metadata["cpu_count"]
        assert environment["source_hostname"] == metadata["hostname"]
        benchmarks = {b["metadata"]["name"] for b in json.loads(source.read_text())["benchmarks"]}
        assert {s["params"]["benchmark"] for s in bundle.samples} == benchmarks
        shown = run_ccbench("show", bundle.path).stdout
        assert f"{metadata['cpu_count']} logical CPUs" in shown and repr(metadata["hostname"]) in shown, shown


def test_one_value_per_benchmark_gets_the_geometric_mean_pyperf_compare_to_prints(tmp_path):
    """With one value per benchmark no benchmark has an interval; compare states the geometric mean
    over the benchmarks, the figure `pyperf compare_to` prints, and not "too few values"."""
    printed = subprocess.run(
        [sys.executable, "-m", "pyperf", "compare_to", *map(str, PYTHONS)], capture_output=True, text=True, timeout=120
    ).stdout
    factor, word = re.search(r"^Geometric mean: ([\d.]+)x (faster|slower)", printed, re.M).groups()
    theirs = 1 / float(factor) if word == "faster" else float(factor)  # as time: < 1 is faster
    for source in PYTHONS:
        assert run_ccbench("import", "pyperf", source, "--out", tmp_path).returncode == 0
    bundles = sorted(_bundles(tmp_path), key=lambda b: b.manifest["label"])  # 3.10 first: the baseline
    done = run_ccbench("compare", *(b.path for b in bundles), "--summary", "--json")
    assert done.returncode == 0, done.stderr
    [layer] = [json.loads(line) for line in done.stdout.splitlines() if line.startswith('{"layer"')]
    judgement = layer["judgement"]
    assert judgement["comparisons"] == 5
    assert round(judgement["typical"], 2) == round(theirs, 2), (judgement, printed)
    assert judgement["low"] < judgement["typical"] < judgement["high"]
    # in the one convention, the words pyperf compare_to prints: "1.30x faster"
    assert "too few values" not in layer["words"] and f"{factor}x {word}" in layer["words"], (layer["words"], printed)


# ---- hyperfine -------------------------------------------------------------------------------------


def _geometric_mean(values: list[float]) -> float:
    return math.exp(sum(map(math.log, values)) / len(values))


def test_the_same_hyperfine_commands_on_two_machines_compare_command_by_command(tmp_path):
    """A command is a case, the label the machine's: the file on machine 'vm' and a copy 1.5x slower on
    'td' give one bundle each, and compare gives each command's ratio against the same command."""
    results = json.loads(TWO_COMMANDS.read_text())["results"]
    slower = json.loads(TWO_COMMANDS.read_text())
    for result in slower["results"]:
        result["times"] = [t * 1.5 for t in result["times"]]
    (tmp_path / "td.json").write_text(json.dumps(slower))
    for source, label in ((TWO_COMMANDS, "vm"), (tmp_path / "td.json", "td")):
        done = run_ccbench("import", "hyperfine", source, "--out", tmp_path / label, "--label", label)
        assert done.returncode == 0 and "ccbench compare" not in done.stdout, done.stdout + done.stderr
    paths = [b.path for b in [*_bundles(tmp_path / "vm"), *_bundles(tmp_path / "td")]]
    compared = run_ccbench("compare", *paths, "--baseline", "vm", "--json")
    assert compared.returncode == 0, compared.stderr
    rows = [json.loads(line) for line in compared.stdout.splitlines() if '"median"' in line]
    assert sorted(r["params"]["command"] for r in rows) == sorted(r["command"] for r in results)
    assert all(r["ratio"] == pytest.approx(1.5, rel=1e-9) for r in rows)


def test_a_hyperfine_file_under_a_label_stays_one_machine_each_command_a_case(tmp_path):
    done = run_ccbench("import", "hyperfine", TWO_COMMANDS, "--out", tmp_path, "--label", "tdx-vm")
    assert done.returncode == 0, done.stderr
    [bundle] = _bundles(tmp_path)
    commands = {s["params"]["command"] for s in bundle.samples}
    assert commands == {r["command"] for r in json.loads(TWO_COMMANDS.read_text())["results"]}


# ---- seed 000's systeminfo -------------------------------------------------------------------------


def _seed_copy(tmp_path: Path, systeminfo: str) -> Path:
    """The seed-000 directory's Intel-Non-TDX files, its systeminfo replaced by ``systeminfo``."""
    directory = tmp_path / "seed"
    directory.mkdir()
    for path in SEED.glob("Intel-Non-TDX_*"):
        text = systeminfo if path.name.endswith("_systeminfo.txt") else path.read_text()
        (directory / path.name).write_text(text)
    return directory


REAL = next(SEED.glob("Intel-Non-TDX_*_systeminfo.txt")).read_text()
MEMORY_SECTION = re.compile(r"^=+Memory Information=+\nTotal: [\d.]+GB$", re.M)


@pytest.mark.parametrize(
    "memory_lines",
    [
        "---------- Memory Information ----------\nTotal: 7.29GB",  # rules of dashes
        "======== Memory ========\nTotal: 7.29 GB",  # a spaced unit
        "======== Memory Information ========\nTotal: 7,29GB",  # a decimal comma
        "Total Memory: 7.29 GB",  # a key that names the memory itself
    ],
)
def test_systeminfo_memory_is_kept_whatever_its_layout(tmp_path, memory_lines):
    """The source's 7.29 GB reaches the manifest's memory (not `"memory": {}` while source_facts hold
    it), so the lint can check it and `show` prints it."""
    text = MEMORY_SECTION.sub(memory_lines, REAL)
    assert "7" in text and text != REAL
    done = run_ccbench("import", "seed000", _seed_copy(tmp_path, text), "--out", tmp_path / "out")
    assert done.returncode == 0, done.stderr
    [bundle] = _bundles(tmp_path / "out")
    assert bundle.manifest["environment"]["memory"] == {"total_bytes": round(7.29 * 1024**3)}
    assert "memory: not in the source" not in bundle.manifest["environment"]["unknown"]
    assert "memory          7.3 GiB" in run_ccbench("show", bundle.path).stdout


def test_the_lint_says_an_imported_source_did_not_state_a_fact_not_that_the_bundle_is_old(tmp_path):
    done = run_ccbench("import", "seed000", SEED, "--out", tmp_path)
    assert done.returncode == 0, done.stderr
    compared = run_ccbench("compare", *(b.path for b in _bundles(tmp_path)), "--json")
    findings = [json.loads(line) for line in compared.stdout.splitlines() if '"unchecked"' in line]
    assert findings, compared.stdout[-2000:]
    assert all("the imported results do not state it" in f["what"] for f in findings)
    assert not any("before the provenance block" in f["what"] for f in findings)


@pytest.mark.skipif(not shutil.which("hyperfine"), reason="hyperfine is not installed (apt-get install hyperfine)")
def test_a_hyperfine_parameter_scan_is_one_case_per_value(tmp_path):
    """`hyperfine -P n 1 3`: three commands, one per value, each a case of the one machine's bundle
    (the value among the case's parameters)."""
    export = tmp_path / "scan.json"
    made = subprocess.run(
        ["hyperfine", "-N", "--runs", "3", "-P", "n", "1", "3", "--export-json", str(export), "sleep 0.0{n}"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    done = run_ccbench("import", "hyperfine", export, "--out", tmp_path / "out")
    assert done.returncode == 0, done.stderr
    [bundle] = [read_bundle(p) for p in _printed(done.stdout)]
    assert bundle.manifest["label"] == "scan"
    cases = {(s["params"]["command"], s["params"]["n"]) for s in bundle.samples}
    assert cases == {("sleep 0.01", "1"), ("sleep 0.02", "2"), ("sleep 0.03", "3")}
