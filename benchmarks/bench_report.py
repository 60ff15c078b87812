"""Time `ccbench report` against `ccbench compare` on the same bundles, side by side in one run.

The two commands read the same bundles and compute the same comparison; the report adds the
verdict, the page and its charts. This prints each command's median wall time over ``--rounds``
interleaved rounds (compare, report, compare, report ...: drift on a shared machine hits both) and
the ratio report / compare, which issue 41 asks to keep at or under 1.2.

Without BUNDLE arguments it imports the seed-000-shaped directory of the tests
(tests/data/import/seed000-azure: three Azure machines, systeminfo, a notebook and pyperformance)
into a temporary directory first. ``--src DIR`` runs another checkout's ``src`` (a before/after:
run it once with each).

    .venv/bin/python benchmarks/bench_report.py [BUNDLE ...] [--rounds 5] [--src ../main/src]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SEED000 = REPO / "tests" / "data" / "import" / "seed000-azure"
SEED000_TEE = ("TDX-Encrypted=tdx", "TDX-Non-Encrypted=tdx", "Intel-Non-TDX=none")


def ccbench(src: Path, *args: str) -> float:
    """Run one ccbench command from ``src``; its wall time in seconds (it must succeed)."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "ccbench", *args], env=env, capture_output=True, text=True, check=False
    )
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"ccbench {' '.join(args[:2])} ... failed ({done.returncode}): {done.stderr.strip()[-500:]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("bundles", nargs="*", type=Path, help="bundles (default: seed 000's test directory imported)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--src", type=Path, default=REPO / "src", help="the ccbench source directory to time")
    options = parser.parse_args()
    src = options.src.resolve()
    with tempfile.TemporaryDirectory(prefix="bench-report-") as scratch:
        work = Path(scratch)
        bundles = [str(p) for p in options.bundles]
        if not bundles:
            tees = [arg for tee in SEED000_TEE for arg in ("--tee", tee)]
            ccbench(src, "import", "seed000", str(SEED000), "--out", str(work / "bundles"), *tees)
            bundles = [str(p) for p in sorted((work / "bundles").iterdir())]
        output = str(work / "report.html")
        ccbench(src, "compare", *bundles)  # warm: the columnar cache of every bundle is written once
        times: dict[str, list[float]] = {"compare": [], "report": []}
        for _ in range(options.rounds):
            times["compare"].append(ccbench(src, "compare", *bundles))
            times["report"].append(ccbench(src, "report", *bundles, "-o", output))
        size = Path(output).stat().st_size
    compare, report = statistics.median(times["compare"]), statistics.median(times["report"])
    print(f"source: {src}; {len(bundles)} bundles; {options.rounds} interleaved rounds")
    print(f"compare  median {compare:6.2f} s  (min {min(times['compare']):.2f}, max {max(times['compare']):.2f})")
    print(f"report   median {report:6.2f} s  (min {min(times['report']):.2f}, max {max(times['report']):.2f})")
    print(f"report / compare: {report / compare:.2f}x (the HTML page: {size / 1024:.0f} KiB)")


if __name__ == "__main__":
    main()
