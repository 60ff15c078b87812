"""A study's launch-time sweep, run (docs/machines.md, section 12): every arm this host can launch is
booted at every memory size of ``[sweep] memory``, timed from QEMU's start to a ready guest, and
stopped; each launch is written to ``launch-times.jsonl`` and synced before the next one starts. An
arm this host cannot launch (an SEV-SNP or TDX arm without such a host) is rendered at every size,
its command line with its firmware and memory-acceptance setting kept, and said to be rendered only.
The verdict (ccbench.machines.launchtime) goes into ``launch-time.json`` and ``study.json``.

``run`` is the study run (ccbench.machines.lifecycle.StudyRun: ``up``, ``down``, ``directory``,
``document``, ``echo``, ``accel``), passed in so that this module sits below the lifecycle."""

from __future__ import annotations

import json
import os
import shlex
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ccbench.basics.fsutil import write_json_atomic
from ccbench.machines import launchtime
from ccbench.machines.preview import command_lines, firmware_note
from ccbench.machines.qemu import memory_acceptance
from ccbench.machines.study import Study

SAMPLES = "launch-times.jsonl"
VERDICT = "launch-time.json"


def append_synced(path: Path, record: dict[str, Any]) -> None:
    """One line appended and on disk (fsync) before this returns: a launch is never lost to the next."""
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(record, sort_keys=True) + "\n")
        handle.flush()
        os.fsync(handle.fileno())


def _label(arm: str, mib: int) -> str:
    return f"{arm}@{mib}M"


def launch_sweep(run: Any, launched: list[str], rendered_only: list[tuple[str, str]], qemu_binary: str):
    """Launch each arm in ``launched`` at each memory size, ``launches`` times; the verdict."""
    study: Study = run.study
    sweep = study.sweep
    path = run.directory / SAMPLES
    samples: list[dict[str, Any]] = []
    run.echo(
        f"launch time against memory: {len(launched)} arm(s) at {', '.join(f'{m} MiB' for m in sweep.memory_mib)}, "
        f"{sweep.launches} launch(es) each"
        + (f"; rendered only (not launched here): {', '.join(a for a, _w in rendered_only)}" if rendered_only else "")
    )
    for k in range(sweep.launches):
        # each launch round turns the sizes' and the arms' order, so host drift lines up with neither
        points = sweep.memory_points if k % 2 == 0 else tuple(reversed(sweep.memory_points))
        for p, point in enumerate(points):
            names = launched[(k + p) % len(launched) :] + launched[: (k + p) % len(launched)]
            for name in names:
                samples.append(_launch_once(run, point, name, k + 1, path))
    rendered = _rendered(study, rendered_only, qemu_binary, run.accel)
    judged = launchtime.verdict(samples, rendered_only)
    document = {
        **judged.as_dict(),
        "rule": launchtime.__doc__.split("\n\n")[-1].replace("\n", " ") if launchtime.__doc__ else "",
        "samples": SAMPLES,
        "launches": len(samples),
        "rendered": rendered,
    }
    write_json_atomic(run.directory / VERDICT, document)
    run.document["launch_time"] = {k: v for k, v in document.items() if k != "rendered"}
    run.save()
    for line in judged.lines():
        run.echo(line)
    return judged


def _launch_once(run: Any, point: Study, name: str, launch: int, path: Path) -> dict[str, Any]:
    mib = point.machine.memory_mib
    label = _label(name, mib)
    arm = point.arm(name)
    started = datetime.now(UTC)
    try:
        guest = run.up(name, study=point, label=label)
        ready_s = guest.ready_s
    finally:
        record = (run.document["arms"].get(label) or {}).get("launch") or {}
        run.down(label)
    sample = {
        "study": point.name,
        "arm": name,
        "label": label,
        "kind": arm.kind,
        "twins": list(arm.twins),
        "memory_mib": mib,
        "vcpus": point.machine.vcpus,
        "launch": launch,
        "ready_s": round(ready_s, 3) if ready_s is not None else None,
        "clock": "monotonic: QEMU started -> console 'ccbench-guest: ready' and SSH answered (polled every 0.5 s)",
        "started_utc": started.isoformat(timespec="seconds"),
        "accel": run.accel,
        "cpu": record.get("cpu"),
        "firmware": record.get("firmware"),
        "firmware_sha256": record.get("firmware_sha256"),
        "memory_acceptance": record.get("memory_acceptance") or memory_acceptance(arm),
        "host": run.document.get("host"),
    }
    append_synced(path, sample)
    return sample


def _rendered(study: Study, rendered_only: list[tuple[str, str]], qemu_binary: str, accel: str) -> list[dict]:
    """Each rendered-only arm's command line at every size, with its firmware and acceptance."""
    names = {arm for arm, _why in rendered_only}
    out = []
    for point in study.sweep.memory_points:
        for name, line, why in command_lines(point, qemu_binary, accel):
            if name not in names:
                continue
            arm = point.arm(name)
            out.append(
                {
                    "arm": name,
                    "memory_mib": point.machine.memory_mib,
                    "argv": shlex.split(line) if line else [],
                    "firmware": firmware_note(arm),
                    "memory_acceptance": memory_acceptance(arm),
                    "not_launched": why,
                }
            )
    return out
