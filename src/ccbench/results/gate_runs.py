"""What the gate needs to know of the new run's bundles as runs, before and beside its rows: whether
a NEW directory holds several runs of one machine and plan (refused), which bundles did not end,
and which formats they were imported from."""

from __future__ import annotations

import json
from pathlib import Path

from ccbench.basics.errors import CCBenchError


def refuse_several_runs(new_paths, labels=None) -> None:
    """A one-line error when a NEW directory holds several runs of one machine and plan (a results
    directory kept from night to night): the gate judges one run, and would otherwise pool them or
    judge whichever came first; the error names the newest, to pass instead. The bundles of one
    fleet run or study (a rounds-mode fleet's round-k/ bundles: under one fleet.json or study.json)
    are one run."""
    from ccbench.bundle import find_bundles
    from ccbench.probe.facts import machine_of

    for path in new_paths:
        if (Path(path) / "manifest.json").exists():
            continue  # a bundle named: the user chose it
        runs: dict[tuple[str, str], list[tuple[str, Path]]] = {}
        for bundle in find_bundles([path]):
            try:
                manifest = json.loads((bundle / "manifest.json").read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue  # said by whoever reads it next
            machine = machine_of(manifest.get("environment") or {}, bundle, labels or {})[0]
            plan = str((manifest.get("plan") or {}).get("name") or "")
            one_run = _fleet_of(bundle, Path(path))
            runs.setdefault((machine, plan, one_run), []).append((str(manifest.get("started_at") or ""), bundle))
        for (machine, plan, _), found in runs.items():
            if len(found) > 1:
                newest = max(found)[1]
                raise CCBenchError(
                    f"{path}: holds {len(found)} runs of plan {plan!r} on {machine}; the gate judges one run: "
                    f"pass the newest, {newest} (or clear the directory before each run)"
                )


def _fleet_of(bundle: Path, top: Path) -> str:
    """The outermost fleet run or study directory (``top`` or under it) the bundle is part of, ""
    for none: a study's rounds are fleet runs, and all of them one study."""
    found = ""
    for parent in bundle.parents:
        if (parent / "fleet.json").exists() or (parent / "study.json").exists():
            found = str(parent)
        if parent == top:
            break
    return found


def interrupted(paths) -> list[str]:
    """The bundles under ``paths`` whose run did not end (interrupted, or still running), each with
    its status: "<bundle> (status 'interrupted')"."""
    from ccbench.bundle import find_bundles
    from ccbench.bundle.layout import FINISHED_STATUSES

    out = []
    for path in find_bundles(paths):
        try:
            status = json.loads((Path(path) / "manifest.json").read_text(encoding="utf-8")).get("status")
        except (OSError, ValueError, AttributeError):
            continue
        if status not in FINISHED_STATUSES:
            out.append(f"{path} (status {status!r})")
    return out


def imported_formats(paths) -> list[str]:
    """The formats the bundles under ``paths`` were imported from (``ccbench import FORMAT``), in
    order, once each; empty for runs ccbench made."""
    from ccbench.bundle import find_bundles

    formats: list[str] = []
    for path in find_bundles(paths):
        try:
            imported = json.loads((Path(path) / "manifest.json").read_text(encoding="utf-8")).get("imported")
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(imported, dict) and imported.get("format") and imported["format"] not in formats:
            formats.append(str(imported["format"]))
    return formats
