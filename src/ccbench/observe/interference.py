"""What else ran on the machine during one execution's measured interval, and whether it was contended.

``InterferenceMonitor`` is started just before and stopped just after the measured interval of one
execution, given the pid of the measured process. ``stop()`` returns a plain dict (stored as the
execution record's ``interference``):

- ``wall_s``: the interval's wall-clock length;
- ``tree_cpu_s``: CPU time (user + system) of the measured process tree during the interval: the
  process, every descendant (including children that started their own session or process group:
  they stay children of their parent), and descendants reparented away from the tree after they
  were seen (daemons that double-fork); ``tree_cpus`` = tree_cpu_s / wall_s;
- ``observer_cpu_s``: CPU time of the process running the monitor (ccbench itself), kept apart;
- ``servers_cpu_s``: where the workload registered processes it started for its executions outside
  the worker (its servers, started in prepare, in network namespaces or not): their trees' CPU
  during the interval, the execution's own like the tree's (``servers_processes`` counts them);
- ``layer_cpu_s`` (``layer_cpus``, ``layer_workers``: CPU seconds per name): the CPU of what serves
  the execution's protection layer, as its variant declared it: kernel threads by name (the fscrypt
  read queue, dm-crypt's kcryptd and dmcrypt_write, the loop device's worker, each also as the
  workqueue a kworker last ran) and user-space daemons by pid (a gocryptfs process). The layer's
  cost, neither the workload's nor someone else's;
- ``own_cpu_s`` (``own_processes``): where the run was told of ccbench's own processes outside its
  tree (``ccbench.basics.ownprocs``: the fleet agent's SSH connection), their trees' CPU: ccbench's, no
  neighbour's;
- ``others_cpu_s``: all busy CPU time of the machine (``/proc/stat``: user, nice, system, irq,
  softirq) minus the tree's, the servers', the layer's, ccbench's own and the observer's: the work
  of everything else; ``others_cpus`` is its average in CPUs (1.0 = one CPU fully busy with other work all along);
- ``steal_s``: time the hypervisor ran something else while a vCPU wanted to run (``steal`` in
  ``/proc/stat``, summed over CPUs); ``steal_fraction`` = steal_s / wall_s;
- ``loadavg_1m`` and ``procs_running`` (run queue) at the end, ``procs_running_max`` over the polls;
- ``psi``: where the kernel has pressure stall information (``/proc/pressure``), per resource
  (cpu, memory, io) ``some_avg10`` at the end and ``some_stall_s``/``full_stall_s`` during the
  interval. CPU "some" pressure also counts the measured tree waiting for itself (more runnable
  threads than CPUs), so it is recorded, not used for the flag by default.

``assess(record, thresholds)`` says whether the execution was contended and why. The thresholds
(``Thresholds``) are documented in docs/trust.md.

Everything under /proc is read under a configurable root (``proc_root``) so tests can feed files
(the machine's figures: ``ccbench.observe.procstat``; what serves the execution from outside its
tree: ``ccbench.observe.serving``); the measured tree's CPU comes from psutil (the live /proc).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import psutil

from ccbench.observe.procstat import PSI_RESOURCES, USER_HZ, _loadavg, _pressure, _stat
from ccbench.observe.serving import ServingWatch


@dataclass
class Thresholds:
    """When an execution counts as contended. A value of None switches that check off.

    others_cpus: other processes' CPU, averaged over the interval, in CPUs (0.25 = a quarter of one
        CPU busy with other work all along). The default catches a CPU hog or a second benchmark, and
        lets the usual background (an idle desktop's or server's daemons, well under 0.1) pass.
    steal_fraction: stolen time over wall time (summed over vCPUs), 0.05 = 5% of one vCPU.
    psi_cpu_some: share of the interval in which some task waited for a CPU (off by default, see
        the module note); psi_memory_some, psi_io_some: the same for memory and I/O (off by default:
        a storage benchmark stalls on I/O by design).
    """

    others_cpus: float | None = 0.25
    steal_fraction: float | None = 0.05
    psi_cpu_some: float | None = None
    psi_memory_some: float | None = None
    psi_io_some: float | None = None

    @classmethod
    def from_mapping(cls, values: dict[str, Any] | None) -> Thresholds:
        """Thresholds from a plan table or options; unknown keys are an error (a typo must not pass)."""
        values = dict(values or {})
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"unknown contention threshold(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
        for key, value in values.items():
            if value is not None and (not isinstance(value, (int, float)) or isinstance(value, bool) or value < 0):
                raise ValueError(f"contention threshold {key} must be a non-negative number or none, not {value!r}")
        return cls(**values)

    def as_dict(self) -> dict[str, float | None]:
        return asdict(self)


def _cpu_of(process: psutil.Process) -> tuple[float, int] | None:
    """Own plus reaped-children CPU seconds of a process, and its parent pid."""
    try:
        with process.oneshot():
            times = process.cpu_times()
            parent = process.ppid()
    except psutil.Error:
        return None
    return times.user + times.system + times.children_user + times.children_system, parent


class InterferenceMonitor:
    """Measure the machine around one measured interval; ``start()`` then ``stop() -> dict``.

    pid: the measured process (its whole tree is measured). poll_s: how often a background thread
    refreshes the tree's membership, so that descendants reparented away from the tree (a daemon's
    double fork) are still counted; None: only at start and stop (cheapest; such a daemon's CPU is
    then counted as others'). proc_root: where /proc/stat, /proc/loadavg and /proc/pressure are read.
    own_registry: the file naming ccbench's own processes outside the tree (ccbench.basics.ownprocs).

    How the tree's CPU is summed without counting anything twice: each process's figure is its own
    CPU plus that of the children it has reaped (Linux adds a waited-for child's total into its
    parent), so the tree's CPU is the sum over the processes alive in the tree; a process that ended
    during the interval is counted by its parent unless it had been reparented outside the tree, when
    its last polled figure is used. When the measured process itself ended and was reaped by the
    observer (the usual case for a worker subprocess), the observer's reaped-children CPU gives it.
    """

    def __init__(
        self,
        pid: int,
        *,
        poll_s: float | None = 1.0,
        proc_root: str | Path = "/proc",
        servers: Sequence[int] = (),
        layer_pids: Sequence[int] = (),
        layer_threads: Sequence[str] = (),
        own_registry: str | Path | None = None,
    ):
        self.pid = pid
        self.poll_s = poll_s
        self.proc_root = Path(proc_root)
        #: the workload's servers and what serves the protection layer (None: nothing registered)
        self._serving = (
            ServingWatch(self.proc_root, servers, layer_pids, layer_threads, own_registry)
            if (servers or layer_pids or layer_threads or own_registry)
            else None
        )
        self._lock = threading.Lock()
        self._stop_event = threading.Event()
        self._thread: threading.Thread | None = None
        # (pid, create_time) -> {"start": cpu at start or 0, "last": cpu last seen, "ppid", "in_tree"}
        self._seen: dict[tuple[int, float], dict[str, Any]] = {}
        self._start: dict[str, Any] | None = None
        self._procs_running_max = 0
        self._root_is_child = False
        self._stopped = False
        self.result: dict[str, Any] | None = None

    # ---- tree bookkeeping
    def _tree(self) -> list[psutil.Process]:
        try:
            root = psutil.Process(self.pid)
            return [root, *root.children(recursive=True)]
        except psutil.Error:
            return []

    def _refresh(self, initial: bool = False) -> None:
        members = self._tree()
        member_keys = set()
        with self._lock:
            for process in members:
                try:
                    key = (process.pid, process.create_time())
                except psutil.Error:
                    continue
                figures = _cpu_of(process)
                if figures is None:
                    continue
                cpu, parent = figures
                member_keys.add(key)
                entry = self._seen.get(key)
                if entry is None:
                    entry = self._seen[key] = {"start": cpu if initial else 0.0, "process": process}
                entry["last"], entry["ppid"], entry["in_tree"] = cpu, parent, True
            # descendants no longer under the root: reparented (alive) or ended
            member_pids = {k[0] for k in member_keys}
            for key, entry in self._seen.items():
                if key in member_keys or key[0] == self.pid or entry.get("ended"):
                    continue
                figures = _cpu_of(entry["process"])
                if figures is None:
                    entry["ended"] = True  # its last figure stands (or its parent in the tree reaped it)
                elif figures[1] not in member_pids:
                    entry["in_tree"] = False  # reparented outside: follow it on its own
                    entry["last"], entry["ppid"] = figures
            if self._serving is not None:
                self._serving.refresh(initial)
            stat = _stat(self.proc_root)
            self._procs_running_max = max(self._procs_running_max, stat.get("procs_running", 0))

    def _poll(self) -> None:
        assert self.poll_s is not None
        while not self._stop_event.wait(self.poll_s):
            self._refresh()

    # ---- public
    def start(self) -> InterferenceMonitor:
        self._refresh(initial=True)
        try:
            self._root_is_child = psutil.Process(self.pid).ppid() == os.getpid()
        except psutil.Error:
            self._root_is_child = False
        observer = os.times()
        self._start = {
            "wall": time.monotonic(),
            "stat": _stat(self.proc_root),
            "psi": _pressure(self.proc_root),
            "observer": observer.user + observer.system,
            "observer_children": observer.children_user + observer.children_system,
        }
        if self.poll_s:
            self._thread = threading.Thread(target=self._poll, name="ccbench-interference", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> dict[str, Any]:
        if self._start is None:
            raise RuntimeError("InterferenceMonitor.stop() before start()")
        if self._stopped:
            assert self.result is not None
            return self.result
        self._stopped = True
        wall = time.monotonic() - self._start["wall"]
        stat = _stat(self.proc_root)
        psi = _pressure(self.proc_root)
        observer = os.times()
        if self._thread is not None:
            self._stop_event.set()
            self._thread.join()
        self._refresh()
        tree_cpu = 0.0
        root_alive = False
        with self._lock:
            for (pid, _), entry in self._seen.items():
                alive = entry["process"].is_running() and _cpu_of(entry["process"]) is not None
                if pid == self.pid:
                    root_alive = alive
                    if alive:
                        tree_cpu += entry["last"] - entry["start"]
                    continue
                if entry["in_tree"] and alive:
                    tree_cpu += entry["last"] - entry["start"]
                elif not entry["in_tree"]:
                    tree_cpu += entry["last"] - entry["start"]  # reparented away; last figure seen
                # ended inside the tree: its parent reaped it and counts it
        observer_children = observer.children_user + observer.children_system - self._start["observer_children"]
        if not root_alive:
            root_entry = next((e for (p, _), e in self._seen.items() if p == self.pid), None)
            if self._root_is_child:
                # reaped by us: its whole life's CPU, its descendants' included, minus what it had at start
                tree_cpu += observer_children - (root_entry["start"] if root_entry is not None else 0.0)
            elif root_entry is not None:
                tree_cpu += root_entry["last"] - root_entry["start"]
        observer_cpu = observer.user + observer.system - self._start["observer"]
        record: dict[str, Any] = {
            "wall_s": round(wall, 6),
            "tree_cpu_s": round(tree_cpu, 3),
            "tree_cpus": round(tree_cpu / wall, 4) if wall > 0 else None,
            "observer_cpu_s": round(observer_cpu, 3),
            "tree_processes": len(self._seen),
        }
        serving_cpu = 0.0
        if self._serving is not None:
            serving = self._serving.totals()
            serving_cpu = serving["servers_cpu_s"] + serving["layer_cpu_s"] + serving["own_cpu_s"]
            record.update(serving)
            record["layer_cpus"] = round(serving["layer_cpu_s"] / wall, 4) if wall > 0 else None
        before = self._start["stat"]
        if "busy" in before and "busy" in stat:
            busy = (stat["busy"] - before["busy"]) / USER_HZ
            steal = (stat["steal"] - before["steal"]) / USER_HZ
            # tick accounting (1/USER_HZ per CPU) can make a short interval's difference slightly negative
            others = max(0.0, busy - tree_cpu - serving_cpu - observer_cpu)
            record.update(
                {
                    "cpus": stat["cpus"],
                    "busy_cpu_s": round(busy, 3),
                    "others_cpu_s": round(others, 3),
                    "others_cpus": round(others / wall, 4) if wall > 0 else None,
                    "steal_s": round(steal, 3),
                    "steal_fraction": round(steal / wall, 4) if wall > 0 else None,
                    "procs_running": stat.get("procs_running"),
                    "procs_running_max": max(self._procs_running_max, stat.get("procs_running", 0)),
                    "procs_blocked": stat.get("procs_blocked"),
                }
            )
        else:
            record["note"] = f"{self.proc_root / 'stat'} unreadable: others' CPU and steal unknown"
        record["loadavg_1m"] = _loadavg(self.proc_root)
        if psi:
            pressure = {}
            for resource, end in psi.items():
                begin = self._start["psi"].get(resource, {})
                entry: dict[str, float] = {"some_avg10": end.get("some_avg10")}
                for kind in ("some", "full"):
                    key = f"{kind}_total"
                    if key in end and key in begin:
                        stall = (end[key] - begin[key]) / 1e6
                        entry[f"{kind}_stall_s"] = round(stall, 4)
                        if kind == "some" and wall > 0:
                            entry["some_fraction"] = round(stall / wall, 4)
                pressure[resource] = entry
            record["psi"] = pressure
        self.result = record
        return record

    def __enter__(self) -> InterferenceMonitor:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        if self._start is not None:
            self.stop()  # the record is kept in .result


def assess(record: dict[str, Any] | None, thresholds: Thresholds | None = None) -> tuple[bool, list[str]]:
    """(contended, reasons) for an interference record; reasons say the measured value and the limit."""
    thresholds = thresholds or Thresholds()
    if not record:
        return False, []
    reasons: list[str] = []
    others = record.get("others_cpus")
    if thresholds.others_cpus is not None and others is not None and others > thresholds.others_cpus:
        reasons.append(
            f"other processes used {others:.2f} CPUs on average "
            f"({record.get('others_cpu_s', 0):.2f} CPU-s in {record.get('wall_s', 0):.2f} s; limit {thresholds.others_cpus:g})"
        )
    steal = record.get("steal_fraction")
    if thresholds.steal_fraction is not None and steal is not None and steal > thresholds.steal_fraction:
        reasons.append(
            f"the hypervisor stole {steal:.1%} of the interval ({record.get('steal_s', 0):.2f} s; "
            f"limit {thresholds.steal_fraction:.0%})"
        )
    for resource in PSI_RESOURCES:
        limit = getattr(thresholds, f"psi_{resource}_some")
        share = (record.get("psi") or {}).get(resource, {}).get("some_fraction")
        if limit is not None and share is not None and share > limit:
            reasons.append(f"{resource} pressure: some task stalled {share:.1%} of the interval (limit {limit:.0%})")
    return bool(reasons), reasons


def execution_fields(record: dict[str, Any] | None, thresholds: Thresholds | None = None) -> dict[str, Any]:
    """The execution record's keys (bundle format v2): ``interference``, ``contended``, ``contended_reasons``."""
    contended, reasons = assess(record, thresholds)
    return {"interference": record or {}, "contended": contended, "contended_reasons": reasons}


def contention_summary(executions: list[dict[str, Any]]) -> str | None:
    """One line for the end of a run: how many measured executions were contended and the worst others'
    CPU; None if none. Measured as compare and the report count them (the executions whose samples they
    read): warm-ups and executions that left no sample are in no count."""
    measured = [e for e in executions if "contended" in e and not e.get("warmup") and e.get("samples", 1)]
    flagged = [e for e in measured if e.get("contended")]
    if not flagged:
        return None
    worst = max(((e.get("interference") or {}).get("others_cpus") or 0.0) for e in flagged)
    steal = max(((e.get("interference") or {}).get("steal_fraction") or 0.0) for e in flagged)
    detail = f"other processes used up to {worst:.2f} CPUs"
    if steal:
        detail += f", steal up to {steal:.0%}"
    return (
        f"{len(flagged)} of {len(measured)} measured executions ran on a busy machine ({detail}): their numbers may be "
        "distorted; compare and the report mark them, and --exclude-contended leaves them out"
    )
