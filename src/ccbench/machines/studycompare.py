"""A study run's comparison: every round's bundles, each labelled with its arm, compared against the
baseline arm (``compare.txt``, ``report.html``), the twins' evidence (the bounces their guests'
counters saw) and whether the arms, as launched, differ only in their declared knobs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ccbench.basics.fsutil import write_json_atomic, write_text_atomic
from ccbench.machines.study import Study


def bundles_by_arm(directory: Path) -> list[tuple[str, Path]]:
    """(arm, bundle) for every bundle the rounds brought back, in round order."""
    found = []
    for fleet_json in sorted(directory.glob("round-*/fleet-*/fleet.json"), key=_round_order):
        fleet = json.loads(fleet_json.read_text())
        for key, host in (fleet.get("hosts") or {}).items():
            label = host.get("label") or key.split("/")[0]
            for run in (host.get("rounds") or {}).values():
                if run.get("bundle") and run.get("outcome") in ("ok", "failed"):
                    found.append((label, fleet_json.parent / run["bundle"]))
    return found


def _round_order(path: Path) -> tuple[int, str]:
    return int(path.parts[-3].split("-")[1]), path.parts[-2]


def compare_arms(
    directory: Path,
    study: Any,
    echo: Callable[[str], None],
    launch_lines: Callable[[Path, Any], list[str]] | None = None,
) -> int:
    """compare and report over every round's bundles, labelled with their arms (the baseline's
    first); the twins' evidence; how the arms were launched (``launch_lines``, by default the local
    launch records' differences: a cloud study passes its instances' facts); 1 when there is
    nothing to compare. ``study``: a local ``Study`` or a cloud one (its name, baseline, and arms
    with their name, kind and twins)."""
    from ccbench.attestation.onread import split_verified

    found = bundles_by_arm(directory)
    verified, unverified = split_verified(path for _label, path in found)
    for line in unverified:
        echo(f"left out, unverified: {line}")
    found = sorted(
        ((label, path) for label, path in found if Path(path) in verified), key=lambda item: item[0] != study.baseline
    )
    if len({label for label, _p in found}) < 2:
        echo("fewer than two arms brought back a bundle: nothing to compare")
        return 1
    args = [str(p) for _l, p in found] + [x for label, p in found for x in ("--label", f"{p}={label}")]
    env = {**os.environ, "COLUMNS": os.environ.get("COLUMNS", "160")}
    done = subprocess.run([sys.executable, "-m", "ccbench", "compare", *args], capture_output=True, text=True, env=env)
    write_text_atomic(directory / "compare.txt", done.stdout + done.stderr)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "ccbench",
            "report",
            *args,
            "-o",
            str(directory / "report.html"),
            "--title",
            f"study {study.name}",
        ],
        capture_output=True,
        text=True,
    )
    echo(done.stdout.rstrip())
    for line in twin_evidence(study, found):
        echo(line)
    for line in (launch_lines or launch_differences)(directory, study):
        echo(line)
    echo(f"comparison: {directory / 'compare.txt'}; report: {directory / 'report.html'}")
    return 0 if done.returncode == 0 else 1


def launch_differences(directory: Path, study: Study) -> list[str]:
    """Whether the arms, as launched, differ only in their declared kind, twins and knobs (the
    launch records in study.json; ccbench.machines.arms); recorded in study.json too."""
    from ccbench.machines.arms import differences

    document = json.loads((directory / "study.json").read_text())
    records = [arm["launch"] for arm in document.get("arms", {}).values() if arm.get("launch")]
    found = differences(records, study.baseline)
    document["launch_differences"] = found
    write_json_atomic(directory / "study.json", document)
    if not found:
        return [f"the arms differ only in their declared knobs ({len(records)} launch records compared)"]
    return [f"launch confounded: {line}" for line in found]


def twin_evidence(study: Any, found: list[tuple[str, Path]]) -> list[str]:
    """For each arm, the bounces its guests' counters saw: the evidence a bounce twin is used on."""
    from ccbench.analysis.rows.twins import BOUNCED

    lines = []
    for arm in study.arms:
        total, counted, executions = 0.0, 0, 0
        for label, path in found:
            if label != arm.name:
                continue
            for line in (Path(path) / "executions.jsonl").read_text().splitlines():
                record = json.loads(line) if line.strip() else {}
                if record.get("warmup") or record.get("status") != "ok":
                    continue
                executions += 1
                value = (record.get("counters") or {}).get(BOUNCED)
                if value is not None:
                    total += value
                    counted += 1
        if not executions:
            continue
        if not counted:
            lines.append(f"{arm.name}: bounce buffers not counted (no swiotlb tracepoint in its guests)")
            continue
        what = "bounce-buffers twin" if "bounce" in arm.twins else arm.kind
        lines.append(
            f"{arm.name} ({what}): {total:,.0f} bounced mappings in {counted} executions (swiotlb:swiotlb_bounced)"
        )
    return lines
