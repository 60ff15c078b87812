"""Helper processes for the CPU-bound parts of ``compare`` and ``report``.

Loading bundles and drawing charts are pure Python work that one interpreter does on one core.
A Helper runs such work in forked worker processes beside the main one (``--jobs N``: the main
process and N - 1 helpers): work is submitted as a picklable function and arguments, results come
back pickled. Anything that cannot run in a helper (no fork on this platform, a helper that died,
an unpicklable function) is done in the main process instead, so the output never depends on it.
"""

from __future__ import annotations

import gc
import multiprocessing
import os
import signal
import threading
from collections.abc import Callable
from concurrent.futures import Future, InvalidStateError, ProcessPoolExecutor
from functools import partial
from typing import Any


def available_cpus() -> int:
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def default_jobs() -> int:
    """Processes to use by default: two where there are two CPUs or more (the work splits into two
    halves well; more helpers gain little for the sizes a report has)."""
    return min(2, available_cpus())


class Helper:
    """Up to ``jobs - 1`` forked worker processes, started on first use."""

    def __init__(self, jobs: int | None = None):
        self.jobs = default_jobs() if jobs is None else max(1, int(jobs))
        self.workers = self.jobs - 1 if "fork" in multiprocessing.get_all_start_methods() else 0
        self._executor: ProcessPoolExecutor | None = None

    @property
    def enabled(self) -> bool:
        return self.workers > 0

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future | None:
        """Run ``fn(*args)`` in a helper; None when there is none (the caller then runs it itself)."""
        if not self.enabled:
            return None
        try:
            if self._executor is None:
                self._executor = ProcessPoolExecutor(
                    max_workers=self.workers,
                    initializer=_ignore_interrupts,
                    mp_context=multiprocessing.get_context("fork"),
                )
                # the workers are forked at the first submit. The documented way to fork a process
                # holding many objects: freeze them, so that a helper's garbage collector does not
                # touch (and so copy) the parent's memory
                gc.freeze()
                self._previous_hook = threading.excepthook
                threading.excepthook = partial(_quiet_cancelled_race, self._previous_hook)
            return self._executor.submit(fn, *args)
        except (OSError, RuntimeError):  # cannot fork (limits, memory) or the pool broke: work here
            self.workers = 0
            return None

    def close(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=True, cancel_futures=True)
            self._executor = None
            gc.unfreeze()
            threading.excepthook = self._previous_hook

    def __enter__(self) -> Helper:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _ignore_interrupts() -> None:
    """In a helper: Ctrl-C is the main process's to handle (it stops the helpers on its way out)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _quiet_cancelled_race(previous: Callable[[Any], Any], args: Any) -> None:
    """Python before 3.12 reports a harmless race as a thread traceback: when a helper dies, the
    pool's manager thread fails to mark a future that this process had already taken back
    (cancelled) as broken (CPython gh-107219). Everything else goes to the usual hook."""
    if isinstance(args.exc_value, InvalidStateError) and type(args.thread).__name__ == "_ExecutorManagerThread":
        return
    previous(args)


def outcome(future: Future | None, fallback: Callable[[], Any]) -> Any:
    """The helper's result, or ``fallback()`` computed here when there was no helper or it failed.

    An error of the work itself (a corrupt bundle) is raised again by the fallback, here, with the
    main process's error handling."""
    if future is not None:
        try:
            return future.result()
        except Exception:  # noqa: BLE001 - a broken helper or the work's own error: redo it here
            pass
    return fallback()
