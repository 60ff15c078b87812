"""Scheduling: repetitions, warmups, interleaved variants, cooldowns, timeouts, signals, resume.

Every execution runs in a worker process (ccbench.worker) in its own session; a timeout ends its
whole process tree. Each execution's samples are appended and fsynced to the bundle before the
next execution starts, so nothing measured is lost to a crash, a kill or Ctrl-C.
"""

from __future__ import annotations

import fcntl
import itertools
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import psutil

from ccbench.bundle import BundleWriter, read_bundle
from ccbench.cases import case_text
from ccbench.errors import CCBenchError
from ccbench.model import Measurement, Sample, utc_now_iso
from ccbench.plan import Plan, WorkloadSpec
from ccbench.variants import AXES
from ccbench.variants.base import PreparedVariant
from ccbench.workloads import workload_class
from ccbench.workloads.base import PrepareContext, Workload, tail

#: grace period between SIGTERM and SIGKILL when ending a timed-out execution
KILL_GRACE_S = 3.0


class Interrupted(Exception):
    """Raised in the runner when SIGINT or SIGTERM arrives."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


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
        variant = self.variant_key.replace("=", "-").replace(",", "_").replace(":", "-")
        return f"{self.spec.name}/{variant}/{'warmup' if self.warmup else 'rep'}-{self.repetition}"


def schedule(spec: WorkloadSpec) -> list[Execution]:
    """Warmups first (one round per variant), then repetitions, variants interleaved A B C A B C."""
    axes = sorted(spec.variants)
    combos = [dict(zip(axes, values)) for values in itertools.product(*(spec.variants[a] for a in axes))] or [{}]
    plan = []
    for index in range(spec.warmup):
        plan.extend(Execution(spec, combo, index, True) for combo in combos)
    for index in range(spec.repetitions):
        plan.extend(Execution(spec, combo, index, False) for combo in combos)
    return plan


@dataclass
class Outcome:
    status: str = "pending"  # ok, failed, partial, skipped, interrupted
    reason: str | None = None
    executions_ok: int = 0
    executions_failed: int = 0
    skipped_variants: dict[str, str] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        document = {"status": self.status, "executions_ok": self.executions_ok, "executions_failed": self.executions_failed}
        if self.reason:
            document["reason"] = self.reason
        if self.skipped_variants:
            document["skipped_variants"] = self.skipped_variants
        return document


class Reporter:
    """What the runner tells the user as it goes (the CLI plugs in a rich progress bar)."""

    def start(self, total: int) -> None: ...
    def execution_started(self, execution: Execution, index: int) -> None: ...
    def execution_finished(self, execution: Execution, status: str, detail: str = "") -> None: ...
    def message(self, text: str) -> None: ...
    def cooldown(self, seconds: float) -> None: ...
    def stop(self) -> None: ...


@dataclass
class RunResult:
    bundle: Path
    outcomes: dict[str, Outcome]
    interrupted: bool
    samples: list[Sample]

    @property
    def failed(self) -> bool:
        return any(o.executions_failed or o.status == "failed" for o in self.outcomes.values())


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
    """Undo what a killed earlier run left behind (mounts, loop devices, keys) under workdir."""
    from ccbench.variants import storage

    cleaner: Callable[[Path], list[str]] | None = getattr(storage, "cleanup_stale", None)
    return cleaner(workdir) if cleaner else []


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
        self._current_process: subprocess.Popen | None = None

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
        with WorkdirLock(workdir):
            for removed in cleanup_stale(workdir):
                self.reporter.message(f"cleaned up after an earlier run: {removed}")
            return self._run_locked(workdir)

    def _open_bundle(self, workdir: Path) -> tuple[BundleWriter, set[str]]:
        if self.resume:
            writer = BundleWriter.reopen(self.resume)
            done = {
                record["key"]
                for record in read_bundle(self.resume).executions
                if record.get("status") in ("ok", "failed", "timeout") and "key" in record
            }
            writer.manifest.setdefault("resumed_at", []).append(utc_now_iso())
            writer.manifest["status"] = "running"
            return writer, done
        if self.environment is None:
            from ccbench.probe import probe

            self.environment = probe(bench_dir=workdir)
        manifest = {
            "plan": self.plan.model_dump(mode="json"),
            "environment": self.environment,
            "command_line": self.command_line,
            "workdir": str(workdir),
            "pin": self.pin,
            "started_at": utc_now_iso(),
            "ended_at": None,
            "status": "running",
            "outcomes": {},
        }
        return BundleWriter.create(self.out, manifest), set()

    def _run_locked(self, workdir: Path) -> RunResult:
        writer, done = self._open_bundle(workdir)
        environment = writer.manifest.get("environment", {})
        outcomes = {spec.name: Outcome() for spec in self.plan.workloads}
        for name, previous in writer.manifest.get("outcomes", {}).items():
            if name in outcomes and previous.get("status") in ("ok", "skipped"):
                outcomes[name] = Outcome(**{k: v for k, v in previous.items() if k in Outcome.__dataclass_fields__})
        total = sum(len(schedule(spec)) for spec in self.plan.workloads if not spec.skip_reason)
        previous_handlers = self._install_signals()
        interrupted = False
        self.reporter.start(total)
        counter = itertools.count(1)
        try:
            for spec in self.plan.workloads:
                outcome = outcomes[spec.name]
                if outcome.status in ("ok", "skipped") and self.resume:
                    for _ in schedule(spec):
                        next(counter)
                    continue
                self._run_workload(spec, outcome, writer, workdir, environment, done, counter)
                writer.manifest["outcomes"][spec.name] = outcome.as_dict()
                writer.write_manifest()
        except Interrupted as exc:
            interrupted = True
            self.reporter.message(f"{exc}: stopped; everything measured so far is in {writer.path}")
            for spec in self.plan.workloads:
                if outcomes[spec.name].status in ("pending", "running"):
                    outcomes[spec.name].status = "interrupted"
                writer.manifest["outcomes"][spec.name] = outcomes[spec.name].as_dict()
        finally:
            self.reporter.stop()
            self._restore_signals(previous_handlers)
            writer.manifest["ended_at"] = utc_now_iso()
            if interrupted:
                writer.manifest["status"] = "interrupted"
            else:
                failed = any(o.executions_failed or o.status == "failed" for o in outcomes.values())
                writer.manifest["status"] = "failed" if failed else "complete"
            writer.write_manifest()
            writer.close()
        return RunResult(bundle=writer.path, outcomes=outcomes, interrupted=interrupted, samples=self.samples)

    def _run_workload(self, spec, outcome, writer, workdir, environment, done, counter) -> None:
        executions = schedule(spec)
        if spec.skip_reason:
            outcome.status, outcome.reason = "skipped", spec.skip_reason
            self.reporter.message(f"{spec.name}: skipped: {spec.skip_reason}")
            return
        cls = workload_class(spec.kind)
        workload: Workload = cls(spec.name, cls.Params(**spec.params))
        reason = workload.requirements()
        if reason:
            outcome.status, outcome.reason = "skipped", reason
            self.reporter.message(f"{spec.name}: skipped: {reason}")
            for _ in executions:
                next(counter)
            return
        outcome.status = "running"
        prepared: dict[tuple[str, str], PreparedVariant] = {}
        prepared_workloads: list[PrepareContext] = []
        scratch = workdir / "scratch" / spec.name
        try:
            # set up each variant value once per workload (a mount serves all its repetitions)
            for axis, values in sorted(spec.variants.items()):
                axis_impl = AXES[axis]
                options_doc = dict(self.plan.axis_options.get(axis, {}))
                if axis == "storage" and self.storage_paths and "paths" in axis_impl.Options.model_fields:
                    options_doc["paths"] = {**options_doc.get("paths", {}), **self.storage_paths}
                options = axis_impl.Options(**options_doc)
                for value in values:
                    skip = axis_impl.skip_reason(value, options)
                    if skip:
                        outcome.skipped_variants[f"{axis}={value}"] = skip
                        self.reporter.message(f"{spec.name}: variant {axis}={value} skipped: {skip}")
                        continue
                    self._check_interrupt_free()
                    try:
                        prepared[(axis, value)] = axis_impl.setup(value, workdir, options)
                    except CCBenchError as exc:
                        outcome.skipped_variants[f"{axis}={value}"] = str(exc)
                        self.reporter.message(f"{spec.name}: variant {axis}={value} could not be set up: {exc}")
            runnable = [e for e in executions if all((a, v) in prepared for a, v in e.combo.items())]
            for execution in executions:
                if execution not in runnable:
                    next(counter)
            if not runnable:
                outcome.status = "skipped"
                outcome.reason = "no variant could be set up: " + "; ".join(f"{k}: {v}" for k, v in outcome.skipped_variants.items())
                return
            contexts: dict[str, PrepareContext] = {}
            for execution in runnable:
                if execution.variant_key in contexts:
                    continue
                ctx = self._prepare_context(spec, execution, prepared, scratch, writer, environment)
                contexts[execution.variant_key] = ctx
                self.reporter.message(f"{spec.name}: preparing {execution.variant_key}")
                try:
                    workload.prepare(ctx)
                    prepared_workloads.append(ctx)
                except Exception as exc:  # a broken prepare fails this workload, not the run
                    outcome.status, outcome.reason = "failed", f"prepare failed: {type(exc).__name__}: {exc}"
                    outcome.executions_failed += 1
                    self.reporter.message(f"{spec.name}: {outcome.reason}")
                    return
            first = True
            for execution in runnable:
                index = next(counter)
                if execution.key in done:
                    continue
                if not first and spec.cooldown > 0:
                    self.reporter.cooldown(spec.cooldown)
                    time.sleep(spec.cooldown)
                first = False
                ctx = contexts[execution.variant_key]
                self.reporter.execution_started(execution, index)
                status = self._execute(workload, spec, execution, ctx, writer, environment)
                if status == "ok":
                    outcome.executions_ok += 1
                else:
                    outcome.executions_failed += 1
            if outcome.executions_failed and outcome.executions_ok:
                outcome.status = "partial"
            elif outcome.executions_failed:
                outcome.status = "failed"
            else:
                outcome.status = "ok"
        finally:
            mask = self._shield()
            try:
                for ctx in prepared_workloads:
                    try:
                        workload.cleanup(ctx)
                    except Exception as exc:
                        self.reporter.message(f"{spec.name}: cleanup failed: {exc}")
                for (axis, value), item in reversed(list(prepared.items())):
                    try:
                        AXES[axis].teardown(item)
                    except Exception as exc:
                        self.reporter.message(f"{spec.name}: teardown of {axis}={value} failed: {exc}; run 'ccbench cleanup'")
            finally:
                signal.pthread_sigmask(signal.SIG_SETMASK, mask)

    def _check_interrupt_free(self) -> None:
        """A hook point: signals arrive as Interrupted exceptions between steps."""

    def _prepare_context(self, spec, execution, prepared, scratch, writer, environment) -> PrepareContext:
        variant: dict[str, Any] = {}
        workdir_for_execution = None
        for axis, value in sorted(execution.combo.items()):
            item = prepared[(axis, value)]
            variant.update(item.info or {axis: value})
            if item.path is not None:
                workdir_for_execution = item.path
        if workdir_for_execution is None:
            workdir_for_execution = scratch / execution.variant_key.replace("=", "-").replace(",", "_")
            workdir_for_execution.mkdir(parents=True, exist_ok=True)
        raw_dir = writer.raw / spec.name / "prepare" / execution.variant_key.replace("=", "-").replace(",", "_")
        return PrepareContext(workload_name=spec.name, workdir=Path(workdir_for_execution), raw_dir=raw_dir,
                              variant=variant, environment=environment)

    def _execute(self, workload, spec, execution, ctx, writer, environment) -> str:
        raw_dir = writer.raw / execution.raw_subdir
        raw_dir.mkdir(parents=True, exist_ok=True)
        job = {
            "kind": spec.kind,
            "name": spec.name,
            "params": spec.params,
            "workdir": str(ctx.workdir),
            "raw_dir": str(raw_dir),
            "repetition": execution.repetition,
            "warmup": execution.warmup,
            "variant": ctx.variant,
            "timeout": spec.timeout,
            "environment": environment,
            "pin": self.pin,
        }
        job_file = raw_dir / "job.json"
        result_file = raw_dir / "result.json"
        job_file.write_text(json.dumps(job, default=str))
        log_file = raw_dir / "worker.log"
        started = utc_now_iso()
        start = time.perf_counter()
        status, error = "ok", None
        with open(log_file, "wb") as log:
            try:
                process = subprocess.Popen(
                    [sys.executable, "-m", "ccbench.worker", str(job_file), str(result_file)],
                    stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
                    cwd=str(ctx.workdir),
                )
            except OSError as exc:
                error = f"could not start the worker process: {exc}"
                self._record(writer, execution, "failed", started, time.perf_counter() - start, error, log_file)
                self.reporter.execution_finished(execution, "failed", error)
                return "failed"
            try:
                process.wait(timeout=spec.timeout)
            except subprocess.TimeoutExpired:
                _kill_tree(process)
                status, error = "timeout", f"timed out after {spec.timeout:g} s; the whole process tree was ended"
            except BaseException:
                _kill_tree(process)
                self._record(writer, execution, "interrupted", started, time.perf_counter() - start,
                             "interrupted by a signal", log_file)
                raise
        elapsed = time.perf_counter() - start
        measurements: list[Measurement] = []
        if status == "ok":
            if result_file.exists():
                result = json.loads(result_file.read_text())
                if result["status"] == "ok":
                    measurements = [Measurement(**m) for m in result["measurements"]]
                else:
                    status, error = "failed", result.get("error", "failed")
                    if result.get("traceback"):
                        (raw_dir / "traceback.txt").write_text(result["traceback"])
            else:
                last = tail(log_file.read_text(errors="replace"), 1, 300) if log_file.exists() else ""
                status, error = "failed", f"the worker died (exit code {process.returncode}) without a result: {last}"
        samples = [
            Sample(
                workload=spec.name, kind=spec.kind, params=workload.sample_params(m), variant=ctx.variant,
                metric=m.metric, unit=m.unit, value=m.value, better=m.better, repetition=execution.repetition,
                warmup=execution.warmup, timestamp=utc_now_iso(),
                metadata={**m.metadata, **({"case": m.case} if m.case else {})},
            )
            for m in measurements
        ]
        if samples:
            writer.append_samples(samples)
            self.samples.extend(samples)
        self._record(writer, execution, status, started, elapsed, error, log_file, len(samples))
        self.reporter.execution_finished(execution, status, error or "")
        return status

    @staticmethod
    def _record(writer, execution, status, started, elapsed, error, log_file, count=0) -> None:
        record = {
            "key": execution.key,
            "workload": execution.spec.name,
            "variant": execution.combo,
            "repetition": execution.repetition,
            "warmup": execution.warmup,
            "status": status,
            "started_at": started,
            "elapsed_s": round(elapsed, 6),
            "samples": count,
            "raw": execution.raw_subdir,
        }
        if error:
            record["error"] = error
            try:
                record["stderr_tail"] = tail(log_file.read_text(errors="replace"), 20, 3000)
            except OSError:
                pass
        writer.append_execution(record)


def summarize(samples: list[Sample]) -> list[dict[str, Any]]:
    """Per workload and variant: the first metric's median, its spread, and the counts."""
    groups: dict[tuple[str, str, str], list[Sample]] = {}
    for sample in samples:
        if sample.warmup:
            continue
        variant = ",".join(f"{k}={v}" for k, v in sorted(sample.variant.items()) if k in AXES) or "-"
        case = sample.metadata.get("case") or {}
        case_label = case_text(case)
        groups.setdefault((sample.workload, variant, case_label), []).append(sample)
    rows = []
    for (workload, variant, case_label), items in groups.items():
        headline = items[0]
        key = (headline.metric, json.dumps(headline.params, sort_keys=True))
        values = [s.value for s in items if (s.metric, json.dumps(s.params, sort_keys=True)) == key]
        median = statistics.median(values)
        cv = (statistics.stdev(values) / statistics.mean(values) * 100) if len(values) > 1 and statistics.mean(values) else None
        rows.append({
            "workload": workload, "variant": variant, "unit": headline.unit, "case": case_label,
            "metric": headline.metric,
            "median": median, "cv_percent": cv, "n": len(values), "samples": len(items),
        })
    return rows
