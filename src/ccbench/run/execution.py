"""One execution of a run: through the executor, its samples and record appended to the bundle.

The methods of ccbench.run.runner.Runner that run one execution; Runner inherits them from
OneExecution. They use the runner's state (its executor, bundle writer, reporter).
"""

from __future__ import annotations

import signal

from ccbench.basics.stopping import block_stop_signals
from ccbench.model import ExecutionRecord, ExecutionStatus, Measurement, Sample, WorkerJob, copied, utc_now_iso
from ccbench.run.schedule import Execution, WorkloadRun
from ccbench.run.supervise import Attempt
from ccbench.workloads.base import PrepareContext


class OneExecution:
    """Runner's one execution (a part of ccbench.run.runner.Runner)."""

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
