"""Hardware counters: system-wide counting events per CPU through perf_event_open, where a PMU exists."""

from __future__ import annotations

import ctypes
import os
import platform

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
