"""ccbench import on files shaped like what the field publishes (tests/data/import/, written from the
tools' documented formats): each test is one finding of issue 29 that the importers got wrong."""

import json
from pathlib import Path

import pytest
from conftest import DATA, run_ccbench

from ccbench.bundle import read_bundle
from ccbench.probe.facts import machine_facts

IMPORT = DATA / "import"
PYPERF = DATA / "pyperf" / "timeit-sum-range.json"
FIO3 = DATA / "fio" / "randrw-4k.json"


def _bundles(out: Path) -> list[Path]:
    return sorted(p for p in out.iterdir() if (p / "manifest.json").exists())


def _import(*args) -> list:
    *rest, out = args
    done = run_ccbench("import", *rest, "--out", out)
    assert done.returncode == 0, done.stdout + done.stderr
    return [read_bundle(p) for p in _bundles(Path(out))]


def _rows(out: str) -> list[dict]:
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


# ---- fio ---------------------------------------------------------------------------------------------


def test_fio2_latency_is_read_from_clat_in_microseconds(tmp_path):
    [bundle] = _import("fio", IMPORT / "fio-2.17-randread-4k.json", tmp_path)
    source = json.loads((IMPORT / "fio-2.17-randread-4k.json").read_text())["jobs"][0]["read"]
    by_metric = {s["metric"]: s["value"] for s in bundle.samples}
    assert by_metric["clat_mean"] == pytest.approx(source["clat"]["mean"])  # already microseconds
    assert by_metric["clat_p50"] == pytest.approx(source["clat"]["percentile"]["50.000000"])
    assert by_metric["clat_p99"] == pytest.approx(source["clat"]["percentile"]["99.000000"])
    assert by_metric["throughput"] == pytest.approx(source["bw"] * 1024 / 1e6)
    assert {s["params"]["direction"] for s in bundle.samples} == {"read"}


def test_fio21_without_job_options_leaves_block_size_and_pattern_unknown(tmp_path):
    [bundle] = _import("fio", IMPORT / "fio-2.1.4-no-options.json", tmp_path)
    assert bundle.samples
    for sample in bundle.samples:
        assert "bs" not in sample["params"] and "rw" not in sample["params"], sample["params"]
    directions = {s["metadata"]["job"]: s["params"]["direction"] for s in bundle.samples}
    assert directions == {"sequential": "read", "write_test": "write"}
    clat = {s["params"]["direction"]: s["value"] for s in bundle.samples if s["metric"] == "clat_mean"}
    assert clat == {"read": pytest.approx(7801.2), "write": pytest.approx(15622.0)}


def test_fio_client_output_is_one_bundle_per_server(tmp_path):
    bundles = _import("fio", IMPORT / "fio-3.28-client.json", tmp_path)
    stats = json.loads((IMPORT / "fio-3.28-client.json").read_text())["client_stats"]
    assert [len(bundle.executions) for bundle in bundles] == [1, 1]
    samples = [s for bundle in bundles for s in bundle.samples]
    throughput = {s["metadata"]["host"]: s["value"] for s in samples if s["metric"] == "throughput"}
    assert throughput == {
        "server-a": pytest.approx(stats[0]["read"]["bw_bytes"] / 1e6),
        "server-b": pytest.approx(stats[1]["read"]["bw_bytes"] / 1e6),
    }  # fio's "All clients" sum is no server's measurement
    assert all(s["params"]["bs"] == "4k" and s["params"]["rw"] == "randread" for s in samples)
    for bundle in bundles:
        assert {s["execution"] for s in bundle.samples} == {e["key"] for e in bundle.executions}
        assert {s["metadata"]["host"] for s in bundle.samples} == {bundle.manifest["label"]}


def test_fio_client_output_from_two_servers_reads_each_servers_global_options(tmp_path):
    """fio --client with two servers writes 'global options' as a list, one object per server
    (client.c): each server's jobs take their block size and pattern from their own entry."""
    source = IMPORT / "fio-3.43-client-two-servers.json"
    bundles = _import("fio", source, tmp_path)
    document = json.loads(source.read_text())
    assert isinstance(document["global options"], list)
    stats = {job["hostname"]: job for job in document["client_stats"] if job["jobname"] != "All clients"}
    samples = [s for bundle in bundles for s in bundle.samples]
    throughput = {s["metadata"]["host"]: s["value"] for s in samples if s["metric"] == "throughput"}
    assert throughput == {host: pytest.approx(job["read"]["bw_bytes"] / 1e6) for host, job in stats.items()}
    assert [len(bundle.executions) for bundle in bundles] == [1, 1]
    assert {(s["params"]["bs"], s["params"]["rw"]) for s in samples} == {("4k", "randread")}


def test_fio_client_servers_on_one_host_are_told_apart_by_port(tmp_path):
    """Two fio servers on one host (fio --server=,8766 beside the default 8765): each is its own
    execution, named hostname:port, with its own global options."""
    document = json.loads((IMPORT / "fio-3.43-client-two-servers.json").read_text())
    for number, entry in enumerate(document["global options"]):
        entry.update(hostname="localhost", port=8765 + number)
    ports = {}
    for job in document["client_stats"]:
        ports.setdefault(job["hostname"], 8765 + len(ports))
        job.update(port=ports[job["hostname"]], hostname="localhost")
    document["global options"][1]["bs"] = "64k"
    source = tmp_path / "one-host.json"
    source.write_text(json.dumps(document))
    [bundle] = _import("fio", source, tmp_path / "out")
    cases = {(s["metadata"]["host"], s["params"]["bs"]) for s in bundle.samples}
    assert cases == {("localhost:8765", "4k"), ("localhost:8766", "64k")}
    assert len(bundle.executions) == 2


def test_the_fio_version_is_provenance_so_two_versions_compare(tmp_path):
    older = tmp_path / "older.json"
    document = json.loads(FIO3.read_text())
    document["fio version"] = "fio-3.16"
    older.write_text(json.dumps(document))
    [new] = _import("fio", FIO3, "--label", "new", tmp_path / "new")
    [old] = _import("fio", older, "--label", "old", tmp_path / "old")
    assert all("fio_version" not in s["params"] for s in new.samples + old.samples)
    assert {s["metadata"]["fio_version"] for s in old.samples} == {"fio-3.16"}
    assert old.manifest["environment"]["tools"]["fio_version"] == "fio-3.16"
    compared = run_ccbench("compare", new.path, old.path, "--baseline", "old", "--json")
    assert compared.returncode == 0, compared.stderr
    rows = [r for r in _rows(compared.stdout) if r.get("metric") == "throughput" and r.get("config") != "old"]
    assert rows and all(r.get("baseline_median") is not None for r in rows), compared.stdout


# ---- pyperf ------------------------------------------------------------------------------------------


def _pyperf_copy(path: Path, **metadata) -> Path:
    document = json.loads(PYPERF.read_text())
    document["metadata"].update(metadata)
    path.write_text(json.dumps(document))
    return path


def test_two_pythons_on_one_kernel_state_one_kernel(tmp_path):
    glibc = _pyperf_copy(tmp_path / "a.json", platform="Linux-6.1.0-18-amd64-x86_64-with-glibc2.36")
    distro = _pyperf_copy(tmp_path / "b.json", platform="Linux-6.1.0-18-amd64-x86_64-with-debian-12.5")
    [a] = _import("pyperf", glibc, "--label", "a", tmp_path / "out-a")
    [b] = _import("pyperf", distro, "--label", "b", tmp_path / "out-b")
    assert a.manifest["environment"]["kernel"]["release"] == "6.1.0-18-amd64"
    assert machine_facts(a.probe) == machine_facts(b.probe)
    compared = run_ccbench("compare", a.path, b.path, "--baseline", "a", "--json")
    assert compared.returncode == 0, compared.stderr
    assert _rows(compared.stdout) and "confounded by kernel" not in compared.stdout


def test_a_single_benchmark_file_and_a_suite_file_compare(tmp_path):
    """pyperf timeit writes one benchmark; pyperformance a suite (with performance_version): one
    workload name for both, so the same benchmark compares."""
    single = _pyperf_copy(tmp_path / "single.json")
    suite = _pyperf_copy(tmp_path / "suite.json", performance_version="1.11.0", hostname="other")
    [a] = _import("pyperf", single, "--label", "single", tmp_path / "a")
    [b] = _import("pyperf", suite, "--label", "suite", tmp_path / "b")
    assert {s["workload"] for s in a.samples + b.samples} == {"pyperformance"}
    compared = run_ccbench("compare", a.path, b.path, "--baseline", "single", "--json")
    assert compared.returncode == 0, compared.stderr
    rows = [r for r in _rows(compared.stdout) if r.get("metric") == "time_s" and r.get("baseline_median")]
    assert rows and rows[0]["workload"] == "pyperformance", compared.stdout


def test_files_of_two_machines_are_never_pooled(tmp_path):
    one = _pyperf_copy(tmp_path / "one.json", hostname="host-one")
    two = _pyperf_copy(tmp_path / "two.json", hostname="host-two")
    same = _pyperf_copy(tmp_path / "same.json", hostname="host-one")
    refused = run_ccbench("import", "pyperf", one, two, "--label", "x", "--out", tmp_path / "refused")
    assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    assert "host-one" in refused.stderr and "host-two" in refused.stderr
    assert not (tmp_path / "refused").exists() or not _bundles(tmp_path / "refused")
    separate = _import("pyperf", one, two, tmp_path / "separate")
    assert sorted(b.manifest["environment"]["source_facts"]["hostname"] for b in separate) == ["host-one", "host-two"]
    [pooled] = _import("pyperf", one, same, "--label", "host-one", tmp_path / "pooled")
    assert len(pooled.executions) == 2 * len(_import("pyperf", one, tmp_path / "single")[0].executions)


def test_perf_format_5_is_read(tmp_path):
    [bundle] = _import("pyperf", IMPORT / "perf-0.8.3-format5.json", tmp_path)
    assert sorted(s["value"] for s in bundle.samples) == sorted([0.01352, 0.01349, 0.01361, 0.01355, 0.01347, 0.01358])
    assert {s["params"]["benchmark"] for s in bundle.samples} == {"telco"}
    environment = bundle.manifest["environment"]
    assert environment["cpu"]["model"].startswith("Intel(R) Xeon(R) CPU E5-2680")
    assert environment["kernel"]["release"] == "4.4.0-62-generic"


# ---- hyperfine ---------------------------------------------------------------------------------------


def test_hyperfine_runs_that_exited_non_zero_are_left_out_and_kept_in_the_execution_record(tmp_path):
    """hyperfine exports non-zero exits only under -i: a failed run is no measurement of the command,
    so it is no sample; the execution record keeps each one (index, exit code, time) and the notes say
    how many failed. A command whose every run failed is a failed execution, named in the outcomes."""
    source = IMPORT / "hyperfine-failures.json"
    results = json.loads(source.read_text())["results"]
    done = run_ccbench("import", "hyperfine", source, "--out", tmp_path)
    assert done.returncode == 0, done.stderr
    assert "1 of 4 runs exited non-zero (exit 137)" in done.stdout, done.stdout
    assert "3 of 3 runs exited non-zero (exit 2)" in done.stdout
    # one machine's file: one bundle, each command a case
    [bundle] = [read_bundle(p) for p in _bundles(tmp_path)]
    for result, record in zip(results, bundle.executions, strict=True):
        runs = list(zip(result["times"], result["exit_codes"]))
        mine = [s for s in bundle.samples if s["params"]["command"] == result["command"]]
        assert sorted(s["value"] for s in mine) == sorted(t for t, code in runs if code == 0)
        assert all(s["metadata"]["exit_code"] == 0 for s in mine)
        assert [(r["wall_s"], r["exit_code"]) for r in record["failed_runs"]] == [(t, c) for t, c in runs if c != 0]
    assert [r["status"] for r in bundle.executions] == ["ok", "failed"]
    outcome = bundle.manifest["outcomes"]["hyperfine"]
    assert outcome["executions_failed"] == 1 and "exit 2" in outcome["reason"]


# ---- errors that say what the file is ----------------------------------------------------------------


@pytest.mark.parametrize(
    "format_name, source, expected",
    [
        ("fio", IMPORT / "fio-error.txt", "fio's own error text"),
        ("fio", IMPORT / "fio-results.html", "an HTML page"),
        ("fio", IMPORT / "hyperfine-failures.json", "this is hyperfine JSON, not fio"),
        ("hyperfine", FIO3, "this is fio JSON, not hyperfine"),
        ("pyperf", FIO3, "this is fio JSON"),
        ("fio", PYPERF, "use `ccbench import pyperf`"),
        ("pyperf", IMPORT / "perf-0.7-format3.json", "format version 3 of the old 'perf' module"),
        ("hyperfine", "{other}", "complete JSON of another shape"),
        ("pyperf", "{strings}", "its values are not a list of numbers"),
    ],
)
def test_a_wrong_file_is_named_for_what_it_is(tmp_path, format_name, source, expected):
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"name": "a benchmark", "values": [1, 2, 3]}))
    strings = tmp_path / "strings.json"
    document = json.loads(PYPERF.read_text())
    document["benchmarks"][0]["runs"][1]["values"][0] = "0.1"
    strings.write_text(json.dumps(document))
    source = {"{other}": other, "{strings}": strings}.get(str(source), source)
    done = run_ccbench("import", format_name, source, "--out", tmp_path / "out")
    assert done.returncode == 2, done.stdout + done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
    assert expected in done.stderr and "cut short" not in done.stderr, done.stderr
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_two_pythons_under_pyperf_name_the_python_as_the_difference(tmp_path):
    """Two real pyperf files, one machine, Python 3.10 against 3.11: no layer differs, so the one thing
    compare can name is the tools' versions, as stated in each file (and not where they agree)."""
    _import("pyperf", IMPORT / "pyperf-2.11-python3.10-one-value.json", "--label", "py310", tmp_path)
    _import("pyperf", IMPORT / "pyperf-2.11-python3.11-one-value.json", "--label", "py311", tmp_path)
    done = run_ccbench("compare", *_bundles(tmp_path), "--json")
    assert done.returncode == 0, done.stderr
    findings = [f for f in _rows(done.stdout) if f.get("finding") == "tool-versions"]
    assert len(findings) == 1, findings
    assert "3.10.13" in findings[0]["what"] and "3.11.7" in findings[0]["what"], findings[0]
    assert "perf version" not in findings[0]["what"]  # pyperf 2.11 on both sides: not a difference
