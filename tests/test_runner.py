"""The runner end to end, through the real CLI: failures, timeouts, kills, signals, resume, pinning."""

import json
import os
import signal
import subprocess
import time

import pytest

from ccbench.bundle import read_bundle
from ccbench.plan import WorkloadSpec
from ccbench.runner import schedule
from conftest import only_bundle, start_run, wait_for_samples


def test_schedule_interleaves_variants_after_warmups():
    spec = WorkloadSpec(kind="fio", name="f", repetitions=2, warmup=1, cooldown=0, timeout=1,
                        variants={"storage": ["disk", "tmpfs", "encrypted"]})
    order = [(e.warmup, e.repetition, e.combo["storage"]) for e in schedule(spec)]
    assert order == [
        (True, 0, "disk"), (True, 0, "tmpfs"), (True, 0, "encrypted"),
        (False, 0, "disk"), (False, 0, "tmpfs"), (False, 0, "encrypted"),
        (False, 1, "disk"), (False, 1, "tmpfs"), (False, 1, "encrypted"),
    ]


def test_failures_and_timeouts_are_recorded_and_the_run_goes_on(tmp_path, ccbench, workdir, write_plan):
    # a duration no other process on the machine uses, so that the check below sees only ours
    sleep = f"sleep 60.{os.getpid()}"
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
    start = time.monotonic()
    done = ccbench("run", path, "--out", out, "--workdir", workdir)
    assert time.monotonic() - start < 50, "the timeout must end the whole process group"
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
    works = [s for s in bundle.samples if s["workload"] == "works"]
    assert {s["metric"] for s in works} == {"wall_time", "user_time", "system_time", "peak_rss"}
    for sample in works:
        for key in ("workload", "params", "variant", "metric", "unit", "value", "repetition", "warmup", "timestamp"):
            assert key in sample
        assert sample["variant"]["storage"] == "disk" and sample["variant"]["storage_protection"] == "plain"
    assert bundle.manifest["status"] == "failed"
    assert bundle.manifest["environment"]["tee"]["technology"] in ("none", "unknown", "sev", "sev-es", "sev-snp", "tdx", "sgx")
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
    with pytest.warns(UserWarning, match="truncated last line"):
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
    path = write_plan('[[workloads]]\nkind = "command"\nrepetitions = 1\ncommand = "grep Cpus_allowed_list /proc/self/status"\n')
    out = tmp_path / "out"
    done = ccbench("run", path, "--out", out, "--workdir", workdir, "--pin", "0")
    assert done.returncode == 0, done.stderr
    logs = list(only_bundle(out).glob("raw/command/*/rep-0/command.stdout"))
    assert logs and logs[0].read_text().split()[-1] == "0"


def test_only_takes_several_names(tmp_path, ccbench, workdir):
    done = ccbench("run", "quick", "--only", "systeminfo,prime", "--repeat", "1", "--out", tmp_path / "out",
                   "--workdir", workdir)
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
