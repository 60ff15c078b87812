"""Stopping processes that ccbench started, with everything they started in turn.

One mechanism for the runner's workers, the servers of the microservices chain, the parties of a
federation and the processes inside emulated hosts: ask with a signal, wait a grace period, then
SIGKILL whatever of the tree is still there. A pid alone is never trusted after a restart of
ccbench: ``same_process`` checks the start time recorded with it, so a recycled pid is left alone.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterable

import psutil

#: how long a tree gets to exit after the first signal before SIGKILL
DEFAULT_GRACE_S = 3.0
#: how long to wait for SIGKILLed processes to be reaped before giving up on them
KILL_WAIT_S = 5.0


def same_process(pid: int | None, create_time: float | None = None) -> psutil.Process | None:
    """The live process ``pid`` if it is still the one that was started (its start time matches
    ``create_time`` within a second when given); None when it is gone, a zombie or a recycled pid."""
    if not pid:
        return None
    try:
        process = psutil.Process(pid)
        if create_time is not None and abs(process.create_time() - create_time) > 1.0:
            return None
        if process.status() == psutil.STATUS_ZOMBIE:
            return None
        return process
    except psutil.Error:
        return None


def _family(root: psutil.Process) -> list[psutil.Process]:
    try:
        return [root, *root.children(recursive=True)]
    except psutil.Error:
        return [root]


def _alive(processes: Iterable[psutil.Process]) -> list[psutil.Process]:
    alive = []
    for process in processes:
        try:
            if process.is_running() and process.status() != psutil.STATUS_ZOMBIE:
                alive.append(process)
        except psutil.Error:
            pass
    return alive


def _send(processes: Iterable[psutil.Process], sig: int) -> None:
    for process in processes:
        try:
            process.send_signal(sig)
        except psutil.Error:
            pass


def stop_tree(
    target: int | psutil.Process | subprocess.Popen,
    *,
    first_signal: int = signal.SIGTERM,
    grace: float = DEFAULT_GRACE_S,
    process_group: bool = False,
    children_first_signal: bool = True,
) -> bool:
    """Stop ``target`` and all its descendants: ``first_signal``, up to ``grace`` seconds for the tree
    to exit, then SIGKILL to what is left. Returns True when something was running.

    ``process_group``: also signal the target's process group (a worker started in its own session,
    whose tools may have left the tree by double-forking but stay in the group).
    ``children_first_signal``: send the first signal to the descendants too; False sends it to the
    target alone (a server such as PostgreSQL shuts its own children down cleanly on SIGINT).
    A Popen target is reaped, so no zombie is left behind.
    """
    popen = target if isinstance(target, subprocess.Popen) else None
    pid = target.pid if isinstance(target, subprocess.Popen | psutil.Process) else int(target)
    try:
        root = target if isinstance(target, psutil.Process) else psutil.Process(pid)
    except psutil.Error:
        if popen is not None:
            popen.poll()
        return False
    family = _family(root)
    if not _alive(family):
        if popen is not None:
            popen.poll()
        return False

    def signal_all(sig: int, members: list[psutil.Process]) -> None:
        if process_group:
            try:
                os.killpg(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
        _send(members, sig)

    signal_all(first_signal, family if children_first_signal else [root])
    _wait(family, popen, grace)
    # descendants started while the first signal was handled count too
    alive = _alive([*family, *_family(root)]) if root.is_running() else _alive(family)
    if alive:
        signal_all(signal.SIGKILL, alive)
        _wait(alive, popen, KILL_WAIT_S)
    return True


def _wait(processes: list[psutil.Process], popen: subprocess.Popen | None, timeout: float) -> None:
    """Wait until ``processes`` are gone. Our own child (``popen``) is reaped through Popen, never
    through psutil, so that its return code stays readable."""
    others = [p for p in processes if popen is None or p.pid != popen.pid]
    if popen is not None:
        try:
            popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pass
    psutil.wait_procs(others, timeout=timeout if popen is None else 0.5)


def stop_all(processes: Iterable[int | psutil.Process | subprocess.Popen], *, grace: float = DEFAULT_GRACE_S) -> None:
    """Stop several trees with one grace period shared between them (not one grace each)."""
    targets = list(processes)
    roots: list[psutil.Process] = []
    for target in targets:
        try:
            pid = target.pid if isinstance(target, subprocess.Popen | psutil.Process) else int(target)
            roots.append(target if isinstance(target, psutil.Process) else psutil.Process(pid))
        except psutil.Error:
            continue
    families = [member for root in roots for member in _family(root)]
    children = {t.pid: t for t in targets if isinstance(t, subprocess.Popen)}
    _send(_alive(families), signal.SIGTERM)
    _wait_many(families, children, grace)
    alive = _alive(families)
    if alive:
        _send(alive, signal.SIGKILL)
        _wait_many(alive, children, KILL_WAIT_S)


def _wait_many(processes: list[psutil.Process], children: dict[int, subprocess.Popen], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    for popen in children.values():
        try:
            popen.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
    others = [p for p in processes if p.pid not in children]
    psutil.wait_procs(others, timeout=max(0.1, deadline - time.monotonic()))


def describe_exit(code: int) -> str:
    """'exited with status 3' or 'was killed by SIGKILL' for a Popen returncode."""
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with status {code}"
