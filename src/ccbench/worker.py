"""One execution of one workload, in its own process (started by the runner).

    python -m ccbench.worker JOB.json RESULT.json

The runner starts this in a new session (its own process group), so a timeout ends the worker and
everything it started. The result is written atomically; a missing result means the worker died.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from pathlib import Path


def main(job_path: str, result_path: str) -> int:
    job = json.loads(Path(job_path).read_text())
    result: dict
    try:
        if job.get("pin"):
            os.sched_setaffinity(0, job["pin"])
        from ccbench.workloads import workload_class
        from ccbench.workloads.base import ExecutionContext, WorkloadFailed

        cls = workload_class(job["kind"])
        workload = cls(job["name"], cls.Params(**job["params"]))
        ctx = ExecutionContext(
            workload_name=job["name"],
            workdir=Path(job["workdir"]),
            raw_dir=Path(job["raw_dir"]),
            repetition=job["repetition"],
            warmup=job["warmup"],
            variant=job["variant"],
            timeout=job.get("timeout"),
            environment=job.get("environment", {}),
        )
        try:
            measurements = workload.run(ctx)
            result = {"status": "ok", "measurements": [m.model_dump(mode="json") for m in measurements]}
        except WorkloadFailed as exc:
            result = {"status": "failed", "error": str(exc)}
    except Exception as exc:  # anything else is a bug or an environment problem: keep the traceback
        result = {
            "status": "failed",
            "error": f"{type(exc).__name__}: {exc}",
            "traceback": traceback.format_exc(),
        }
    tmp = Path(result_path + ".tmp")
    tmp.write_text(json.dumps(result, default=str))
    os.replace(tmp, result_path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
