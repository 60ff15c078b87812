"""How much does ccbench's runner cost per execution?

Runs the same short command N times directly (subprocess) and N times as a ccbench plan (worker
process per execution, journaling, fsync), side by side in one run, and prints the per-execution
overhead and the ratio. The workload's own timing is measured inside the worker, so this overhead
is never part of a sample; it only stretches the wall time of a plan.

    .venv/bin/python benchmarks/bench_runner_overhead.py [--executions 30]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--executions", type=int, default=30)
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
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "ccbench", "run", str(plan), "--out", f"{tmp}/out",
                               "--workdir", f"{tmp}/work"], capture_output=True, text=True)
        through_ccbench = time.perf_counter() - start
        if done.returncode != 0:
            sys.exit(f"ccbench run failed: {done.stderr.strip()}")
    per_direct = direct / args.executions
    per_ccbench = through_ccbench / args.executions
    print(f"executions:                 {args.executions}")
    print(f"direct, per execution:      {per_direct * 1000:8.1f} ms")
    print(f"via ccbench, per execution: {per_ccbench * 1000:8.1f} ms (incl. one probe and start-up)")
    print(f"overhead per execution:     {(per_ccbench - per_direct) * 1000:8.1f} ms")
    print(f"ratio ccbench/direct:       {per_ccbench / per_direct:8.1f}x")


if __name__ == "__main__":
    main()
