"""What the gate needs to know of the new run's bundles as runs, before and beside its rows: whether
a NEW directory holds several runs of one machine and plan (refused), which bundles did not end,
which formats they were imported from, and why a case of the baseline is missing from them (its
executions failed, the run stopped before it, the plan no longer has it)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from ccbench.analysis.settling.gate import NOT_IN_PLAN, OTHER_PLAN
from ccbench.basics.errors import CCBenchError

#: the end of a failed command's error (ccbench.workloads.base.CommandResult.failure)
_EXITED = re.compile(r"exited with (-?\d+)(?: \(no output on stderr or stdout\)|: ?(.*))?$", re.S)


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


def plan_of(paths) -> str:
    """The plan the new run ran, as `ccbench run` takes it: a bundled plan's name, or the plan file where
    it still is; "" when the bundles do not say (imported, a plan file gone, or several plans)."""
    from ccbench.bundle import find_bundles
    from ccbench.planning.plan import bundled_plans

    said, bundled = set(), bundled_plans()
    for path in find_bundles(paths):
        try:
            plan = json.loads((Path(path) / "manifest.json").read_text(encoding="utf-8")).get("plan") or {}
        except (OSError, ValueError, AttributeError):
            continue
        name, source = str(plan.get("name") or ""), str(plan.get("source") or "")
        if name in bundled and (not source or Path(source) == bundled[name]):
            said.add(name)
        elif source and Path(source).is_file():
            said.add(source)
        else:
            return ""  # a plan file no longer there: its name alone would run nothing
    return said.pop() if len(said) == 1 else ""


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


def plan_differs(bundles, baseline, workload: str) -> str:
    """How the new run's plan (``bundles``) sets ``workload`` up otherwise than the baseline's
    (``baseline``: its bundles, read): its params and variants that differ, "blocksizes ['4k'], was
    ['4k', '1m']", or "" where they are the same (or a side's plan does not say)."""

    def spec(side) -> dict | None:
        for bundle in side:
            for entry in ((bundle.manifest.get("plan") or {}).get("workloads")) or []:
                if isinstance(entry, dict) and entry.get("name") == workload:
                    return {
                        **(entry.get("params") or {}),
                        **{f"variants {k}": v for k, v in (entry.get("variants") or {}).items()},
                    }
        return None

    mine, theirs = spec(bundles), spec(baseline or [])
    if mine is None or theirs is None:
        return ""
    return differences(mine, theirs)


def differences(mine: dict, theirs: dict) -> str:
    """The keys whose values differ, "size 32M, was 64M; ..." ("" where none does)."""
    keys = sorted(k for k in set(mine) | set(theirs) if mine.get(k) != theirs.get(k))
    return "; ".join(f"{k} {mine.get(k, '(none)')}, was {theirs.get(k, '(none)')}" for k in keys)


def why_lost(bundles, workload: str, config: str, had: str = "in the baseline", baseline=None) -> str:
    """Why the new run (``bundles``, read) has no measured sample of ``workload`` on ``config`` (its
    configuration without the machine, "no TEE / disk"; ``had``: where the case was): "its 3
    executions failed in the new run (exit 1, no output)", the run stopped before it, its plan has no
    such workload, or (``baseline``: the baseline's bundles, read) sets it up otherwise."""
    records = [e for b in bundles for e in b.executions if e.get("workload") == workload and not e.get("warmup")]
    parts = set(config.split(" / "))
    # the executions of the case's variant where its values name it, else every execution of the workload
    ran = [e for e in records if {str(v).split(":")[-1] for v in (e.get("variant") or {}).values()} <= parts]
    ran = ran or records
    if not ran:
        if any(b.manifest.get("status") == "interrupted" for b in bundles):
            return f"{had}; the new run stopped before it"
        if any(workload in (b.manifest.get("declarations") or {}) for b in bundles):
            return f"{had}; none of its executions ran in the new run"
        return f"{had}; {NOT_IN_PLAN}"
    failed = [e for e in ran if e.get("status") in ("failed", "timeout")]
    if not failed:
        differs = plan_differs(bundles, baseline, workload)
        if differs:
            return f"{had}; {OTHER_PLAN} ({differs})"
        return f"{had}, not measured in the new run (its executions there measured no sample of it)"
    count = f"its {len(failed)} executions" if len(failed) > 1 else "its execution"
    if len(failed) < len(ran):
        count = f"{len(failed)} of its {len(ran)} executions"
    errors = list(dict.fromkeys(_short_error(e) for e in failed))
    more = f"; and {len(errors) - 1} other error(s)" if len(errors) > 1 else ""
    return f"{count} failed in the new run ({errors[0]}{more})"


def _short_error(record: dict) -> str:
    """An execution's failure in a few words: "exit 1, no output", "exit 3: boom", "timed out"."""
    error = " ".join(str(record.get("error") or "").split())
    if record.get("status") == "timeout" and not error:
        return "timed out"
    found = _EXITED.search(error)
    if found:
        code, output = found.group(1), (found.group(2) or "").strip()
        if not output:
            return f"exit {code}, no output"
        return f"exit {code}: {output[-120:]}"
    return error[:160] or str(record.get("status"))
