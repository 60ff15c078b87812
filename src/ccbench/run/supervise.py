"""Process supervision: one execution in a worker process, watched, timed out, its result read.

The runner hands an Executor a WorkerJob and gets back an Attempt: how the execution ended, its
measurements, and what the interference monitor saw over exactly the worker's lifetime. The
WorkerExecutor does it for real (``python -m ccbench.run.worker`` in its own session, its whole process
tree ended on a timeout or a signal); tests give the runner an executor of their own, so that
scheduling, outcomes and resume are tested without starting processes.
"""

from __future__ import annotations

import os
import select
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ccbench.basics.procs import stop_tree
from ccbench.model import ExecutionStatus, Measurement, WorkerJob, WorkerResult
from ccbench.workloads.base import tail

#: grace period between SIGTERM and SIGKILL when ending a timed-out execution
KILL_GRACE_S = 3.0


@dataclass
class Attempt:
    """What came of one execution."""

    status: ExecutionStatus
    #: why it did not end ok, one line
    error: str | None = None
    measurements: list[Measurement] = field(default_factory=list)
    #: a failure that would repeat (workloads.base.RepeatingFailure)
    repeats: bool = False
    elapsed_s: float = 0.0
    #: the end of the worker's output, for a failed execution
    output_tail: str | None = None
    #: the record fields of the interference watch (interference, contended, contended_reasons)
    watch: dict[str, Any] = field(default_factory=dict)
    #: the signal that stopped the execution: the runner records the attempt, then raises it
    interruption: BaseException | None = None


class Executor(Protocol):
    def execute(self, job: WorkerJob, raw_dir: Path) -> Attempt:
        """Run one execution (job.workdir is its working directory; raw_dir keeps its files)."""
        ...


def wait_for_exit(process: subprocess.Popen, timeout: float | None) -> int:
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


def end_tree(process: subprocess.Popen) -> None:
    """End the worker's process group and every descendant (some tools start their own session)."""
    stop_tree(process, grace=KILL_GRACE_S, process_group=True)


def read_result(result_file: Path, log_file: Path, raw_dir: Path, returncode: int) -> WorkerResult:
    """The worker's result; a worker that died without one failed, with the last line it wrote."""
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


class WorkerExecutor:
    """Each execution in a fresh ``python -m ccbench.run.worker`` process, in its own session."""

    def __init__(self, thresholds=None, message: Callable[[str], None] = lambda text: None, workdir=None):
        #: ccbench.observe.interference.Thresholds of the plan (None: the defaults)
        self.thresholds = thresholds
        self.message = message
        #: the run's work directory: the counters' ledger lives there (None: no mounts are made)
        self.workdir = workdir
        #: the mechanism counters' sources (ccbench.observe.counters), opened at the first execution that wants them
        self.counters = None

    def close(self) -> None:
        """The run is over: undo what the counters mounted."""
        if self.counters is not None:
            self.counters.close()
            self.counters = None

    def execute(self, job: WorkerJob, raw_dir: Path) -> Attempt:
        job_file, result_file, log_file = raw_dir / "job.json", raw_dir / "result.json", raw_dir / "worker.log"
        job_file.write_text(job.model_dump_json())
        counted = self._count(job)
        start = time.perf_counter()
        with open(log_file, "wb") as log:
            try:
                process = subprocess.Popen(
                    [sys.executable, "-m", "ccbench.run.worker", str(job_file), str(result_file)],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,
                    cwd=job.workdir,
                )
            except OSError as exc:
                attempt = Attempt(ExecutionStatus.FAILED, f"could not start the worker process: {exc}")
                return self._ended(attempt, time.perf_counter() - start, log_file)
            stopped, watch = self._supervise(process, job)
        elapsed = time.perf_counter() - start
        watch.update(self._counted(counted))
        if stopped is not None:
            attempt = stopped
        else:
            result = read_result(result_file, log_file, raw_dir, process.returncode)
            attempt = Attempt(result.status, result.error, result.measurements, result.repeats)
        attempt.watch = watch
        return self._ended(attempt, elapsed, log_file)

    def _supervise(self, process: subprocess.Popen, job: WorkerJob) -> tuple[Attempt | None, dict[str, Any]]:
        """Watch the worker until it ends. Returns the attempt of a timeout or a signal (its whole
        tree ended), None when it ended by itself; and what the interference watch saw."""
        monitor, timeout = None, job.timeout
        try:
            # the watch starts with the worker and ends with it: the execution's measured interval
            monitor = self._watch(process.pid, job)
            wait_for_exit(process, timeout)
        except subprocess.TimeoutExpired:
            watch = self._observe(monitor)
            end_tree(process)
            return Attempt(
                ExecutionStatus.TIMEOUT, f"timed out after {timeout:g} s; the whole process tree was ended"
            ), watch
        except BaseException as exc:  # Interrupted (SIGINT/SIGTERM): recorded by the runner, then raised again
            watch = self._observe(monitor)
            end_tree(process)
            return Attempt(ExecutionStatus.INTERRUPTED, "interrupted by a signal", interruption=exc), watch
        return None, self._observe(monitor)

    @staticmethod
    def _ended(attempt: Attempt, elapsed: float, log_file: Path) -> Attempt:
        attempt.elapsed_s = elapsed
        if attempt.error:
            try:
                attempt.output_tail = tail(log_file.read_text(errors="replace"), 20, 3000)
            except OSError:
                pass
        return attempt

    def _watch(self, pid: int, job: WorkerJob):
        """Start watching the machine around the worker (ccbench.observe.interference), with the workload's
        servers, the layer's workers and ccbench's own processes (the fleet agent's connection, where
        the agent started this run: ccbench.basics.ownprocs) apart from others; None if it cannot."""
        from ccbench.basics import ownprocs
        from ccbench.observe.interference import InterferenceMonitor

        try:
            companions = {"servers": job.servers, "layer_pids": job.layer_pids, "layer_threads": job.layer_threads}
            companions["own_registry"] = os.environ.get(ownprocs.ENV) or None
            return InterferenceMonitor(pid, **companions).start()
        except Exception as exc:  # the watch is evidence about the run, never a reason to fail it
            self.message(f"interference monitor could not start: {type(exc).__name__}: {exc}")
            return None

    def _count(self, job: WorkerJob) -> dict[str, float] | None:
        """The mechanism counters before the execution (ccbench.observe.counters); None when off or failing."""
        if not job.counters:
            return None
        from ccbench.observe.counters import CounterSession

        try:
            if self.counters is None:
                self.counters = CounterSession(self.workdir)  # kept first: close() undoes a half-open one
                self.counters.open()
            return self.counters.begin()
        except Exception as exc:  # the counters are evidence about the run, never a reason to fail it
            self.message(f"mechanism counters could not be read: {type(exc).__name__}: {exc}")
            return None

    def _counted(self, before: dict[str, float] | None) -> dict[str, Any]:
        """The record fields of the counters after the execution (counters, counters_missing)."""
        from ccbench.observe.counters import execution_fields

        try:
            return execution_fields(self.counters, before)
        except Exception as exc:
            self.message(f"mechanism counters could not be read: {type(exc).__name__}: {exc}")
            return {}

    def _observe(self, monitor) -> dict[str, Any]:
        """Stop the watch: the record fields of what it saw (interference, contended, contended_reasons)."""
        from ccbench.observe.interference import execution_fields

        if monitor is None:
            return {}
        try:
            fields = execution_fields(monitor.stop(), self.thresholds)
        except Exception as exc:
            self.message(f"interference monitor failed: {type(exc).__name__}: {exc}")
            return {}
        return {key: fields[key] for key in ("interference", "contended", "contended_reasons")}
