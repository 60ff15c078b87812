"""What serves an execution from outside its worker's tree, and its CPU: the workload's registered
servers, the protection layer's daemons and kernel threads, and ccbench's own processes
(``ServingWatch``), read from /proc/<pid>/stat under a configurable root by following the children
files (every process where the kernel has none). ccbench.observe.interference refreshes it with
its own polls."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ccbench.basics import ownprocs
from ccbench.observe.procstat import USER_HZ

#: /proc/<pid>/stat flags bit of a kernel thread (PF_KTHREAD)
_PF_KTHREAD = 0x00200000
#: a kworker's name: kworker/<cpu or pool>:<id>, then "-" (last ran) or "+" (running) and its workqueue
_KWORKER = re.compile(r"kworker/[^-+]*[-+](.+)")


#: one process: (parent pid, name, start ticks, CPU seconds own plus reaped children, kernel thread)
ProcessFacts = tuple[int, str, int, float, bool]


def _process_facts(root: Path, pid: int | str) -> ProcessFacts | None:
    try:
        with open(root / str(pid) / "stat", "rb") as handle:
            text = handle.read().decode(errors="replace")
    except OSError:
        return None
    close = text.rfind(")")
    # after the name: state ppid pgrp session tty tpgid flags ... utime(11) stime cutime cstime ... starttime(19)
    values = text[close + 2 :].split()
    try:
        cpu = sum(int(v) for v in values[11:15]) / USER_HZ
        kthread = bool(int(values[6]) & _PF_KTHREAD)
        return int(values[1]), text[text.find("(") + 1 : close], int(values[19]), cpu, kthread
    except (IndexError, ValueError):
        return None


def _process_table(root: Path) -> dict[int, ProcessFacts]:
    """Every process under root, one pass over <root>/*/stat."""
    table: dict[int, ProcessFacts] = {}
    try:
        names = os.listdir(root)
    except OSError:
        return table
    for name in names:
        if name.isdigit() and (facts := _process_facts(root, name)) is not None:
            table[int(name)] = facts
    return table


def _children(root: Path, pid: int) -> list[int] | None:
    """The children of every thread of pid (/proc/<pid>/task/<tid>/children); None where the kernel
    has no such files (CONFIG_PROC_CHILDREN), [] for a process that is gone."""
    try:
        tasks = os.listdir(root / str(pid) / "task")
    except FileNotFoundError:
        return [] if (root / "2" / "task" / "2" / "children").exists() else None
    except OSError:
        return []
    found: list[int] = []
    for task in tasks:
        try:
            found += [int(child) for child in (root / str(pid) / "task" / task / "children").read_text().split()]
        except FileNotFoundError:
            return None if task == tasks[0] and not found else found
        except (OSError, ValueError):
            continue
    return found


def _targeted_table(root: Path, roots: Sequence[int], kernel_threads: bool) -> dict[int, ProcessFacts] | None:
    """The processes of the trees under roots, and the kernel threads (kthreadd's children) when
    asked, read by following the children files instead of reading every process; None where the
    kernel has no children files (then the whole table is read)."""
    table: dict[int, ProcessFacts] = {}
    pending = list(roots)
    if kernel_threads:
        threads = _children(root, 2)
        if threads is None:
            return None
        for pid in threads:
            if (facts := _process_facts(root, pid)) is not None:
                table[pid] = facts
    while pending:
        pid = pending.pop()
        if pid in table or (facts := _process_facts(root, pid)) is None:
            continue
        table[pid] = facts
        children = _children(root, pid)
        if children is None:
            return None
        pending += children
    return table


def layer_worker(name: str, serving: Sequence[str]) -> str | None:
    """Which of ``serving`` (kernel thread or workqueue names) the kernel thread ``name`` works for:
    ``loop0`` or a kworker that last ran the loop0 workqueue (``kworker/u8:0-loop0``); a name with its
    device (``kcryptd/253:0``) serves ``kcryptd``. None when it serves none of them."""
    match = _KWORKER.fullmatch(name)
    work = match.group(1) if match else name
    for candidate in serving:
        if work == candidate or work.startswith(candidate + "/"):
            return candidate
    return None


@dataclass
class _Member:
    group: str
    start: float
    last: float = 0.0
    parent_in_group: bool = False
    alive: bool = True


@dataclass
class ServingWatch:
    """The CPU of what serves an execution from outside its worker's tree, read at each refresh by
    following the children files from the roots and from kthreadd (every process where the kernel
    has no children files): the workload's registered servers (and their descendants), and the
    protection layer's daemons (by pid) and kernel threads (by name, see layer_worker).

    A kworker serves many workqueues in turn; its CPU between two refreshes goes to the layer when
    its name named the layer's workqueue at either end (its name shows the last one it ran), so the
    poll interval bounds how finely a shared kworker is split."""

    root: Path
    servers: Sequence[int] = ()
    layer_pids: Sequence[int] = ()
    layer_threads: Sequence[str] = ()
    #: the registry of ccbench's own processes (ccbench.basics.ownprocs), read at each refresh: they come and go
    own_registry: str | Path | None = None
    _members: dict[tuple[int, int], _Member] = field(default_factory=dict)
    #: kernel thread (pid, start) -> (CPU seconds, name) at the last refresh
    _threads: dict[tuple[int, int], tuple[float, str]] = field(default_factory=dict)
    _layer_by_name: dict[str, float] = field(default_factory=dict)

    def refresh(self, initial: bool = False) -> None:
        own = ownprocs.registered(self.own_registry)
        roots = [*self.servers, *self.layer_pids, *(pid for pid, _start in own)]
        table = _targeted_table(self.root, roots, bool(self.layer_threads))
        if table is None:
            table = _process_table(self.root)
        children: dict[int, list[int]] = {}
        for pid, (parent, *_rest) in table.items():
            children.setdefault(parent, []).append(pid)
        # by identity: a registered pid counts only while it is the process that was registered
        own_roots = [pid for pid, start in own if pid in table and table[pid][2] == start]
        for group, roots in (("servers", self.servers), ("layer", self.layer_pids), ("own", own_roots)):
            self._follow(group, roots, table, children, initial, own_roots)
        if self.layer_threads:
            self._count_threads(table, initial)

    def _follow(self, group: str, roots: Sequence[int], table, children, initial: bool, own_roots=()) -> None:
        members, pending = set(), [pid for pid in roots if pid in table]
        while pending:
            pid = pending.pop()
            if pid not in members:
                members.add(pid)
                pending += children.get(pid, [])
        seen = set()
        for pid in members:
            parent, _name, started, cpu, _kthread = table[pid]
            key = (pid, started)
            seen.add(key)
            member = self._members.get(key)
            if member is None:
                # a connection registered during the interval is counted from when it is first seen
                counted_from = cpu if initial or pid in own_roots else 0.0
                member = self._members[key] = _Member(group, counted_from)
            member.last, member.parent_in_group, member.alive = cpu, parent in members, True
        for key, member in self._members.items():
            if member.group == group and key not in seen:
                # ended: its parent in the group reaped it and counts it, or its last figure stands
                member.alive = False

    def _count_threads(self, table, initial: bool) -> None:
        for pid, (_parent, name, started, cpu, kthread) in table.items():
            if not kthread:
                continue
            key = (pid, started)
            previous = self._threads.get(key)
            self._threads[key] = (cpu, name)
            if initial:
                continue
            before, old_name = previous if previous is not None else (0.0, name)
            serves = layer_worker(name, self.layer_threads) or layer_worker(old_name, self.layer_threads)
            if serves and cpu > before:
                self._layer_by_name[serves] = self._layer_by_name.get(serves, 0.0) + cpu - before

    def totals(self) -> dict[str, Any]:
        """servers_cpu_s, servers_processes, layer_cpu_s and layer_workers (CPU seconds per name)."""
        cpu = {"servers": 0.0, "layer": 0.0, "own": 0.0}
        for member in self._members.values():
            if member.alive or not member.parent_in_group:
                cpu[member.group] += member.last - member.start
            else:
                # ended and reaped by its parent in the group, whose figure now holds its whole life:
                # what it had used before the interval (its start figure) is not the interval's
                cpu[member.group] -= member.start
        workers = {name: round(seconds, 3) for name, seconds in sorted(self._layer_by_name.items()) if seconds > 0}
        if cpu["layer"] > 0:
            workers["daemons"] = round(cpu["layer"], 3)
        return {
            "servers_cpu_s": round(max(cpu["servers"], 0.0), 3),
            "servers_processes": sum(1 for m in self._members.values() if m.group == "servers"),
            "layer_cpu_s": round(max(cpu["layer"], 0.0) + sum(self._layer_by_name.values()), 3),
            "layer_workers": workers,
            "own_cpu_s": round(max(cpu["own"], 0.0), 3),
            "own_processes": sum(1 for m in self._members.values() if m.group == "own"),
        }
