"""The runner end to end, through the real CLI: failures, timeouts, kills, signals, resume, pinning."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from conftest import only_bundle, start_run, wait_for_samples

from ccbench.bundle import read_bundle
from ccbench.planning.plan import WorkloadSpec
from ccbench.run.runner import schedule


def test_schedule_interleaves_variants_after_warmups():
    spec = WorkloadSpec(
        kind="fio",
        name="f",
        repetitions=2,
        warmup=1,
        cooldown=0,
        timeout=1,
        variants={"storage": ["disk", "tmpfs", "encrypted"]},
    )
    order = [(e.warmup, e.repetition, e.combo["storage"]) for e in schedule(spec)]
    assert order == [
        (True, 0, "disk"),
        (True, 0, "tmpfs"),
        (True, 0, "encrypted"),
        (False, 0, "disk"),
        (False, 0, "tmpfs"),
        (False, 0, "encrypted"),
        (False, 1, "disk"),
        (False, 1, "tmpfs"),
        (False, 1, "encrypted"),
    ]


def test_failures_and_timeouts_are_recorded_and_the_run_goes_on(tmp_path, ccbench, workdir, write_plan):
    # a duration no other process on the machine uses, so that the check below sees only ours, and
    # longer than the test may take: a sleep the timeout left alive is still there to be found
    sleep = f"sleep 3600.{os.getpid()}"
    path = write_plan(f"""
[[workloads]]
kind = "command"
name = "fails"
command = "echo going wrong >&2; exit 3"
[[workloads]]
kind = "command"
name = "hangs"
timeout = 1
repetitions = 1
command = "{sleep} & {sleep}"
[[workloads]]
kind = "command"
name = "works"
command = "echo fine"
""")
    out = tmp_path / "out"
    done = ccbench("run", path, "--out", out, "--workdir", workdir)
    assert done.returncode == 1, done.stderr
    bundle = read_bundle(only_bundle(out))
    outcomes = bundle.manifest["outcomes"]
    assert outcomes["fails"]["status"] == "failed" and outcomes["fails"]["executions_failed"] == 2
    assert outcomes["hangs"]["status"] == "failed"
    assert outcomes["works"]["status"] == "ok" and outcomes["works"]["executions_ok"] == 2
    records = {(r["workload"], r["repetition"]): r for r in bundle.executions}
    assert records[("fails", 0)]["status"] == "failed"
    assert "going wrong" in records[("fails", 0)]["error"]
    assert records[("hangs", 0)]["status"] == "timeout"
    assert "the whole process tree was ended" in records[("hangs", 0)]["error"]
    works = [s for s in bundle.samples if s["workload"] == "works"]
    assert {s["metric"] for s in works} == {"wall_time", "user_time", "system_time", "peak_rss"}
    for sample in works:
        for key in ("workload", "params", "variant", "metric", "unit", "value", "repetition", "warmup", "timestamp"):
            assert key in sample
        assert sample["variant"]["storage"] == "disk" and sample["variant"]["storage_protection"] == "plain"
    assert bundle.manifest["status"] == "failed"
    assert bundle.manifest["environment"]["tee"]["technology"] in (
        "none",
        "unknown",
        "sev",
        "sev-es",
        "sev-snp",
        "tdx",
        "sgx",
    )
    # no sleep survived the timeout
    left = subprocess.run(["pgrep", "-f", sleep], capture_output=True, text=True)
    assert left.stdout.strip() == ""


def test_warmups_are_marked(tmp_path, ccbench, write_plan):
    write_plan('[[workloads]]\nkind = "prime"\nn = 200\nwarmup = 2\nrepetitions = 3\n')
    out = tmp_path / "out"
    # relative paths, as a user types them
    done = ccbench("run", "plan.toml", "--out", "out", "--workdir", "work", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    samples = [s for s in read_bundle(only_bundle(out)).samples if s["metric"] == "time"]
    assert [s["warmup"] for s in samples] == [True, True, False, False, False]
    assert "summary" in done.stdout and "bundle:" in done.stdout


SLOW_PLAN = '[[workloads]]\nkind = "command"\nname = "tick"\nrepetitions = 30\ncommand = "sleep 0.2"\n'


def test_sigkill_mid_plan_leaves_a_readable_bundle(tmp_path, ccbench, workdir, write_plan):
    out = tmp_path / "out"
    process = start_run(write_plan(SLOW_PLAN), out, workdir)
    bundle = wait_for_samples(out, 8)
    process.kill()
    process.wait()
    # simulate a line cut in half by the kill
    with open(bundle / "samples.jsonl", "a") as handle:
        handle.write('{"workload": "tick", "metr')
    with pytest.warns(UserWarning, match="the last line .* is cut off"):
        data = read_bundle(bundle)
    assert len(data.samples) >= 8
    shown = ccbench("show", bundle)
    assert shown.returncode == 0, shown.stderr
    assert "tick" in shown.stdout and "wall_time" in shown.stdout


def test_sigterm_stops_cleanly_and_resume_finishes(tmp_path, ccbench, workdir, write_plan):
    out = tmp_path / "out"
    path = write_plan(SLOW_PLAN.replace("repetitions = 30", "repetitions = 12"))
    process = start_run(path, out, workdir)
    bundle = wait_for_samples(out, 8)
    process.send_signal(signal.SIGTERM)
    stdout, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr
    assert "ccbench run --resume" in stdout + stderr
    manifest = json.loads((bundle / "manifest.json").read_text())
    assert manifest["status"] == "interrupted" and manifest["outcomes"]["tick"]["status"] == "interrupted"
    before = len([s for s in read_bundle(bundle).samples if s["metric"] == "wall_time"])
    assert before < 12
    done = ccbench("run", "--resume", bundle, "--workdir", workdir)
    assert done.returncode == 0, done.stderr
    data = read_bundle(bundle)
    reps = sorted(s["repetition"] for s in data.samples if s["metric"] == "wall_time")
    assert reps == list(range(12)), "resume runs exactly the missing repetitions"
    assert data.manifest["status"] == "complete"


def test_pinning_applies_to_the_measured_process(tmp_path, ccbench, workdir, write_plan):
    path = write_plan(
        '[[workloads]]\nkind = "command"\nrepetitions = 1\ncommand = "grep Cpus_allowed_list /proc/self/status"\n'
    )
    out = tmp_path / "out"
    # a CPU this test may use: started under taskset (or a CI runner's cgroup), CPU 0 may not be one
    cpu = str(max(os.sched_getaffinity(0)))
    done = ccbench("run", path, "--out", out, "--workdir", workdir, "--pin", cpu)
    assert done.returncode == 0, done.stderr
    logs = list(only_bundle(out).glob("raw/command/*/rep-0/command.stdout"))
    assert logs and logs[0].read_text().split()[-1] == cpu


def test_only_takes_several_names(tmp_path, ccbench, workdir):
    done = ccbench(
        "run", "quick", "--only", "systeminfo,prime", "--repeat", "1", "--out", tmp_path / "out", "--workdir", workdir
    )
    assert done.returncode == 0, done.stderr
    outcomes = read_bundle(only_bundle(tmp_path / "out")).manifest["outcomes"]
    assert sorted(outcomes) == ["prime", "systeminfo"]


def test_only_and_bad_inputs(tmp_path, ccbench, workdir):
    out = tmp_path / "out"
    done = ccbench("run", "quick", "--only", "nothing", "--out", out, "--workdir", workdir)
    assert done.returncode == 2 and "no such workload" in done.stderr and "Traceback" not in done.stderr
    done = ccbench("run", tmp_path / "missing.toml", "--out", out, "--workdir", workdir)
    assert done.returncode == 2 and "missing.toml" in done.stderr and done.stderr.count("\n") == 1
    blocker = tmp_path / "file"
    blocker.write_text("")
    done = ccbench("run", "quick", "--only", "prime", "--out", blocker / "sub", "--workdir", workdir, "--repeat", "1")
    assert done.returncode == 2 and "cannot create the result bundle" in done.stderr
    done = ccbench("run", "quick", "--pin", "999", "--workdir", workdir)
    assert done.returncode == 2 and "not available" in done.stderr
    done = ccbench("show", tmp_path / "nothing-here")
    assert done.returncode == 2 and "no such bundle" in done.stderr


def test_ctrl_c_keeps_samples_and_says_how_to_resume(tmp_path, workdir, write_plan):
    out = tmp_path / "out"
    process = start_run(write_plan(SLOW_PLAN), out, workdir)
    bundle = wait_for_samples(out, 4)
    process.send_signal(signal.SIGINT)
    stdout, stderr = process.communicate(timeout=60)
    assert process.returncode == 130
    assert f"ccbench run --resume {bundle}" in stdout + stderr
    data = read_bundle(bundle)
    assert data.manifest["status"] == "interrupted" and data.manifest["ended_at"]
    assert len(data.samples) >= 4
    assert any(r["status"] == "interrupted" for r in data.executions) or len(data.executions) * 4 == len(data.samples)


A_A_PLAN = '[[workloads]]\nkind = "command"\nrepetitions = 3\ncommand = "sleep 0.6"\n'


def test_a_run_beside_a_cpu_hog_is_flagged_contended(tmp_path, ccbench, write_plan):
    """The loaded half of an A/A pair: the plan run while a CPU hog (one busy process per CPU)
    started by the test runs beside it. Every execution is flagged contended, on its record and
    its samples, the CPU is counted as others' (not the measured tree's), and the run says so."""
    plan = write_plan(A_A_PLAN)
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(os.cpu_count() or 1)]
    try:
        time.sleep(0.5)
        loaded = ccbench("run", plan, "--out", tmp_path / "loaded", "--workdir", tmp_path / "work")
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    assert loaded.returncode == 0, loaded.stderr
    bundle = read_bundle(only_bundle(tmp_path / "loaded"))
    assert len(bundle.executions) == 3
    for record in bundle.executions:
        assert record["contended"] is True, record
        assert record["interference"]["others_cpus"] > 0.25
        assert any("other processes used" in reason for reason in record["contended_reasons"])
        # the measured tree (a sleeping shell) is not where the CPU went
        assert record["interference"]["tree_cpus"] < record["interference"]["others_cpus"]
    assert bundle.samples and all(s["contended"] for s in bundle.samples)
    assert "3 of 3 measured executions ran on a busy machine" in " ".join(loaded.stdout.split())
    assert "other busy processes" in loaded.stderr  # the system check saw the hog before the run


@pytest.mark.alone
def test_a_quiet_run_is_not_flagged(tmp_path, ccbench, write_plan):
    """The quiet half of the A/A pair: nothing else runs, nothing is flagged. On a machine shared
    with other work (the development VM usually is) the run is skipped, naming what was busy."""
    done = ccbench("run", write_plan(A_A_PLAN), "--out", tmp_path / "quiet", "--workdir", tmp_path / "work")
    assert done.returncode == 0, done.stderr
    bundle = read_bundle(only_bundle(tmp_path / "quiet"))
    if any(r["contended"] for r in bundle.executions):
        reasons = sorted({reason for r in bundle.executions for reason in r["contended_reasons"]})
        pytest.skip("the machine was busy with other work during the quiet run: " + "; ".join(reasons)[:400])
    assert all(r["interference"]["others_cpus"] <= 0.25 for r in bundle.executions)
    assert all(not s["contended"] for s in bundle.samples)
    assert "busy machine" not in done.stdout


def test_precision_runs_interleaved_rounds_until_the_interval_is_narrow(tmp_path, ccbench, workdir, write_plan):
    plan = write_plan(
        '[[workloads]]\nkind = "command"\nname = "steady"\ncommand = "sleep 0.05"\n'
        "repetitions = 2\nmax_repetitions = 8\n"
        '[[workloads]]\nkind = "command"\nname = "capped"\ncommand = "sleep 0.0$((RANDOM % 9 + 1))"\n'
        "repetitions = 2\nmax_repetitions = 4\n"
    )
    done = ccbench("run", plan, "--precision", "25%", "--out", tmp_path / "out", "--workdir", workdir)
    assert done.returncode == 0, done.stderr
    bundle = read_bundle(only_bundle(tmp_path / "out"))
    outcomes = bundle.manifest["outcomes"]
    steady, capped = outcomes["steady"]["precision"], outcomes["capped"]["precision"]
    assert steady["target"] == 0.25 and capped["target"] == 0.25
    # the rule never stops before 5 repetitions (a narrow interval must hold three checks)
    assert steady["stopped_by"] in ("precision reached", "max repetitions") and 5 <= steady["repetitions"] <= 8
    assert capped["stopped_by"] == "max repetitions" and capped["repetitions"] == 4
    reps = {name: sorted(r["repetition"] for r in bundle.executions if r["workload"] == name) for name in outcomes}
    assert reps["capped"] == [0, 1, 2, 3] and reps["steady"] == list(range(steady["repetitions"]))
    assert "steady: " in done.stdout and "(target +-25.0%)" in done.stdout
    bad = ccbench("run", plan, "--precision", "lots", "--out", tmp_path / "out", "--workdir", workdir)
    assert bad.returncode == 2 and "--precision lots" in bad.stderr and "Traceback" not in bad.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="the tmpfs variant needs root")
def test_precision_rounds_interleave_the_variants(tmp_path, ccbench, workdir, write_plan):
    plan = write_plan(
        '[[workloads]]\nkind = "command"\ncommand = "sleep 0.0$((RANDOM % 9 + 1))"\n'
        'repetitions = 2\nprecision = "1%"\nmax_repetitions = 4\nvariants = { storage = ["disk", "tmpfs"] }\n'
        '[storage]\ntmpfs_size = "16M"\n'
    )
    done = ccbench("run", plan, "--out", tmp_path / "out", "--workdir", workdir)
    assert done.returncode == 0, done.stderr
    bundle = read_bundle(only_bundle(tmp_path / "out"))
    order = [(r["repetition"], r["variant"]["storage"]) for r in bundle.executions]
    # each round runs every variant once (in the order the manifest's seed drew)
    assert sorted(order) == [(n, v) for n in range(4) for v in ("disk", "tmpfs")]
    assert [n for n, _ in order] == [n for n in range(4) for _ in range(2)]
    assert bundle.manifest["order"]["mode"] == "random"
    assert bundle.manifest["outcomes"]["command"]["precision"]["stopped_by"] == "max repetitions"


def test_run_summary_is_short_and_ends_with_the_machine_protection(tmp_path, ccbench, workdir, write_plan):
    plan = write_plan(
        '[[workloads]]\nkind = "systeminfo"\n[[workloads]]\nkind = "compression"\nsize = "1M"\nrepetitions = 1\n'
    )
    done = ccbench("run", plan, "--out", tmp_path / "out", "--workdir", workdir)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    # the bundle, then the verdict of the variants it ran: here one configuration per workload
    assert lines[-2].startswith("bundle: ")
    assert lines[-1].startswith("verdict: nothing to compare in this run (one configuration per workload)")
    assert f"ccbench compare {lines[-2].removeprefix('bundle: ')} OTHER_BUNDLE --summary" in lines[-1]
    machine = [line for line in lines if line.startswith(("TEE: ", "storage at "))]
    assert len(machine) == 2 and machine[0].split()[1] in ("none", "unknown", "sev", "sev-es", "sev-snp", "tdx", "sgx")
    assert f"storage at {workdir}" in machine[1]
    # one row per workload and variant: the headline case, the others counted, the facts left out
    assert "probe_time" not in done.stdout
    rows = [line for line in lines if "compress" in line and "storage=disk" in line]
    assert len(rows) == 1 and "(+1 more case, not shown)" in rows[0]
    # the system check was printed before the run and kept in the manifest
    assert "system check" in done.stderr
    names = [check["name"] for check in read_bundle(only_bundle(tmp_path / "out")).manifest["system_check"]]
    assert "transparent huge pages" in names and "other busy processes" in names


def test_a_failure_that_would_repeat_skips_the_rest_of_its_variant(tmp_path, ccbench, workdir, write_plan):
    # bash exits 127 for a command it cannot find: the next execution would fail the same way
    path = write_plan(
        '[[workloads]]\nkind = "command"\nname = "missing"\nwarmup = 1\nrepetitions = 3\n'
        'command = "no-such-tool-for-ccbench"\n'
        '[[workloads]]\nkind = "command"\nname = "works"\ncommand = "true"\n'
    )
    out = tmp_path / "out"
    done = ccbench("run", path, "--out", out, "--workdir", workdir)
    assert done.returncode == 1, done.stderr
    bundle = read_bundle(only_bundle(out))
    outcome = bundle.manifest["outcomes"]["missing"]
    assert outcome["status"] == "failed"
    assert outcome["executions_failed"] == 1 and outcome["executions_skipped"] == 3
    assert "no-such-tool-for-ccbench" in outcome["repeating_failures"]["storage=disk"]
    records = [r for r in bundle.executions if r["workload"] == "missing"]
    assert [(r["warmup"], r["status"]) for r in records] == [(True, "failed")]
    assert (done.stdout + done.stderr).count("remaining executions of this variant combination are skipped") == 1
    assert bundle.manifest["outcomes"]["works"]["executions_ok"] == 2
