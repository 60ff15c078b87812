"""ccbench import on the user trial's findings (2026-12-02): a hyperfine command whose every run
failed, bundle names a shell hides, a fio --client file of two machines, a pyperformance log cut in
the middle of a line, ping logs taken as one machine. Each test runs the real CLI on the files in
tests/data/import/ and tests/data/network/."""

import json
from pathlib import Path

from conftest import DATA, run_ccbench

from ccbench.bundle import read_bundle

IMPORT = DATA / "import"
FAILURES = IMPORT / "hyperfine-failures.json"


def _bundles(out: Path) -> list[Path]:
    return sorted(p for p in out.iterdir() if (p / "manifest.json").exists())


def _one_line_refusal(done, out: Path) -> str:
    assert done.returncode == 2, done.stdout + done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr, done.stderr
    assert not out.exists() or not _bundles(out)
    return done.stderr


# ---- hyperfine: a command whose every run failed -------------------------------------------------------


def test_compare_gives_no_figure_for_a_command_whose_every_run_failed(tmp_path):
    """The trial's '71x faster, significant': './server-bench --missing-flag' exited 2 in 3 of 3 runs.
    The file is one machine's, each command a case: the import prints no compare line, and compared
    with another machine's clean run the failed command has no ratio; the lint names it."""
    done = run_ccbench("import", "hyperfine", FAILURES, "--out", tmp_path / "new")
    assert done.returncode == 0, done.stderr
    assert "ccbench compare" not in done.stdout
    [bundle] = _bundles(tmp_path / "new")
    assert read_bundle(bundle).manifest["label"] == "hyperfine-failures"
    clean = json.loads(FAILURES.read_text())
    for result in clean["results"]:
        result["exit_codes"] = [0] * len(result["times"])
    (tmp_path / "clean.json").write_text(json.dumps(clean))
    assert (
        run_ccbench("import", "hyperfine", tmp_path / "clean.json", "--out", tmp_path / "b", "--label", "b").returncode
        == 0
    )
    compared = run_ccbench("compare", *_bundles(tmp_path / "b"), bundle, "--baseline", "b", "--json")
    assert compared.returncode == 0, compared.stderr
    rows = [json.loads(line) for line in compared.stdout.splitlines() if '"median"' in line]
    assert {r["params"].get("command") for r in rows} == {"./server-bench --quick"}
    assert "failed-executions" in compared.stdout and "exit 2" in compared.stdout


def test_a_failed_command_is_a_lost_case_for_the_gate_and_a_finding_for_compare(tmp_path):
    """The same file under one label, gated against a baseline whose runs all exited 0: the failed
    command's case is lost (exit 1); compared with another machine, the lint names the failure."""
    clean = json.loads(FAILURES.read_text())
    for result in clean["results"]:
        result["exit_codes"] = [0] * len(result["times"])
    baseline_file = tmp_path / "clean.json"
    baseline_file.write_text(json.dumps(clean))
    for out, source, label in (("base", baseline_file, "vm"), ("new", FAILURES, "vm"), ("other", baseline_file, "b")):
        assert run_ccbench("import", "hyperfine", source, "--out", tmp_path / out, "--label", label).returncode == 0
    [base], [new], [other] = (_bundles(tmp_path / out) for out in ("base", "new", "other"))
    gated = run_ccbench("gate", new, "--against", base)
    assert gated.returncode == 1, gated.stdout + gated.stderr
    assert "1 case lost" in gated.stdout and "./server-bench --missing-flag" in gated.stdout
    compared = run_ccbench("compare", other, new, "--json")
    assert compared.returncode == 0, compared.stderr
    rows = [json.loads(line) for line in compared.stdout.splitlines() if line.startswith("{")]
    assert {r["params"].get("command") for r in rows if "params" in r} == {"./server-bench --quick"}
    assert "failed-executions" in compared.stdout and "exit 2" in compared.stdout


def test_hyperfine_commands_are_cases_of_one_bundle_labelled_as_the_machine(tmp_path):
    """The trial's bundles labelled './server-bench --quick' (a command is no machine): one bundle,
    named after the file (or --label), each command a case."""
    assert run_ccbench("import", "hyperfine", FAILURES, "--out", tmp_path).returncode == 0
    [path] = _bundles(tmp_path)
    assert path.name[0].isalnum() and sorted(p.name for p in tmp_path.glob("*/")) == [path.name]
    bundle = read_bundle(path)
    assert bundle.manifest["label"] == "hyperfine-failures"
    assert {s["params"]["command"] for s in bundle.samples} == {"./server-bench --quick"}
    assert {r["status"] for r in bundle.executions} == {"ok", "failed"}


# ---- fio --client: one file, two machines ---------------------------------------------------------------


def test_a_fio_client_file_of_two_servers_is_one_bundle_per_server(tmp_path):
    """client_stats name the servers tdx-vm and plain-vm: two machines, two bundles, each labelled
    (and its hostname) the server's, each holding only its server's samples; never one median of both."""
    source = IMPORT / "fio-3.43-client-two-servers.json"
    done = run_ccbench("import", "fio", source, "--out", tmp_path)
    assert done.returncode == 0, done.stderr
    stats = {j["hostname"]: j for j in json.loads(source.read_text())["client_stats"] if j["jobname"] != "All clients"}
    bundles = {b.manifest["label"]: b for b in map(read_bundle, _bundles(tmp_path))}
    assert set(bundles) == {"tdx-vm", "plain-vm"}
    for host, bundle in bundles.items():
        assert bundle.manifest["environment"]["hostname"] == host
        assert bundle.manifest["environment"]["source_hostname"] == host
        [throughput] = [s["value"] for s in bundle.samples if s["metric"] == "throughput"]
        assert abs(throughput - stats[host]["read"]["bw_bytes"] / 1e6) < 1e-9
        assert {s["metadata"]["host"] for s in bundle.samples} == {host}


def test_a_fio_client_file_of_two_servers_is_refused_under_one_label(tmp_path):
    source = IMPORT / "fio-3.43-client-two-servers.json"
    error = _one_line_refusal(run_ccbench("import", "fio", source, "--out", tmp_path, "--label", "vm"), tmp_path)
    assert "states 2 machines" in error and "'tdx-vm' vs 'plain-vm'" in error and "--label 'vm'" in error


# ---- seed 000: a pyperformance log cut in the middle of its last line -------------------------------------


def test_a_pyperformance_log_cut_in_its_last_line_is_refused_as_a_cut_file(tmp_path):
    """Cut after 'float: Mean +- std d', the log still held one whole line, and 'float' went missing
    without a word. Refused as a cut fio JSON file is: one line, exit 2, nothing written."""
    copy = tmp_path / "seed"
    copy.mkdir()
    for source in (IMPORT / "seed000-azure").iterdir():
        (copy / source.name).write_bytes(source.read_bytes())
    log = copy / "TDX-Encrypted_20241120_101244_pyperformance default.txt"
    text = log.read_text()
    assert text.rstrip().endswith("float: Mean +- std dev: 88.4 ms +- 0.9 ms")
    log.write_text(text[: text.index("float: Mean +- std d") + len("float: Mean +- std d")])
    error = _one_line_refusal(run_ccbench("import", "seed000", copy, "--out", tmp_path / "out"), tmp_path / "out")
    assert log.name in error and "'float: Mean +- std d'" in error and "cut short" in error


# ---- ping: logs that state no machine, taken as one -------------------------------------------------------


def test_ping_logs_imported_together_are_said_to_be_taken_as_one_machine(tmp_path):
    """busybox's and iputils' logs (two destinations, two cases) land in one bundle named after the
    first: the import says they were taken as one machine, that different pings wrote them, and what
    to do; the manifest keeps the note and which pings wrote the logs."""
    network = DATA / "network"
    done = run_ccbench(
        "import", "ping", network / "ping-busybox.txt", network / "ping-iputils-ipv6.txt", "--out", tmp_path
    )
    assert done.returncode == 0, done.stderr
    [bundle] = map(read_bundle, _bundles(tmp_path))
    [note] = bundle.manifest["imported"]["notes"]
    assert "2 ping logs taken as one machine, named after ping-busybox.txt" in note
    assert "ping-busybox.txt: busybox, ping-iputils-ipv6.txt: iputils" in note and "--label" in note
    assert note in done.stdout
    assert bundle.manifest["environment"]["tools"]["ping"] == ["busybox", "iputils"]
    same = run_ccbench(
        "import", "ping", network / "ping-loopback.txt", network / "ping-iputils-ipv6.txt", "--out", tmp_path / "same"
    )
    assert "2 ping logs taken as one machine" in same.stdout and "different pings" not in same.stdout
    labelled = run_ccbench(
        "import",
        "ping",
        network / "ping-loopback.txt",
        network / "ping-iputils-ipv6.txt",
        "--out",
        tmp_path / "l",
        "--label",
        "vm",
    )
    assert labelled.returncode == 0 and "taken as one machine" not in labelled.stdout
