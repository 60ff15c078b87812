"""A study both ways on this machine: its fixed repetitions, then ``--settle`` (issue 42).

Runs a plan twice through the real CLI, one after the other: as written (fixed repetitions), and with
``--settle TARGET --repeat 3`` (3 repetitions, ``--minimum``, then rounds until each case is
settled or the plan's ``max_repetitions``). Prints each run's wall time and their ratio, the settle run's machine time
per settled variant, each case's answer (settled, or what cut it), and whether the two bundles'
verdicts agree: for every row of the workloads' primary metrics, compare's verdict (slower, faster, or
not significant) in both bundles, and for the rows the fixed run found not significant, the
fixed run's MDE (what it could have seen) next to it.

The default plan is a short one of the bundled ``storage`` plan's shape (fio on disk, tmpfs and
the ext4 loop file, two block sizes; about 2-4 minutes both ways). ``--plan storage`` runs the
bundled plan itself (about half an hour fixed; needs root for its mounts).

    python benchmarks/bench_study_time.py [--plan PLAN] [--settle 5%] [--out DIR]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SHORT_PLAN = """\
name = "storage-short"
description = "the storage plan's shape, short: fio on disk, tmpfs and the ext4 loop file"
[defaults]
repetitions = 5
warmup = 1
cooldown = 0.5
timeout = 300
max_repetitions = 15
variants = { storage = ["disk", "tmpfs", "ext4-loop"] }
[storage]
tmpfs_size = "256M"
image_size = "256M"
[[workloads]]
kind = "fio"
name = "fio-short"
blocksizes = ["4k", "1m"]
patterns = ["randread"]
size = "64M"
runtime = 1
iodepth = 16
"""


def run(plan: str, out: Path, workdir: Path, *extra: str) -> tuple[float, Path]:
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "ccbench", "run", plan, "--out", str(out), "--workdir", str(workdir), *extra],
        capture_output=True,
        text=True,
    )
    elapsed = time.monotonic() - started
    if done.returncode not in (0, 1):
        sys.exit(f"ccbench run {plan} {' '.join(extra)} failed ({done.returncode}): {done.stderr.strip()[-400:]}")
    bundle = next(p for p in out.iterdir() if (p / "manifest.json").exists())
    return elapsed, bundle


def rows(bundle: Path) -> dict[tuple[str, str, str], dict]:
    """compare's rows of the workloads' primary metrics (the series settle looks at):
    (workload, config, metric and case) -> the row."""
    from ccbench.analysis.comparison import comparison
    from ccbench.bundle import read_bundle

    declared = read_bundle(bundle, samples=False).manifest.get("declarations") or {}
    found = {}
    for row in comparison([bundle]).table.to_dict("records"):
        if row["metric"] in (declared.get(row["workload"]) or {}).get("primary_metrics", ()):
            found[(row["workload"], str(row["config"]), f"{row['metric']} {row['case'] or ''}".strip())] = row
    return found


def main() -> None:
    from ccbench.bundle import read_bundle

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--plan", help="a plan file or bundled plan name (default: a short storage-shaped plan)")
    parser.add_argument("--settle", default="5%")
    parser.add_argument(
        "--minimum", type=int, default=3, help="the settle run's repetitions before its first look (--repeat)"
    )
    parser.add_argument("--out", type=Path, help="where the two bundles go (default: a temporary directory)")
    args = parser.parse_args()
    base = args.out or Path(tempfile.mkdtemp(prefix="bench-study-time-"))
    plan = args.plan
    if plan is None:
        plan = str(base / "storage-short.toml")
        Path(plan).write_text(SHORT_PLAN)
    fixed_s, fixed = run(plan, base / "fixed", base / "work")
    settle_s, settled = run(
        plan, base / "settle", base / "work", "--settle", args.settle, "--repeat", str(args.minimum)
    )
    print(f"plan {plan}: fixed {fixed_s:.0f} s, settle {args.settle} {settle_s:.0f} s: {settle_s / fixed_s:.2f}x")
    outcomes = read_bundle(settled, samples=False).manifest["outcomes"]
    variants = 0
    for workload, outcome in outcomes.items():
        for key, variant in (outcome.get("settled") or {}).get("variants", {}).items():
            variants += variant["stopped_by"] == "settled"
            for label, case in variant["cases"].items():
                rounds = case["rounds"]
                print(f"  {workload} [{key}] {label}: {variant['stopped_by']}, {rounds} rounds: {case['state']}")
    if variants:
        print(f"the settle run's wall time per settled variant: {settle_s / variants:.0f} s ({variants} settled)")
    fixed_rows, settle_rows = rows(fixed), rows(settled)
    agree = 0
    for key, row in sorted(fixed_rows.items()):
        other = settle_rows.get(key)
        if other is None:
            continue
        same = (row["significant"], row["verdict"]) == (other["significant"], other["verdict"])
        agree += same
        # what the fixed run could have seen where it saw nothing (settle's own answer is listed above)
        note = f"; the fixed run's MDE {row['mde']:.1%}" if not row["significant"] and row["mde"] == row["mde"] else ""
        print(f"  {' '.join(key)}: fixed {row['verdict']}, settle {other['verdict']}{'' if same else '  DIFFER'}{note}")
    print(f"verdicts agree on {agree} of {len(fixed_rows)} rows")


if __name__ == "__main__":
    main()
