"""What the interference monitor costs: start()+stop() around an empty interval, and one poll.

A measured process (a sleeping subprocess with a child, like a worker running a tool) is watched
repeatedly; prints the median wall time of start+stop with polling off and on, the time of one
tree refresh (what each poll costs), and the CPU the observer used, next to a bare
psutil.Process(pid).cpu_times() for scale.

    .venv/bin/python benchmarks/bench_interference.py [--rounds 200]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

import psutil

from ccbench.observe.interference import InterferenceMonitor


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=200)
    args = parser.parse_args()
    measured = subprocess.Popen(
        [sys.executable, "-c", "import subprocess, time; subprocess.Popen(['sleep', '600']); time.sleep(600)"]
    )
    time.sleep(0.5)
    try:
        results = {}
        for label, poll in (("start+stop, no polling", None), ("start+stop, polling thread", 1.0)):
            walls, cpus = [], []
            for _ in range(args.rounds):
                cpu0, wall0 = time.process_time(), time.perf_counter()
                InterferenceMonitor(measured.pid, poll_s=poll).start().stop()
                walls.append(time.perf_counter() - wall0)
                cpus.append(time.process_time() - cpu0)
            results[label] = (statistics.median(walls), statistics.mean(cpus))
        monitor = InterferenceMonitor(measured.pid, poll_s=None).start()
        refresh = []
        for _ in range(args.rounds):
            wall0 = time.perf_counter()
            monitor._refresh()
            refresh.append(time.perf_counter() - wall0)
        monitor.stop()
        bare = []
        process = psutil.Process(measured.pid)
        for _ in range(args.rounds):
            wall0 = time.perf_counter()
            process.cpu_times()
            bare.append(time.perf_counter() - wall0)
        processes = len(psutil.pids())
        print(f"processes on this machine: {processes}; rounds: {args.rounds}")
        for label, (wall, cpu) in results.items():
            print(f"{label:32s} median {wall * 1e3:7.2f} ms wall, mean {cpu * 1e3:7.2f} ms CPU")
        print(f"{'one poll (tree refresh)':32s} median {statistics.median(refresh) * 1e3:7.2f} ms wall")
        print(f"{'psutil cpu_times() alone':32s} median {statistics.median(bare) * 1e3:7.3f} ms wall")
    finally:
        for child in psutil.Process(measured.pid).children(recursive=True):
            child.kill()
        measured.kill()
        measured.wait()


if __name__ == "__main__":
    main()
