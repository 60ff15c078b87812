"""The counters' session of one run (its sources opened once, a snapshot around each execution) and
what an execution record and the analysis get from it."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ccbench.counters.mounts import mount, mounted, private_dir, sweep_orphans, undo_entry
from ccbench.counters.perf import PerfCounters
from ccbench.counters.proc import (
    EXITS_REASON,
    LEDGER,
    METRIC_PREFIX,
    PMU_EVENTS,
    TRACEPOINTS,
    differences,
    lockdown_mode,
    online_cpus,
    read_or_none,
    read_proc,
)
from ccbench.ledger import Ledger
from ccbench.probe.kmsg import KernelMessages

# --- the session of one run ----------------------------------------------------------------------------


class CounterSession:
    """The counters' sources for one run: opened at the first execution, ``snapshot()`` around each,
    ``close()`` at the run's end. ``missing`` says, per counter that cannot be read, why."""

    def __init__(
        self,
        workdir: Path | None,
        *,
        proc_root: str | Path = "/proc",
        sys_root: str | Path = "/sys",
        tracepoints: tuple[str, ...] = TRACEPOINTS,
    ):
        self.proc_root = Path(proc_root)
        self.tracepoints = tracepoints
        self.sys_root = Path(sys_root)
        self.ledger = Ledger(Path(workdir) / LEDGER) if workdir is not None and os.geteuid() == 0 else None
        self.missing: dict[str, str] = {"exits": EXITS_REASON}
        self.swiotlb: Path | None = None
        self.kmsg: KernelMessages | None = None
        #: tracepoint -> its instance's directory
        self.traces: dict[str, Path] = {}
        self.perf: PerfCounters | None = None
        #: (directory of one CPU's idle state, the state's name)
        self.idle_states: list[tuple[Path, str]] = []
        self._mounts: list[tuple[dict[str, Any], Path]] = []

    def open(self) -> CounterSession:
        for state in sorted((self.sys_root / "devices/system/cpu").glob("cpu[0-9]*/cpuidle/state[0-9]*")):
            name = read_or_none(state / "name")
            if name:
                self.idle_states.append((state, name.strip()))
        if not self.idle_states:
            self.missing["cpuidle"] = "no cpuidle states in sysfs (no idle driver: the CPUs halt or poll directly)"
        self.swiotlb = self._swiotlb()
        self.kmsg = KernelMessages(missing=self.missing)
        self._tracepoints()
        self.perf = PerfCounters(PMU_EVENTS, online_cpus(self.sys_root))
        for name, reason in self.perf.missing.items():
            self.missing[f"pmu.{name}"] = reason
        self._name_lockdown()
        return self

    def _name_lockdown(self) -> None:
        """Under kernel lockdown, say so in the reason of each counter it can refuse: debugfs files with
        write bits under any lockdown (LOCKDOWN_DEBUGFS), tracefs and perf under confidentiality
        (LOCKDOWN_TRACEFS, LOCKDOWN_PERF); where the refusal was a permission error or a failed mount."""
        lockdown = lockdown_mode(self.sys_root)
        if not lockdown:
            return
        refused = ("not permitted", "Permission denied", "could not", "unavailable", "needs root", "not reset")
        for name, reason in list(self.missing.items()):
            debugfs = name.startswith(("debugfs", "swiotlb"))
            tracefs_or_perf = name.startswith(("tracefs", "trace.", "pmu."))
            applies = debugfs or (tracefs_or_perf and lockdown == "confidentiality")
            if (
                applies
                and "lockdown" not in reason
                and "locked down" not in reason
                and any(w in reason for w in refused)
            ):
                self.missing[name] = f"{reason} (the kernel is locked down: {lockdown})"

    def _filesystem(self, fstype: str, standard: Path) -> Path | None:
        """Where ``fstype`` can be read: its standard place when mounted there, else a private mount of
        this run (recorded first); None when it cannot be mounted (the reason goes to missing)."""
        if mounted(standard):
            return standard
        if self.ledger is None:
            self.missing[fstype] = f"{fstype} is not mounted at {standard} and mounting it needs root"
            return None
        point = private_dir()
        entry = self.ledger.record({"kind": "mount", "fstype": fstype, "path": str(point)})
        try:
            mount(fstype, point)
        except OSError as exc:
            self.ledger.forget(lambda e: e is entry)
            os.rmdir(point)
            self.missing[fstype] = f"could not mount {fstype}: {exc}"
            return None
        self._mounts.append((entry, point))
        return point

    def _release(self, point: Path) -> None:
        """Unmount a private mount that turned out to hold nothing to count."""
        for entry, path in list(self._mounts):
            if path == point:
                undo_entry(entry)
                self._mounts.remove((entry, path))
                self.ledger.forget(lambda e, entry=entry: e is entry)

    def _swiotlb(self) -> Path | None:
        debugfs = self._filesystem("debugfs", self.sys_root / "kernel/debug")
        if debugfs is None:
            self.missing["swiotlb"] = "debugfs unavailable: " + self.missing.get("debugfs", "")
            return None
        directory = debugfs / "swiotlb"
        if not (directory / "io_tlb_used").exists():
            self._release(debugfs)
            self.missing["swiotlb"] = (
                "no bounce-buffer pool: debugfs has no swiotlb/io_tlb_used (the kernel allocated no swiotlb, "
                "e.g. swiotlb=noforce or no device needs it)"
            )
            return None
        if not (directory / "io_tlb_used_hiwater").exists():
            self.missing["swiotlb.hiwater"] = "this kernel has no swiotlb/io_tlb_used_hiwater (added in 2023)"
        return directory

    def _pool_slabs(self) -> float | None:
        """The slabs the values can reach: io_tlb_nslabs plus io_tlb_transient_nslabs where present."""
        assert self.swiotlb is not None
        total = None
        for file in ("io_tlb_nslabs", "io_tlb_transient_nslabs"):
            text = read_or_none(self.swiotlb / file)
            if text is not None and text.strip().isdigit():
                total = (total or 0.0) + float(text)
        return total

    def _swiotlb_values(self) -> dict[str, float]:
        """used, hiwater and transient slabs; a value above the pool is rejected with the reason, an
        unreadable file says why (under lockdown debugfs refuses the 0600 high-water file)."""
        assert self.swiotlb is not None
        values: dict[str, float] = {}
        pool = self._pool_slabs()
        files = (
            ("used", "io_tlb_used"),
            ("hiwater", "io_tlb_used_hiwater"),
            ("transient_nslabs", "io_tlb_transient_nslabs"),
            ("nslabs", "io_tlb_nslabs"),
        )
        for name, file in files:
            path = self.swiotlb / file
            try:
                text = path.read_text()
            except FileNotFoundError:
                continue
            except OSError as exc:
                lockdown = lockdown_mode(self.sys_root)
                why = f"{file}: {exc.strerror}"
                if lockdown:
                    why += f": the kernel is locked down ({lockdown}), and debugfs refuses files with write bits"
                self.missing[f"swiotlb.{name}"] = why
                continue
            if not text.strip().isdigit():
                continue
            value = float(text)
            if name in ("used", "hiwater") and pool is not None and value > pool:
                self.missing[f"swiotlb.{name}"] = (
                    f"{file} read {text.strip()}, above the pool's {int(pool)} slabs: rejected (a counter that "
                    "underflowed, as on some 6.5-6.8 kernels)"
                )
                continue
            values[f"swiotlb.{name}"] = value
        return values

    def begin(self) -> dict[str, float]:
        """The snapshot at an execution's start, the swiotlb high-water mark first reset to 0 where the
        file is writable (so its value at the end is this execution's peak)."""
        if self.swiotlb is not None:
            hiwater = self.swiotlb / "io_tlb_used_hiwater"
            if hiwater.exists():
                try:
                    hiwater.write_text("0")
                    self.missing.pop("swiotlb.hiwater.reset", None)
                except OSError as exc:
                    self.missing["swiotlb.hiwater.reset"] = (
                        f"io_tlb_used_hiwater not reset ({exc.strerror}): the mark is since boot or its last reset"
                    )
                    self._name_lockdown()
        return self.snapshot()

    def _tracepoints(self) -> None:
        tracefs = self._filesystem("tracefs", self.sys_root / "kernel/tracing")
        if self.ledger is not None:
            sweep_orphans(tracefs)
        for event in self.tracepoints:
            if tracefs is None:
                self.missing[f"trace.{event}"] = "tracefs unavailable: " + self.missing.get("tracefs", "")
                continue
            group, name = event.split(":")
            if not (tracefs / "events" / group / name).is_dir():
                self.missing[f"trace.{event}"] = f"this kernel has no {event} tracepoint" + (
                    " (it exists only in Intel's downstream TDX kernels, and counts kernel-mode #VEs only)"
                    if group == "tdx"
                    else ""
                )
                continue
            if self.ledger is None:
                self.missing[f"trace.{event}"] = "counting a tracepoint needs root"
                continue
            instance_name = f"ccbench-{os.getpid()}-{uuid.uuid4().hex[:8]}"
            entry = self.ledger.record({"kind": "trace-instance", "tracefs": str(tracefs), "name": instance_name})
            instance = tracefs / "instances" / instance_name
            try:
                instance.mkdir()
                # the events are counted, never read: the smallest buffer, overwritten as it fills
                (instance / "buffer_size_kb").write_text("4")
                (instance / "events" / group / name / "enable").write_text("1")
            except OSError as exc:
                self.missing[f"trace.{event}"] = f"could not enable {event}: {exc}"
                undo_entry(entry)
                self.ledger.forget(lambda e, entry=entry: e is entry)
                continue
            self.traces[event] = instance
            self._mounts.append((entry, instance))

    def snapshot(self) -> dict[str, float]:
        values = read_proc(self.proc_root)
        if self.swiotlb is not None:
            values.update(self._swiotlb_values())
        values.update(self.kmsg.read() if self.kmsg is not None else {})
        for event, instance in self.traces.items():
            values[f"trace.{event}"] = float(_events_written(instance))
        for state, name in self.idle_states:
            for field, key in (("usage", "usage"), ("time", "time_us")):
                text = read_or_none(state / field)
                if text is not None and text.strip().isdigit():
                    values[f"cpuidle.{name}.{key}"] = values.get(f"cpuidle.{name}.{key}", 0.0) + float(text)
        if self.perf is not None:
            values.update({f"pmu.{name}": value for name, value in self.perf.read().items()})
        return values

    def close(self) -> None:
        """Undo what open() made, newest first; the ledger forgets each thing undone."""
        if self.perf is not None:
            self.perf.close()
            self.perf = None
        for entry, _path in reversed(self._mounts):
            try:
                undo_entry(entry)
            except OSError:
                continue  # left in the ledger for cleanup_stale
            if self.ledger is not None:
                self.ledger.forget(lambda e, entry=entry: e is entry)
        if self.kmsg is not None:
            self.kmsg.close()
        self._mounts, self.traces, self.swiotlb, self.kmsg = [], {}, None, None


def _events_written(instance: Path) -> int:
    """Events written to a trace instance: those in its buffers plus those overwritten, over CPUs."""
    total = 0
    for stats in (instance / "per_cpu").glob("cpu*/stats"):
        for line in (read_or_none(stats) or "").splitlines():
            key, _, value = line.partition(":")
            if key in ("entries", "overrun"):
                total += int(value)
    return total


def execution_fields(session: CounterSession | None, before: dict[str, float] | None) -> dict[str, Any]:
    """The execution record's ``counters`` (differences over the execution) and ``counters_missing``."""
    if session is None or before is None:
        return {}
    return {"counters": differences(before, session.snapshot()), "counters_missing": dict(session.missing)}


def counter_samples(bundle: str | Path) -> Iterator[dict[str, Any]]:
    """The counters of a bundle's executions as sample dicts (metric ``mech.<name>``, unit ``count``;
    the layer's CPU from the interference record as ``mech.layer_cpu_s``), for the analysis that
    wants them beside the workload's samples (joined on ``execution``)."""
    from ccbench.bundle import read_bundle

    for record in read_bundle(bundle, samples=False).executions:
        counters = dict(record.get("counters") or {})
        layer = (record.get("interference") or {}).get("layer_cpu_s")
        if layer is not None:
            counters["layer_cpu_s"] = layer
        for name, value in counters.items():
            yield {
                "workload": record.get("workload"),
                "variant": record.get("variant"),
                "metric": METRIC_PREFIX + name,
                "unit": "s" if name == "layer_cpu_s" else "count",
                "value": value,
                "repetition": record.get("repetition"),
                "warmup": record.get("warmup"),
                "execution": record.get("key"),
                "contended": record.get("contended", False),
            }
