"""How much does ccbench's runner cost per execution?

Runs the same short command N times directly (subprocess) and N times as a ccbench plan (worker
process per execution, journaling, fsync), side by side in one run, and prints the per-execution
overhead and the ratio. The workload's own timing is measured inside the worker, so this overhead
is never part of a sample; it only stretches the wall time of a plan.

With ``--baseline-src DIR`` (another checkout's ``src``, e.g. the main branch's) the plan is also
run by that ccbench, alternating with this one for ``--rounds`` rounds, and the medians of both and
their ratio are printed: a before/after comparison taken under the same machine conditions.

    .venv/bin/python benchmarks/bench_runner_overhead.py [--executions 30]
    .venv/bin/python benchmarks/bench_runner_overhead.py --baseline-src ../main/src --rounds 5
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"


def through_ccbench(plan: Path, tmp: str, src: Path | None) -> tuple[float, float]:
    """Wall seconds and CPU seconds (of ccbench and every process it started) for one
    ``ccbench run`` of the plan, with ccbench imported from ``src``. On a busy machine the CPU time
    is the steadier of the two."""
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = str(src)
    out = tempfile.mkdtemp(dir=tmp)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "ccbench", "run", str(plan), "--out", f"{out}/out",
                           "--workdir", f"{out}/work"], capture_output=True, text=True, env=env)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        sys.exit(f"ccbench run failed: {done.stderr.strip()}")
    return elapsed, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--executions", type=int, default=30)
    parser.add_argument("--baseline-src", type=Path, help="compare with the ccbench in this src directory")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds with --baseline-src")
    args = parser.parse_args()
    command = "true"
    with tempfile.TemporaryDirectory() as tmp:
        plan = Path(tmp) / "plan.toml"
        plan.write_text(
            f'name = "overhead"\n[defaults]\nrepetitions = {args.executions}\nwarmup = 0\ncooldown = 0\n'
            f'[[workloads]]\nkind = "command"\ncommand = "{command}"\n'
        )
        start = time.perf_counter()
        for _ in range(args.executions):
            subprocess.run(["bash", "-c", command], check=True)
        direct = time.perf_counter() - start
        if args.baseline_src is None:
            this = [through_ccbench(plan, tmp, None)]
            baseline = []
        else:
            this, baseline = [], []
            for _ in range(args.rounds):
                baseline.append(through_ccbench(plan, tmp, args.baseline_src.resolve()))
                this.append(through_ccbench(plan, tmp, SRC))
    per_direct = direct / args.executions
    per_ccbench = statistics.median(wall for wall, _ in this) / args.executions
    print(f"executions:                 {args.executions}")
    print(f"direct, per execution:      {per_direct * 1000:8.1f} ms")
    print(f"via ccbench, per execution: {per_ccbench * 1000:8.1f} ms (incl. one probe and start-up)")
    print(f"overhead per execution:     {(per_ccbench - per_direct) * 1000:8.1f} ms")
    print(f"ratio ccbench/direct:       {per_ccbench / per_direct:8.1f}x")
    if baseline:
        per_baseline = statistics.median(wall for wall, _ in baseline) / args.executions
        cpu_this = statistics.median(cpu for _, cpu in this) / args.executions
        cpu_baseline = statistics.median(cpu for _, cpu in baseline) / args.executions
        print(f"baseline: {args.baseline_src} (medians of {len(baseline)} runs each, alternating)")
        print(f"  wall per execution:       {per_baseline * 1000:8.1f} ms baseline, {per_ccbench * 1000:8.1f} ms this tree, "
              f"ratio {per_ccbench / per_baseline:.3f}")
        print(f"  CPU per execution:        {cpu_baseline * 1000:8.1f} ms baseline, {cpu_this * 1000:8.1f} ms this tree, "
              f"ratio {cpu_this / cpu_baseline:.3f}")


if __name__ == "__main__":
    main()
