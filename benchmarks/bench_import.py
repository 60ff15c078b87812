"""Time and peak memory of ``ccbench import pyperf`` on a generated pyperf JSON file, side by side
with the floor: ``json.load`` of the same file in a fresh Python.

The file has the shape pyperformance writes (many benchmarks, 20 worker runs of 50 values each,
calibration runs, warmups, the metadata pyperf records); ``--mb`` sets its size (10 by default,
issue 29's target: at most 3 s and at most 5x the file's size in memory). Each measurement runs in
a fresh process (the import through ``import_results``, in-process, as the CLI does), ``--rounds``
times interleaved; the median wall time and the peak RSS are printed, with ratios to the floor and
the memory above a process that only imports the modules an import uses, per MB of file.

With ``--against REV`` the import also runs from another revision (``git archive REV src`` into a
temporary directory, or the path of another checkout's ``src``), interleaved: before/after side by
side. ``--profile`` prints cProfile's top functions of one import (this checkout).

    .venv/bin/python benchmarks/bench_import.py [--mb 10] [--rounds 3] [--against c2966d2] [--profile]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
VALUES_PER_RUN, RUNS = 50, 20

#: each child prints {"seconds": wall time of the work, "cpu": its CPU time, "peak_mib": its peak RSS}
FLOOR = """
import json, resource, sys, time
cpu0 = sum(resource.getrusage(resource.RUSAGE_SELF)[:2])
start = time.perf_counter()
with open(sys.argv[1]) as handle:
    json.load(handle)
seconds = time.perf_counter() - start
usage = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"seconds": seconds, "cpu": usage.ru_utime + usage.ru_stime - cpu0, "peak_mib": usage.ru_maxrss / 1024}))
"""
BARE = """
import json, resource
import ccbench.attestation, ccbench.results.importers.staging, ccbench.workloads
try:
    import ccbench.bundle.columnar
except ImportError:  # a revision from before the bundle package (--against): results/columnar.py
    import ccbench.results.columnar
print(json.dumps({"seconds": 0.0, "cpu": 0.0, "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""
IMPORT = """
import json, resource, sys, time
from pathlib import Path
from ccbench.results.importers import import_results
if sys.argv[3:] == ["no-parquet"]:  # the share of samples.parquet: the same import without it
    import ccbench.bundle.columnar
    ccbench.bundle.columnar.write_bundle_parquet = lambda bundle: None
cpu0 = sum(resource.getrusage(resource.RUSAGE_SELF)[:2])
start = time.perf_counter()
import_results("pyperf", [Path(sys.argv[1])], Path(sys.argv[2]), "bench")
seconds = time.perf_counter() - start
usage = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"seconds": seconds, "cpu": usage.ru_utime + usage.ru_stime - cpu0, "peak_mib": usage.ru_maxrss / 1024}))
"""


def generate(path: Path, megabytes: float) -> int:
    """A pyperformance-shaped result of about ``megabytes`` MB; returns the number of values."""
    rng = random.Random(29)
    metadata = {
        "hostname": "bench-host",
        "cpu_model_name": "Intel(R) Xeon(R) Processor",
        "cpu_count": 2,
        "platform": "Linux-6.1.0-18-amd64-x86_64-with-glibc2.36",
        "python_version": "3.11.7 (64-bit)",
        "perf_version": "2.10.0",
        "performance_version": "1.11.0",
        "unit": "second",
    }
    benchmarks, size, values = [], 0, 0
    while size < megabytes * 1e6:
        scale = 10 ** rng.uniform(-6, -1)
        runs = [{"metadata": {"date": "2026-11-23 04:15:15.043262", "calibrate_loops": 16}, "warmups": [[16, scale]]}]
        for _ in range(RUNS):
            run_values = [scale * rng.uniform(0.95, 1.1) for _ in range(VALUES_PER_RUN)]
            runs.append(
                {
                    "metadata": {"date": "2026-11-23 04:15:16.1", "duration": 1.5, "load_avg_1min": 0.4},
                    "warmups": [[16, scale]],
                    "values": run_values,
                }
            )
            values += VALUES_PER_RUN
        benchmark = {"metadata": {"name": f"bench_{len(benchmarks)}", "loops": 16}, "runs": runs}
        benchmarks.append(benchmark)
        size += len(json.dumps(benchmark))
    path.write_text(json.dumps({"version": "1.0", "metadata": metadata, "benchmarks": benchmarks}))
    return values


def child(code: str, src: str, *args: str) -> dict:
    env = {**os.environ, "PYTHONPATH": src}
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env)
    if done.returncode != 0:
        sys.exit(f"a measurement failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def source_of(against: str, root: Path) -> str:
    if Path(against).is_dir():
        return str(Path(against).resolve())
    target = root / "against"
    target.mkdir()
    archive = subprocess.run(["git", "-C", str(REPO), "archive", against, "src"], capture_output=True)
    if archive.returncode != 0:
        sys.exit(f"--against {against}: neither a directory nor a git revision ({archive.stderr.decode().strip()})")
    subprocess.run(["tar", "-x", "-C", str(target)], input=archive.stdout, check=True)
    return str(target / "src")


def profile(source: Path, root: Path) -> None:
    import cProfile
    import pstats

    sys.path.insert(0, str(REPO / "src"))
    from ccbench.results.importers import import_results

    profiler = cProfile.Profile()
    profiler.enable()
    import_results("pyperf", [source], root / "profiled", "bench")
    profiler.disable()
    pstats.Stats(profiler).sort_stats("tottime").print_stats(20)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=float, default=10.0, help="size of the generated pyperf JSON (MB)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--against", help="another revision or src directory, measured interleaved")
    parser.add_argument("--profile", action="store_true", help="print cProfile's top functions of one import")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-import-") as tmp:
        root = Path(tmp)
        source = root / "pyperf.json"
        values = generate(source, args.mb)
        megabytes = source.stat().st_size / 1e6
        print(f"pyperf JSON: {megabytes:.1f} MB, {values:,} values")
        if args.profile:
            profile(source, root)
            return
        sources = {"this": str(REPO / "src")}
        if args.against:
            sources["against"] = source_of(args.against, root)
        results: dict[str, list[dict]] = {name: [] for name in ["json.load", *sources, "no Parquet"]}
        bare = {name: child(BARE, src)["peak_mib"] for name, src in sources.items()}
        bare["no Parquet"] = bare["this"]
        for round_number in range(args.rounds):
            results["json.load"].append(child(FLOOR, sources["this"], str(source)))
            for name, src in sources.items():
                out = root / f"out-{name}-{round_number}"
                results[name].append(child(IMPORT, src, str(source), str(out)))
            out = root / f"out-no-parquet-{round_number}"
            results["no Parquet"].append(child(IMPORT, sources["this"], str(source), str(out), "no-parquet"))
        floor_s = statistics.median(r["seconds"] for r in results["json.load"])
        floor_cpu = statistics.median(r["cpu"] for r in results["json.load"])
        floor_mib = max(r["peak_mib"] for r in results["json.load"])
        print(
            f"{'':10} {'median s':>9} {'x floor':>8} {'CPU s':>7} {'x floor':>8} {'peak MiB':>9} {'x floor':>8} "
            f"{'MiB above its imports / MB file':>32}"
        )
        for name, runs in results.items():
            seconds = statistics.median(r["seconds"] for r in runs)
            cpu = statistics.median(r["cpu"] for r in runs)
            peak = max(r["peak_mib"] for r in runs)
            above = f"{(peak - bare[name]) / megabytes:32.2f}" if name in bare else ""
            print(
                f"{name:10} {seconds:9.2f} {seconds / floor_s:8.2f} {cpu:7.2f} {cpu / floor_cpu:8.2f} "
                f"{peak:9.0f} {peak / floor_mib:8.2f} {above}"
            )
        if args.against:
            this = statistics.median(r["seconds"] for r in results["this"])
            that = statistics.median(r["seconds"] for r in results["against"])
            print(f"this / against: {this / that:.3f} (time)")


if __name__ == "__main__":
    main()
