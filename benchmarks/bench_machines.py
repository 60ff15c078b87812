"""A study of machines on this machine, once, timed (issue 43): how long a guest takes from launch to
SSH, from the fleet's start to its first execution, and how long each arm's run takes.

Runs ``ccbench machines run`` through the real CLI on the two-arm study of the lifecycle tests (the
plain arm and its bounce twin, 2 vCPUs, 1 GiB, one round, a tiny fio plan on the guest's virtio
disk), or on a study file you name, and prints per arm, from the run's own records:

  * boot to SSH: ``study.json`` ``arms.<arm>.boots[].ready_s`` (launch until SSH lets the study in);
  * the fleet's phases in each round (``round-<k>/fleet-*/fleet.json``, ``hosts.<arm>.rounds.*.timings``):
    ``connect_s`` (SSH to the guest and its checks), ``install_s`` (the wheelhouse into the guest),
    ``first_execution_s`` (from the start of the arm's own fleet run, one per arm and round, to its
    first execution) and
    ``run_s`` (the plan's run in the guest);
  * the bounced mappings its guests counted (``trace.swiotlb:swiotlb_bounced``, measured executions);

and the study's total wall time (the CLI from start to exit: image check, boots, rounds, compare,
report, every guest stopped). The image is built first if the cache has none (1-2 minutes with a
Debian mirror; reported apart, as a user's second study would find it cached).

Needs root (the image is built with debootstrap), QEMU, qemu-img, debootstrap and mke2fs
(``bash scripts/setup.sh --with machines``). Under software emulation (TCG) the default study takes
about 5 minutes on 2 cores.

    python benchmarks/bench_machines.py [--study STUDY.toml] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BOUNCED = "trace.swiotlb:swiotlb_bounced"

TINY_PLAN = """name = "tiny-disk"
description = "fio random reads on the guest's virtio disk, briefly"
[defaults]
repetitions = 2
warmup = 0
cooldown = 0
timeout = 120
[[workloads]]
kind = "fio"
variants = { storage = ["disk"] }
blocksizes = ["4k"]
patterns = ["randread"]
size = "16M"
runtime = 1
"""

STUDY = """name = "bench-bounce"
plan = "{plan}"
rounds = 1
[machine]
vcpus = 2
memory = "1G"

[[arm]]
name = "plain"
kind = "plain"
baseline = true

[[arm]]
name = "plain+bounce"
kind = "plain"
twins = ["bounce"]
"""


def default_study(folder: Path) -> Path:
    plan = folder / "tiny.toml"
    plan.write_text(TINY_PLAN)
    study = folder / "study.toml"
    study.write_text(STUDY.format(plan=plan))
    return study


def ensure_image() -> float:
    """Build the image unless it is cached; the seconds it took (0 when it was cached)."""
    from ccbench.machines.image import ensure_image as build

    started = time.monotonic()
    built = []
    build(echo=built.append)
    return time.monotonic() - started if built else 0.0


def arm_timings(directory: Path) -> dict[str, list[dict]]:
    """arm -> its fleet timings, one dict per round it ran in."""
    found: dict[str, list[dict]] = {}
    for fleet_json in sorted(directory.glob("round-*/fleet-*/fleet.json")):
        fleet = json.loads(fleet_json.read_text())
        for key, host in (fleet.get("hosts") or {}).items():
            label = host.get("label") or key.split("/")[0]
            for run in (host.get("rounds") or {}).values():
                found.setdefault(label, []).append(
                    {"round": fleet_json.parts[-3], "outcome": run.get("outcome"), **(run.get("timings") or {})}
                )
    return found


def bounces(directory: Path) -> dict[str, tuple[float, int]]:
    """arm -> (bounced mappings, executions counted) over its measured executions."""
    counts: dict[str, tuple[float, int]] = {}
    for fleet_json in directory.glob("round-*/fleet-*/fleet.json"):
        fleet = json.loads(fleet_json.read_text())
        for key, host in (fleet.get("hosts") or {}).items():
            label = host.get("label") or key.split("/")[0]
            for run in (host.get("rounds") or {}).values():
                if not run.get("bundle"):
                    continue
                executions = fleet_json.parent / run["bundle"] / "executions.jsonl"
                if not executions.is_file():
                    continue
                total, counted = counts.get(label, (0.0, 0))
                for line in executions.read_text().splitlines():
                    record = json.loads(line) if line.strip() else {}
                    value = (record.get("counters") or {}).get(BOUNCED)
                    if record.get("warmup") or record.get("status") != "ok" or value is None:
                        continue
                    total, counted = total + float(value), counted + 1
                counts[label] = (total, counted)
    return counts


def _seconds(value) -> str:
    return f"{value:7.1f} s" if isinstance(value, int | float) else "      -  "


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--study", type=Path, help="a study file (default: plain and plain+bounce, a tiny fio plan)")
    parser.add_argument("--out", type=Path, help="where the study run goes (default: a temporary directory)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-machines-") as scratch:
        out = args.out or Path(scratch) / "results"
        study = args.study or default_study(Path(scratch))
        built = ensure_image()
        print(f"image: built in {built:.0f} s" if built else "image: cached", flush=True)
        started = time.monotonic()
        done = subprocess.run([sys.executable, "-m", "ccbench", "machines", "run", str(study), "--out", str(out)])
        wall = time.monotonic() - started
        runs = sorted(out.glob("machines-*"))
        if not runs:
            print(f"bench_machines: the study made no run directory under {out} (exit {done.returncode})")
            return 1
        directory = runs[-1]
        document = json.loads((directory / "study.json").read_text())
        timings, counted = arm_timings(directory), bounces(directory)
        print()
        print(
            f"study {document['name']}: {len(document['arms'])} arms, accelerator {document['accel']}, "
            f"exit {done.returncode}, status {document['status']}"
        )
        print(
            f"{'arm':<16} {'round':<8} {'boot->SSH':>9} {'connect':>9} {'install':>9} {'1st exec':>9} "
            f"{'run':>9}  bounced mappings (executions)"
        )
        for arm, record in document["arms"].items():
            boots = [b.get("ready_s") for b in record.get("boots") or []]
            total, executions = counted.get(arm, (0.0, 0))
            for index, timing in enumerate(timings.get(arm) or [{}]):
                ready = boots[index] if index < len(boots) else None  # interleaved: booted once
                print(
                    f"{arm:<16} {timing.get('round', '-'):<8} {_seconds(ready)} {_seconds(timing.get('connect_s'))} "
                    f"{_seconds(timing.get('install_s'))} {_seconds(timing.get('first_execution_s'))} "
                    f"{_seconds(timing.get('run_s'))}  {total:,.0f} ({executions})"
                )
        print("1st exec: from the start of the arm's own fleet run (one per arm and round) to its first execution")
        print(f"study wall time: {wall:.0f} s (ccbench machines run, from start to exit)")
        print(f"study run: {directory}" + ("" if args.out else " (temporary: removed now; keep it with --out)"))
        return done.returncode


if __name__ == "__main__":
    sys.exit(main())
