"""Mechanism counters: what the guest can count of the mechanisms behind a TEE's cost, per execution.

Around each execution (the worker's whole life, like the interference watch) the supervisor takes
two snapshots and records their differences in the execution record (docs/mechanisms.md):

- ``vmstat.*``: page faults, major faults, transparent huge pages, migrations (/proc/vmstat);
  ``vmstat.nr_unaccepted`` is a level (pages not yet accepted by a TDX or SEV-SNP guest): its value
  at the end is recorded as ``vmstat.nr_unaccepted.end`` beside the change;
- ``stat.*``: context switches, interrupts, softirqs and forks (/proc/stat);
- ``interrupts.*``: interrupts per kind (/proc/interrupts: LOC, RES, CAL, TLB... and each device's
  action name), summed over CPUs, those that moved;
- ``softirqs.*``: softirqs per kind (/proc/softirqs), summed over CPUs;
- ``swiotlb.used.end``, ``swiotlb.hiwater.end``: bounce-buffer slabs in use at the end (about 0 once
  the I/O stopped) and the high-water mark of the execution (debugfs ``swiotlb/io_tlb_used``,
  ``io_tlb_used_hiwater``: reset to 0 at the start of each execution where the file is writable,
  else the mark since boot, said in ``counters_missing``); a value above the pool
  (``io_tlb_nslabs`` plus the transient slabs) is rejected with the reason (some 6.5-6.8 kernels
  read 18446744073709551615 after an underflow); ``swiotlb.transient_nslabs`` (.end and change):
  the slabs of dynamic pools (CONFIG_SWIOTLB_DYNAMIC), each a private-to-shared conversion in a CVM;
  ``swiotlb.nslabs`` (.end and change): the pool's slabs; ``kmsg.swiotlb_full``: the kernel's "swiotlb
  buffer is full" lines (ccbench.probe.kmsg: /dev/kmsg, root), each a mapping the pool could not take;
- ``cpuidle.<state>.usage``, ``cpuidle.<state>.time_us``: how often the CPUs entered each idle
  state and how long they stayed, summed over CPUs (the halts behind idle exits; POLL never halts);
- ``trace.<event>``: how often a tracepoint fired (``swiotlb:swiotlb_bounced``,
  ``tdx:tdx_virtualization_exception``), from a tracefs instance of ccbench's own per event
  (events written plus overwritten in a tiny ring buffer: counting, never reading the events);
- ``pmu.cycles``, ``pmu.instructions``: hardware counters over the online CPUs
  (/sys/devices/system/cpu/online), where a PMU exists.

All of them count the whole machine, as the guest sees it. What cannot be read says why in
``counters_missing`` (name -> reason): no PMU, no bounce-buffer pool, a tracepoint this kernel lacks,
kernel lockdown (/sys/kernel/security/lockdown: debugfs then refuses its writable files, such as the
high-water mark), and exits, which only the host counts.

debugfs and tracefs are mounted, where they are not already, at private mount points of this run
(never on /sys/kernel/*, which other tools may mount and unmount), each recorded in the run's ledger
(``<workdir>/counters/mounts.json``) before it is made and undone at the run's end, or by the next
run and ``ccbench cleanup`` after a kill (``cleanup_stale``).

Records, not samples in samples.jsonl: the counters are facts about the machine during an
execution, never the workload's result, so they stay out of the workload's metrics, tables and
verdicts; ``counter_samples`` gives them as samples (metric ``mech.<name>``) for the analysis that
wants them (the mechanism breakdown).
"""

from __future__ import annotations

import ctypes
import os
import platform
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ccbench.basics.ledger import Ledger, read_entries
from ccbench.probe.kmsg import KernelMessages

#: the metric prefix of the counters as samples (counter_samples)
METRIC_PREFIX = "mech."
#: /proc/vmstat counters (differences) and levels (value at the end, and the change)
VMSTAT_COUNTS = (
    "pgfault",
    "pgmajfault",
    "thp_fault_alloc",
    "thp_fault_fallback",
    "thp_collapse_alloc",
    "thp_split_page",
    "pgmigrate_success",
    "numa_hint_faults",
    "pswpin",
    "pswpout",
    "compact_stall",
)
VMSTAT_LEVELS = ("nr_unaccepted", "nr_anon_transparent_hugepages")
STAT_COUNTS = {"ctxt": "ctxt", "intr": "intr", "softirq": "softirq", "processes": "processes"}
TRACEPOINTS = ("swiotlb:swiotlb_bounced", "tdx:tdx_virtualization_exception")
#: perf_event_open (type, config): PERF_TYPE_HARDWARE cycles and instructions
PMU_EVENTS = {"cycles": (0, 0), "instructions": (0, 1)}
LEVELS = {f"vmstat.{key}" for key in VMSTAT_LEVELS} | {
    f"swiotlb.{key}" for key in ("used", "hiwater", "transient_nslabs", "nslabs")
}
EXITS_REASON = (
    "exits (#VC/GHCB on SEV-SNP, #VE/TDVMCALL on TDX, VM exits on a plain VM) are counted by the "
    "hypervisor; a guest sees their cost, not their number (tdx:tdx_virtualization_exception exists only in "
    "Intel's downstream kernels, and counts kernel-mode #VEs only)"
)
LEDGER = "counters/mounts.json"


# --- /proc readers (plain text under a root, so tests can feed files) ---------------------------------


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def read_proc(proc_root: Path) -> dict[str, float]:
    """vmstat, stat, interrupts and softirqs of one moment, as flat name -> value."""
    values: dict[str, float] = {}
    for line in (_read(proc_root / "vmstat") or "").splitlines():
        key, _, value = line.partition(" ")
        if key in VMSTAT_COUNTS or key in VMSTAT_LEVELS:
            values[f"vmstat.{key}"] = float(value)
    for line in (_read(proc_root / "stat") or "").splitlines():
        parts = line.split()
        if len(parts) > 1 and parts[0] in STAT_COUNTS:
            values[f"stat.{STAT_COUNTS[parts[0]]}"] = float(parts[1])
    values.update(_per_cpu_table(_read(proc_root / "interrupts"), "interrupts"))
    values.update(_per_cpu_table(_read(proc_root / "softirqs"), "softirqs"))
    return values


def _per_cpu_table(text: str | None, prefix: str) -> dict[str, float]:
    """Rows of /proc/interrupts or /proc/softirqs summed over CPUs, named by kind: a symbolic row by
    its label (LOC, NET_RX), a numbered interrupt by its action name (the last word: virtio0-input.0)."""
    if not text:
        return {}
    lines = text.splitlines()
    cpus = len(lines[0].split())
    found: dict[str, float] = {}
    for line in lines[1:]:
        label, _, rest = line.partition(":")
        words = rest.split()
        counts = [int(w) for w in words[:cpus] if w.isdigit()]
        if not counts:
            continue
        label = label.strip()
        kind = words[-1] if label.isdigit() and len(words) > len(counts) else label
        found[f"{prefix}.{kind}"] = found.get(f"{prefix}.{kind}", 0.0) + sum(counts)
    return found


def differences(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """Counts as their change; levels as their value at the end (``.end``) and their change.
    Interrupt kinds that did not move are left out (a machine has dozens)."""
    result: dict[str, float] = {}
    for name, end in after.items():
        if name not in before:
            continue
        change = end - before[name]
        if name in LEVELS:
            result[f"{name}.end"] = end
            if name in ("swiotlb.used", "swiotlb.hiwater"):
                continue
        if name.startswith("interrupts.") and change == 0:
            continue
        result[name] = change
    return result


def lockdown_mode(sys_root: Path) -> str | None:
    """The kernel's lockdown mode ("integrity", "confidentiality") from security/lockdown, the bracketed
    word; None where it is "none" or unreadable."""
    text = _read(Path(sys_root) / "kernel/security/lockdown") or ""
    for word in text.split():
        if word.startswith("[") and word.endswith("]"):
            return None if word[1:-1] == "none" else word[1:-1]
    return None


def online_cpus(sys_root: Path) -> list[int] | None:
    """The online CPUs from devices/system/cpu/online ("0-3,6"), or None where unreadable."""
    text = (_read(Path(sys_root) / "devices/system/cpu/online") or "").strip()
    if not text:
        return None
    cpus: list[int] = []
    try:
        for part in text.split(","):
            low, _, high = part.partition("-")
            cpus.extend(range(int(low), int(high or low) + 1))
    except ValueError:
        return None
    return cpus


# --- mounts and the ledger ---------------------------------------------------------------------------


def _mounted(path: Path) -> bool:
    text = _read(Path("/proc/self/mountinfo")) or ""
    return any(line.split()[4] == str(path) for line in text.splitlines() if len(line.split()) > 4)


def _mount(fstype: str, path: Path) -> None:
    done = subprocess.run(["mount", "-t", fstype, fstype, str(path)], capture_output=True, text=True)
    if done.returncode != 0:
        raise OSError(f"mount -t {fstype} {path}: {done.stderr.strip() or done.returncode}")


def _umount(path: Path) -> None:
    if _mounted(path):
        # recursive: debugfs grows a tracefs submount at tracing/ once anything looks inside it
        subprocess.run(["umount", "-R", str(path)], check=False, capture_output=True)


#: private mount points are named after the process that made them: <prefix><pid>-<random>
MOUNT_PREFIX = "ccbench-counters-"


def _private_dir() -> Path:
    """A directory no one removes recursively (a mount point under the work directory or a test's
    temporary directory could be walked into by a clean-up), named after this process."""
    base = "/run" if os.access("/run", os.W_OK) else tempfile.gettempdir()
    return Path(tempfile.mkdtemp(prefix=f"{MOUNT_PREFIX}{os.getpid()}-", dir=base))


def _dead(name: str, prefix: str) -> bool:
    """Whether the process named in ``<prefix><pid>-...`` is gone (a live one, or a pid reused, is kept)."""
    pid = name[len(prefix) :].split("-", 1)[0]
    if not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False
    return False


def sweep_orphans(tracefs: Path | None) -> list[str]:
    """Undo the trace instances and private mounts of counters' sessions whose process died without
    its ledger being read again (a run killed in a work directory where nothing runs afterwards)."""
    done = []
    if tracefs is not None:
        for instance in (tracefs / "instances").glob("ccbench-*"):
            if _dead(instance.name, "ccbench-"):
                try:
                    os.rmdir(instance)
                    done.append(f"removed the trace instance {instance.name} of a run that died")
                except OSError:
                    continue
    for base in {Path("/run"), Path(tempfile.gettempdir())}:
        for point in base.glob(f"{MOUNT_PREFIX}*"):
            if point.is_dir() and _dead(point.name, MOUNT_PREFIX) and (tracefs is None or point != tracefs):
                _umount(point)
                try:
                    os.rmdir(point)
                    done.append(f"unmounted and removed {point}, left by a run that died")
                except OSError:
                    continue
    return done


def cleanup_stale(workdir: Path) -> list[str]:
    """Undo the trace instances and mounts a killed run's counters left (its ledger under workdir)."""
    path = Path(workdir) / LEDGER
    if not path.exists():
        return []
    entries, _ = read_entries(path)
    ledger = Ledger(path)
    ledger.entries = entries
    done = ledger.undo(_undo)
    path.unlink(missing_ok=True)
    return done


def _undo(entry: dict[str, Any]) -> list[str]:
    if entry.get("kind") == "trace-instance":
        tracefs = Path(entry["tracefs"])
        temporary = None
        if not _mounted(tracefs):  # its mount is gone: the instance lives on in the kernel
            temporary = _private_dir()
            _mount("tracefs", temporary)
            tracefs = temporary
        try:
            instance = tracefs / "instances" / entry["name"]
            if instance.exists():
                os.rmdir(instance)
                return [f"removed the trace instance {entry['name']}"]
            return []
        finally:
            if temporary is not None:
                _umount(temporary)
                os.rmdir(temporary)
    if entry.get("kind") == "mount":
        point = Path(entry["path"])
        done = []
        if _mounted(point):
            _umount(point)
            done.append(f"unmounted {entry.get('fstype')} at {point}")
        if point.is_dir():
            os.rmdir(point)
        return done
    return []


# --- hardware counters -------------------------------------------------------------------------------

_PERF_EVENT_OPEN = {"x86_64": 298, "aarch64": 241}


class _PerfEventAttr(ctypes.Structure):
    """struct perf_event_attr up to config1 (PERF_ATTR_SIZE_VER0, 64 bytes): counting only."""

    _fields_ = [
        ("type", ctypes.c_uint32),
        ("size", ctypes.c_uint32),
        ("config", ctypes.c_uint64),
        ("sample_period", ctypes.c_uint64),
        ("sample_type", ctypes.c_uint64),
        ("read_format", ctypes.c_uint64),
        ("flags", ctypes.c_uint64),
        ("wakeup_events", ctypes.c_uint32),
        ("bp_type", ctypes.c_uint32),
        ("config1", ctypes.c_uint64),
    ]


class PerfCounters:
    """System-wide counting events, one per CPU (perf_event_open with pid -1), summed when read."""

    def __init__(self, events: dict[str, tuple[int, int]], cpus: list[int] | None = None):
        cpus = cpus if cpus is not None else list(range(os.cpu_count() or 1))
        self.fds: dict[str, list[int]] = {}
        self.missing: dict[str, str] = {}
        number = _PERF_EVENT_OPEN.get(platform.machine())
        libc = ctypes.CDLL(None, use_errno=True)
        for name, (kind, config) in events.items():
            if number is None:
                self.missing[name] = f"perf_event_open is not wired for {platform.machine()}"
                continue
            attr = _PerfEventAttr(type=kind, size=ctypes.sizeof(_PerfEventAttr), config=config)
            fds = []
            for cpu in cpus:
                fd = libc.syscall(number, ctypes.byref(attr), -1, cpu, -1, 0)
                if fd < 0:
                    error = ctypes.get_errno()
                    self.missing[name] = f"perf_event_open({name}): {os.strerror(error)}" + _pmu_hint(error)
                    break
                fds.append(fd)
            if name in self.missing:
                for fd in fds:
                    os.close(fd)
            else:
                self.fds[name] = fds

    def read(self) -> dict[str, float]:
        return {
            name: float(sum(int.from_bytes(os.read(fd, 8), "little") for fd in fds)) for name, fds in self.fds.items()
        }

    def close(self) -> None:
        for fds in self.fds.values():
            for fd in fds:
                os.close(fd)
        self.fds = {}


def _pmu_hint(error: int) -> str:
    if error in (2, 95):  # ENOENT, EOPNOTSUPP
        return (
            ": no PMU in this guest (the hypervisor exposes no hardware counters; a TDX TD without "
            "the PERFMON attribute has none)"
        )
    if error in (1, 13):  # EPERM, EACCES
        return ": not permitted (run as root, or lower kernel.perf_event_paranoid)"
    return ""


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
            name = _read(state / "name")
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
        if _mounted(standard):
            return standard
        if self.ledger is None:
            self.missing[fstype] = f"{fstype} is not mounted at {standard} and mounting it needs root"
            return None
        point = _private_dir()
        entry = self.ledger.record({"kind": "mount", "fstype": fstype, "path": str(point)})
        try:
            _mount(fstype, point)
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
                _undo(entry)
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
            text = _read(self.swiotlb / file)
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
                _undo(entry)
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
                text = _read(state / field)
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
                _undo(entry)
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
        for line in (_read(stats) or "").splitlines():
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
