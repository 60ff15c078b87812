"""ccbench gate: its three exits on real bundles (a tiny plan run through the CLI) and on synthetic
ones, its Markdown and JUnit files, a history store as the baseline, and --confirm."""

from __future__ import annotations

import xml.etree.ElementTree as ElementTree
from pathlib import Path

import numpy as np
from bundles import sample, write
from conftest import only_bundle

from ccbench.bundle import read_bundle

PLAN = '[[workloads]]\nkind = "prime"\nn = 3000\nwarmup = 1\nrepetitions = 5\n'


def _copy(bundle: Path, out: Path, factor: float = 1.0, host: str = "later", known: bool = False) -> Path:
    """A bundle of the same workload and configuration as ``bundle``: its times ``factor`` times, or,
    with ``known``, times of known values (10 ms x ``factor``, 1% apart between repetitions) in place of
    the measured ones, so that a gate decision does not depend on how fast or quiet the machine was."""
    data = read_bundle(bundle)

    def time_value(s) -> float:
        if known:
            return 0.010 * factor * (1 + 0.01 * (s["repetition"] % 3 - 1))
        return s["value"] * factor

    samples = [
        sample(
            workload=s["workload"],
            kind=s["kind"],
            params=s["params"],
            variant=s["variant"],
            metric=s["metric"],
            unit=s["unit"],
            better=s["better"],
            value=time_value(s) if s["metric"] == "time" else s["value"],
            repetition=s["repetition"],
            warmup=s["warmup"],
        )
        for s in data.samples
    ]
    return write(out, host, "none", samples)


def _prime_samples(factor: float, rng, reps: int = 6, variants=({"storage": "disk"}, {"storage": "tmpfs"})):
    return [
        sample(workload="prime", kind="prime", variant=v, metric=m, value=2.0 * factor * np.exp(x), repetition=r)
        for v in variants
        for m in ("time", "cpu_time")
        for r, x in enumerate(rng.normal(0, 0.01, reps))
    ]


def test_gate_on_a_real_run_passes_unchanged_values_and_fails_known_slower_ones(tmp_path, ccbench, workdir, write_plan):
    """The real run proves the plumbing (a bundle of the runner's through the gate: exit codes, files,
    case names); the decisions are taken on values that are known, never on how fast this machine was
    twice in a row (two real runs of a 3 ms prime differed by 60% on a loaded machine)."""
    plan = write_plan(PLAN)
    done = ccbench("run", plan, "--out", tmp_path / "first", "--workdir", workdir)
    assert done.returncode == 0, done.stderr
    first = only_bundle(tmp_path / "first")
    # the real bundle against a copy with the same values: nothing to fail, whatever the machine did
    same = _copy(first, tmp_path / "same")
    passed = ccbench("gate", same, "--against", first, "--threshold", "50%", "--junit", tmp_path / "j.xml")
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert "ccbench gate: passed: no regression among 1 judged primary metric case" in passed.stdout
    suite = ElementTree.parse(tmp_path / "j.xml").getroot().find("testsuite")
    assert suite.get("tests") == "1" and suite.get("failures") == "0"
    assert [c.get("name") for c in suite.iter("testcase")] == ["prime time on no TEE"]  # cpu_time is not primary
    # known values of the same cases: 1% apart within each, 3x between them, beyond a 50% threshold
    baseline = _copy(first, tmp_path / "baseline", host="earlier", known=True)
    slower = _copy(first, tmp_path / "slower", 3.0, known=True)
    failed = ccbench(
        "gate",
        slower,
        "--against",
        baseline,
        "--threshold",
        "50%",
        "--markdown",
        tmp_path / "g.md",
        "--junit",
        tmp_path / "j.xml",
    )
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert "FAIL prime time on no TEE" in failed.stdout
    assert "rerun: ccbench run PLAN --only prime" in failed.stdout
    summary = (tmp_path / "g.md").read_text()
    assert summary.startswith("**ccbench gate: failed**: 1 regression; of 1 primary metric case")
    assert "| prime time on no TEE |" in summary and "regression:" in summary
    suite = ElementTree.parse(tmp_path / "j.xml").getroot().find("testsuite")
    assert suite.get("failures") == "1"
    failure = next(suite.iter("testcase")).find("failure")
    assert failure is not None and "beyond the threshold 50% slower" in failure.get("message")
    # and the same known values unchanged pass the same gate
    again = _copy(first, tmp_path / "again", known=True)
    assert ccbench("gate", again, "--against", baseline, "--threshold", "50%").returncode == 0


def test_gate_thresholds_and_bad_input(tmp_path, ccbench):
    rng = np.random.default_rng(4)
    base = write(tmp_path / "base", "ci", "none", _prime_samples(1.0, rng))
    new = write(tmp_path / "new", "ci", "none", _prime_samples(1.03, rng))
    # 3% slower at 1% noise: beyond the MDE, so the default fails; a 5% threshold lets it pass
    default = ccbench("gate", new, "--against", base)
    assert default.returncode == 1, default.stdout + default.stderr
    assert default.stdout.count("FAIL prime time") == 2
    assert ccbench("gate", new, "--against", base, "--threshold", "5%").returncode == 0
    # bad input: exit 2, one line, no traceback
    for args, words in (
        (["--against", tmp_path / "missing"], "no such file or directory"),
        (["--against", base, "--threshold", "lots"], "--threshold 'lots'"),
    ):
        bad = ccbench("gate", new, *args)
        assert bad.returncode == 2 and words in bad.stderr and "Traceback" not in bad.stderr, bad.stderr
    other = write(tmp_path / "other", "ci", "none", _prime_samples(1.0, rng, variants=({"storage": "encrypted"},)))
    unmatched = ccbench("gate", other, "--against", base)
    assert unmatched.returncode == 2 and "not in the baseline" in unmatched.stderr


def test_gate_against_a_history_store(tmp_path, ccbench):
    rng = np.random.default_rng(9)
    store = tmp_path / "history.duckdb"
    for night in range(6):
        # each night's level wanders by 1% (run to run), executions by 1% around it
        level = float(np.exp(rng.normal(0, 0.01)))
        bundle = write(tmp_path / f"night{night}", "ci", "none", _prime_samples(level, rng))
        assert ccbench("history", "add", bundle, "--store", store).returncode == 0
    same = write(tmp_path / "same", "ci", "none", _prime_samples(1.0, rng))
    done = ccbench("gate", same, "--against", store)
    assert done.returncode == 0, done.stdout + done.stderr
    step = write(tmp_path / "step", "ci", "none", _prime_samples(1.15, rng))
    failed = ccbench("gate", step, "--against", store, "--junit", tmp_path / "j.xml")
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert "against the history store" in failed.stdout
    # a machine the store has never seen: its baseline is still being built (nothing judged, nothing failed)
    stranger = write(tmp_path / "stranger", "elsewhere", "none", _prime_samples(1.0, rng))
    unknown = ccbench("gate", stranger, "--against", store)
    assert unknown.returncode == 0 and "ccbench gate: building the baseline: 0 of 3 runs" in unknown.stdout


def test_confirm_reruns_the_failing_workloads_and_reports_not_reproduced(tmp_path, ccbench, workdir, write_plan):
    plan = write_plan(PLAN)
    done = ccbench("run", plan, "--out", tmp_path / "base", "--workdir", workdir)
    assert done.returncode == 0, done.stderr
    base = only_bundle(tmp_path / "base")
    # a one-off: a bundle 10x slower than the baseline that a rerun of the same plan will not repeat;
    # the threshold (+400%: 5x) leaves room for a rerun on a busy machine (a QEMU guest beside it made
    # the reruns up to 1.5x slower and left the case open at +100%)
    noisy = _copy(base, tmp_path / "noisy", 10.0)
    confirm_out = tmp_path / "confirm"
    result = ccbench(
        "gate",
        noisy,
        "--against",
        base,
        "--threshold",
        "400%",
        "--confirm",
        plan,
        "--confirm-out",
        confirm_out,
        "--workdir",
        workdir,
        "--markdown",
        tmp_path / "g.md",
    )
    assert "rerun: ccbench run" in result.stdout and "--only prime" in result.stdout
    assert "not reproduced: prime time on no TEE" in result.stdout, result.stdout + result.stderr
    assert result.returncode == 0
    assert "regression, not reproduced" in (tmp_path / "g.md").read_text()
    # runs until settled: one run on a quiet machine, more where its noise leaves the case open
    runs = len(list(confirm_out.glob("*/manifest.json")))
    assert 1 <= runs <= 5 and result.stdout.count("confirming: ccbench run") == runs


def test_confirm_runs_until_a_real_regression_is_settled_as_confirmed(tmp_path, ccbench, workdir, write_plan):
    """A baseline of known values far faster than any real run of the plan (1 us): the real reruns
    are a regression beyond any doubt, settled as confirmed, with its numbers, and the gate fails."""
    plan = write_plan(PLAN)
    done = ccbench("run", plan, "--out", tmp_path / "first", "--workdir", workdir)
    assert done.returncode == 0, done.stderr
    first = only_bundle(tmp_path / "first")
    baseline = _copy(first, tmp_path / "baseline", 1e-4, host="earlier", known=True)
    slower = _copy(first, tmp_path / "slower", 3e-4, known=True)
    args = ["--against", baseline, "--threshold", "50%", "--confirm", plan, "--workdir", workdir]
    result = ccbench("gate", slower, *args, "--confirm-out", tmp_path / "confirm", "--junit", tmp_path / "j.xml")
    assert result.returncode == 1, result.stdout + result.stderr
    line = next(x for x in result.stdout.splitlines() if x.startswith("  confirmed: prime time on no TEE"))
    assert "confirmation executions: worse, beyond 50.0%" in line
    assert len(list((tmp_path / "confirm").glob("*/manifest.json"))) == 1  # settled after one run
    bad = ccbench("gate", slower, *args, "--confirm-budget", "soon")
    assert bad.returncode == 2 and "--confirm-budget soon: expected seconds" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_settle_confirmation_with_known_values_and_its_error_when_looked_at_after_every_run():
    from ccbench.analysis.gate import CONFIRMED, NOT_REPRODUCED, UNSETTLED, settle_confirmation

    rng = np.random.default_rng(7)
    base = rng.normal(0, 0.02, 10)
    assert settle_confirmation(np.log(3) + rng.normal(0, 0.02, 5), base, "lower", 0.5).state == CONFIRMED
    # a rate a third of the baseline's: 3x the time
    assert settle_confirmation(-np.log(3) + rng.normal(0, 0.02, 5), base, "higher", 0.5).state == CONFIRMED
    same = settle_confirmation(rng.normal(0, 0.02, 10), base, "lower", 0.5)
    assert same.state == NOT_REPRODUCED and same.high < 0.5
    assert settle_confirmation(rng.normal(0, 0.5, 3), base, "lower", 0.05).state == UNSETTLED
    assert settle_confirmation([0.1], base, "lower", 0.05).change is None
    # no change, five executions a run, looked at after each of 6 runs: confirmed (any worse) rarely
    wrong = 0
    for _ in range(1000):
        baseline, new = rng.normal(0, 0.05, 10), rng.normal(0, 0.05, 30)
        looks = (settle_confirmation(new[:n], baseline, "lower", 0.0).state for n in range(5, 31, 5))
        wrong += any(state == CONFIRMED for state in looks)
    assert wrong / 1000 <= 0.05
