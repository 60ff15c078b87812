"""One study run five ways, side by side on this machine (issue 55): what settling saves, and whether
its answers are the fixed run's.

The designs, each a real ``ccbench run`` of the same plan with the same --seed (the order of the
variants within each round drawn alike):

- ``fixed-3``: 3 repetitions, no settling (the fewest from which an interval is finite);
- ``fixed-10``: 10 repetitions actually run (the reference: the round limit settling is built for);
- ``case``: 3 repetitions, then settled case by case (``--settle T``, the repeated interval built for
  the round limit 10);
- ``layer``: 3 repetitions, then settled by layer across the plan's workloads (``--settle-by layer``);
- ``aa``: the ``layer`` design on an A/A plan: the baseline storage variant and a second variant
  name (``tmpfs``) pointed by ``--storage-path`` at a directory on the baseline's own file system,
  so every claim it makes is wrong (compare layers it by what the directory is, "own path, no
  protection: tmpfs (own path, plain)", and its lint says the name is not the directory's,
  ``misnamed-storage-path``: on purpose here).

(The per-case design on the horizon-free anytime interval is not run: the simulation chose the
repeated interval over it, ``benchmarks/sim_sequential.py``.) With ``--abba`` the designs run in
order and then in reverse, each twice (drift on the machine falls on both halves alike).

For each run: wall time, the executions' own time, and for a settled run the time to its first
settled line ("settled after round N, ..."). Against ``fixed-10``: per primary row, whether the
verdict (cost, gain, not significant, and for a settled case its claim) agrees, counted by the kind
of claim; per layer, whether compare's judgement of the layer agrees in kind and direction. Per case
of ``fixed-10``: the lag-1 autocorrelation, skew and ties of its paired log costs (the noise the
intervals must survive). The A/A run: its layers' claims (each one wrong).

The default plan is short, of the bundled ``storage`` plan's shape (fio and a compression case on
disk, tmpfs and the ext4 loop file; a few minutes a design); ``--plan storage`` runs the bundled plan
(its fio and compression alone took 29 min at 3 repetitions here on 2026-12-03, fixed-10 100 min: the
five designs take several hours and want a quiet machine; docs/analysis.md, "The storage plan, measured").

    python benchmarks/bench_settle_designs.py [--plan PLAN] [--settle 5%] [--seed N] [--abba] [--out DIR]
    python benchmarks/bench_settle_designs.py --report --out DIR [--seed N] [--settle 5%]

``--only`` runs some of the designs (the five take hours on the storage plan: they may be run a few
at a time into one ``--out``, each run's bundle in ``NN-design/``), and ``--report`` runs nothing and
reads every design's bundles in ``--out``, each run's wall time from its manifest (``started_at`` to
``ended_at``: the run itself, without this script's start-up). Runs made hours apart see a machine
of another speed (another load, the hypervisor's steal): each run's share of contended executions is
printed, and beside each wall ratio the same ratio "at one speed", scaled by the executions' time in
the first 3 rounds, which every design runs whole (fixed-10's over the design's).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from bench_study_time import SHORT_PLAN, rows, run

#: bench_study_time's short storage-shaped plan (fio on disk, tmpfs and the ext4 loop file) at 3
#: repetitions and the settle round limit's default, with a compression case as a second workload
SHORT = (
    SHORT_PLAN.replace("@SUFFIX@", "-designs")
    .replace("@REPETITIONS@", "repetitions = 3")
    .replace("max_repetitions = 15\n", "")
    + '[[workloads]]\nkind = "compression"\nname = "compression-short"\nalgorithms = ["zstd"]\nsize = "16M"\n'
)
DESIGNS = ("fixed-3", "fixed-10", "case", "layer", "aa")
#: the A/A plan's second variant: a variant name given the baseline's own file system with
#: --storage-path (a directory beside the work directory), so it measures what the baseline does
AGAIN = "tmpfs"


def design_args(design: str, settle: str, seed: int, again: Path) -> list[str]:
    common = ["--seed", str(seed)]
    return {
        "fixed-3": ["--repeat", "3", *common],
        "fixed-10": ["--repeat", "10", *common],
        "case": ["--repeat", "3", "--settle", settle, *common],
        "layer": ["--repeat", "3", "--settle", settle, "--settle-by", "layer", *common],
        "aa": [
            "--repeat",
            "3",
            "--settle",
            settle,
            "--settle-by",
            "layer",
            "--storage-path",
            f"{AGAIN}={again}",
            *common,
        ],
    }[design]


def aa_plan(text: str) -> str:
    """The plan with each storage axis cut to its first variant and the same file system again."""
    lists = re.findall(r"storage\s*=\s*(\[[^\]]*\])", text)
    if not lists:
        sys.exit("the plan names no storage variants: an A/A storage run needs them")
    for found in lists:
        first = json.loads(found.replace("'", '"'))[0]
        text = text.replace(found, json.dumps([first, AGAIN]), 1)
    return text


def manifest_wall(bundle: Path) -> float:
    """The run's own wall time, from its manifest's start and end (what --report reads)."""
    from datetime import datetime

    from ccbench.bundle import read_bundle

    manifest = read_bundle(bundle, samples=False).manifest
    started, ended = (
        datetime.fromisoformat(str(manifest[k]).replace("Z", "+00:00")) for k in ("started_at", "ended_at")
    )
    return (ended - started).total_seconds()


def recorded(base: Path) -> dict[str, list[tuple[float, Path]]]:
    """The designs' bundles in ``base`` (``NN-design/<bundle>``, in NN order), each with its wall time."""
    found: dict[str, list[tuple[float, Path]]] = {}
    for out in sorted(p for p in base.iterdir() if p.is_dir() and re.fullmatch(r"\d\d-[a-z0-9-]+", p.name)):
        design = out.name[3:]
        bundles = [p for p in out.iterdir() if (p / "manifest.json").is_file()]
        if design in DESIGNS and len(bundles) == 1:
            found.setdefault(design, []).append((manifest_wall(bundles[0]), bundles[0]))
    return found


def first_rounds_s(bundle: Path, rounds: int = 3) -> float:
    """The executions' own time in the first ``rounds`` rounds (warm-ups left out): every design runs
    all of its cases there, so the ratio of two runs' figures is how much faster the machine was for
    one than for the other (a yardstick for runs made at different times)."""
    from ccbench.bundle import read_bundle

    executions = read_bundle(bundle, samples=False).executions
    return sum(
        r.get("elapsed_s") or 0.0 for r in executions if not r.get("warmup") and (r.get("repetition") or 0) < rounds
    )


def contended_share(bundle: Path) -> float:
    """The share of the run's measured executions ccbench flagged contended (others' CPU, steal)."""
    from ccbench.bundle import read_bundle

    measured = [r for r in read_bundle(bundle, samples=False).executions if not r.get("warmup")]
    flagged = [r for r in measured if r.get("contended")]
    return len(flagged) / len(measured) if measured else float("nan")


def executions_s(bundle: Path) -> float:
    from ccbench.bundle import read_bundle

    return sum(r.get("elapsed_s") or 0.0 for r in read_bundle(bundle, samples=False).executions)


def first_settled(log: Path) -> str | None:
    """The run's first "settled after round N, T: ..." line (a layer, or with --settle by case none)."""
    for line in log.read_text(errors="replace").splitlines():
        if line.strip().startswith("settled after round"):
            return line.strip()
    return None


def layers(bundle: Path) -> dict[str, tuple[str, int]]:
    """compare --summary --json: per layer, its judgement's kind and direction (+1 slower, -1 faster, 0
    neither, 2 both ways)."""
    done = subprocess.run(
        [sys.executable, "-m", "ccbench", "compare", str(bundle), "--summary", "--json"], capture_output=True, text=True
    )
    found = {}
    for line in done.stdout.splitlines():
        record = json.loads(line)
        if "finding" in record:
            continue
        judgement = record.get("judgement") or {}
        kind = judgement.get("kind") or "none"
        low, high = judgement.get("low"), judgement.get("high")
        if low is not None and high is not None:  # one figure for the layer: its interval against 1
            direction = 1 if low > 1 else -1 if high < 1 else 0
        else:  # the significant rows' directions: 2 where they go both ways
            slower, faster = judgement.get("slower") or 0, judgement.get("faster") or 0
            direction = 2 if slower and faster else 1 if slower else -1 if faster else 0
        found[str(record.get("layer") or record.get("title") or record.get("headline", [""])[0])] = (kind, direction)
    return found


def claim(row: dict) -> str:
    if row.get("settled") in ("no cost above",):
        return "no cost above"
    if not row["significant"]:
        return "not significant"
    return str(row["verdict"])


def agreement(reference: Path, other: Path, name: str) -> None:
    """Per primary row, the two runs' claims side by side, counted by the other run's kind of claim."""
    mine, theirs = rows(reference), rows(other)
    tally: dict[str, list[int]] = {}
    for key in sorted(set(mine) & set(theirs)):
        said = claim(theirs[key])
        reference_said = claim(mine[key])
        agrees = said == reference_said or (
            said in ("no cost above", "not significant") and not mine[key]["significant"]
        )
        counts = tally.setdefault(said, [0, 0])
        counts[0] += agrees
        counts[1] += 1
    shown = ", ".join(f"{kind} {a} of {n}" for kind, (a, n) in sorted(tally.items()))
    print(f"  {name} against fixed-10, rows agreeing by the {name} run's claim: {shown or 'no rows in both'}")
    ours, reference_layers = layers(other), layers(reference)
    for layer, (kind, direction) in sorted(ours.items()):
        ref = reference_layers.get(layer)
        same = ref is not None and ref[1] == direction
        word = {1: "slower", -1: "faster", 0: "neither", 2: "both ways"}
        theirs = f"{ref[0]}, {word[ref[1]]}" if ref else "absent"
        print(f"    layer {layer}: {kind}, {word[direction]}; fixed-10 {theirs}{'' if same else '  DIFFER'}")


def noise(reference: Path) -> None:
    """Per case of the reference run: lag-1 autocorrelation, skew and ties of its paired log costs."""
    from ccbench.analysis.statistics import sequential as rule
    from ccbench.bundle import read_bundle
    from ccbench.model import ExecutionKey, Sample

    bundle = read_bundle(reference)
    declarations = bundle.manifest.get("declarations") or {}
    planned = {w["name"]: w for w in bundle.manifest["plan"]["workloads"]}
    samples = [Sample(**record) for record in bundle.samples if not record.get("warmup")]
    print("  per case of fixed-10 (paired log costs): lag-1 autocorrelation, skew, ties")
    for workload in sorted({s.workload for s in samples}):
        mine = [s for s in samples if s.workload == workload]
        axes = planned.get(workload, {}).get("variants") or {}

        def rank(key: str, axes=axes) -> tuple:
            """The plan's order of the variants: its first is the baseline (the samples come in drawn order)."""
            parts = dict(part.split("=", 1) for part in key.split(",") if "=" in part)
            return tuple(
                axes.get(a, []).index(v) if v in axes.get(a, []) else len(axes.get(a, []))
                for a, v in sorted(parts.items())
            )

        keys = sorted(dict.fromkeys(ExecutionKey.parse(s.execution).variant for s in mine), key=rank)
        against = rule.loop_twins(mine, keys)
        declared = rule.judged(declarations.get(workload))
        for key, cases in rule.paired_against(mine, keys[0], keys, against, declared).items():
            for label, values in cases.items():
                v = np.asarray(values, dtype=float)
                if len(v) < 3:
                    continue
                centred = v - v.mean()
                spread = float(np.sqrt((centred**2).mean()))
                lag1 = float((centred[1:] * centred[:-1]).sum() / (centred**2).sum()) if spread else float("nan")
                skew = float((centred**3).mean() / spread**3) if spread else float("nan")
                ties = len(v) - len(np.unique(v))
                print(f"    {workload} [{key}] {label}: rho1 {lag1:+.2f}, skew {skew:+.2f}, ties {ties} of {len(v)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--plan", help="a plan file or bundled plan name (default: a short storage-shaped plan)")
    parser.add_argument("--settle", default="5%")
    parser.add_argument("--seed", type=int, default=55)
    parser.add_argument("--abba", action="store_true", help="run the designs in order, then in reverse")
    parser.add_argument("--only", help="comma-separated designs to run (default: all five)")
    parser.add_argument("--out", type=Path, help="where the bundles go (default: a temporary directory)")
    parser.add_argument("--report", action="store_true", help="run nothing: report the designs' bundles in --out")
    args = parser.parse_args()
    if args.report:
        if args.out is None or not args.out.is_dir():
            sys.exit("--report reads the bundles of earlier runs: give their directory with --out DIR")
        results = recorded(args.out)
        if not results:
            sys.exit(f"no design's bundle in {args.out}: it holds none of {', '.join(f'NN-{d}/' for d in DESIGNS)}")
        summary(results, args.seed, args.settle, [d for d, runs in results.items() for _ in runs])
        return
    base = args.out or Path(tempfile.mkdtemp(prefix="bench-settle-designs-"))
    base.mkdir(parents=True, exist_ok=True)
    if args.plan is None:
        plan = base / "plan.toml"
        plan.write_text(SHORT)
        text = plan.read_text()
    else:
        from ccbench.planning.plan import bundled_plans

        plan = bundled_plans().get(args.plan) or Path(args.plan)
        if not plan.is_file():
            sys.exit(f"no plan {args.plan!r}: give a plan file or a bundled plan's name (ccbench plans)")
        text = plan.read_text()
    aa = base / "aa.toml"
    aa.write_text(aa_plan(text))
    again = base / "again"
    again.mkdir(exist_ok=True)
    chosen = [d for d in (args.only.split(",") if args.only else DESIGNS)]
    unknown = set(chosen) - set(DESIGNS)
    if unknown:
        sys.exit(f"unknown design {sorted(unknown)}: choose from {', '.join(DESIGNS)}")
    order = chosen + (chosen[::-1] if args.abba else [])
    results: dict[str, list[tuple[float, Path]]] = {}
    # numbered after what --out holds already (designs run a few at a time into one directory)
    first = sum(len(runs) for runs in recorded(base).values())
    for i, design in enumerate(order, start=first):
        target = aa if design == "aa" else plan
        wall, bundle = run(
            str(target), base / f"{i:02d}-{design}", base / "work", *design_args(design, args.settle, args.seed, again)
        )
        results.setdefault(design, []).append((wall, bundle))
    summary(results, args.seed, args.settle, order)


def skipped(log: Path) -> list[str]:
    """The workloads the run skipped, as its output says ("ycsb-a-f: skipped: the YCSB binding is not
    built in ..."): a worktree made for a run has none of a checkout's builds (YCSB's binding is built by
    setup.sh --with ycsb), and a skipped workload makes every figure of the run another plan's."""
    return [line.strip() for line in log.read_text(errors="replace").splitlines() if ": skipped: " in line]


def summary(results: dict[str, list[tuple[float, Path]]], seed: int, settle: str, order: list[str]) -> None:
    """Each run's times, the A/A run's claims, each design's agreement with fixed-10, the noise."""
    from ccbench.attestation.onread import check_before_reading

    check_before_reading([b for runs in results.values() for _, b in runs])  # what is read is what the runs sealed
    print(f"same seed {seed}, settle {settle}, order {' '.join(order)}")
    reference = results.get("fixed-10", [(0.0, None)])[0]
    yardstick = first_rounds_s(reference[1]) if reference[1] is not None else None
    for design, runs in results.items():
        for wall, bundle in runs:
            for said in skipped(bundle.parent.with_suffix(".log")):
                print(f"  warning: {design} {said}: not the whole plan")
            line = (
                f"{design}: wall {wall:,.0f} s, executions {executions_s(bundle):,.0f} s "
                f"({contended_share(bundle):.0%} of them contended)"
            )
            if reference[1] is not None and design != "fixed-10":
                line += f", {wall / reference[0]:.2f}x fixed-10's wall time"
                mine = first_rounds_s(bundle)
                if yardstick and mine:
                    # rounds 1-3 run every case in both: their time ratio is the machine's drift between
                    # the two runs; the wall ratio at one speed is the design's own saving
                    line += (
                        f" ({wall / reference[0] * yardstick / mine:.2f}x at one speed: its first 3 rounds took "
                        f"{mine / yardstick:.2f}x fixed-10's)"
                    )
            first = first_settled(bundle.parent.with_suffix(".log"))
            print(line + (f"; first settled: {first}" if first else ""))
    for _, bundle in results.get("aa", []):
        claims = {layer: kind for layer, (kind, direction) in layers(bundle).items() if direction}
        print(f"  aa: layers claiming a cost or a gain (each wrong): {claims or 'none'}")
    if reference[1] is None:
        return
    for design, runs in results.items():
        if design not in ("fixed-10", "aa"):
            agreement(reference[1], runs[0][1], design)
    noise(reference[1])


if __name__ == "__main__":
    main()
