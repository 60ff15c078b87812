"""The counters' plain readers: /proc tables (vmstat, stat, interrupts, softirqs) and sysfs facts
(lockdown, online CPUs) read as text under a root, so tests can feed files; their differences over an
execution; the names and reasons the other rooms share."""

from __future__ import annotations

from pathlib import Path

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


def read_or_none(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def read_proc(proc_root: Path) -> dict[str, float]:
    """vmstat, stat, interrupts and softirqs of one moment, as flat name -> value."""
    values: dict[str, float] = {}
    for line in (read_or_none(proc_root / "vmstat") or "").splitlines():
        key, _, value = line.partition(" ")
        if key in VMSTAT_COUNTS or key in VMSTAT_LEVELS:
            values[f"vmstat.{key}"] = float(value)
    for line in (read_or_none(proc_root / "stat") or "").splitlines():
        parts = line.split()
        if len(parts) > 1 and parts[0] in STAT_COUNTS:
            values[f"stat.{STAT_COUNTS[parts[0]]}"] = float(parts[1])
    values.update(_per_cpu_table(read_or_none(proc_root / "interrupts"), "interrupts"))
    values.update(_per_cpu_table(read_or_none(proc_root / "softirqs"), "softirqs"))
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
    text = read_or_none(Path(sys_root) / "kernel/security/lockdown") or ""
    for word in text.split():
        if word.startswith("[") and word.endswith("]"):
            return None if word[1:-1] == "none" else word[1:-1]
    return None


def online_cpus(sys_root: Path) -> list[int] | None:
    """The online CPUs from devices/system/cpu/online ("0-3,6"), or None where unreadable."""
    text = (read_or_none(Path(sys_root) / "devices/system/cpu/online") or "").strip()
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
