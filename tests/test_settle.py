"""Settle rounds in the runner (ccbench.run.settle) with the scripted executor of test_scheduling: no
workload runs, each execution's value is chosen by the test. An easy case (a 10x cost) leaves the
rounds early; a hard one (no cost, noise near the target) runs on, with its baseline, to the limit; a
hopeless one (noise far above the target) leaves without an answer once it cannot settle by the limit."""

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import only_bundle, own_path_layer, tmpfs_as_cipher
from test_scheduling import Messages, ScriptedExecutor, measured

from ccbench.analysis import format as fmt
from ccbench.basics.errors import PlanError
from ccbench.bundle import read_bundle
from ccbench.commands.run import settle_lines, settled_block
from ccbench.planning.plan import plan_from_dict
from ccbench.run.runner import Runner
from ccbench.run.schedule import Order

VALUES = ("disk", "tmpfs", "ext4-loop")


@pytest.fixture
def run_settle(tmp_path, monkeypatch):
    """run_settle(executor, plan_extra={}, **defaults) -> (RunResult, Messages): one command workload
    on three storage variants (directories of the test's own: nothing is mounted), disk first."""
    import ccbench.probe.syscheck

    monkeypatch.setattr(ccbench.probe.syscheck, "system_check", lambda **options: [])
    paths = {}
    for value in VALUES:
        paths[value] = str(tmp_path / f"dir-{value}")
        Path(paths[value]).mkdir()

    def run(executor, plan_extra=None, order="random", resume=None, **defaults):
        document = {
            "name": "scripted",
            "defaults": {
                "repetitions": 3,
                "warmup": 1,
                "cooldown": 0,
                "variants": {"storage": list(VALUES)},
                **defaults,
            },
            "workloads": [{"kind": "command", "name": "c", "command": "true"}],
            **(plan_extra or {}),
        }
        messages = Messages()
        runner = Runner(
            plan_from_dict(document, "test"),
            out=tmp_path / "out",
            workdir=tmp_path / "work",
            # the directories of the variants the plan runs (a --storage-path it runs none of is an error)
            storage_paths={v: p for v, p in paths.items() if v in document["defaults"]["variants"]["storage"]},
            reporter=messages,
            environment={},
            executor=executor,
            order=Order(order, 11),
            resume=resume,
        )
        return runner.run(), messages

    return run


def easy_and_hard(seed: int = 2, hard_noise: float = 0.013) -> ScriptedExecutor:
    """disk ~1 s, tmpfs 10x slower (1% noise), ext4-loop the same as disk but with more noise; each
    value drawn from the seed, the variant and the repetition (whatever the order drawn). At 1.3%
    noise and a 2% target the ext4-loop case, on the repeated interval for a limit of 12, neither
    settles nor is given up before the limit (1.1% settles it, 1.4% gives it up: a hard case is one
    that sits between)."""
    scale = {"disk": (1.0, 0.01), "tmpfs": (10.0, 0.01), "ext4-loop": (1.0, hard_noise)}

    def answer(job):
        value = job.variant["storage"]
        rng = np.random.default_rng([seed, VALUES.index(value), job.repetition, job.warmup])
        return measured(scale[value][0] * rng.lognormal(0, scale[value][1]))

    return ScriptedExecutor(answer)


def rounds_of(executor: ScriptedExecutor) -> dict[int, list[str]]:
    rounds: dict[int, list[str]] = {}
    for job in executor.jobs:
        if not job.warmup:
            rounds.setdefault(job.repetition, []).append(job.variant["storage"])
    return rounds


def test_an_easy_case_leaves_the_rounds_early_and_a_hard_one_runs_on_with_its_baseline(run_settle):
    executor = easy_and_hard()
    result, messages = run_settle(executor, settle="2%", max_repetitions=12)
    settled = result.outcomes["c"].settled
    easy_variant, hard_variant = settled["variants"]["storage=tmpfs"], settled["variants"]["storage=ext4-loop"]
    assert list(easy_variant["cases"]) == ["wall_time"]
    easy, hard = easy_variant["cases"]["wall_time"], hard_variant["cases"]["wall_time"]
    assert settled["baseline"] == "storage=disk"
    assert easy_variant["stopped_by"] == "settled" and easy["state"] == "cost"
    assert easy["estimate"] == pytest.approx(9.0, abs=0.2) and easy["low"] > 5
    assert hard_variant["stopped_by"] == "max repetitions" and hard["state"] is None and hard["rounds"] == 12
    rounds = rounds_of(executor)
    ran = {value: sum(value in r for r in rounds.values()) for value in VALUES}
    assert ran["tmpfs"] < 6 and ran["ext4-loop"] == 12 and ran["disk"] == 12
    # every round keeps the baseline; warm-ups ran once per variant, first
    assert all("disk" in r for r in rounds.values())
    assert [job.variant["storage"] for job in executor.jobs if job.warmup] and all(
        job.warmup for job in executor.jobs[:3]
    )
    # the rounds after the easy case left hold the two others, in a drawn order
    later = [tuple(r) for rep, r in rounds.items() if rep >= ran["tmpfs"]]
    assert {frozenset(r) for r in later} == {frozenset({"disk", "ext4-loop"})}
    assert len(set(later)) == 2  # both orders drawn, not a fixed A B
    assert any("storage=tmpfs] wall_time: settled: a cost: " in line for line in messages.lines)
    manifest_outcome = result.manifest["outcomes"]["c"]
    assert manifest_outcome["settled"]["variants"]["storage=tmpfs"]["stopped_by"] == "settled"


def test_a_run_interrupted_in_its_settle_rounds_resumes_them_where_it_stopped(run_settle):
    from ccbench.model import ExecutionStatus
    from ccbench.run.runner import Interrupted
    from ccbench.run.supervise import Attempt

    values = easy_and_hard()

    def answer(job):
        if len(first.jobs) == 14:  # 3 warm-ups, 9 repetitions, then the second execution of round 3
            return Attempt(ExecutionStatus.INTERRUPTED, "interrupted by a signal", interruption=Interrupted(2))
        return values.answer(job)

    first = ScriptedExecutor(answer)
    result, _ = run_settle(first, settle="2%", max_repetitions=12)
    assert result.interrupted and result.outcomes["c"].settled is None
    second = ScriptedExecutor(lambda job: values.answer(job))
    resumed, _ = run_settle(second, resume=result.bundle, settle="2%", max_repetitions=12)
    assert not resumed.interrupted and not any(job.warmup for job in second.jobs)
    settled = resumed.outcomes["c"].settled
    assert settled["variants"]["storage=tmpfs"]["stopped_by"] == "settled"
    assert settled["variants"]["storage=ext4-loop"]["cases"]["wall_time"]["rounds"] == 12
    records = read_bundle(result.bundle).executions
    ok = [(r["warmup"], r["repetition"], r["variant"]["storage"]) for r in records if r["status"] == "ok"]
    assert len(ok) == len(set(ok))  # nothing measured twice
    assert {(False, 11, "disk"), (False, 11, "ext4-loop")} <= set(ok) and (False, 11, "tmpfs") not in ok


def test_without_settle_the_schedule_is_the_fixed_one(run_settle):
    executor = easy_and_hard()
    result, _ = run_settle(executor, order="fixed")
    assert len([job for job in executor.jobs if not job.warmup]) == 3 * 3
    assert result.outcomes["c"].settled is None and "settled" not in result.manifest["outcomes"]["c"]


def test_the_budget_cuts_the_unsettled_cases_and_the_summary_names_them(run_settle):
    import time

    rng = np.random.default_rng(2)

    def answer(job):
        time.sleep(0.002)  # the study takes longer than its 1 ms budget whatever the machine
        return measured(rng.lognormal(0, 0.01))

    executor = ScriptedExecutor(answer)
    result, _ = run_settle(executor, plan_extra={"budget": 0.001}, settle="1%", max_repetitions=30)
    variants = result.outcomes["c"].settled["variants"]
    assert {variant["stopped_by"] for variant in variants.values()} == {"budget"}
    assert len([job for job in executor.jobs if not job.warmup]) == 3 * 3  # only the minimum rounds
    lines = settle_lines("c", result.outcomes["c"].settled)
    assert lines[0] == "c: the budget cut 2 unsettled variant(s): storage=tmpfs, storage=ext4-loop"
    assert lines[1] == "c [storage=tmpfs] against storage=disk: budget"
    assert lines[2].startswith("  wall_time: unsettled: ") and lines[2].endswith("(3 rounds)")


def test_settle_and_budget_in_a_plan_and_their_errors():
    document = {
        "name": "p",
        "budget": "20m",
        "defaults": {"settle": "5%"},
        "workloads": [{"kind": "command", "command": "true"}],
    }
    plan = plan_from_dict(document, "p.toml")
    assert plan.budget == 1200 and plan.workloads[0].settle == 0.05
    assert plan.with_settle("2%").workloads[0].settle == 0.02 and plan.with_budget("1h").budget == 3600
    with pytest.raises(PlanError, match=r"p.toml: budget: duration 'soon'"):
        plan_from_dict({**document, "budget": "soon"}, "p.toml")
    with pytest.raises(PlanError, match=r"--settle 200%: .*below 100%"):
        plan.with_settle("200%")
    with pytest.raises(PlanError, match=r"--budget 0: must be positive"):
        plan.with_budget("0")


def _unwrapped(text: str) -> list[str]:
    """The lines of an output with each wrapped continuation (indented deeper than the line it
    continues, by the wrapper's hanging indent) joined back onto it."""
    out: list[str] = []
    for line in text.splitlines():
        depth = len(line) - len(line.lstrip(" "))
        if out and line.strip() and depth >= len(out[-1]) - len(out[-1].lstrip(" ")) + 4:
            out[-1] += " " + line.strip()
        else:
            out.append(line)
    return out


def test_a_real_run_through_the_cli_settles_a_large_cost_early_and_says_so(tmp_path, ccbench, workdir):
    """Real worker processes: a command that sleeps what its variant's directory says, 25x longer
    on one of them; --settle settles that case within the round limit, the budget leaves it alone."""
    paths = {}
    for value, delay in (("disk", "0.02"), ("tmpfs", "0.5")):
        paths[value] = tmp_path / f"dir-{value}"
        paths[value].mkdir()
        (paths[value] / "delay").write_text(delay)
    plan = tmp_path / "plan.toml"
    plan.write_text(
        'name = "settle"\n[defaults]\nrepetitions = 3\nwarmup = 0\ncooldown = 0\nmax_repetitions = 8\n'
        'variants = { storage = ["disk", "tmpfs"] }\n'
        '[[workloads]]\nkind = "command"\nname = "sleepy"\ncommand = "sleep $(cat ../delay)"\n'
    )
    out = tmp_path / "out"
    paths_args = [f"--storage-path={value}={path}" for value, path in paths.items()]
    done = ccbench("run", plan, "--out", out, "--workdir", workdir, *paths_args, "--settle", "5%", "--budget", "10m")
    assert done.returncode == 0, done.stderr
    assert "sleepy [storage=tmpfs] against storage=disk: settled\n  wall_time: a cost: " in done.stdout
    assert "budget cut" not in done.stdout
    manifest = read_bundle(only_bundle(out), samples=False).manifest
    case = manifest["outcomes"]["sleepy"]["settled"]["variants"]["storage=tmpfs"]["cases"]["wall_time"]
    # how large and how soon depends on this machine's speed (a start-up of 0.2 s on a busy core
    # shrinks the 25x to 3x): the rule's numbers are tested on known values above, here the plumbing
    assert case["state"] == "cost" and case["low"] > 0 and case["rounds"] <= 8
    assert manifest["plan"]["budget"] == 600
    # compare recomputes each case from the bundle's samples with the run's rule: the same answer (its
    # case lines are in the full compare; --summary gives each variant's line)
    compared = ccbench("compare", only_bundle(out))
    assert compared.returncode == 0, compared.stderr
    run_line = next(line for line in _unwrapped(done.stdout) if line.startswith("  wall_time: a cost: "))
    # the same words (each output wraps at its own indent: compared whole)
    assert any(line.startswith(f"  {run_line}") for line in _unwrapped(compared.stdout)), compared.stdout
    # the run records the interval it settled on (built for its round limit, max_repetitions 8), and
    # compare's header and row name the one the record names
    record = manifest["outcomes"]["sleepy"]["settled"]
    assert (record["interval"], record["limit"]) == ("repeated", 8)
    assert case["interval"] == "repeated interval, limit 8"
    header = next(line for line in compared.stdout.splitlines() if line.startswith("settled in "))
    assert header.endswith(f"({case['interval']}, target 5.0%):"), header
    # and compare's own row of that case: the run's interval, its answer, its numbers
    rows = [json.loads(line) for line in ccbench("compare", only_bundle(out), "--json").stdout.splitlines()]
    (row,) = [r for r in rows if r.get("metric") == "wall_time"]
    assert (row["interval"], row["settled"], row["verdict"]) == (case["interval"], "cost", "slower")
    numbers = f"a cost: {fmt.effect(row['ratio'], row['ci_low'], row['ci_high'])}"
    assert run_line.startswith(f"  wall_time: {numbers}")
    # the layer's line: a cost, as the run said
    layer_line = next(
        line for line in _unwrapped(compared.stdout) if line.startswith(own_path_layer("tmpfs", tmp_path))
    )
    assert "slower" in layer_line, compared.stdout
    bad = ccbench("run", plan, "--out", out, "--workdir", workdir, "--budget", "soon")
    assert bad.returncode == 2 and "--budget soon: expected seconds" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_the_storage_settle_plan_is_the_storage_plan_run_to_be_settled():
    """The bundled twin differs from ``storage`` only in what settling needs: a target, a limit
    on the repetitions and a budget (the workloads, variants, sizes and minimum are the same)."""
    from ccbench.planning.plan import load_plan

    def shape(plan):
        document = plan.model_dump(exclude={"name", "description", "source", "budget", "time"})
        for part in (document["defaults"], *document["workloads"]):
            assert part.pop("settle") in (None, 0.05) and part.pop("max_repetitions") in (None, 10)
        return document

    fixed, settled = load_plan("storage"), load_plan("storage-settle")
    assert shape(fixed) == shape(settled)
    assert all(w.settle == 0.05 and w.max_repetitions == 10 for w in settled.workloads)
    assert all(w.settle is None for w in fixed.workloads) and fixed.budget is None
    assert settled.budget == 3600 and settled.workloads[0].repetitions == fixed.workloads[0].repetitions == 3


def test_a_case_that_cannot_settle_by_the_limit_leaves_early_and_says_why(run_settle):
    """ext4-loop is disk with 8% noise: at a 1% target no interval of 12 rounds could answer, so it
    leaves the rounds within a few of them, unsettled, and every output names the reason."""
    executor = easy_and_hard(hard_noise=0.08)
    result, messages = run_settle(executor, settle="1%", max_repetitions=12)
    settled = result.outcomes["c"].settled
    hopeless = settled["variants"]["storage=ext4-loop"]
    assert hopeless["stopped_by"] == "cannot settle within the round limit"
    case = hopeless["cases"]["wall_time"]
    assert case["state"] is None and case["stopped_by"] == hopeless["stopped_by"] and 3 <= case["rounds"] < 8
    ran = {value: sum(1 for j in executor.jobs if not j.warmup and j.variant["storage"] == value) for value in VALUES}
    assert ran["ext4-loop"] == ran["disk"] == case["rounds"]  # no round ran after it left
    lines = settle_lines("c", settled)
    assert "c [storage=ext4-loop] against storage=disk: cannot settle within the round limit" in lines
    assert any("ext4-loop] wall_time: cannot settle within the round limit: unsettled" in m for m in messages.lines)


def fio_answer(job):
    """fio's two jobs as scripted measurements: at 4k, tmpfs is 10x faster than disk (settled at
    once); at 1m, the two are the same within 1% noise (a case that needs many rounds at 2%)."""
    from ccbench.model import ExecutionStatus, Measurement
    from ccbench.run.supervise import Attempt

    value = job.variant["storage"]
    rng = np.random.default_rng([7, VALUES.index(value), job.repetition, job.warmup])
    speed = {"4k": 10.0 if value == "tmpfs" else 1.0, "1m": 1.0}
    chosen = job.parts if job.parts is not None else [{"bs": bs, "rw": "randread"} for bs in ("4k", "1m")]
    return Attempt(
        ExecutionStatus.OK,
        measurements=[
            Measurement(
                metric="throughput",
                unit="MB/s",
                better="higher",
                value=100 * speed[part["bs"]] * rng.lognormal(0, 0.01),
                case={"bs": part["bs"], "rw": part["rw"], "direction": "read"},
            )
            for part in chosen
        ],
    )


def test_settle_rounds_run_only_the_parts_whose_cases_are_open(run_settle):
    """fio's jobs are parts of an execution (Workload.selectable): once 4k is settled, every
    execution of a round runs only the 1m job, the baseline's as well as the variant's."""
    workloads = [{"kind": "fio", "name": "f", "blocksizes": ["4k", "1m"], "patterns": ["randread"]}]
    executor = ScriptedExecutor(fio_answer)
    result, _ = run_settle(
        executor,
        plan_extra={"workloads": workloads},
        settle="2%",
        max_repetitions=10,
        variants={"storage": ["disk", "tmpfs"]},
    )
    settled = result.outcomes["f"].settled
    cases = settled["variants"]["storage=tmpfs"]["cases"]
    fast, open_case = (
        cases["throughput bs=4k rw=randread direction=read"],
        cases["throughput bs=1m rw=randread direction=read"],
    )
    assert fast["state"] == "gain" and fast["rounds"] == 3
    assert open_case["rounds"] > 3
    later = [job for job in executor.jobs if not job.warmup and job.repetition >= 3]
    assert later and all(job.parts == [{"bs": "1m", "rw": "randread"}] for job in later)
    assert {job.variant["storage"] for job in later} == {"disk", "tmpfs"}
    first = [job for job in executor.jobs if job.repetition < 3 or job.warmup]
    assert all(job.parts is None for job in first)
    assert settled["settle_rounds"][0] == {
        "round": 3,
        "variants": ["storage=tmpfs"],
        "baseline": True,
        "parts": [{"bs": "1m", "rw": "randread"}],
    }


def test_fio_job_file_holds_only_the_parts_asked_for():
    from ccbench.workloads.fio import FioParams, job_file

    params = FioParams(blocksizes=["4k", "1m"], patterns=["randread", "write"])
    whole = job_file(params, Path("/x"), True)
    assert [line for line in whole.splitlines() if line.startswith("[") and line != "[global]"] == [
        "[4k_randread]",
        "[4k_write]",
        "[1m_randread]",
        "[1m_write]",
    ]
    part = job_file(params, Path("/x"), True, [{"bs": "1m", "rw": "write"}, {"bs": "4k", "rw": "randread"}])
    assert [line for line in part.splitlines() if line.startswith("[") and line != "[global]"] == [
        "[4k_randread]",
        "[1m_write]",
    ]


def test_a_cipher_on_a_loop_file_is_settled_against_its_twin_which_runs_with_it(run_settle, monkeypatch):
    # tmpfs stands in for a cipher on a loop file here (the scripted run mounts nothing): the loop
    # file costs 2x and settles early against the disk; the cipher adds 3% to it, near the target,
    # so it runs on, paired with the loop file, which runs in its rounds although settled itself
    tmpfs_as_cipher(monkeypatch)
    scale = {"disk": 1.0, "ext4-loop": 2.0, "tmpfs": 2.06}

    def answer(job):
        value = job.variant["storage"]
        rng = np.random.default_rng([4, job.repetition, job.warmup])  # a round's drift: every variant alike
        own = np.random.default_rng([5, VALUES.index(value), job.repetition])
        return measured(scale[value] * rng.lognormal(0, 0.05) * own.lognormal(0, 0.01))

    executor = ScriptedExecutor(answer)
    result, _ = run_settle(executor, settle="5%", max_repetitions=8)
    settled = result.outcomes["c"].settled
    cipher, loop = settled["variants"]["storage=tmpfs"], settled["variants"]["storage=ext4-loop"]
    assert cipher["against"] == "storage=ext4-loop" and "against" not in loop
    # the loop file's case is settled (its later rounds, run for the cipher, count too: the interval
    # holds at every look)
    assert loop["cases"]["wall_time"]["state"] == "cost" and loop["stopped_by"] == "settled"
    # against the loop file the cipher's cost is 3%, not the 2.06x it costs against the disk
    assert cipher["cases"]["wall_time"]["estimate"] == pytest.approx(0.03, abs=0.02)
    rounds = rounds_of(executor)
    assert len(rounds) > 3, rounds  # the cipher did not settle at the first look
    # after the first three the loop file's own case (against the disk) is settled: the rounds run
    # the cipher with its twin, and the disk, which no open case is paired with, not at all
    assert all(set(r) == {"ext4-loop", "tmpfs"} for rep, r in rounds.items() if rep >= 3), rounds
    assert all(set(entry["variants"]) == {"storage=ext4-loop", "storage=tmpfs"} for entry in settled["settle_rounds"])
    assert not any(entry["baseline"] for entry in settled["settle_rounds"])
    lines = settle_lines("c", settled)
    assert "c [storage=tmpfs] against storage=ext4-loop: settled" in lines, lines
    assert "c [storage=ext4-loop] against storage=disk: settled" in lines, lines
    assert any(line.startswith("  wall_time: ") for line in lines), lines
    # compare --summary: each variant's line, none per case
    assert settle_lines("c", settled, cases=False) == [line for line in lines if not line.startswith("  ")]
    assert len(settle_lines("c", settled, cases=False)) == 2


def test_settling_by_layer_stops_on_the_headline_and_says_each_layer_as_it_settles(run_settle, tmp_path):
    """By layer: tmpfs (10x slower) settles its headline at the minimum rounds and the run says so at
    once, with the round and the time; ext4-loop (no cost, 1.3% noise) is settled when its mean is
    known to be under the target; the record names the layer's answer, its costliest case and which
    cases are claims (e-BH) and which are "so far"."""
    executor = easy_and_hard()
    result, messages = run_settle(executor, settle="2%", max_repetitions=12, settle_by="layer")
    settled = result.outcomes["c"].settled
    assert settled["by"] == "layer" and (settled["interval"], settled["limit"]) == ("repeated", 12)
    easy = settled["variants"]["storage=tmpfs"]
    assert easy["stopped_by"] == "settled" and easy["layer"]["state"] == "cost"
    # the variants are the test's own directories: layered by what they are (plain, on a disk), not by name
    tmpfs_layer = own_path_layer("tmpfs", tmp_path)
    assert easy["layer"]["costliest"] == "wall_time" and easy["layer"]["title"] == tmpfs_layer
    assert easy["cases"]["wall_time"]["claim"] == "called"
    running = [line for line in messages.lines if line.startswith("settled after round ")]
    assert running[0].startswith("settled after round 3, ") and f": c: {tmpfs_layer}: " in running[0]
    assert "x slower [" in running[0]
    hard = settled["variants"]["storage=ext4-loop"]
    # whatever ended it, its words agree with its state: never a settled line for an open layer
    said = [line for line in messages.lines if "ext4-loop" in line and line.startswith(("settled after", "open after"))]
    assert len(said) == 1 and said[0].startswith("settled after" if hard["layer"]["state"] else "open after")
    lines = settled_block({"c": settled})
    assert any(line.startswith(f"{tmpfs_layer} against storage=disk, in c: cost: ") for line in lines), lines
    assert any(line.startswith("  c: wall_time: called a cost: ") for line in lines), lines
    # the verdict renders the run's settled headline, not a second figure of its own (one judged result)
    from ccbench.analysis.comparison import comparison

    [tmpfs] = [v for v in comparison([result.bundle]).verdicts() if "tmpfs" in v.layer]
    head = easy["layer"]["headline"]
    assert tmpfs.typical == pytest.approx(1 + head["estimate"], rel=1e-6), (tmpfs.words(), head)
    assert (tmpfs.low, tmpfs.high) == pytest.approx((1 + head["low"], 1 + head["high"]), rel=1e-6)
    assert "settled by the run on its paired rounds" in tmpfs.judgement.test_named()


def test_a_layer_cut_by_the_budget_is_said_open_never_settled(run_settle):
    import time

    rng = np.random.default_rng(2)

    def answer(job):
        time.sleep(0.002)
        return measured(rng.lognormal(0, 0.01))

    result, messages = run_settle(
        ScriptedExecutor(answer), plan_extra={"budget": 0.001}, settle="1%", max_repetitions=30, settle_by="layer"
    )
    variants = result.outcomes["c"].settled["variants"]
    opened = [line for line in messages.lines if line.startswith("open after round 3, ")]
    for variant in variants.values():
        if variant["layer"]["state"] is None:
            assert variant["stopped_by"] == "budget"
            assert all(case["claim"] == "so far" for case in variant["cases"].values())
    assert len(opened) == sum(v["layer"]["state"] is None for v in variants.values()) > 0
    assert all(": open, so far " in line for line in opened)
