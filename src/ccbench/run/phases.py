"""A run's workload, phase by phase: admit, set up the variants, prepare, execute, clean up.

The methods of ccbench.run.runner.Runner that take one workload of the plan through its phases (the
module docstring of ccbench.run.runner lists them); Runner inherits them from WorkloadPhases. They
use the runner's state (its reporter, bundle writer, progress position) and its execution
(ccbench.run.execution); the settle rounds are ccbench.run.settle and ccbench.run.settle_layers.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Any

from ccbench.basics.errors import CCBenchError
from ccbench.basics.stopping import block_stop_signals
from ccbench.model import OutcomeStatus
from ccbench.planning.plan import WorkloadSpec
from ccbench.run.schedule import Execution, Outcome, WorkloadRun, path_part, schedule
from ccbench.run.settle import run_round, settle_rounds
from ccbench.run.settle_layers import hold
from ccbench.variants import AXES
from ccbench.workloads import workload_class
from ccbench.workloads.base import PrepareContext


class WorkloadPhases:
    """Runner's phases of one workload (a part of ccbench.run.runner.Runner)."""

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
