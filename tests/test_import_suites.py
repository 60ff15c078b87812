"""ccbench import cloud-hypervisor / pts: the two suites' result files (tests/data/import/cloud-hypervisor,
tests/data/import/pts; each folder's README says which files are real and from where), a stated
summary kept as one, a PTS run's values as samples, each PTS system a bundle, and broken or foreign
files refused in one line with nothing written."""

import json
from pathlib import Path

import pytest
from conftest import DATA, run_ccbench

from ccbench.bundle import read_bundle

CH = DATA / "import" / "cloud-hypervisor"
PTS = DATA / "import" / "pts"
#: a real report's excerpt (cloud-hypervisor PR #3794): five tests
CH_REAL = CH / "pr3794-2022-03-03-excerpt.json"
#: a real PTS 5.2.1 result file (a Raspberry Pi 4): one system, 17 results, all BAR_GRAPH
PTS_REAL = PTS / "ptspythonv2-composite.xml"


def _import(fmt, *args, out):
    done = run_ccbench("import", fmt, *args, "--out", out)
    assert done.returncode == 0, done.stderr
    return done, {read_bundle(p).manifest["label"]: read_bundle(p) for p in sorted(Path(out).iterdir())}


def _rows(*bundles, baseline):
    compared = run_ccbench("compare", *(b.path for b in bundles), "--baseline", baseline, "--json")
    assert compared.returncode == 0, compared.stderr
    return [json.loads(line) for line in compared.stdout.splitlines() if line.startswith('{"workload"')]


def test_a_cloud_hypervisor_report_is_a_stated_summary_with_the_run_it_states(tmp_path):
    _, bundles = _import("cloud-hypervisor", CH_REAL, out=tmp_path)
    [bundle] = bundles.values()
    source = json.loads(CH_REAL.read_text())
    # one value per test, the mean, never invented samples: the rest beside it, the count unknown
    assert len(bundle.samples) == len(source["results"])
    by_metric = {s["metric"]: s for s in bundle.samples}
    for test in source["results"]:
        sample = by_metric[test["name"]]
        assert sample["value"] == test["mean"] and sample["workload"] == "cloud-hypervisor"
        meta = sample["metadata"]
        assert meta["statistic"] == "mean" and meta["values"] is None
        assert (meta["stdev"], meta["max"], meta["min"]) == (test["std_dev"], test["max"], test["min"])
    assert (by_metric["boot_time_ms"]["unit"], by_metric["boot_time_ms"]["better"]) == ("ms", "lower")
    assert by_metric["virtio_net_latency_us"]["unit"] == "us"
    rx = by_metric["virtio_net_throughput_single_queue_rx_gbps"]
    assert (rx["unit"], rx["better"]) == ("Gbit/s", "higher")
    # the run as the report states it: its revision, its commit date and its date (UTC: the start)
    environment = bundle.manifest["environment"]
    facts = environment["source_facts"]
    assert facts["git_revision"] == source["git_revision"] and facts["date"] == source["date"]
    assert facts["git_commit_date"] == source["git_commit_date"]
    assert "git_human_readable" not in facts  # empty in the file (git describe failed): not a fact
    assert environment["tools"]["cloud_hypervisor"] == source["git_revision"]
    assert bundle.manifest["started_at"] == "2022-03-03T10:53:56Z"
    assert run_ccbench("verify", bundle.path).returncode == 0


def test_a_confidential_arm_against_a_regular_one_is_a_flagged_tee_row(tmp_path):
    regular, confidential = CH / "written-from-source-regular.json", CH / "written-from-source-confidential.json"
    done, bundles = _import(
        "cloud-hypervisor", regular, confidential, "--tee", f"{confidential.stem}=tdx", "--tee", f"{regular.stem}=none",
        out=tmp_path,
    )  # fmt: skip
    # a report names no VM type: without --label each report is its own bundle, never pooled
    assert sorted(bundles) == sorted([regular.stem, confidential.stem])
    cvm = bundles[confidential.stem]
    # the FAILED test has no value (its figures are 0.0): left out and said so
    assert {s["metric"] for s in cvm.samples} == {"boot_time_ms", "block_read_MiBps"}
    [record] = cvm.executions
    assert any("FAILED" in note and "virtio_net_latency_us" in note for note in record["notes"])
    assert "virtio_net_latency_us" in done.stdout
    rows = _rows(bundles[regular.stem], cvm, baseline=regular.stem)
    boot = next(r for r in rows if r["metric"] == "boot_time_ms")
    assert boot["layer"] == "TEE: TDX" and boot["median"] == pytest.approx(412.9)
    # a summary is never called significant, and the row says why
    assert boot["significant"] is False and "summary statistics (number of values unknown)" in boot["flags"]


def test_reports_of_two_builds_are_refused_under_one_label(tmp_path):
    refused = run_ccbench(
        "import", "cloud-hypervisor", CH_REAL, CH / "written-from-source-regular.json", "--label", "one",
        "--out", tmp_path / "out",
    )  # fmt: skip
    assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    assert "git_revision" in refused.stderr and not (tmp_path / "out").exists()


def test_a_pts_file_gives_every_run_as_a_sample_and_the_system_it_states(tmp_path):
    _, bundles = _import("pts", PTS_REAL, out=tmp_path)
    [(label, bundle)] = bundles.items()
    assert label == "ARMv7 rev 3"  # the system's identifier
    text = PTS_REAL.read_text()
    runs = [float(v) for raw in text.split("<RawString>")[1:] for v in raw.split("</RawString>")[0].split(":")]
    assert sorted(s["value"] for s in bundle.samples) == sorted(runs)  # each run's value, not the mean
    go = [s for s in bundle.samples if s["params"] == {"test": "pts/pyperformance-1.0.2", "options": "Benchmark: go"}]
    assert [s["value"] for s in go] == [1.37, 1.37, 1.37] and go[0]["unit"] == "Milliseconds"
    assert go[0]["better"] == "lower"  # LIB
    numpy = next(s for s in bundle.samples if s["params"]["test"] == "pts/numpy-1.2.0")
    assert numpy["better"] == "higher" and "statistic" not in numpy["metadata"]  # HIB; samples, not a summary
    environment = bundle.manifest["environment"]
    assert environment["cpu"] == {"model": "ARMv7 rev 3 @ 1.50GHz", "cores": 4}
    assert environment["memory"]["total_bytes"] == 4096 * 1024**2
    assert environment["kernel"]["release"] == "5.4.72-v7l+"
    facts = environment["source_facts"]
    assert facts["os"] == "Raspbian 10" and facts["pts_notes"] == "Python 2.7.16."
    assert facts["pts_software"]["Kernel"] == "5.4.72-v7l+ (armv7l)"
    assert environment["tools"]["phoronix_test_suite"] == "5.2.1"
    assert bundle.manifest["started_at"] == "2020-11-14T09:22:11Z"
    assert run_ccbench("verify", bundle.path).returncode == 0


def test_a_td_and_a_vm_of_one_pts_file_give_a_tee_row(tmp_path):
    done, bundles = _import(
        "pts", PTS / "written-from-source-td-vs-vm.xml", "--tee", "TD=tdx", "--tee", "VM=none", out=tmp_path
    )
    assert sorted(bundles) == ["TD", "VM"]
    assert "LINE_GRAPH" in done.stdout  # the sensor's line graph is not a figure per run: left out, said so
    assert {s["params"]["test"] for s in bundles["TD"].samples} == {"pts/stream-1.3.4", "pts/tinymembench-1.0.2"}
    assert bundles["TD"].manifest["environment"]["source_facts"]["system_layer"] == "KVM"
    assert bundles["TD"].manifest["environment"]["cpu"]["threads"] == 32
    rows = _rows(bundles["VM"], bundles["TD"], baseline="VM")
    triad = next(r for r in rows if r["params"].get("options") == "Type: Triad")
    assert triad["layer"] == "TEE: TDX" and triad["n"] == 5 and triad["n_baseline"] == 5
    assert triad["significant"] is True and triad["effect"].startswith("12.0% slower")
    # the TD's debug attribute is not in a PTS file: the source does not state it (the trial's lint
    # said "no provenance in this probe: recorded by an older ccbench")
    compared = run_ccbench("compare", bundles["VM"].path, bundles["TD"].path, "--baseline", "VM")
    assert "debug mode could not be checked (the imported source does not state it)" in " ".join(
        compared.stdout.split()
    )
    assert "older ccbench" not in compared.stdout


def test_a_pts_result_without_a_number_is_left_out_with_the_error_pts_gave(tmp_path):
    # PTS 10.8.6 run here twice on one machine (identifiers baseline and other): its test failed
    done = run_ccbench("import", "pts", PTS / "pts-10.8.6-self-test-two-systems-failed.xml", "--out", tmp_path)
    assert done.returncode == 0, done.stderr
    bundles = [read_bundle(p) for p in sorted(tmp_path.iterdir())]
    assert sorted(b.manifest["label"] for b in bundles) == ["baseline", "other"]
    for bundle in bundles:
        assert bundle.samples == []
        [record] = bundle.executions
        assert record["status"] == "failed" and "did not produce a result" in record["error"]
        # PTS's error, cut at a word and marked: the trial's note stopped mid-path ("null given in /tmp/wt-)")
        said = record["error"].split("(PTS: ", 1)[1]
        assert said.endswith(" ...)") and "/tmp/wt-)" not in said, said


#: the two real compression files of one Raspberry Pi, both under the identifier 'ARMv7 rev 3'
SAME_IDENTIFIER = [PTS / "ptscompressionresults10nov-composite.xml", PTS / "ptscomoressionv2-composite.xml"]


@pytest.mark.parametrize(
    "fmt, make, expected",
    [
        ("pts", lambda d: [_cut(PTS_REAL, d)], "cut short"),
        ("pts", lambda d: [CH / "written-from-source-regular.json"], "ccbench import cloud-hypervisor"),
        ("cloud-hypervisor", lambda d: [PTS_REAL], "ccbench import pts"),
        ("cloud-hypervisor", lambda d: [_cut(CH_REAL, d)], "cut short"),
        ("pts", lambda d: [_hostile(d)], "declares a DTD"),
        ("pts", lambda d: [PTS / "pts-10.8.6-merge-results-one-identifier.xml"], "rename-identifier-in-result-file"),
        ("pts", lambda d: SAME_IDENTIFIER, "own --label"),
    ],
    ids=["pts-cut", "ch-as-pts", "pts-as-ch", "ch-cut", "pts-entity-bomb", "pts-merged-one-id", "pts-same-id"],
)
def test_broken_or_foreign_files_are_refused_in_one_line_and_nothing_is_written(tmp_path, fmt, make, expected):
    done = run_ccbench("import", fmt, *make(tmp_path), "--out", tmp_path / "out")
    assert done.returncode == 2, done.stdout + done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
    assert expected in done.stderr and not (tmp_path / "out").exists()


def _cut(path: Path, directory: Path) -> Path:
    cut = directory / f"cut-{path.name}"
    cut.write_bytes(path.read_bytes()[: len(path.read_bytes()) // 2])
    return cut


def _hostile(directory: Path) -> Path:
    """Entities that expand a billion times: a parser that expands them is taken down."""
    lines = ['<?xml version="1.0"?>', "<!DOCTYPE PhoronixTestSuite [", '<!ENTITY a0 "ha">']
    lines += [f'<!ENTITY a{i} "{f"&a{i - 1};" * 10}">' for i in range(1, 10)]
    lines += ["]>", "<PhoronixTestSuite><Generated><Title>&a9;</Title></Generated></PhoronixTestSuite>"]
    hostile = directory / "bomb.xml"
    hostile.write_text("\n".join(lines))
    return hostile


def test_import_help_lists_both_suites():
    shown = run_ccbench("import", "--help")
    assert shown.returncode == 0
    assert "cloud-hypervisor" in shown.stdout and "Phoronix Test Suite" in shown.stdout


def test_two_real_pts_files_of_one_machine_on_two_kernels_compare_with_the_kernel_named(tmp_path):
    # one identifier in both files: each imported under its own label, as the refusal above advises
    bundles = {}
    for path, label in zip(SAME_IDENTIFIER, ("rpi-5.4.74", "rpi-5.4.72"), strict=True):
        _, imported = _import("pts", path, "--label", label, "--tee", "none", out=tmp_path / label)
        bundles.update(imported)
    compared = run_ccbench("compare", *(b.path for b in bundles.values()), "--baseline", "rpi-5.4.74", "--json")
    assert compared.returncode == 0, compared.stderr
    records = [json.loads(line) for line in compared.stdout.splitlines() if line.startswith("{")]
    zstd = next(r for r in records if r.get("params", {}).get("options") == "Compression Level: 3")
    assert zstd["n"] == zstd["n_baseline"] == 3 and zstd["better"] == "higher"
    confounded = [r for r in records if r.get("finding") == "confounded"]
    assert confounded and "kernel" in confounded[0]["what"], records[-3:]
