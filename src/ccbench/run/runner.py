"""Scheduling: repetitions, warmups, interleaved variants, cooldowns, timeouts, signals, resume.

A run takes each workload of the plan through the same phases, one method each in Runner:

1. admit      skip it, with the reason, when the plan or the machine cannot run it
2. set up     each variant value once (a mount serves all its repetitions)
3. prepare    the workload once per variant combination (not timed)
4. execute    warmups, repetitions interleaved; then rounds for a precision or settle target (ccbench.run.settle)
5. clean up   the workload's preparations, then tear the variants down, whatever happened before

Workloads settled by layer are held after 4 and settled together at the end (ccbench.run.settle_layers).
Runner keeps the run as a whole here (inputs, bundle, signals, the end); it inherits the phases of one
workload from ccbench.run.phases and one execution (executor, samples, record) from ccbench.run.execution.

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
from ccbench.basics.stopping import catch_stop_signals, restore_signals
from ccbench.bundle import BundleWriter, finish_samples, read_bundle
from ccbench.model import ExecutionRecord, ExecutionStatus, OutcomeStatus, Sample, utc_now_iso
from ccbench.planning.plan import Plan
from ccbench.run.execution import OneExecution
from ccbench.run.phases import WorkloadPhases
from ccbench.run.schedule import Execution, Outcome, schedule, variant_combinations
from ccbench.run.settle_layers import release, settle_held
from ccbench.run.supervise import Executor, WorkerExecutor
from ccbench.run.workdir import WorkdirLock, cleanup_stale, prepare_workdir, unwritable
from ccbench.variants import AXES
from ccbench.workloads import declarations

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


def recorded_storage_paths(bundle: Path) -> dict[str, str]:
    """The ``--storage-path`` directories a bundle's run measured in: its manifest's record, or for a
    bundle from before that record, its samples' (a variant's ``storage_path`` where it was the user's)."""
    found = read_bundle(bundle, samples=False)
    if "storage_paths" in found.manifest:
        return dict(found.manifest["storage_paths"])
    paths: dict[str, str] = {}
    for sample in read_bundle(bundle).samples:
        variant = sample.get("variant") or {}
        if variant.get("storage_mechanism") == "user-path" and variant.get("storage_path"):
            paths.setdefault(str(variant["storage"]), str(Path(variant["storage_path"]).resolve()))
    return paths


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


class Runner(WorkloadPhases, OneExecution):
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
        if self.resume:
            self._resume_storage_paths()
        planned = {value for spec in self.plan.workloads for value in spec.variants.get("storage", [])}
        for value, directory in self.storage_paths.items():
            where = f"--storage-path {value}={directory}"
            try:
                AXES["storage"].validate(value)
            except ValueError as exc:
                raise CCBenchError(f"{where}: {exc}") from None
            if value not in planned:
                runs = ", ".join(sorted(planned)) or "none"
                raise CCBenchError(
                    f"{where}: no workload of the plan runs the storage variant {value!r} (its storage "
                    f"variants: {runs}); name one of those"
                )
            if Path(directory).exists() and not Path(directory).is_dir():
                raise CCBenchError(f"{where}: not a directory; name the directory the variant should run in")
            if not Path(directory).is_dir():
                raise CCBenchError(f"{where}: no such directory; create it or name an existing one")
            if reason := unwritable(directory):
                raise CCBenchError(f"{where}: cannot write there ({reason}); name a directory you can write")

    def _resume_storage_paths(self) -> None:
        """A resumed run measures its variants where the run it finishes did: the bundle's own
        ``--storage-path`` directories, unless given again (then they must be the same)."""
        recorded = recorded_storage_paths(self.resume)
        given = {value: str(Path(directory).resolve()) for value, directory in self.storage_paths.items()}
        if given and given != recorded:
            said = " ".join(f"--storage-path {v}={d}" for v, d in recorded.items()) or "no --storage-path"
            raise CCBenchError(
                f"--resume {self.resume}: its run measured with {said}; a resumed run measures where it did "
                "(leave --storage-path out, or give the same)"
            )
        if recorded and not given:
            self.storage_paths = dict(recorded)
            for value, directory in recorded.items():
                self.reporter.message(f"resumed with the bundle's --storage-path {value}={directory}")

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
            # where the --storage-path variants ran: a resumed run measures them there again
            "storage_paths": {value: str(Path(d).resolve()) for value, d in self.storage_paths.items()},
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
