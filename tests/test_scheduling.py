"""The runner's scheduling, outcomes and resume with an executor of the test's own: no worker
process is started, each execution's end is chosen by the test (tests/test_runner.py drives the
real CLI end to end)."""

import os
import signal
from collections.abc import Callable
from pathlib import Path

import pytest

from ccbench.bundle import read_bundle
from ccbench.model import ExecutionKey, ExecutionStatus, Measurement, WorkerJob
from ccbench.planning.plan import plan_from_dict
from ccbench.run.runner import Interrupted, Reporter, Runner
from ccbench.run.schedule import Order
from ccbench.run.supervise import Attempt


def measured(value: float = 1.0) -> Attempt:
    return Attempt(ExecutionStatus.OK, measurements=[Measurement(metric="wall_time", unit="s", value=value)])


class ScriptedExecutor:
    """Answers each execution in process with what ``answer(job)`` returns; keeps the jobs in order."""

    def __init__(self, answer: Callable[[WorkerJob], Attempt] = lambda job: measured()):
        self.answer = answer
        self.jobs: list[WorkerJob] = []

    def execute(self, job: WorkerJob, raw_dir: Path) -> Attempt:
        self.jobs.append(job)
        return self.answer(job)

    def order(self) -> list[tuple[bool, int, str]]:
        return [(job.warmup, job.repetition, job.variant["storage"]) for job in self.jobs]


class Messages(Reporter):
    def __init__(self):
        self.lines: list[str] = []
        self.total = 0
        #: how far the progress got: executions finished or passed over, as the runner said
        self.position = 0

    def start(self, total: int) -> None:
        self.total = total

    def extend(self, more: int) -> None:
        self.total += more

    def execution_started(self, execution, index: int) -> None:
        self.position = max(self.position, index - 1)

    def reached(self, position: int) -> None:
        self.position = max(self.position, position)

    def message(self, text: str) -> None:
        self.lines.append(text)

    def execution_finished(self, execution, status: str, detail: str = "") -> None:
        self.lines.append(f"{execution.key}: {status} {detail}")
        self.position += 1


@pytest.fixture
def run_plan(tmp_path, monkeypatch):
    """run_plan(executor, **workload) -> (RunResult, Messages): one command workload (variants disk
    and tmpfs in directories of the test's own, so nothing is mounted) through a Runner, in fixed
    order unless ``order="random"``."""
    import ccbench.probe.syscheck

    # the system check samples the machine for half a second; it is not what these tests are about
    monkeypatch.setattr(ccbench.probe.syscheck, "system_check", lambda **options: [])
    paths = {}
    for value in ("disk", "tmpfs"):
        paths[value] = str(tmp_path / f"dir-{value}")
        Path(paths[value]).mkdir()

    def run(executor, resume: Path | None = None, order: str = "fixed", **workload) -> tuple:
        document = {
            "name": "scripted",
            "defaults": {"repetitions": 2, "warmup": 0, "cooldown": 0, "variants": {"storage": ["disk", "tmpfs"]}},
            "workloads": [{"kind": "command", "name": "c", "command": "true", **workload}],
        }
        messages = Messages()
        runner = Runner(
            plan_from_dict(document, "test"),
            out=tmp_path / "out",
            workdir=tmp_path / "work",
            storage_paths=paths,
            reporter=messages,
            environment={},
            executor=executor,
            resume=resume,
            order=Order(order),
        )
        return runner.run(), messages

    return run


def test_warmups_come_first_then_the_variants_interleaved(run_plan):
    executor = ScriptedExecutor()
    result, _ = run_plan(executor, warmup=1, repetitions=2)
    assert executor.order() == [
        (True, 0, "disk"),
        (True, 0, "tmpfs"),
        (False, 0, "disk"),
        (False, 0, "tmpfs"),
        (False, 1, "disk"),
        (False, 1, "tmpfs"),
    ]
    assert [s.warmup for s in result.samples] == [True, True, False, False, False, False]
    assert result.outcomes["c"].status.value == "ok" and result.outcomes["c"].executions_ok == 6
    assert read_bundle(result.bundle).manifest["status"] == "complete"


def test_each_execution_works_in_its_variant_directory(run_plan, tmp_path):
    executor = ScriptedExecutor()
    run_plan(executor, repetitions=1)
    # a directory of its own inside the one given for the variant
    assert [Path(job.workdir).parent.name for job in executor.jobs] == ["dir-disk", "dir-tmpfs"]


def test_failures_and_timeouts_make_a_partial_outcome_with_their_reasons(run_plan):
    def answer(job):
        if job.repetition == 1 and job.variant["storage"] == "disk":
            return Attempt(ExecutionStatus.FAILED, "went wrong", output_tail="last words")
        if job.repetition == 2 and job.variant["storage"] == "disk":
            return Attempt(ExecutionStatus.TIMEOUT, "timed out after 1 s")
        return measured()

    result, _ = run_plan(ScriptedExecutor(answer), repetitions=3)
    outcome = result.outcomes["c"]
    assert outcome.status.value == "partial" and (outcome.executions_ok, outcome.executions_failed) == (4, 2)
    records = {r["key"]: r for r in read_bundle(result.bundle).executions}
    assert records["c|storage=disk|rep|1"]["status"] == "failed"
    assert records["c|storage=disk|rep|1"]["error"] == "went wrong"
    assert records["c|storage=disk|rep|1"]["stderr_tail"] == "last words"
    assert records["c|storage=disk|rep|2"]["status"] == "timeout"
    assert result.failed and read_bundle(result.bundle).manifest["status"] == "failed"


def test_a_failure_that_would_repeat_skips_only_its_own_variant_combination(run_plan):
    def answer(job):
        if job.variant["storage"] == "disk":
            return Attempt(ExecutionStatus.FAILED, "cell 3 raised KeyError", repeats=True)
        return measured()

    executor = ScriptedExecutor(answer)
    result, messages = run_plan(executor, warmup=1, repetitions=3)
    # the disk warmup failed for good: no disk repetition ran, every tmpfs one did
    assert executor.order() == [(True, 0, "disk"), (True, 0, "tmpfs")] + [(False, n, "tmpfs") for n in range(3)]
    outcome = result.outcomes["c"]
    assert (outcome.executions_ok, outcome.executions_failed, outcome.executions_skipped) == (4, 1, 3)
    assert outcome.status.value == "partial"
    assert outcome.repeating_failures == {"storage=disk": "cell 3 raised KeyError"}
    manifest = read_bundle(result.bundle).manifest
    assert manifest["outcomes"]["c"]["executions_skipped"] == 3
    said = [line for line in messages.lines if "remaining executions" in line]
    assert said == [
        "c [storage=disk]: this failure would repeat; the remaining executions of this variant combination are skipped"
    ]


def test_the_progress_reaches_its_total_when_the_last_executions_are_skipped(run_plan):
    def answer(job):
        if job.variant["storage"] == "tmpfs":  # the last variant in each round: the plan ends with skips
            return Attempt(ExecutionStatus.FAILED, "cell 3 raised KeyError", repeats=True)
        return measured()

    executor = ScriptedExecutor(answer)
    result, messages = run_plan(executor, warmup=1, repetitions=3)
    assert result.outcomes["c"].executions_skipped == 3
    assert executor.order()[-1] == (False, 2, "disk")
    assert messages.position == messages.total == 8


def test_precision_rounds_stop_when_every_combination_fails_for_good(run_plan):
    executor = ScriptedExecutor(lambda job: Attempt(ExecutionStatus.FAILED, "no such tool", repeats=True))
    result, _ = run_plan(executor, repetitions=2, precision="1%", max_repetitions=10)
    assert len(executor.jobs) == 2
    assert result.outcomes["c"].executions_skipped == 2 and result.outcomes["c"].status.value == "failed"


def test_precision_rounds_run_until_the_interval_is_narrow_or_the_limit(run_plan):
    steady = ScriptedExecutor()
    result, _ = run_plan(steady, repetitions=3, precision="5%", max_repetitions=8)
    assert result.outcomes["c"].precision["stopped_by"] != "max repetitions"
    noisy = ScriptedExecutor(lambda job: measured(1.0 if len(noisy.jobs) % 4 < 2 else 9.0))
    result, _ = run_plan(noisy, repetitions=3, precision="1%", max_repetitions=5)
    assert len(noisy.jobs) == 2 * 5
    assert result.outcomes["c"].precision["stopped_by"] == "max repetitions"


def test_precision_follows_the_declared_primary_metric_not_the_first_reported(run_plan):
    """A command's primary metric is its wall time; a noisy figure reported before it (a start-up
    time) must not keep the rounds going."""

    def answer(job):
        startup = 1.0 if len(executor.jobs) % 4 < 2 else 9.0
        return Attempt(
            ExecutionStatus.OK,
            measurements=[
                Measurement(metric="startup_s", unit="s", value=startup),
                Measurement(metric="wall_time", unit="s", value=2.0),
            ],
        )

    executor = ScriptedExecutor(answer)
    result, _ = run_plan(executor, repetitions=3, precision="5%", max_repetitions=6)
    assert len(executor.jobs) < 2 * 6
    assert result.outcomes["c"].precision["stopped_by"] != "max repetitions"


@pytest.mark.parametrize("at_start", [signal.SIG_DFL, signal.SIG_IGN])
def test_a_hang_up_stops_the_run_like_ctrl_c_unless_the_run_was_started_ignoring_it(run_plan, at_start):
    """SIGHUP (the terminal or SSH session went away) stops a run cleanly, as SIGINT and SIGTERM do;
    a run started ignoring it (nohup) was asked to outlive its session and keeps going."""

    def answer(job):
        if len(executor.jobs) == 2:
            os.kill(os.getpid(), signal.SIGHUP)  # arrives between executions, in the runner
        return measured()

    executor = ScriptedExecutor(answer)
    before = signal.signal(signal.SIGHUP, at_start)
    try:
        result, messages = run_plan(executor, repetitions=3)
        assert signal.getsignal(signal.SIGHUP) == at_start
    finally:
        signal.signal(signal.SIGHUP, before)
    if at_start == signal.SIG_IGN:
        assert not result.interrupted and len(executor.jobs) == 6
        return
    assert result.interrupted and result.stopped_by == signal.SIGHUP
    assert result.outcomes["c"].status.value == "interrupted" and len(executor.jobs) == 2
    assert any(line.startswith("SIGHUP: stopped") for line in messages.lines), messages.lines
    assert read_bundle(result.bundle).manifest["status"] == "interrupted"


def test_an_interrupted_execution_is_recorded_and_resume_runs_only_what_is_missing(run_plan):
    def answer(job):
        if len(first.jobs) == 3:
            return Attempt(ExecutionStatus.INTERRUPTED, "interrupted by a signal", interruption=Interrupted(2))
        return measured()

    first = ScriptedExecutor(answer)

    # whatever the test process was started with (a background job ignores SIGINT, nohup SIGHUP), the
    # run must put back what it found: three different dispositions, set here, are the ones to find
    def mine(signum, frame):
        raise AssertionError("not to be called")

    found = {signal.SIGINT: signal.SIG_IGN, signal.SIGTERM: mine, signal.SIGHUP: signal.SIG_DFL}
    before = {sig: signal.signal(sig, disposition) for sig, disposition in found.items()}
    try:
        result, _ = run_plan(first, repetitions=3)
        now = {sig: signal.getsignal(sig) for sig in found}
    finally:
        for sig, disposition in before.items():
            signal.signal(sig, disposition)
    assert result.interrupted and result.outcomes["c"].status.value == "interrupted"
    records = read_bundle(result.bundle).executions
    assert [r["status"] for r in records] == ["ok", "ok", "interrupted"]
    # the handlers the run installed are gone again
    assert now == found

    second = ScriptedExecutor()
    resumed, _ = run_plan(second, resume=result.bundle, repetitions=3)
    assert second.order() == [(False, 1, "disk"), (False, 1, "tmpfs"), (False, 2, "disk"), (False, 2, "tmpfs")]
    data = read_bundle(result.bundle)
    assert sorted((s["repetition"], s["variant"]["storage"]) for s in data.samples) == [
        (n, v) for n in range(3) for v in ("disk", "tmpfs")
    ]
    assert data.manifest["status"] == "complete" and not resumed.interrupted


def test_a_resumed_run_does_not_try_again_what_failed_for_good(run_plan):
    def answer(job):
        if job.variant["storage"] == "disk":
            return Attempt(ExecutionStatus.FAILED, "no such tool", repeats=True)
        if len(first.jobs) == 4:
            return Attempt(ExecutionStatus.INTERRUPTED, "interrupted by a signal", interruption=Interrupted(15))
        return measured()

    first = ScriptedExecutor(answer)
    result, _ = run_plan(first, repetitions=3)
    assert result.interrupted
    second = ScriptedExecutor()
    resumed, _ = run_plan(second, resume=result.bundle, repetitions=3)
    assert second.order() == [(False, 2, "tmpfs")]
    assert resumed.outcomes["c"].repeating_failures == {"storage=disk": "no such tool"}


def test_the_execution_key_is_typed():
    key = ExecutionKey("c", "storage=disk,transport=tls", True, 4)
    assert str(key) == "c|storage=disk,transport=tls|warmup|4"
    assert ExecutionKey.parse(str(key)) == key
    assert ExecutionKey.parse("c|-|rep|0") == ExecutionKey("c", "-", False, 0)


def test_random_order_draws_each_round_from_the_seed_kept_in_the_manifest(run_plan):
    executor = ScriptedExecutor()
    result, _ = run_plan(executor, order="random", repetitions=12)
    seed = result.manifest["order"]["seed"]
    assert result.manifest["order"]["mode"] == "random" and isinstance(seed, int)
    rounds = [executor.order()[i : i + 2] for i in range(0, 24, 2)]
    # every round runs each variant once, and the rounds do not all keep one order
    assert all(sorted(v for _, _, v in r) == ["disk", "tmpfs"] for r in rounds)
    firsts = {r[0][2] for r in rounds}
    assert firsts == {"disk", "tmpfs"}
    # the same seed, the same schedule
    from ccbench.planning.plan import plan_from_dict
    from ccbench.run.schedule import schedule

    spec = plan_from_dict(
        {
            "workloads": [
                {
                    "kind": "command",
                    "name": "c",
                    "command": "true",
                    "repetitions": 12,
                    "variants": {"storage": ["disk", "tmpfs"]},
                }
            ]
        },
        "t",
    ).workloads[0]
    assert [e.combo["storage"] for e in schedule(spec, seed)] == [v for _, _, v in executor.order()]


def test_a_resumed_random_run_keeps_its_seed(run_plan):
    def answer(job):
        if len(first.jobs) == 6:
            return Attempt(ExecutionStatus.INTERRUPTED, "interrupted by a signal", interruption=Interrupted(2))
        return measured()

    first = ScriptedExecutor(answer)
    result, _ = run_plan(first, order="random", repetitions=6)
    assert result.interrupted
    seed = read_bundle(result.bundle, samples=False).manifest["order"]["seed"]
    second = ScriptedExecutor()
    resumed, _ = run_plan(second, resume=result.bundle, order="fixed", repetitions=6)
    assert resumed.manifest["order"] == {"mode": "random", "seed": seed}
    assert first.order()[:5] + second.order() == [
        (False, e.repetition, e.combo["storage"]) for e in _schedule_of(6, seed)
    ]


def _schedule_of(repetitions, seed):
    from ccbench.run.schedule import schedule

    spec = plan_from_dict(
        {
            "defaults": {"warmup": 0},
            "workloads": [
                {
                    "kind": "command",
                    "name": "c",
                    "command": "true",
                    "repetitions": repetitions,
                    "variants": {"storage": ["disk", "tmpfs"]},
                }
            ],
        },
        "t",
    ).workloads[0]
    return schedule(spec, seed)
