"""A study both ways on this machine: its fixed repetitions, then settled case by case (issue 42).

Runs two plans of one shape through the real CLI, one after the other: the fixed one as written
(its repetitions), and the one designed for settling as written (fewer repetitions, ``settle`` and
``max_repetitions`` in its defaults: rounds until each case is settled or the limit). Prints each
run's wall time and their ratio, the settle run's machine time per settled case, each case's
answer (settled, or what stopped it: a limit, or that it could not settle by the round limit), and
whether the two bundles' verdicts agree: for every row of
the workloads' primary metrics, compare's verdict (slower, faster, or not significant; compare
judges a settled case on the run's own anytime-valid interval) in both bundles, and for the rows
the fixed run found not significant, the fixed run's MDE (what it could have seen) next to it.
Last, an estimate (said so where it prints): the time a fixed design would take whose repetitions
per workload are sized so that every primary row's MDE reaches the target (at most the settle
plan's limit), from the fixed run's MDEs and its time per repetition: the design settling replaces
for a user who wants those answers, against which the issue's one-third target is set.

The default pair is short, of the bundled ``storage`` plan's shape (fio on disk, tmpfs and the
ext4 loop file, two block sizes; 5 fixed repetitions against 3 then settled at 5%, at most 15;
about 2-4 minutes both ways). ``--plan storage`` runs the bundled plan and ``storage-settle``, its
twin designed for settling (about half an hour fixed, at most an hour settled; needs root for its
mounts). Another ``--plan`` without ``--settle-plan`` is run the second time with ``--settle TARGET
--repeat MINIMUM``. Each run's output goes to ``<out>/fixed.log`` and ``<out>/settle.log`` as it
runs (a line here when each starts and ends); Ctrl-C is passed on to the run, which cleans up its
mounts before the script stops.

    python benchmarks/bench_study_time.py [--plan PLAN [--settle-plan PLAN]] [--settle 5%] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SHORT_PLAN = """\
name = "storage-short@SUFFIX@"
description = "the storage plan's shape, short: fio on disk, tmpfs and the ext4 loop file"
[defaults]
@REPETITIONS@
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
    """``ccbench run`` of ``plan``, its output in ``out``.log; the wall time and the bundle. Ctrl-C
    (or SIGINT to this script alone) is passed on to the run once and waited for, so that it
    unmounts and detaches what it made before this script stops."""
    log = out.with_suffix(".log")
    out.mkdir(parents=True, exist_ok=True)
    print(f"ccbench run {' '.join([plan, *extra])}: running (its output: {log})", flush=True)
    started = time.monotonic()
    with log.open("w") as sink:
        # a session of its own: the terminal's Ctrl-C reaches this script only, which passes it on once
        process = subprocess.Popen(
            [sys.executable, "-m", "ccbench", "run", plan, "--out", str(out), "--workdir", str(workdir), *extra],
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            code = process.wait()
        except KeyboardInterrupt:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout=300)
            except subprocess.TimeoutExpired:
                process.kill()
            raise
    elapsed = time.monotonic() - started
    if code not in (0, 1):
        tail = log.read_text(errors="replace").strip()[-400:]
        sys.exit(f"ccbench run {plan} {' '.join(extra)} failed ({code}; {log}): {tail}")
    print(f"  done in {elapsed:,.0f} s", flush=True)
    bundle = next(p for p in out.iterdir() if (p / "manifest.json").exists())
    return elapsed, bundle


def rows(bundle: Path) -> dict[tuple[str, str, str], dict]:
    """compare's rows of the series settle judges (ccbench.analysis.statistics.sequential.judged: the
    workloads' primary metrics, or the figures their per-message verdict is made of):
    (workload, config, metric and case) -> the row."""
    from ccbench.analysis.comparison import comparison
    from ccbench.analysis.statistics.sequential import declares, judged
    from ccbench.bundle import read_bundle

    declared = read_bundle(bundle, samples=False).manifest.get("declarations") or {}
    series = {name: judged(spec) for name, spec in declared.items()}
    found = {}
    for row in comparison([bundle]).table.to_dict("records"):
        params = json.loads(row["params"]) if row["params"] else {}
        if declares(series.get(row["workload"], ()), row["metric"], params):
            found[(row["workload"], str(row["config"]), f"{row['metric']} {row['case'] or ''}".strip())] = row
    return found


#: the short pair: fixed, and designed for settling (fewer repetitions, a target, the same limit)
SHORT_FIXED = SHORT_PLAN.replace("@SUFFIX@", "").replace("@REPETITIONS@", "repetitions = 5")
SHORT_SETTLE = SHORT_PLAN.replace("@SUFFIX@", "-settle").replace("@REPETITIONS@", 'repetitions = 3\nsettle = "5%"')
#: the bundled plans' twins designed for settling
SETTLE_TWINS = {"storage": "storage-settle"}


def answers(settled: Path) -> tuple[int, int]:
    """Print each settled case's answer and what stopped it (its own reason, else its variant's);
    the count of cases settled and of cases in all."""
    from ccbench.bundle import read_bundle

    outcomes = read_bundle(settled, samples=False).manifest["outcomes"]
    count = total = 0
    for workload, outcome in outcomes.items():
        for key, variant in (outcome.get("settled") or {}).get("variants", {}).items():
            for label, case in variant["cases"].items():
                why = case.get("stopped_by") or variant["stopped_by"]
                count, total = count + (case["state"] is not None), total + 1
                print(f"  {workload} [{key}] {label}: {why}, {case['rounds']} rounds: {case['state'] or 'unsettled'}")
    return count, total


def agreement(fixed: Path, settled: Path) -> None:
    """compare's verdict per primary row in both bundles, and how many agree."""
    fixed_rows, settle_rows = rows(fixed), rows(settled)
    agree, tally = 0, {"fixed only": 0, "settle only": 0, "opposite": 0, "no cost above beyond the fixed MDE": 0}
    # a case each run names its own way (an open-loop rate each run calibrates) has no row to match
    unmatched = len(set(fixed_rows) ^ set(settle_rows))
    for key, row in sorted(fixed_rows.items()):
        other = settle_rows.get(key)
        if other is None:
            continue
        same = (row["significant"], row["verdict"]) == (other["significant"], other["verdict"])
        agree += same
        if row["significant"] and other["significant"] and not same:
            tally["opposite"] += 1
        elif not same:
            tally["fixed only" if row["significant"] else "settle only"] += 1
        # "no cost above" the target is the settle run's answer; the fixed run's "not significant"
        # could see only down to its MDE, so the settled one is the same answer or a sharper one
        if other.get("settled") == "no cost above" and row["mde"] == row["mde"] and other["mde"] > row["mde"]:
            tally["no cost above beyond the fixed MDE"] += 1
        # what the fixed run could have seen where it saw nothing (settle's own answer is listed above)
        note = f"; the fixed run's MDE {row['mde']:.1%}" if not row["significant"] and row["mde"] == row["mde"] else ""
        how = f" ({other['interval']}: {other['settled']})" if other.get("settled") else ""
        print(
            f"  {' '.join(key)}: fixed {row['verdict']}, settle {other['verdict']}{how}{'' if same else '  DIFFER'}{note}"
        )
    both = len(set(fixed_rows) & set(settle_rows))
    print(f"verdicts agree on {agree} of {both} rows in both runs; " + ", ".join(f"{k}: {v}" for k, v in tally.items()))
    if unmatched:
        print(f"  {unmatched} rows are in one run only (a case named by what the run calibrated: not compared)")


def equal_power(fixed: Path, target: float, limit: int) -> tuple[float, dict[str, int]]:
    """An estimate, not a measurement: the wall time of a fixed design that sizes each workload's
    repetitions so that every primary row's MDE would reach the target (the fixed run's MDE scaled
    by the square root of the count, as an MDE shrinks), at most ``limit`` (the settle plan's
    max_repetitions), at the fixed run's own time per repetition of that workload (its executions'
    times and cooldowns). What a fixed or ``--detect`` run that wanted the settle run's answers
    would have spent; (seconds, repetitions per workload)."""
    import math

    from ccbench.bundle import read_bundle

    bundle = read_bundle(fixed, samples=False)
    plan = {w["name"]: w for w in bundle.manifest["plan"]["workloads"]}
    spent: dict[str, float] = {}
    for record in bundle.executions:
        if not record["warmup"]:
            cooldown = plan.get(record["workload"], {}).get("cooldown") or 0.0
            spent[record["workload"]] = spent.get(record["workload"], 0.0) + record["elapsed_s"] + cooldown
    needed: dict[str, int] = {}
    for (workload, _, _), row in rows(fixed).items():
        n0 = plan[workload]["repetitions"]
        mde = row["mde"]
        n = limit if not mde == mde else math.ceil(n0 * (math.log1p(mde) / math.log1p(target)) ** 2)
        needed[workload] = max(needed.get(workload, n0), min(max(n, n0), limit))
    seconds = sum(spent.get(w, 0.0) / plan[w]["repetitions"] * n for w, n in needed.items())
    return seconds, needed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--plan", help="a plan file or bundled plan name (default: a short storage-shaped plan)")
    parser.add_argument("--settle", default="5%")
    parser.add_argument(
        "--minimum", type=int, default=3, help="the settle run's repetitions before its first look (--repeat)"
    )
    parser.add_argument("--out", type=Path, help="where the two bundles go (default: a temporary directory)")
    parser.add_argument("--settle-plan", help="the plan designed for settling (default: the --plan's twin, if any)")
    args = parser.parse_args()
    base = args.out or Path(tempfile.mkdtemp(prefix="bench-study-time-"))
    base.mkdir(parents=True, exist_ok=True)
    plan, settle_plan, extra = args.plan, args.settle_plan or SETTLE_TWINS.get(args.plan or ""), ()
    if plan is None:
        plan, settle_plan = str(base / "storage-short.toml"), str(base / "storage-short-settle.toml")
        Path(plan).write_text(SHORT_FIXED)
        Path(settle_plan).write_text(SHORT_SETTLE)
    if settle_plan is None:
        settle_plan, extra = plan, ("--settle", args.settle, "--repeat", str(args.minimum))
    fixed_s, fixed = run(plan, base / "fixed", base / "work")
    settle_s, settled = run(settle_plan, base / "settle", base / "work", *extra)
    from ccbench.attestation.onread import check_before_reading

    check_before_reading([fixed, settled])  # what is read below is what the runs sealed
    print(f"fixed {plan}: {fixed_s:.0f} s; settled {' '.join((settle_plan, *extra))}: {settle_s:.0f} s")
    print(f"settled / fixed wall time: {settle_s / fixed_s:.2f}x")
    count, total = answers(settled)
    if count:
        print(f"the settle run's wall time per settled case: {settle_s / count:.1f} s ({count} of {total} settled)")
    agreement(fixed, settled)
    from ccbench.bundle import read_bundle
    from ccbench.planning.plan import parse_precision

    limits = [w.get("max_repetitions") for w in read_bundle(settled, samples=False).manifest["plan"]["workloads"]]
    limit = max([x for x in limits if x] or [30])
    estimate, needed = equal_power(fixed, parse_precision(args.settle), limit)
    shown = ", ".join(f"{w} {n}" for w, n in needed.items())
    print(
        f"estimated, not measured: a fixed design sized for an MDE of {args.settle} on every primary row (at most "
        f"{limit} repetitions: {shown}) would take about {estimate:.0f} s of executions; settled / that: "
        f"{settle_s / estimate:.2f}x"
        if estimate
        else "no estimate of an equal-power fixed design (no rows)"
    )


if __name__ == "__main__":
    main()
