"""Scheduling: repetitions, warmups, interleaved variants, cooldowns, timeouts, signals, resume.

A run takes each workload of the plan through the same phases, one method each in Runner:

1. admit      skip it, with the reason, when the plan or the machine cannot run it
2. set up     each variant value once (a mount serves all its repetitions)
3. prepare    the workload once per variant combination (not timed)
4. execute    warmups, repetitions interleaved; then rounds for a precision or settle target (ccbench.run.settle)
5. clean up   the workload's preparations, then tear the variants down, whatever happened before

Workloads settled by layer are held after 4 and settled together at the end (ccbench.run.settle_layers).

Before the first workload, a system check (governor, boost, swap, THP, busy processes) is printed
and kept in the manifest. Each execution is watched by ccbench.observe.interference over exactly its
worker's lifetime; one run on a busy machine is flagged ``contended`` on its record and samples.

Every execution goes through an executor (ccbench.run.supervise): for real, a worker process
(ccbench.run.worker) in its own session whose whole process tree a timeout ends. The schedule and the
outcome live in ccbench.run.schedule, the work directory's lock and stale cleanup in ccbench.run.workdir.
Each execution's samples are appended and fsynced to the bundle before the next execution starts,
so nothing measured is lost to a crash, a kill or Ctrl-C.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import ccbench.run.schedule as scheduling
from ccbench.basics.errors import CCBenchError
from ccbench.basics.stopping import block_stop_signals, catch_stop_signals, restore_signals
from ccbench.bundle import BundleWriter, finish_samples, read_bundle
from ccbench.model import (
    ExecutionRecord,
    ExecutionStatus,
    Measurement,
    OutcomeStatus,
    Sample,
    WorkerJob,
    copied,
    utc_now_iso,
)
from ccbench.planning.plan import Plan, WorkloadSpec
from ccbench.run.schedule import Execution, Outcome, WorkloadRun, path_part, schedule, variant_combinations
from ccbench.run.settle import run_round, settle_rounds
from ccbench.run.settle_layers import hold, release, settle_held
from ccbench.run.supervise import Attempt, Executor, WorkerExecutor
from ccbench.run.workdir import WorkdirLock, cleanup_stale, prepare_workdir, unwritable
from ccbench.variants import AXES
from ccbench.workloads import declarations, workload_class
from ccbench.workloads.base import PrepareContext

# re-exported: the progress display, ccbench cleanup and the tests import them from here
__all__ = [
    "Execution",
    "Outcome",
    "Reporter",
    "RunResult",
    "Runner",
    "WorkdirLock",
    "cleanup_stale",
    "schedule",
    "variant_combinations",
]

#: execution statuses that count as done when a run is resumed
DONE_STATUSES = (ExecutionStatus.OK, ExecutionStatus.FAILED, ExecutionStatus.TIMEOUT)


class Interrupted(BaseException):
    """Raised in the runner when SIGINT, SIGTERM or SIGHUP (a dropped session) arrives. A BaseException, like
    KeyboardInterrupt, so that the ``except Exception`` around best-effort steps (a prepare, the
    interference monitor, the system check) cannot swallow it."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _interrupt(signum, frame):
    raise Interrupted(signum)


class Reporter:
    """What the runner tells the user as it goes (the CLI plugs in a rich progress bar)."""

    def start(self, total: int) -> None: ...
    def execution_started(self, execution: Execution, index: int) -> None: ...
    def execution_finished(self, execution: Execution, status: str, detail: str = "") -> None: ...
    def extend(self, more: int) -> None: ...
    def reached(self, position: int) -> None:
        """Executions up to ``position`` are behind: run, or passed over (skipped, already done)."""

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
    #: the signal that interrupted the run (SIGINT, SIGTERM, SIGHUP), None when it was not
    stopped_by: int | None = None

    @property
    def failed(self) -> bool:
        return any(o.executions_failed or o.status == OutcomeStatus.FAILED for o in self.outcomes.values())


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
        executor: Executor | None = None,
        order: scheduling.Order | None = None,
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
        #: runs each execution (None: a WorkerExecutor with the plan's contention thresholds)
        self.executor = executor
        #: the order of the variants within a round (drawn from a seed by default; a resume takes the bundle's)
        self.order = order or scheduling.Order()
        self.samples: list[Sample] = []
        self.records: list[ExecutionRecord] = []
        # set for the duration of run()
        self._writer: BundleWriter | None = None
        self._done: set[str] = set()
        #: samples a resumed bundle already holds (the precision rule counts them)
        self._earlier: list[Sample] = []
        #: the last progress position handed out (1-based positions over the whole plan)
        self._position = 0
        self._held: list[Any] = []  # workloads settled by layer, held open (run.settle_layers)

    # --- the run -------------------------------------------------------------------------------
    def check_inputs(self) -> None:
        """Bad input, found before anything is printed or prepared (a one-line CCBenchError): the work
        directory, where the bundle goes (or the bundle resumed), the directories given for storage
        variants."""
        prepare_workdir(self.workdir)
        if self.resume:
            reason = unwritable(self.resume)
            if reason:
                raise CCBenchError(
                    f"cannot append to the bundle {self.resume}: {reason}; resume as a user who can write it"
                )
        elif reason := unwritable(self.out):
            raise CCBenchError(
                f"cannot create the result bundle under {self.out}: {reason}; choose a writable directory with --out"
            )
        for value, directory in self.storage_paths.items():
            where = f"--storage-path {value}={directory}"
            try:
                AXES["storage"].validate(value)
            except ValueError as exc:
                raise CCBenchError(f"{where}: {exc}") from None
            if not Path(directory).is_dir():
                raise CCBenchError(f"{where}: no such directory; create it or name an existing one")
            if reason := unwritable(directory):
                raise CCBenchError(f"{where}: cannot write there ({reason}); name a directory you can write")

    def run(self) -> RunResult:
        self.check_inputs()
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
            self.order = scheduling.Order.recorded(writer.manifest)
            writer.manifest["status"] = "running"
            if any(spec.precision or spec.detect or spec.settle for spec in self.plan.workloads):
                self._earlier = [Sample(**record) for record in read_bundle(self.resume).samples]
            return writer
        if self.environment is None:
            from ccbench.probe import probe

            self.environment = probe(bench_dir=self.workdir)
        manifest = {
            "system_check": self._system_check(),
            "plan": self.plan.model_dump(mode="json"),
            # each workload's primary metrics and message costs: analysis reads them from here
            "declarations": declarations((spec.name, spec.kind) for spec in self.plan.workloads),
            "environment": self.environment,
            "command_line": self.command_line,
            "workdir": str(self.workdir),
            "pin": self.pin,
            "order": self.order.record(),
            "started_at": utc_now_iso(),
            "ended_at": None,
            "status": "running",
            "outcomes": {},
        }
        return BundleWriter.create(self.out, manifest)

    def _system_check(self) -> list[dict[str, Any]]:
        """The before-run check, printed and kept in the manifest; nothing is changed. The TLS
        library's AES check (3 s) runs only when a workload of the plan asks for it."""
        from ccbench.probe.syscheck import format_checks, system_check
        from ccbench.workloads import crosses_no_device, system_checks
        from ccbench.workloads.base import DEVICE_IO_CHECK, TLS_AES_CHECK

        asked = system_checks((spec.kind, spec.variants) for spec in self.plan.workloads)
        # the bounce-buffer check only for workloads whose data crosses a device (not emulated hosts)
        device_io = DEVICE_IO_CHECK in system_checks(
            (spec.kind, spec.variants) for spec in self.plan.workloads if not crosses_no_device(spec.kind, spec.params)
        )
        try:
            checks = system_check(aes=TLS_AES_CHECK in asked, environment=self.environment, device_io=device_io)
        except Exception as exc:  # a check that cannot run must not stop the benchmark
            return [{"name": "system check", "value": f"failed: {type(exc).__name__}: {exc}", "ok": None, "advice": ""}]
        self.reporter.message("system check (nothing is changed; see the advice):\n" + format_checks(checks))
        return checks

    def _run_locked(self) -> RunResult:
        from ccbench.observe.interference import Thresholds

        if self.executor is None:
            thresholds = Thresholds.from_mapping(self.plan.contention)
            self.executor = WorkerExecutor(thresholds, self.reporter.message, self.workdir)
        self.started = time.monotonic()  # the study's clock (the plan's budget)
        writer = self._writer = self._open_bundle()
        self.environment = writer.manifest.get("environment", {})
        outcomes = {spec.name: Outcome() for spec in self.plan.workloads}
        for name, previous in writer.manifest.get("outcomes", {}).items():
            if name in outcomes and previous.get("status") in ("ok", "skipped"):
                outcomes[name] = Outcome.from_dict(previous)
            elif name in outcomes:
                # a failure known to repeat is not tried again by a resumed run
                outcomes[name].repeating_failures = dict(previous.get("repeating_failures", {}))
        total = sum(len(schedule(spec, self.order.draw)) for spec in self.plan.workloads if not spec.skip_reason)
        previous_handlers = catch_stop_signals(_interrupt)
        interrupted = False
        stopped_by: int | None = None
        self.reporter.start(total)
        try:
            for spec in self.plan.workloads:
                outcome = outcomes[spec.name]
                if self.resume and outcome.status in (OutcomeStatus.OK, OutcomeStatus.SKIPPED):
                    self._pass_over(len(schedule(spec, self.order.draw)))
                    continue
                self._run_workload(spec, outcome)
                writer.manifest["outcomes"][spec.name] = outcome.as_dict()
                writer.write_manifest()
            settle_held(self)
        except Interrupted as exc:
            interrupted = True
            stopped_by = exc.signum
            self._tell(f"{exc}: stopped; everything measured so far is in {writer.path}")
            for spec in self.plan.workloads:
                if outcomes[spec.name].status in (OutcomeStatus.PENDING, OutcomeStatus.RUNNING):
                    outcomes[spec.name].status = OutcomeStatus.INTERRUPTED
                writer.manifest["outcomes"][spec.name] = outcomes[spec.name].as_dict()
        finally:
            release(self)  # held workloads the run was cut before settling
            getattr(self.executor, "close", lambda: None)()  # the counters' mounts, made for this run
            self._tell(None)
            restore_signals(previous_handlers)
            writer.manifest["ended_at"] = utc_now_iso()
            if interrupted:
                writer.manifest["status"] = "interrupted"
            else:
                failed = any(o.executions_failed or o.status == OutcomeStatus.FAILED for o in outcomes.values())
                writer.manifest["status"] = "failed" if failed else "complete"
            writer.write_manifest()
            writer.close()
            finish_samples(writer.path, self._tell)  # before the digest list, which covers it
            self._attest(writer.path)
        return RunResult(
            bundle=writer.path,
            outcomes=outcomes,
            interrupted=interrupted,
            stopped_by=stopped_by,
            samples=self.samples,
            executions=self.records,
            manifest=writer.manifest,
        )

    def _tell(self, text: str | None) -> None:
        """A message (or, with None, the end of the progress display) on the way out of a run. After
        a hang-up the terminal may be gone (writes fail with EIO): the clean-up goes on regardless."""
        try:
            self.reporter.message(text) if text is not None else self.reporter.stop()
        except OSError:
            pass

    def _attest(self, bundle: Path) -> None:
        """Every bundle ends with its digest list (attestation.json) and, where the machine has
        configfs-tsm, TEE evidence over it; otherwise it says `unattested` and why. A failure here
        is reported and never costs the run its measurements."""
        from ccbench.attestation import finish_bundle

        try:
            document = finish_bundle(bundle)
        except (OSError, CCBenchError) as exc:
            self._tell(f"attestation: the digest list could not be written: {exc}")
            return
        if document["status"] == "attested":
            self._tell(
                f"attested: {document['evidence']['technology']} evidence over "
                f"{len(document['files'])} files ('ccbench verify {bundle}')"
            )

    def _next_position(self) -> int:
        self._position += 1
        return self._position

    def _pass_over(self, count: int) -> None:
        """Advance the progress position past executions that will not run, and tell the reporter
        (a progress bar would otherwise stop short of its total)."""
        self._position += max(count, 0)
        self.reporter.reached(self._position)

    # --- one workload, phase by phase ------------------------------------------------------------
    def _run_workload(self, spec: WorkloadSpec, outcome: Outcome) -> None:
        """Admit the workload, set up its variants, prepare it on each, execute its schedule; then
        clean up and tear down, on success, failure and interruption alike."""
        job = WorkloadRun(spec, outcome, schedule(spec, self.order.draw))
        if not self._admit(job):
            return
        # the planned positions of this workload end here; what did not run (a failed prepare,
        # skipped or already recorded executions) is passed over when the workload is done
        planned_end = self._position + len(job.executions)
        outcome.status = OutcomeStatus.RUNNING
        held = False  # settled by layer: held open for the rounds across workloads (run.settle_layers)
        try:
            if self._set_up_variants(job) and self._prepare(job):
                started = time.monotonic()
                self._execute_schedule(job)
                if spec.settle is not None and spec.settle_by == "layer":
                    held = hold(self, job, started)
                elif spec.settle is not None:
                    settle_rounds(self, job, started)
                elif spec.precision is not None or spec.detect is not None:
                    self._repeat_for_precision(job, started)
                if not held:
                    outcome.settle()
        finally:
            if not held:
                self._clean_up(job)
        self._pass_over(planned_end - self._position)

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
            index = self._next_position()
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
        variant once) until the primary metric's 95% interval (with --detect: its MDE, which then
        decides) is within the target, or max_repetitions or max_time is reached
        (ccbench.analysis.statistics.precision); why it stopped goes into the outcome."""
        from ccbench.analysis.statistics.precision import decide, rule_for

        spec = job.spec
        rule = rule_for(spec)
        combos = job.combinations()
        repetition, round_s = spec.repetitions, None
        decision = decide(self._primary_values(job, combos), rule, elapsed_s=time.monotonic() - started)
        # the bound on rounds holds even when failed executions leave the rule short of values
        # a round of combinations that all fail for good would only count skips
        while decision.more and repetition < rule.max_repetitions and not job.all_stopped():
            round_started = time.monotonic()
            run_round(self, job, combos, repetition)
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
        measure = "mde" if rule.detect else "half-width"
        job.outcome.precision = {"target": rule.target, "measure": measure, **decision.as_dict()}
        self.reporter.message(f"{spec.name}: {decision.stopped_by}: {decision.reason}")

    def _primary_values(self, job: WorkloadRun, combos: list[dict[str, str]]) -> dict[str, list[float]]:
        """Per variant (in schedule order), the values of the workload's primary metric (see
        ccbench.analysis.statistics.precision.primary_values), repetitions only, in execution order."""
        from ccbench.analysis.statistics.precision import primary_values

        mine = [s for s in (*self._earlier, *self.samples) if s.workload == job.spec.name and not s.warmup]
        variants = [Execution(job.spec, combo, 0, False).variant_key for combo in combos]
        return primary_values(mine, variants, getattr(job.workload, "primary_metrics", ()))

    def _clean_up(self, job: WorkloadRun) -> None:
        """Phase 5: the workload's cleanup per prepared context, then the variants' teardown in
        reverse order, with SIGINT/SIGTERM held back until done."""
        mask = block_stop_signals()  # a second Ctrl-C cannot leave a mount behind
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
            directory = self.workdir / "scratch" / job.spec.name / path_part(execution.variant_key)
            directory.mkdir(parents=True, exist_ok=True)
        raw_dir = self._writer.raw / job.spec.name / "prepare" / path_part(execution.variant_key)
        return PrepareContext(
            workload_name=job.spec.name,
            workdir=Path(directory),
            raw_dir=raw_dir,
            variant=variant,
            environment=self.environment,
            layer=[job.variants[(axis, value)].serving for axis, value in execution.combo.items()],
        )

    # --- one execution ---------------------------------------------------------------------------
    def _execute(self, job: WorkloadRun, execution: Execution) -> ExecutionStatus:
        """Run one execution through the executor, append its samples, record how it ended."""
        spec, ctx = job.spec, job.contexts[execution.variant_key]
        raw_dir = self._writer.raw / execution.raw_subdir
        raw_dir.mkdir(parents=True, exist_ok=True)
        worker_job = WorkerJob(
            kind=spec.kind,
            name=spec.name,
            params=spec.params,
            workdir=str(ctx.workdir),
            raw_dir=str(raw_dir),
            **copied(execution, "repetition", "warmup", "parts"),
            variant=ctx.variant,
            timeout=spec.timeout,
            environment=self.environment or {},
            pin=self.pin,
            counters=spec.counters,
            **ctx.companions(),
        )
        record = ExecutionRecord(
            key=execution.key,
            workload=spec.name,
            variant=execution.combo,
            **copied(execution, "repetition", "warmup"),
            status=ExecutionStatus.OK,
            started_at=utc_now_iso(),
            elapsed_s=0.0,
            raw=execution.raw_subdir,
        )
        attempt = self.executor.execute(worker_job, raw_dir)
        for name, value in attempt.watch.items():
            setattr(record, name, value)
        # samples and record go to the bundle together: a signal in between would leave samples that
        # a resume cannot see as done, and would measure again
        mask = block_stop_signals()  # a second Ctrl-C cannot leave a mount behind
        try:
            self._record(job, execution, ctx, record, attempt)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        if attempt.repeats:
            self._stop_repeating(job, execution, attempt.error)
        if attempt.interruption is not None:
            raise attempt.interruption
        return attempt.status

    def _record(
        self, job: WorkloadRun, execution: Execution, ctx: PrepareContext, record: ExecutionRecord, attempt: Attempt
    ) -> None:
        """Append the attempt's samples and its record, and tell the reporter."""
        if attempt.status == ExecutionStatus.OK:
            samples = [self._sample(job, execution, ctx, m, record.contended) for m in attempt.measurements]
            if samples:
                self._writer.append_samples(samples)
                self.samples.extend(samples)
            record.samples = len(samples)
        record.status = attempt.status
        record.elapsed_s = round(attempt.elapsed_s, 6)
        if attempt.error:
            record.error = attempt.error
            if attempt.output_tail is not None:
                record.stderr_tail = attempt.output_tail
        self._writer.append_execution(record.as_json())
        self.records.append(record)
        self.reporter.execution_finished(execution, attempt.status.value, attempt.error or "")

    def _stop_repeating(self, job: WorkloadRun, execution: Execution, error: str) -> None:
        """A failure that would repeat: the rest of its variant combination is skipped, said once."""
        job.outcome.repeating_failures[execution.variant_key] = error
        self.reporter.message(
            f"{job.spec.name} [{execution.variant_key}]: this failure would repeat; "
            "the remaining executions of this variant combination are skipped"
        )

    @staticmethod
    def _sample(job: WorkloadRun, execution: Execution, ctx: PrepareContext, m: Measurement, contended: bool) -> Sample:
        return Sample(
            workload=job.spec.name,
            kind=job.spec.kind,
            params=job.workload.sample_params(m),
            variant=ctx.variant,
            **copied(m, "metric", "unit", "value", "better"),
            **copied(execution, "repetition", "warmup"),
            timestamp=utc_now_iso(),
            metadata={**m.metadata, **({"case": m.case} if m.case else {})},
            execution=execution.key,
            raw=execution.raw_path,
            contended=contended,
        )
