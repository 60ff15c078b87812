"""Scheduling: repetitions, warmups, interleaved variants, cooldowns, timeouts, signals, resume.

A run takes each workload of the plan through the same phases, one method each in Runner:

1. admit      skip it, with the reason, when the plan or the machine cannot run it
2. set up     each variant value once (a mount serves all its repetitions)
3. prepare    the workload once per variant combination (not timed)
4. execute    the schedule: warmups, then repetitions with the variants interleaved; with a
              precision target, more interleaved rounds until the interval is narrow enough
5. clean up   the workload's preparations, then tear the variants down, whatever happened before

Before the first workload, a system check (governor, boost, swap, THP, busy processes) is printed
and kept in the manifest. Each execution is watched by ccbench.interference over exactly its
worker's lifetime; one run on a busy machine is flagged ``contended`` on its record and samples.

Every execution runs in a worker process (ccbench.worker) in its own session; a timeout ends its
whole process tree. Each execution's samples are appended and fsynced to the bundle before the
next execution starts, so nothing measured is lost to a crash, a kill or Ctrl-C.
"""

from __future__ import annotations

import fcntl
import itertools
import os
import select
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from ccbench.bundle import RAW, BundleWriter, read_bundle
from ccbench.errors import CCBenchError
from ccbench.model import (
    ExecutionRecord,
    ExecutionStatus,
    Measurement,
    OutcomeStatus,
    Sample,
    WorkerJob,
    WorkerResult,
    utc_now_iso,
)
from ccbench.plan import Plan, WorkloadSpec
from ccbench.variants import AXES
from ccbench.variants.base import PreparedVariant
from ccbench.workloads import workload_class
from ccbench.workloads.base import PrepareContext, Workload, tail

#: grace period between SIGTERM and SIGKILL when ending a timed-out execution
KILL_GRACE_S = 3.0
#: execution statuses that count as done when a run is resumed
DONE_STATUSES = (ExecutionStatus.OK, ExecutionStatus.FAILED, ExecutionStatus.TIMEOUT)


class Interrupted(BaseException):
    """Raised in the runner when SIGINT or SIGTERM arrives. A BaseException, like
    KeyboardInterrupt, so that the ``except Exception`` around best-effort steps (a prepare, the
    interference monitor, the system check) cannot swallow it."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _path_part(text: str) -> str:
    return text.replace("=", "-").replace(",", "_").replace(":", "-")


@dataclass
class Execution:
    spec: WorkloadSpec
    combo: dict[str, str]
    repetition: int
    warmup: bool

    @property
    def variant_key(self) -> str:
        return ",".join(f"{axis}={value}" for axis, value in sorted(self.combo.items())) or "-"

    @property
    def key(self) -> str:
        return f"{self.spec.name}|{self.variant_key}|{'warmup' if self.warmup else 'rep'}|{self.repetition}"

    @property
    def raw_subdir(self) -> str:
        """Its raw directory relative to the bundle's raw/."""
        return f"{self.spec.name}/{_path_part(self.variant_key)}/{'warmup' if self.warmup else 'rep'}-{self.repetition}"

    @property
    def raw_path(self) -> str:
        """Its raw directory relative to the bundle (what samples record)."""
        return f"{RAW}/{self.raw_subdir}"


def variant_combinations(spec: WorkloadSpec) -> list[dict[str, str]]:
    axes = sorted(spec.variants)
    return [dict(zip(axes, values)) for values in itertools.product(*(spec.variants[a] for a in axes))] or [{}]


def schedule(spec: WorkloadSpec) -> list[Execution]:
    """Warmups first (one round per variant), then repetitions, variants interleaved A B C A B C."""
    combos = variant_combinations(spec)
    plan = []
    for index in range(spec.warmup):
        plan.extend(Execution(spec, combo, index, True) for combo in combos)
    for index in range(spec.repetitions):
        plan.extend(Execution(spec, combo, index, False) for combo in combos)
    return plan


@dataclass
class Outcome:
    status: OutcomeStatus = OutcomeStatus.PENDING
    reason: str | None = None
    executions_ok: int = 0
    executions_failed: int = 0
    #: executions not run because an earlier one of their variant combination failed for good
    executions_skipped: int = 0
    skipped_variants: dict[str, str] = field(default_factory=dict)
    #: variant key -> the failure that would repeat (workloads.base.RepeatingFailure)
    repeating_failures: dict[str, str] = field(default_factory=dict)
    #: with a precision target: why the workload stopped repeating (ccbench.analysis.precision.Decision)
    precision: dict[str, Any] | None = None

    @classmethod
    def from_dict(cls, document: dict[str, Any]) -> Outcome:
        known = {k: v for k, v in document.items() if k in cls.__dataclass_fields__}
        known["status"] = OutcomeStatus(known.get("status", "pending"))
        return cls(**known)

    def as_dict(self) -> dict[str, Any]:
        document = {
            "status": self.status.value,
            "executions_ok": self.executions_ok,
            "executions_failed": self.executions_failed,
        }
        if self.reason:
            document["reason"] = self.reason
        if self.executions_skipped:
            document["executions_skipped"] = self.executions_skipped
        if self.skipped_variants:
            document["skipped_variants"] = self.skipped_variants
        if self.repeating_failures:
            document["repeating_failures"] = self.repeating_failures
        if self.precision:
            document["precision"] = self.precision
        return document

    def skip(self, reason: str) -> None:
        self.status, self.reason = OutcomeStatus.SKIPPED, reason

    def count(self, status: ExecutionStatus) -> None:
        if status == ExecutionStatus.OK:
            self.executions_ok += 1
        else:
            self.executions_failed += 1

    def settle(self) -> None:
        """The workload's status once its executions are done."""
        if self.executions_failed and self.executions_ok:
            self.status = OutcomeStatus.PARTIAL
        elif self.executions_failed:
            self.status = OutcomeStatus.FAILED
        else:
            self.status = OutcomeStatus.OK


class Reporter:
    """What the runner tells the user as it goes (the CLI plugs in a rich progress bar)."""

    def start(self, total: int) -> None: ...
    def execution_started(self, execution: Execution, index: int) -> None: ...
    def execution_finished(self, execution: Execution, status: str, detail: str = "") -> None: ...
    def extend(self, more: int) -> None: ...
    def message(self, text: str) -> None: ...
    def cooldown(self, seconds: float) -> None: ...
    def stop(self) -> None: ...


@dataclass
class RunResult:
    bundle: Path
    outcomes: dict[str, Outcome]
    interrupted: bool
    samples: list[Sample]
    #: the execution records written by this invocation
    executions: list[ExecutionRecord] = field(default_factory=list)
    #: the manifest as written at the end
    manifest: dict[str, Any] = field(default_factory=dict)

    @property
    def failed(self) -> bool:
        return any(o.executions_failed or o.status == OutcomeStatus.FAILED for o in self.outcomes.values())


class WorkdirLock:
    """One run per work directory: cleaning up a killed run's mounts must not touch a live run's."""

    def __init__(self, workdir: Path):
        self.path = workdir / ".lock"
        self.handle = None

    def __enter__(self):
        self.handle = open(self.path, "w")
        try:
            fcntl.flock(self.handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self.handle.close()
            raise CCBenchError(
                f"another ccbench run is using the work directory {self.path.parent}; wait for it or pass a different --workdir"
            ) from None
        self.handle.write(str(os.getpid()))
        self.handle.flush()
        return self

    def __exit__(self, *exc):
        if self.handle:
            fcntl.flock(self.handle, fcntl.LOCK_UN)
            self.handle.close()


def prepare_workdir(workdir: Path) -> Path:
    try:
        workdir.mkdir(parents=True, exist_ok=True)
        probe_file = workdir / ".write-test"
        probe_file.write_text("")
        probe_file.unlink()
    except OSError as exc:
        raise CCBenchError(f"work directory {workdir} is not writable ({exc.strerror}); pass --workdir DIR") from None
    return workdir.resolve()


def cleanup_stale(workdir: Path) -> list[str]:
    """Undo what a killed earlier run left behind under workdir: the microservices workload's servers
    (first: their data may sit in a storage variant's directory), mounts, loop devices and keys, and
    emulated hosts (network namespaces, bridges, veths) whose owner is gone. Callers hold the
    workdir lock, so nothing here belongs to a live run."""
    from ccbench import topology
    from ccbench.variants import storage

    removed: list[str] = []
    if (Path(workdir) / "microservices").is_dir():
        from ccbench.workloads.microservices import cleanup_stale as stop_microservice_chains

        removed += stop_microservice_chains(workdir)
    removed += storage.cleanup_stale(workdir)
    removed += topology.cleanup_stale(workdir)
    return removed


def _wait(process: subprocess.Popen, timeout: float | None) -> int:
    """Wait for the worker to end, waking the moment it does. Popen.wait(timeout) polls with sleeps of
    up to 50 ms, which stretched every execution; a pidfd (Linux 5.3+) becomes readable when the
    process ends. Raises subprocess.TimeoutExpired like Popen.wait."""
    try:
        fd = os.pidfd_open(process.pid)
    except (AttributeError, OSError):
        return process.wait(timeout=timeout)
    try:
        ready, _, _ = select.select([fd], [], [], timeout)
    finally:
        os.close(fd)
    if not ready:
        raise subprocess.TimeoutExpired(process.args, timeout)
    return process.wait()


def _kill_tree(process: subprocess.Popen) -> None:
    """End the worker's process group and every descendant (some tools start their own session)."""
    try:
        descendants = psutil.Process(process.pid).children(recursive=True)
    except psutil.Error:
        descendants = []
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(process.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass
        for child in descendants:
            try:
                child.send_signal(sig)
            except psutil.Error:
                pass
        try:
            process.wait(timeout=KILL_GRACE_S if sig == signal.SIGTERM else 10)
            alive = [c for c in descendants if c.is_running() and c.status() != psutil.STATUS_ZOMBIE]
            if not alive:
                return
        except subprocess.TimeoutExpired:
            continue
        except psutil.Error:
            return


@dataclass
class WorkloadRun:
    """One workload on its way through the phases: what was set up for it, and what it holds."""

    spec: WorkloadSpec
    outcome: Outcome
    executions: list[Execution]
    workload: Workload | None = None
    #: (axis, value) -> the variant set up for it
    variants: dict[tuple[str, str], PreparedVariant] = field(default_factory=dict)
    #: variant key -> the context the workload was prepared in
    contexts: dict[str, PrepareContext] = field(default_factory=dict)
    #: the contexts whose prepare ran (each is cleaned up)
    prepared: list[PrepareContext] = field(default_factory=list)

    def stopped(self, execution: Execution) -> bool:
        """Whether an earlier execution of its variant combination failed in a way that repeats."""
        return execution.variant_key in self.outcome.repeating_failures

    def all_stopped(self) -> bool:
        return all(e.variant_key in self.outcome.repeating_failures for e in self.executions)

    def combinations(self) -> list[dict[str, str]]:
        """The variant combinations left to run, in schedule order."""
        seen: dict[str, dict[str, str]] = {}
        for execution in self.executions:
            seen.setdefault(execution.variant_key, execution.combo)
        return list(seen.values())

    def runnable(self) -> list[Execution]:
        """The executions whose every variant value was set up."""
        return [e for e in self.executions if all((a, v) in self.variants for a, v in e.combo.items())]


class Runner:
    def __init__(
        self,
        plan: Plan,
        *,
        out: Path,
        workdir: Path,
        pin: list[int] | None = None,
        storage_paths: dict[str, str] | None = None,
        reporter: Reporter | None = None,
        environment: dict[str, Any] | None = None,
        command_line: list[str] | None = None,
        resume: Path | None = None,
    ):
        self.plan = plan
        # absolute: workers run in the workload's directory, not in the user's
        self.out = Path(os.path.abspath(out))
        self.workdir = Path(os.path.abspath(workdir))
        self.pin = pin
        self.storage_paths = storage_paths or {}
        self.reporter = reporter or Reporter()
        self.environment = environment
        self.command_line = command_line or sys.argv
        self.resume = resume
        self.samples: list[Sample] = []
        self.records: list[ExecutionRecord] = []
        # set for the duration of run()
        self._writer: BundleWriter | None = None
        self._done: set[str] = set()
        #: samples a resumed bundle already holds (the precision rule counts them)
        self._earlier: list[Sample] = []
        self._positions = itertools.count(1)
        self._thresholds = None

    # --- signals -------------------------------------------------------------------------------
    def _install_signals(self):
        previous = {}

        def handler(signum, frame):
            raise Interrupted(signum)

        for sig in (signal.SIGINT, signal.SIGTERM):
            previous[sig] = signal.signal(sig, handler)
        return previous

    @staticmethod
    def _restore_signals(previous) -> None:
        for sig, old in previous.items():
            signal.signal(sig, old)

    def _shield(self):
        """Block SIGINT/SIGTERM while cleaning up, so a second Ctrl-C cannot leave a mount behind."""
        return signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})

    # --- the run -------------------------------------------------------------------------------
    def run(self) -> RunResult:
        workdir = prepare_workdir(self.workdir)
        self.workdir = workdir
        with WorkdirLock(workdir):
            for removed in cleanup_stale(workdir):
                self.reporter.message(f"cleaned up after an earlier run: {removed}")
            return self._run_locked()

    def _open_bundle(self) -> BundleWriter:
        if self.resume:
            writer = BundleWriter.reopen(self.resume)
            self._done = {
                record["key"]
                for record in read_bundle(self.resume, samples=False).executions
                if record.get("status") in DONE_STATUSES and "key" in record
            }
            writer.manifest.setdefault("resumed_at", []).append(utc_now_iso())
            writer.manifest["status"] = "running"
            if any(spec.precision for spec in self.plan.workloads):
                self._earlier = [Sample(**record) for record in read_bundle(self.resume).samples]
            return writer
        if self.environment is None:
            from ccbench.probe import probe

            self.environment = probe(bench_dir=self.workdir)
        manifest = {
            "system_check": self._system_check(),
            "plan": self.plan.model_dump(mode="json"),
            "environment": self.environment,
            "command_line": self.command_line,
            "workdir": str(self.workdir),
            "pin": self.pin,
            "started_at": utc_now_iso(),
            "ended_at": None,
            "status": "running",
            "outcomes": {},
        }
        return BundleWriter.create(self.out, manifest)

    def _system_check(self) -> list[dict[str, Any]]:
        """The before-run check, printed and kept in the manifest; nothing is changed. The TLS
        library's AES check (3 s) runs only for plans that measure a transport."""
        from ccbench.probe.syscheck import format_checks, system_check

        transport = any("transport" in spec.variants or spec.kind == "transport" for spec in self.plan.workloads)
        try:
            checks = system_check(aes=transport)
        except Exception as exc:  # a check that cannot run must not stop the benchmark
            return [{"name": "system check", "value": f"failed: {type(exc).__name__}: {exc}", "ok": None, "advice": ""}]
        self.reporter.message("system check (nothing is changed; see the advice):\n" + format_checks(checks))
        return checks

    def _run_locked(self) -> RunResult:
        from ccbench.interference import Thresholds

        self._thresholds = Thresholds.from_mapping(self.plan.contention)
        writer = self._writer = self._open_bundle()
        self.environment = writer.manifest.get("environment", {})
        outcomes = {spec.name: Outcome() for spec in self.plan.workloads}
        for name, previous in writer.manifest.get("outcomes", {}).items():
            if name in outcomes and previous.get("status") in ("ok", "skipped"):
                outcomes[name] = Outcome.from_dict(previous)
        total = sum(len(schedule(spec)) for spec in self.plan.workloads if not spec.skip_reason)
        previous_handlers = self._install_signals()
        interrupted = False
        self.reporter.start(total)
        try:
            for spec in self.plan.workloads:
                outcome = outcomes[spec.name]
                if self.resume and outcome.status in (OutcomeStatus.OK, OutcomeStatus.SKIPPED):
                    self._pass_over(len(schedule(spec)))
                    continue
                self._run_workload(spec, outcome)
                writer.manifest["outcomes"][spec.name] = outcome.as_dict()
                writer.write_manifest()
        except Interrupted as exc:
            interrupted = True
            self.reporter.message(f"{exc}: stopped; everything measured so far is in {writer.path}")
            for spec in self.plan.workloads:
                if outcomes[spec.name].status in (OutcomeStatus.PENDING, OutcomeStatus.RUNNING):
                    outcomes[spec.name].status = OutcomeStatus.INTERRUPTED
                writer.manifest["outcomes"][spec.name] = outcomes[spec.name].as_dict()
        finally:
            self.reporter.stop()
            self._restore_signals(previous_handlers)
            writer.manifest["ended_at"] = utc_now_iso()
            if interrupted:
                writer.manifest["status"] = "interrupted"
            else:
                failed = any(o.executions_failed or o.status == OutcomeStatus.FAILED for o in outcomes.values())
                writer.manifest["status"] = "failed" if failed else "complete"
            writer.write_manifest()
            writer.close()
            self._attest(writer.path)
        return RunResult(
            bundle=writer.path,
            outcomes=outcomes,
            interrupted=interrupted,
            samples=self.samples,
            executions=self.records,
            manifest=writer.manifest,
        )

    def _attest(self, bundle: Path) -> None:
        """Every bundle ends with its digest list (attestation.json) and, where the machine has
        configfs-tsm, TEE evidence over it; otherwise it says `unattested` and why. A failure here
        is reported and never costs the run its measurements."""
        from ccbench.attestation import finish_bundle

        try:
            document = finish_bundle(bundle)
        except (OSError, CCBenchError) as exc:
            self.reporter.message(f"attestation: the digest list could not be written: {exc}")
            return
        if document["status"] == "attested":
            self.reporter.message(
                f"attested: {document['evidence']['technology']} evidence over "
                f"{len(document['files'])} files ('ccbench verify {bundle}')"
            )

    def _pass_over(self, count: int) -> None:
        """Advance the progress position past executions that will not run."""
        for _ in range(count):
            next(self._positions)

    # --- one workload, phase by phase ------------------------------------------------------------
    def _run_workload(self, spec: WorkloadSpec, outcome: Outcome) -> None:
        """Admit the workload, set up its variants, prepare it on each, execute its schedule; then
        clean up and tear down, on success, failure and interruption alike."""
        job = WorkloadRun(spec, outcome, schedule(spec))
        if not self._admit(job):
            return
        outcome.status = OutcomeStatus.RUNNING
        try:
            if self._set_up_variants(job) and self._prepare(job):
                started = time.monotonic()
                self._execute_schedule(job)
                if spec.precision is not None:
                    self._repeat_for_precision(job, started)
                outcome.settle()
        finally:
            self._clean_up(job)

    def _admit(self, job: WorkloadRun) -> bool:
        """Phase 1: whether the workload can run here; a skip is recorded with its reason."""
        spec = job.spec
        reason = spec.skip_reason
        if reason is None:
            cls = workload_class(spec.kind)
            job.workload = cls(spec.name, cls.Params(**spec.params))
            reason = job.workload.requirements()
            if reason:
                self._pass_over(len(job.executions))
        if reason:
            job.outcome.skip(reason)
            self.reporter.message(f"{spec.name}: skipped: {reason}")
            return False
        return True

    def _axis_options(self, axis: str):
        axis_impl = AXES[axis]
        options_doc = dict(self.plan.axis_options.get(axis, {}))
        if axis == "storage" and self.storage_paths and "paths" in axis_impl.Options.model_fields:
            options_doc["paths"] = {**options_doc.get("paths", {}), **self.storage_paths}
        return axis_impl.Options(**options_doc)

    def _set_up_variants(self, job: WorkloadRun) -> bool:
        """Phase 2: set up each variant value once; a value that cannot be set up is skipped with
        the reason. False when no execution is left to run."""
        spec, outcome = job.spec, job.outcome
        for axis, values in sorted(spec.variants.items()):
            axis_impl, options = AXES[axis], self._axis_options(axis)
            for value in values:
                reason = axis_impl.skip_reason(value, options)
                if reason is None:
                    try:
                        job.variants[(axis, value)] = axis_impl.setup(value, self.workdir, options)
                        continue
                    except CCBenchError as exc:
                        reason = f"could not be set up: {exc}"
                else:
                    reason = f"skipped: {reason}"
                outcome.skipped_variants[f"{axis}={value}"] = reason.split(": ", 1)[1]
                self.reporter.message(f"{spec.name}: variant {axis}={value} {reason}")
        runnable = job.runnable()
        self._pass_over(len(job.executions) - len(runnable))
        job.executions = runnable
        if not runnable:
            outcome.skip(
                "no variant could be set up: " + "; ".join(f"{k}: {v}" for k, v in outcome.skipped_variants.items())
            )
            return False
        return True

    def _prepare(self, job: WorkloadRun) -> bool:
        """Phase 3: prepare the workload once per variant combination. A failing prepare fails
        this workload (not the run)."""
        spec, outcome = job.spec, job.outcome
        for execution in job.executions:
            if execution.variant_key in job.contexts:
                continue
            ctx = self._prepare_context(job, execution)
            job.contexts[execution.variant_key] = ctx
            self.reporter.message(f"{spec.name}: preparing {execution.variant_key}")
            try:
                job.workload.prepare(ctx)
                job.prepared.append(ctx)
            except Exception as exc:  # a broken prepare fails this workload, not the run
                outcome.status, outcome.reason = OutcomeStatus.FAILED, f"prepare failed: {type(exc).__name__}: {exc}"
                outcome.executions_failed += 1
                self.reporter.message(f"{spec.name}: {outcome.reason}")
                return False
        return True

    def _execute_schedule(self, job: WorkloadRun) -> None:
        """Phase 4: run the executions in order (cooldown between them), skipping those a resumed
        run already recorded."""
        first = True
        for execution in job.executions:
            index = next(self._positions)
            if execution.key in self._done:
                continue
            if job.stopped(execution):
                job.outcome.executions_skipped += 1
                continue
            if not first:
                self._cool_down(job)
            first = False
            self.reporter.execution_started(execution, index)
            job.outcome.count(self._execute(job, execution))

    def _cool_down(self, job: WorkloadRun) -> None:
        if job.spec.cooldown > 0:
            self.reporter.cooldown(job.spec.cooldown)
            time.sleep(job.spec.cooldown)

    def _repeat_for_precision(self, job: WorkloadRun, started: float) -> None:
        """Phase 4, with a precision target: after the repetitions, more interleaved rounds (every
        variant once) until the primary metric's 95% interval is within the target, or
        max_repetitions or max_time is reached (ccbench.analysis.precision); why it stopped goes
        into the outcome."""
        from ccbench.analysis.precision import DEFAULT_MAX_REPETITIONS, PrecisionRule, decide

        spec = job.spec
        rule = PrecisionRule(
            spec.precision,
            min_repetitions=spec.repetitions,
            max_repetitions=spec.max_repetitions or max(DEFAULT_MAX_REPETITIONS, spec.repetitions),
            max_time_s=spec.max_time,
        )
        combos = job.combinations()
        repetition, round_s = spec.repetitions, None
        decision = decide(self._primary_values(job, combos), rule, elapsed_s=time.monotonic() - started)
        # the bound on rounds holds even when failed executions leave the rule short of values
        # a round of combinations that all fail for good would only count skips
        while decision.more and repetition < rule.max_repetitions and not job.all_stopped():
            round_started = time.monotonic()
            self.reporter.extend(len(combos))
            for combo in combos:
                execution = Execution(spec, combo, repetition, False)
                index = next(self._positions)
                if execution.key in self._done:
                    continue
                if job.stopped(execution):
                    job.outcome.executions_skipped += 1
                    continue
                self._cool_down(job)
                self.reporter.execution_started(execution, index)
                job.outcome.count(self._execute(job, execution))
            repetition += 1
            round_s = time.monotonic() - round_started
            decision = decide(
                self._primary_values(job, combos),
                rule,
                elapsed_s=time.monotonic() - started,
                round_s=round_s,
                previous=decision,
            )
        if decision.more:
            decision.more, decision.stopped_by = False, "max repetitions"
            decision.reason = f"{repetition} rounds run; {decision.reason}"
        job.outcome.precision = {"target": spec.precision, **decision.as_dict()}
        self.reporter.message(f"{spec.name}: {decision.stopped_by}: {decision.reason}")

    def _primary_values(self, job: WorkloadRun, combos: list[dict[str, str]]) -> dict[str, list[float]]:
        """Per variant (in schedule order), the values of the workload's primary metric: the first
        metric and case it reported, repetitions only, in execution order."""
        import json

        mine = [s for s in (*self._earlier, *self.samples) if s.workload == job.spec.name and not s.warmup]
        values: dict[str, list[float]] = {Execution(job.spec, combo, 0, False).variant_key: [] for combo in combos}
        if not mine:
            return values
        primary = (mine[0].metric, json.dumps(mine[0].params, sort_keys=True))
        for sample in mine:
            variant_key = (sample.execution or "").split("|")[1] if sample.execution else None
            if variant_key in values and (sample.metric, json.dumps(sample.params, sort_keys=True)) == primary:
                values[variant_key].append(sample.value)
        return values

    def _clean_up(self, job: WorkloadRun) -> None:
        """Phase 5: the workload's cleanup per prepared context, then the variants' teardown in
        reverse order, with SIGINT/SIGTERM held back until done."""
        mask = self._shield()
        try:
            for ctx in job.prepared:
                try:
                    job.workload.cleanup(ctx)
                except Exception as exc:
                    self.reporter.message(f"{job.spec.name}: cleanup failed: {exc}")
            for (axis, value), item in reversed(list(job.variants.items())):
                try:
                    AXES[axis].teardown(item)
                except Exception as exc:
                    self.reporter.message(
                        f"{job.spec.name}: teardown of {axis}={value} failed: {exc}; run 'ccbench cleanup'"
                    )
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)

    def _prepare_context(self, job: WorkloadRun, execution: Execution) -> PrepareContext:
        variant: dict[str, Any] = {}
        directory = None
        for axis, value in sorted(execution.combo.items()):
            item = job.variants[(axis, value)]
            variant.update(item.info or {axis: value})
            if item.path is not None:
                directory = item.path
        if directory is None:
            directory = self.workdir / "scratch" / job.spec.name / _path_part(execution.variant_key)
            directory.mkdir(parents=True, exist_ok=True)
        raw_dir = self._writer.raw / job.spec.name / "prepare" / _path_part(execution.variant_key)
        return PrepareContext(
            workload_name=job.spec.name,
            workdir=Path(directory),
            raw_dir=raw_dir,
            variant=variant,
            environment=self.environment,
        )

    # --- one execution ---------------------------------------------------------------------------
    def _execute(self, job: WorkloadRun, execution: Execution) -> ExecutionStatus:
        """Run one execution in a worker process, append its samples, record how it ended."""
        spec, ctx = job.spec, job.contexts[execution.variant_key]
        raw_dir = self._writer.raw / execution.raw_subdir
        raw_dir.mkdir(parents=True, exist_ok=True)
        worker_job = WorkerJob(
            kind=spec.kind,
            name=spec.name,
            params=spec.params,
            workdir=str(ctx.workdir),
            raw_dir=str(raw_dir),
            repetition=execution.repetition,
            warmup=execution.warmup,
            variant=ctx.variant,
            timeout=spec.timeout,
            environment=self.environment or {},
            pin=self.pin,
        )
        job_file, result_file, log_file = raw_dir / "job.json", raw_dir / "result.json", raw_dir / "worker.log"
        job_file.write_text(worker_job.model_dump_json())
        record = ExecutionRecord(
            key=execution.key,
            workload=spec.name,
            variant=execution.combo,
            repetition=execution.repetition,
            warmup=execution.warmup,
            status=ExecutionStatus.OK,
            started_at=utc_now_iso(),
            elapsed_s=0.0,
            raw=execution.raw_subdir,
        )
        start = time.perf_counter()
        with open(log_file, "wb") as log:
            try:
                process = subprocess.Popen(
                    [sys.executable, "-m", "ccbench.worker", str(job_file), str(result_file)],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,
                    cwd=str(ctx.workdir),
                )
            except OSError as exc:
                return self._finish(
                    execution,
                    record,
                    start,
                    ExecutionStatus.FAILED,
                    f"could not start the worker process: {exc}",
                    log_file,
                )
            monitor = None
            try:
                # the watch starts with the worker and ends with it: the execution's measured interval
                monitor = self._watch(process.pid)
                _wait(process, spec.timeout)
            except subprocess.TimeoutExpired:
                self._observe(record, monitor)
                _kill_tree(process)
                return self._finish(
                    execution,
                    record,
                    start,
                    ExecutionStatus.TIMEOUT,
                    f"timed out after {spec.timeout:g} s; the whole process tree was ended",
                    log_file,
                )
            except BaseException:
                self._observe(record, monitor)
                _kill_tree(process)
                self._finish(execution, record, start, ExecutionStatus.INTERRUPTED, "interrupted by a signal", log_file)
                raise
            self._observe(record, monitor)
        elapsed = time.perf_counter() - start
        result = self._read_result(result_file, log_file, raw_dir, process.returncode)
        if result.status != ExecutionStatus.OK:
            status = self._finish(execution, record, start, result.status, result.error, log_file, elapsed)
            if result.repeats:
                self._stop_repeating(job, execution, result.error)
            return status
        samples = [self._sample(job, execution, ctx, m, record.contended) for m in result.measurements]
        if samples:
            self._writer.append_samples(samples)
            self.samples.extend(samples)
        record.samples = len(samples)
        return self._finish(execution, record, start, ExecutionStatus.OK, None, log_file, elapsed)

    def _stop_repeating(self, job: WorkloadRun, execution: Execution, error: str) -> None:
        """A failure that would repeat: the rest of its variant combination is skipped, said once."""
        job.outcome.repeating_failures[execution.variant_key] = error
        self.reporter.message(
            f"{job.spec.name} [{execution.variant_key}]: this failure would repeat; "
            "the remaining executions of this variant combination are skipped"
        )

    def _watch(self, pid: int):
        """Start watching the machine around the worker (ccbench.interference); None if it cannot."""
        from ccbench.interference import InterferenceMonitor

        try:
            return InterferenceMonitor(pid).start()
        except Exception as exc:  # the watch is evidence about the run, never a reason to fail it
            self.reporter.message(f"interference monitor could not start: {type(exc).__name__}: {exc}")
            return None

    def _observe(self, record: ExecutionRecord, monitor) -> None:
        """Stop the watch and put what it saw on the record: interference, contended, contended_reasons."""
        from ccbench.interference import execution_fields

        if monitor is None:
            return
        try:
            fields = execution_fields(monitor.stop(), self._thresholds)
        except Exception as exc:
            self.reporter.message(f"interference monitor failed: {type(exc).__name__}: {exc}")
            return
        record.interference = fields["interference"]
        record.contended = fields["contended"]
        record.contended_reasons = fields["contended_reasons"]

    @staticmethod
    def _read_result(result_file: Path, log_file: Path, raw_dir: Path, returncode: int) -> WorkerResult:
        if not result_file.exists():
            last = tail(log_file.read_text(errors="replace"), 1, 300) if log_file.exists() else ""
            return WorkerResult(
                status=ExecutionStatus.FAILED,
                error=f"the worker died (exit code {returncode}) without a result: {last}",
            )
        result = WorkerResult.model_validate_json(result_file.read_text())
        if result.status != ExecutionStatus.OK:
            result.error = result.error or "failed"
            if result.traceback:
                (raw_dir / "traceback.txt").write_text(result.traceback)
        return result

    @staticmethod
    def _sample(job: WorkloadRun, execution: Execution, ctx: PrepareContext, m: Measurement, contended: bool) -> Sample:
        return Sample(
            workload=job.spec.name,
            kind=job.spec.kind,
            params=job.workload.sample_params(m),
            variant=ctx.variant,
            metric=m.metric,
            unit=m.unit,
            value=m.value,
            better=m.better,
            repetition=execution.repetition,
            warmup=execution.warmup,
            timestamp=utc_now_iso(),
            metadata={**m.metadata, **({"case": m.case} if m.case else {})},
            execution=execution.key,
            raw=execution.raw_path,
            contended=contended,
        )

    def _finish(
        self,
        execution: Execution,
        record: ExecutionRecord,
        start: float,
        status: ExecutionStatus,
        error: str | None,
        log_file: Path,
        elapsed: float | None = None,
    ) -> ExecutionStatus:
        """Append the execution's record and tell the reporter."""
        record.status = status
        record.elapsed_s = round(elapsed if elapsed is not None else time.perf_counter() - start, 6)
        if error:
            record.error = error
            try:
                record.stderr_tail = tail(log_file.read_text(errors="replace"), 20, 3000)
            except OSError:
                pass
        self._writer.append_execution(record.as_json())
        self.records.append(record)
        self.reporter.execution_finished(execution, status.value, error or "")
        return status
