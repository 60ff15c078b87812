"""Time `ccbench compare` and `ccbench report` on 100,000 samples across 6 configurations.

Writes 3 synthetic bundles (3 machines, each with 2 storage variants: 6 configurations; realistic
shapes: fio cases with 5 metrics, notebooks with per-cell times, prime), then runs each command as
a user would, interleaved with loading the same bundles in Python and with the commands restricted
to one process (-j 1), and prints the median times, peak memory (of the main process) and ratios.
Target (issue 3): each command under 5 s on the 2-core development machine.

With ``--against SRC`` (a ``src`` directory of another ccbench checkout, e.g. made with
``git archive <commit> src | tar -x -C /tmp/old``) every command also runs from that code, interleaved
with this checkout's, and the ratios this/that are printed: a before/after measured side by side.

    .venv/bin/python benchmarks/bench_analysis.py [--samples 100000] [--rounds 3] [--against /tmp/old/src]
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

import numpy as np

from ccbench.bundle import BundleWriter
from ccbench.model import Sample

MACHINES = [("plain-vm", "none", 1.0), ("sev-snp-vm", "sev-snp", 1.06), ("tdx-vm", "tdx", 1.09)]
STORAGE = [({"storage": "disk"}, 1.0), ({"storage": "encrypted", "storage_mechanism": "fscrypt"}, 1.4)]


def cases():
    for bs in ("4k", "64k", "1m"):
        for rw in ("randread", "randwrite", "read", "write"):
            for metric, unit, better in (("throughput", "MB/s", "higher"), ("iops", "IOPS", "higher"),
                                         ("clat_mean", "us", "lower"), ("clat_p50", "us", "lower"), ("clat_p99", "us", "lower")):
                yield "fio", {"bs": bs, "rw": rw}, metric, unit, better
    for notebook in ("airline_delay", "credit_fraud", "app_store"):
        for cell in range(20):
            yield f"notebook-{notebook}", {"cell": cell}, "cell_s", "s", "lower"
        yield f"notebook-{notebook}", {}, "total_s", "s", "lower"
    yield "prime", {}, "time", "s", "lower"


def write_bundles(root: Path, total: int) -> list[Path]:
    rng = np.random.default_rng(1)
    groups = list(cases())
    configs = len(MACHINES) * len(STORAGE)
    per_group = max(3, total // (configs * len(groups)))
    paths = []
    for host, tee, machine_factor in MACHINES:
        writer = BundleWriter.create(root / host, {"plan": {"name": "bench"}, "environment": {
            "hostname": host, "tee": {"technology": tee, "evidence": []}, "cpu": {"model": "bench"}, "memory": {},
            "kernel": {"release": "6"}, "storage": {"protection": "plain"}}})
        batch = []
        for variant, storage_factor in STORAGE:
            for workload, case, metric, unit, better in groups:
                factor = machine_factor * (storage_factor if workload == "fio" else 1.0)
                values = 100 * factor * np.exp(rng.normal(0, 0.03, per_group))
                if better == "higher":
                    values = 1e4 / values
                for rep, value in enumerate(values):
                    batch.append(Sample(workload=workload, kind=workload.split("-")[0], params=case, variant=variant,
                                        metric=metric, unit=unit, value=float(value), better=better, repetition=rep,
                                        warmup=False, timestamp="2026-01-01T00:00:00Z", metadata={"case": case}))
        writer.append_samples(batch)
        writer.close()
        paths.append(writer.path)
    return paths


def timed(argv: list[str], src: str | None = None) -> tuple[float, float]:
    """Wall seconds and peak resident memory (MiB) of the command's own process (os.wait4's rusage:
    a helper process it forks is not included); with ``src``, ccbench is imported from there."""
    env = dict(os.environ, PYTHONPATH=src) if src else None
    with tempfile.TemporaryFile() as stderr:
        start = time.perf_counter()
        process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=stderr, env=env)
        _, status, usage = os.wait4(process.pid, 0)
        elapsed = time.perf_counter() - start
        process.returncode = os.waitstatus_to_exitcode(status)
        if process.returncode != 0:
            stderr.seek(0)
            sys.exit(f"{' '.join(argv[:4])} failed: {stderr.read().decode(errors='replace').strip()[-500:]}")
    return elapsed, usage.ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3, help="runs of each command, interleaved; the median is printed")
    parser.add_argument("--against", metavar="SRC", help="also run every command from this src directory, interleaved, "
                                                         "and print the ratios (this checkout / that one)")
    args = parser.parse_args()
    this_src = str(Path(__file__).resolve().parents[1] / "src")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        paths = write_bundles(root, args.samples)
        count = sum(len((p / "samples.jsonl").read_text().splitlines()) for p in paths)
        cli = [sys.executable, "-m", "ccbench"]
        commands = {
            "load only (python -c ccbench.load)": [sys.executable, "-c", f"import ccbench; ccbench.load({[str(p) for p in paths]!r})"],
            "ccbench compare --json": cli + ["compare", *map(str, paths), "--json"],
            "ccbench compare --json -j 1": cli + ["compare", *map(str, paths), "--json", "-j", "1"],
            "ccbench report -o report.html": cli + ["report", *map(str, paths), "-o", str(root / "report.html")],
            "ccbench report -o report.html -j 1": cli + ["report", *map(str, paths), "-o", str(root / "report.html"), "-j", "1"],
        }
        sources = {"": this_src}
        if args.against:
            sources["against: "] = args.against
        times: dict[str, list[float]] = {}
        peaks: dict[str, list[float]] = {}
        for _ in range(args.rounds):  # interleaved, so that drift on a shared machine hits all alike
            for name, argv in commands.items():
                for prefix, src in sources.items():
                    elapsed, peak = timed(argv, src)
                    times.setdefault(prefix + name, []).append(elapsed)
                    peaks.setdefault(prefix + name, []).append(peak)
    median = {name: statistics.median(values) for name, values in times.items()}
    load = median["load only (python -c ccbench.load)"]
    print(f"samples: {count:,} in {len(paths)} bundles, 6 configurations; median of {args.rounds} interleaved runs")
    for name, value in median.items():
        if name.startswith("against: "):
            continue
        extra = "" if name.startswith("load") else f"  ({value / load:.1f}x load; {value / 5:.2f} of the 5 s target)"
        print(f"{name:36s} {value:6.2f} s  peak {statistics.median(peaks[name]):5.0f} MiB{extra}")
    if args.against:
        print(f"against {args.against} (same bundles, interleaved): this checkout / that one")
        for name in commands:
            other = median["against: " + name]
            print(f"{name:36s} {median[name]:6.2f} s vs {other:6.2f} s  ratio {median[name] / other:.2f}  "
                  f"peak memory ratio {statistics.median(peaks[name]) / statistics.median(peaks['against: ' + name]):.2f}")
    print(f"helper process (default) vs -j 1: compare {median['ccbench compare --json'] / median['ccbench compare --json -j 1']:.2f}x, "
          f"report {median['ccbench report -o report.html'] / median['ccbench report -o report.html -j 1']:.2f}x")


if __name__ == "__main__":
    main()
