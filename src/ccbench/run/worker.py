"""One execution of one workload, in its own process (started by the runner).

    python -m ccbench.run.worker JOB.json RESULT.json

The job is a ccbench.model.WorkerJob, the result a ccbench.model.WorkerResult. The runner starts
this in a new session (its own process group), so a timeout ends the worker and everything it
started. The result is written atomically; a missing result means the worker died.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from pathlib import Path

from ccbench.model import ExecutionStatus, WorkerJob, WorkerResult, copied


def run_job(job: WorkerJob) -> WorkerResult:
    try:
        if job.pin:
            os.sched_setaffinity(0, job.pin)
        from ccbench.workloads import workload_class
        from ccbench.workloads.base import ExecutionContext, RepeatingFailure, WorkloadFailed

        cls = workload_class(job.kind)
        workload = cls(job.name, cls.Params(**job.params))
        ctx = ExecutionContext(
            workload_name=job.name,
            workdir=Path(job.workdir),
            raw_dir=Path(job.raw_dir),
            **copied(job, "repetition", "warmup", "variant", "timeout", "environment", "parts"),
        )
        try:
            measurements = workload.run(ctx)
        except WorkloadFailed as exc:
            repeats = isinstance(exc, RepeatingFailure)
            return WorkerResult.model_construct(status=ExecutionStatus.FAILED, error=str(exc), repeats=repeats)
        # the workload returns validated Measurements; the runner validates the whole result again
        return WorkerResult.model_construct(status=ExecutionStatus.OK, measurements=measurements)
    except Exception as exc:  # anything else is a bug or an environment problem: keep the traceback
        return WorkerResult.model_construct(
            status=ExecutionStatus.FAILED, error=f"{type(exc).__name__}: {exc}", traceback=traceback.format_exc()
        )


def result_json(result: WorkerResult) -> str:
    """The result as JSON. Written by hand rather than by pydantic's serializer: building that
    serializer would cost each worker process about 10 ms, a twentieth of its whole bookkeeping."""
    document: dict = {"status": result.status.value}
    if result.measurements:
        document["measurements"] = [m.model_dump(mode="json") for m in result.measurements]
    for key in ("error", "traceback", "repeats"):
        if getattr(result, key, None):
            document[key] = getattr(result, key)
    return json.dumps(document, default=str)


def main(job_path: str, result_path: str) -> int:
    from ccbench.basics.fsutil import write_text_atomic

    result = run_job(WorkerJob.model_validate_json(Path(job_path).read_text()))
    write_text_atomic(Path(result_path), result_json(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
