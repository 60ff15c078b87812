"""Time `ccbench report` against `ccbench compare` on the same bundles, side by side in one run.

The two commands read the same bundles and compute the same comparison; the report adds the
verdict, the page and its charts. This prints each command's median wall time over ``--rounds``
interleaved rounds (compare, report, compare, report ...: drift on a shared machine hits both) and
the ratio report / compare, which issue 41 asks to keep at or under 1.2, and the same for the CPU time
each used (its helper processes included): on a machine busy with other work the wall times follow
the CPU times, since a report's helper then waits for a core.

Without BUNDLE arguments it imports the seed-000-shaped directory of the tests
(tests/data/import/seed000-azure: three Azure machines, systeminfo, a notebook and pyperformance)
into a temporary directory first. ``--src DIR`` runs another checkout's ``src``; given several
times, every source is timed in the same interleaved rounds (a before/after in one run).

    .venv/bin/python benchmarks/bench_report.py [BUNDLE ...] [--rounds 5] [--src ../main/src --src src]
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

REPO = Path(__file__).resolve().parents[1]
SEED000 = REPO / "tests" / "data" / "import" / "seed000-azure"
SEED000_TEE = ("TDX-Encrypted=tdx", "TDX-Non-Encrypted=tdx", "Intel-Non-TDX=none")


def ccbench(src: Path, *args: str) -> tuple[float, float]:
    """Run one ccbench command from ``src``: its wall time and its CPU time (user + system, its helper
    processes included) in seconds; it must succeed."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "ccbench", *args], env=env, capture_output=True, text=True, check=False
    )
    elapsed = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        sys.exit(f"ccbench {' '.join(args[:2])} ... failed ({done.returncode}): {done.stderr.strip()[-500:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return elapsed, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("bundles", nargs="*", type=Path, help="bundles (default: seed 000's test directory imported)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--src", type=Path, action="append", help="a ccbench source directory to time (repeatable; default: this one)"
    )
    options = parser.parse_args()
    sources = [src.resolve() for src in options.src or [REPO / "src"]]
    with tempfile.TemporaryDirectory(prefix="bench-report-") as scratch:
        work = Path(scratch)
        bundles = [str(p) for p in options.bundles]
        if not bundles:
            tees = [arg for tee in SEED000_TEE for arg in ("--tee", tee)]
            ccbench(sources[0], "import", "seed000", str(SEED000), "--out", str(work / "bundles"), *tees)
            bundles = [str(p) for p in sorted((work / "bundles").iterdir())]
        output = str(work / "report.html")
        ccbench(sources[0], "compare", *bundles)  # warm: the columnar cache of every bundle is written once
        times = {src: {"compare": [], "report": []} for src in sources}
        for _ in range(options.rounds):
            for src in sources:
                times[src]["compare"].append(ccbench(src, "compare", *bundles))
                times[src]["report"].append(ccbench(src, "report", *bundles, "-o", output))
        size = Path(output).stat().st_size
    print(f"{len(bundles)} bundles; {options.rounds} interleaved rounds (the HTML page: {size / 1024:.0f} KiB)")
    for src in sources:
        wall = {command: [w for w, _ in runs] for command, runs in times[src].items()}
        cpu = {command: statistics.median(c for _, c in runs) for command, runs in times[src].items()}
        compare, report = statistics.median(wall["compare"]), statistics.median(wall["report"])
        spread = {command: f"{min(values):.2f}-{max(values):.2f}" for command, values in wall.items()}
        print(
            f"{src}: compare median {compare:.2f} s ({spread['compare']}), report median {report:.2f} s "
            f"({spread['report']}); report / compare: {report / compare:.2f}x; CPU time (helpers included) "
            f"compare {cpu['compare']:.2f} s, report {cpu['report']:.2f} s: {cpu['report'] / cpu['compare']:.2f}x"
        )


if __name__ == "__main__":
    main()
