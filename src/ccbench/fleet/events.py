"""The playbook's event stream turned into each host's state, as a pure function.

The ``ccbench_events`` callback prints one JSON object per event (``host_task_start``, ``ok``,
``failed``, ``unreachable``, ``retry``, ...); ccbench's own tasks put one JSON line of the remote
agent's state (``fleet/remote.py``) in their stdout. ``advance`` takes a host's round as it stands
and one event, and returns the round as it is after that event, plus the failure message the
event carried (the controller uses it when the playbook ends without a better reason). It reads
no clock and writes nothing, so a recorded stream replays to the same states (see
``tests/data/fleet/``).
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass

from ccbench.fleet.records import HostRun, iso_to_epoch, one_line

#: the playbook's task names -> the phase a host is in while that task runs
PHASES = {
    "ccbench:connect": "connect",
    "ccbench:python": "connect",
    "ccbench:platform": "connect",
    "ccbench:install": "install",
    "ccbench:install stream": "install",
    "ccbench:install copy": "install",
    "ccbench:install files": "install",
    "ccbench:install pip": "install",  # its name before the installed-files wheelhouse (recorded streams)
    "ccbench:components": "install",
    "ccbench:start": "run",
    "ccbench:run": "run",
    "ccbench:stop": "stop",
    "ccbench:login user": "connect",
    "ccbench:pack": "fetch",
    "ccbench:fetch": "fetch",
}
#: tasks whose stdout is the remote agent's state (executions, bundle, exit status)
_STATE_TASKS = ("ccbench:start", "ccbench:run", "ccbench:stop", "ccbench:pack")


@dataclass(frozen=True)
class Context:
    """What an event is read against: the playbook's action (``run`` or ``stop``: a stop playbook
    passes through install and run tasks without the host entering those phases again), the
    moment the fleet command started (first_execution_s counts from it), whether this is the
    first round (only its first execution is timed), and the time for events that carry none."""

    action: str
    command_started: float
    first_round: bool
    now: float


def parse_event(line: str | None) -> dict | None:
    """One line of the stream as an event, None for anything else (Ansible's own stray output)."""
    if not line:
        return None
    line = line.strip()
    if not line.startswith("{"):
        return None
    try:
        value = json.loads(line)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def advance(run: HostRun, event: dict, context: Context) -> tuple[HostRun, str | None]:
    """``run`` after ``event``, and the failure message the event carried (None if it carried none).
    ``run`` itself is left as it was."""
    run = copy.deepcopy(run)
    kind, task = event.get("event"), event.get("task", "")
    result = event.get("result") or {}
    now = event.get("time") or context.now
    if kind == "host_task_start":
        _task_started(run, task, now, context.action)
        return run, None
    if kind == "unreachable":
        run.outcome, run.phase = "unreachable", "unreachable"
        run.reason = one_line(result.get("msg") or "unreachable")
        return run, None
    if kind == "failed":
        failure = f"{task or 'a task'} failed: {one_line(_failure_message(result))}"
        run.outcome, run.reason = "failed", failure
        return run, failure
    if kind in ("ok", "retry"):
        stdout = result.get("stdout")
        document = parse_event(stdout) if isinstance(stdout, str) else None
        _task_reported(run, kind, task, document, result, now)
        _time_first_execution(run, context)
    return run, None


def _task_started(run: HostRun, task: str, now: float, action: str) -> None:
    phase = PHASES.get(task)
    if task == "ccbench:connect":
        # the host is in this phase already (set before the playbook starts): its clock starts here
        run.phase_started["connect"] = now
    if not phase or (action == "stop" and phase in ("install", "run")) or run.phase == phase:
        return
    previous = run.phase
    if previous in run.phase_started:
        run.timings[f"{previous}_s"] = round(now - run.phase_started[previous], 3)
    run.phase = phase
    run.phase_started[phase] = now


def _failure_message(result: dict) -> str:
    message = result.get("msg") or ""
    if result.get("stderr") and (not message or message == "non-zero return code"):
        return f"{message}: {one_line(result['stderr'])}" if message else result["stderr"]
    return message


def _task_reported(run: HostRun, kind: str, task: str, document: dict | None, result: dict, now: float) -> None:
    """An ``ok`` or ``retry`` of one task: what the remote agent's state line says."""
    if document is not None:
        if task == "ccbench:start":
            run.started = True
        if task == "ccbench:components" and kind == "ok":
            run.components = document.get("components")
        if task == "ccbench:connect" and kind == "ok" and isinstance(document.get("components"), dict):
            # set up by this wheelhouse on an earlier run (the components task is then skipped)
            run.components = {name: {**result, "earlier": True} for name, result in document["components"].items()}
        if task == "ccbench:stop" and kind == "ok":
            run.stopped = document.get("state") != "running"
            if document.get("exit_code") == 0 and run.outcome == "pending":
                run.outcome = "ok"  # it had finished before the stop request reached it
    if document and task in _STATE_TASKS:
        _remote_state(run, document)
    if task == "ccbench:run" and kind == "ok" and document is not None and document.get("state") != "running":
        _run_ended(run, document)
    if kind == "ok" and document is not None and document.get("packed"):
        # packed by the run's last status poll, by the stop, or by the fallback pack task
        run.packed = {k: document.get(k) for k in ("bytes", "files", "file_bytes", "packer")}
        if document.get("stream"):
            run.packed["stream"] = True  # listed, not packed: the fetch streams the bundle
        run.timings["pack_s"] = document.get("pack_s")
    if task == "ccbench:fetch" and kind == "ok":
        run.timings["fetch_s"] = round(now - run.phase_started.get("fetch", now), 3)
        if document is not None:
            run.timings["transfer_s"] = document.get("seconds")


def _remote_state(run: HostRun, document: dict) -> None:
    run.executions_done = document.get("executions_done", run.executions_done)
    run.executions_total = document.get("executions_total", run.executions_total)
    run.remote_bundle = document.get("bundle") or run.remote_bundle
    run.first_execution_at = run.first_execution_at or document.get("first_started_at")
    if document.get("state") == "done":
        run.exit_code = document.get("exit_code")


def _run_ended(run: HostRun, document: dict) -> None:
    code = document.get("exit_code")
    if code == 0:
        run.outcome = "ok"
    elif code == 130:
        run.outcome, run.reason = "interrupted", "the remote run was interrupted"
    elif code is None:
        run.outcome = "failed"
        run.reason = "the remote ccbench run ended without an exit status (killed, or the host restarted)"
    else:
        run.outcome = "failed"
        tail = one_line(document.get("log_tail") or "")
        run.reason = f"ccbench run exited {code}" + (f": {tail}" if tail else "")


def _time_first_execution(run: HostRun, context: Context) -> None:
    if run.first_execution_at and "first_execution_s" not in run.timings and context.first_round:
        first = iso_to_epoch(run.first_execution_at)
        if first:
            run.timings["first_execution_s"] = round(first - context.command_started, 3)
