"""hyperfine's ``--export-json`` files: every run's wall time, per command (one execution each),
with the command's parameters as the case.

hyperfine exports runs that exited non-zero only under ``-i``/``--ignore-failure`` (without it a
failing command stops the benchmark). A failed run is not a measurement of the command (a usage error
exits at once: its time says nothing of the work), so, as ccbench's own ``command`` workload fails an
execution whose command exits non-zero, failed runs are left out of the samples: the execution
record keeps each one (``failed_runs``: its index, exit code and time; ``exit_codes``, hyperfine >=
1.12; null for a run a signal ended) and its ``notes`` say how many runs exited non-zero, with which
codes. A command whose every run failed (or whose name hyperfine marked ``[ERROR]``) has no sample:
its execution is ``failed`` and the manifest's ``outcomes`` say so, so ``show`` names it, ``compare``
has no figure for it, and ``gate`` counts a baseline's case of it as lost.

**Commands are cases.** A command is what was measured, not where: each command (with its parameters,
hyperfine's ``-P``/``-L`` values) is a case of the bundle, named ``command '...'`` in ``compare`` and
``gate``, and the bundle's label is the machine's (``--label``, else the file's name). The same
commands on two machines (two imports with two labels) are compared command by command; two files of
different commands share no case, and ``gate`` and ``compare`` say which cases the other side lacks
instead of judging one command against another.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ccbench.model import Measurement
from ccbench.results.importers.base import (
    Execution,
    FileFormat,
    ImportProblem,
    mtime,
    read_json,
    wrong_shape,
)

ERROR_MARK = "[ERROR]"


def _failed(result: dict[str, Any], runs: int) -> list[tuple[int, Any]]:
    """(run index, exit code) of each failed run."""
    if str(result.get("command", "")).lstrip().startswith(ERROR_MARK):
        return [(i, "[ERROR]") for i in range(runs)]
    codes = result.get("exit_codes")
    if not isinstance(codes, list):
        return []
    return [(i, code) for i, code in enumerate(codes[:runs]) if code != 0]


def execution(path: Path, result: dict[str, Any], started: str) -> Execution:
    times = result.get("times")
    if not isinstance(times, list) or not times:
        raise ImportProblem(
            f"{path}: command {result.get('command', '?')!r} has no per-run 'times' (hyperfine >= 1.9 writes them)"
        )
    if not all(type(t) in (int, float) for t in times):
        raise ImportProblem(f"{path}: command {result.get('command', '?')!r}: its 'times' are not all numbers")
    case = {
        "command": str(result.get("command", "?")),
        **{k: str(v) for k, v in (result.get("parameters") or {}).items()},
    }
    failed = dict(_failed(result, len(times)))
    codes = result.get("exit_codes") if isinstance(result.get("exit_codes"), list) else []
    measurements = [
        Measurement(
            metric="wall_s",
            unit="s",
            value=float(seconds),
            case=case,
            metadata={
                "exit_code": codes[i] if i < len(codes) else None,
                "timestamp_source": "the file's modification time",
            },
        )
        for i, seconds in enumerate(times)
        if i not in failed
    ]
    return Execution(
        workload="hyperfine",
        kind="command",
        source=path,
        started_at=started,
        measurements=measurements,
        status="ok" if measurements else "failed",
        notes=_notes(case["command"], failed, len(times)),
        failed_runs=[{"run": i, "exit_code": code, "wall_s": float(times[i])} for i, code in failed.items()],
    )


def _notes(command: str, failed: dict[int, Any], runs: int) -> list[str]:
    """What the execution's notes say of its failed runs (none when every run exited 0)."""
    if not failed:
        return []
    if ERROR_MARK in failed.values():
        return [f"hyperfine marked the command {ERROR_MARK} ({command}): its {runs} runs are left out of the samples"]
    shown = [f"exit {code}" for code in sorted({c for c in failed.values() if c is not None})]
    shown += ["ended by a signal"] if None in failed.values() else []
    counted = f"{len(failed)} of {runs} runs exited non-zero ({', '.join(shown)})"
    if len(failed) == runs:
        return [f"{counted}: {command!r} failed; no run of it is a sample"]
    return [f"{counted}: left out of the samples (a failed run is no measurement of the command)"]


def commands(path: Path) -> list[tuple[str, Execution]]:
    """Each command of the file, as hyperfine names it, with its execution, in the file's order."""
    document = read_json(path, "hyperfine")
    results = document.get("results") if isinstance(document, dict) else None
    if not isinstance(results, list) or not results or not all(isinstance(r, dict) for r in results):
        raise wrong_shape(path, document, "hyperfine's --export-json output", "a JSON object with 'results'")
    started = mtime(path)
    return [(str(result.get("command", "?")), execution(path, result, started)) for result in results]


def read(path: Path) -> list[Execution]:
    return [one for _command, one in commands(path)]


ADAPTER = FileFormat(
    name="hyperfine",
    description="hyperfine --export-json files: every run's wall time, per command (runs that exited non-zero "
    "under -i left out and named; a command whose every run failed is a failed execution); each command a case, "
    "the label the machine's",
    read=read,
)
