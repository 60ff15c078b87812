"""What the mechanism counters cost an execution: A/A, side by side, interleaved.

The same execution (a command that faults pages, makes syscalls and computes for about a second)
runs through the real supervisor (ccbench.run.supervise.WorkerExecutor) alternately with the counters
on and off, in ABBA order so that drift hits both sides. Prints, per side, the median of the
workload's own wall time and of the execution as the runner sees it, their ratios (on / off) with
the spread of the per-pair ratios, and the counters' own bookkeeping per execution (two snapshots
and the record fields; opening the session once per run) as a share of the execution.

Also one refresh of the interference watch over the layer's kernel workers and the workload's
servers, which runs once a second when a variant or workload declares them.

    .venv/bin/python benchmarks/bench_counters.py [--pairs 12]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

from ccbench.model import WorkerJob
from ccbench.observe.counters import CounterSession, execution_fields
from ccbench.observe.serving import ServingWatch
from ccbench.run.supervise import WorkerExecutor

WORK = (
    'python3 -c "import os\nblocks = [bytearray(4096) for _ in range(40000)]\n'
    'for _ in range(20000): os.getppid()\nprint(sum(range(12_000_000)))"'
)


def _job(directory: Path, counters: bool, index: int) -> tuple[WorkerJob, Path]:
    raw = directory / f"raw-{index}"
    raw.mkdir()
    job = WorkerJob(
        kind="command",
        name="aa",
        params={"command": WORK, "env": {}},
        workdir=str(directory),
        raw_dir=str(raw),
        repetition=index,
        warmup=False,
        variant={},
        counters=counters,
    )
    return job, raw


def _run(executor: WorkerExecutor, directory: Path, counters: bool, index: int) -> tuple[float, float]:
    job, raw = _job(directory, counters, index)
    attempt = executor.execute(job, raw)
    if attempt.status.value != "ok":
        raise SystemExit(f"the execution failed: {attempt.error}")
    wall = next(m.value for m in attempt.measurements if m.metric == "wall_time")
    assert ("counters" in attempt.watch) == counters
    return wall, attempt.elapsed_s


def _spread(values: list[float]) -> str:
    ordered = sorted(values)
    low, high = ordered[len(ordered) // 10], ordered[-1 - len(ordered) // 10]
    return f"{statistics.median(values):.4f} (per-pair 10-90%: {low:.4f}-{high:.4f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=12)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ccbench-bench-counters-") as name:
        directory = Path(name)
        executor = WorkerExecutor(workdir=directory / "work")
        results: dict[bool, list[tuple[float, float]]] = {True: [], False: []}
        try:
            _run(executor, directory, True, 10_000)  # opens the session; a warm-up for both sides
            for pair in range(args.pairs):
                order = (True, False) if pair % 2 == 0 else (False, True)
                for side in order:
                    results[side].append(_run(executor, directory, side, pair * 2 + order.index(side)))
            session = executor.counters
            snapshots = []
            for _ in range(200):
                started = time.perf_counter()
                execution_fields(session, session.snapshot())
                snapshots.append(time.perf_counter() - started)
        finally:
            executor.close()
        started = time.perf_counter()
        CounterSession(directory / "work2").open().close()
        session_s = time.perf_counter() - started
    workload = [on[0] / off[0] for on, off in zip(results[True], results[False], strict=True)]
    elapsed = [on[1] / off[1] for on, off in zip(results[True], results[False], strict=True)]
    median_wall = statistics.median(w for w, _ in results[False])
    median_elapsed = statistics.median(e for _, e in results[False])
    bookkeeping = statistics.median(snapshots)
    watch = ServingWatch(Path("/proc"), servers=[os.getpid()], layer_threads=["fscrypt_read_queue", "loop0"])
    refreshes, refresh_cpu = [], []
    for _ in range(100):
        started, cpu = time.perf_counter(), time.process_time()
        watch.refresh()
        refreshes.append(time.perf_counter() - started)
        refresh_cpu.append(time.process_time() - cpu)
    processes = sum(1 for entry in os.listdir("/proc") if entry.isdigit())
    print(f"{args.pairs} A/A pairs, ABBA order; processes on this machine: {processes}")
    print(f"{'':34s} {'counters on':>12s} {'counters off':>13s}")
    for label, index in (("workload wall time (median, s)", 0), ("execution elapsed (median, s)", 1)):
        on = statistics.median(r[index] for r in results[True])
        off = statistics.median(r[index] for r in results[False])
        print(f"{label:34s} {on:12.4f} {off:13.4f}")
    print(f"ratio on/off, workload wall time: {_spread(workload)}")
    print(f"ratio on/off, execution elapsed:  {_spread(elapsed)}")
    print(
        f"counters' bookkeeping per execution (snapshot before, snapshot + fields after): "
        f"{2 * bookkeeping * 1e3:.2f} ms = {2 * bookkeeping / median_elapsed:.2%} of this execution "
        f"({2 * bookkeeping / median_wall:.2%} of its workload time)"
    )
    print(f"opening and closing the counters once per run (mounts, trace instances, perf): {session_s * 1e3:.1f} ms")
    print(
        f"one refresh of the watch over servers and layer workers (their trees and kthreadd's children): "
        f"{statistics.median(refreshes) * 1e3:.2f} ms wall, {statistics.median(refresh_cpu) * 1e3:.2f} ms CPU "
        "(once a second when declared)"
    )


if __name__ == "__main__":
    main()
