"""Lint findings from what a run recorded beside the workload's samples (docs/trust.md, "Lint"): the
clock each machine read time from (the probe's ``provenance.clocksource``), a bounce-buffer pool
that filled during an execution (the mechanism counters in the execution records, ccbench.observe.counters),
executions that failed (their cases have no sample, so the comparison has no figure for them),
percentiles that rest on few operations (the operations fio's and YCSB's samples record), and
``--storage-path`` variants whose directory is not what their name says (the variant's recorded
``storage_protection``).
Pure functions; each returns Findings, never raises on odd input. ccbench.analysis.judgement.lint gathers them
with the other findings for compare and the report.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ccbench.analysis.labels import FOUND, IN_MEMORY, LOOP_FILE, NO_PROTECTION, named_kind, own_path_label
from ccbench.probe.facts import provenance, tee_technology
from ccbench.probe.lint import HIGH, INFO, MEDIUM, Finding, make_finding

#: a pool whose high-water mark reached this share of its slabs was full for the I/O that wanted more
#: (a mapping needs contiguous slots: the pool fails before every slab is taken)
NEARLY_FULL = 0.95
#: kernel/dma/swiotlb.c: IO_TLB_SHIFT 11, slabs of 2 KiB
SLAB_BYTES = 2048


# ---- the clock source ---------------------------------------------------------------------------------


def clocksource(probe: Mapping[str, Any] | None) -> str | None:
    value = (provenance(probe) or {}).get("clocksource")
    return str(value) if value else None


def _each_side(baseline: list, other: list, value_of) -> tuple[list, list]:
    """The distinct values (None left out) that ``value_of(label)`` gives each side's machines, sorted."""
    return tuple(sorted({value_of(label) for label, _ in side} - {None}) for side in (baseline, other))


def _side_names(baseline: list, other: list) -> tuple[str, str]:
    return ", ".join(label for label, _ in baseline), ", ".join(label for label, _ in other)


def clock_sources(baseline: list, other: list) -> list[Finding]:
    """Two sides of a comparison whose machines read time from different clock sources: every
    timestamp, timeout and timer wake-up costs what the clock costs (a vDSO read of the TSC or of
    kvm-clock's page, a system call for hpet or acpi_pm), so a timing-bound difference may be the
    clock's. Machines that did not record their clock are not judged (bundles from before it)."""
    seen = {label: clocksource(probe) for label, probe in [*baseline, *other]}
    a, b = _each_side(baseline, other, seen.get)
    if not a or not b or a == b:
        return []
    names = _side_names(baseline, other)
    return [
        make_finding(
            "clock-source",
            MEDIUM,
            f"{names[0]} read time from {' and '.join(a)} and {names[1]} from {' and '.join(b)}: timestamps, "
            "timeouts and timer wake-ups cost what each clock costs, so a difference in short latencies or "
            "wake-ups may be the clock's, not the layer's",
            {label: {"clocksource": value} for label, value in seen.items()},
            "boot both with the same clocksource= (and tsc=reliable where the TSC is stable), or read the timing-bound "
            "rows (mechanisms' timer wake-up, microsecond latencies) as including the clock's cost",
        )
    ]


def _tools(probe: Mapping[str, Any]) -> dict[str, str]:
    """The versions of the tools that measured (an imported source's pyperf, Python, fio...), as stated."""
    tools = probe.get("tools")
    if not isinstance(tools, Mapping):
        return {}
    return {
        str(k): ", ".join(map(str, v)) if isinstance(v, list) else str(v) for k, v in tools.items() if v is not None
    }


def tool_versions(baseline: list, other: list) -> list[Finding]:
    """Two sides measured by different versions of the same tool (Python 3.10 against 3.11 under
    pyperf, fio 3.28 against 3.36): the difference between them may be the tool's, which then is the
    only named difference where no layer differs. Only tools both sides state are compared."""
    seen = {label: _tools(probe) for label, probe in [*baseline, *other]}
    differ = []
    for name in sorted({k for v in seen.values() for k in v}):
        a, b = _each_side(baseline, other, lambda label, name=name: seen[label].get(name))
        if a and b and a != b:
            differ.append(f"{name.replace('_', ' ')} {' and '.join(a)} against {' and '.join(b)}")
    if not differ:
        return []
    names = _side_names(baseline, other)
    return [
        make_finding(
            "tool-versions",
            MEDIUM,
            f"{names[0]} and {names[1]} were measured by different versions of their tools ({'; '.join(differ)}): "
            "a difference between them may be the tool's, not the machine's or the layer's",
            {label: value for label, value in seen.items() if value},
            "measure both sides with the same tool versions, or read the difference as the tools' and the "
            "machines' together",
        )
    ]


# ---- a full bounce-buffer pool during an execution ----------------------------------------------------


def _pool_slabs(record: Mapping[str, Any], probe: Mapping[str, Any] | None) -> float | None:
    """The pool's slabs during the execution: io_tlb_nslabs where counted, else the boot pool's size."""
    counted = (record.get("counters") or {}).get("swiotlb.nslabs.end")
    if isinstance(counted, int | float) and counted > 0:
        return float(counted)
    size = ((provenance(probe) or {}).get("swiotlb") or {}).get("bytes")
    return size / SLAB_BYTES if isinstance(size, int | float) and size > 0 else None


def _peak(record: Mapping[str, Any]) -> float | None:
    """The execution's high-water mark of used slabs; None where the mark was not reset at its start
    (it would be since boot, not this execution's)."""
    counters, missing = record.get("counters") or {}, record.get("counters_missing") or {}
    value = counters.get("swiotlb.hiwater.end")
    if not isinstance(value, int | float) or "swiotlb.hiwater.reset" in missing:
        return None
    return float(value)


def dynamic_pool(records: list[Mapping[str, Any]], probe: Mapping[str, Any] | None) -> bool | None:
    """Whether the kernel grows the pool when full (CONFIG_SWIOTLB_DYNAMIC): its config as the probe
    read it, else debugfs' io_tlb_transient_nslabs (only such a kernel has it: counted in the records),
    else no where the high-water file of the same kernel series was read without it."""
    recorded = ((provenance(probe) or {}).get("swiotlb") or {}).get("dynamic")
    if isinstance(recorded, bool):
        return recorded
    counted = [set(r.get("counters") or {}) for r in records]
    if any("swiotlb.transient_nslabs.end" in names for names in counted):
        return True
    if any("swiotlb.hiwater.end" in names for names in counted):
        return False
    return None


def _full_executions(records: list[Mapping[str, Any]], probe: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    full = []
    for record in records:
        counters = record.get("counters") or {}
        failed = counters.get("kmsg.swiotlb_full")
        failed = int(failed) if isinstance(failed, int | float) and failed > 0 else 0
        peak, pool = _peak(record), _pool_slabs(record, probe)
        near = peak is not None and pool is not None and peak >= NEARLY_FULL * pool
        if failed or near:
            full.append(
                {
                    "execution": record.get("key"),
                    "workload": record.get("workload"),
                    "peak_slabs": None if peak is None else int(peak),
                    "pool_slabs": None if pool is None else int(pool),
                    "full_lines": failed if "kmsg.swiotlb_full" in counters else None,
                    "grew_slabs": counters.get("swiotlb.nslabs"),
                }
            )
    return full


def full_bounce_pool(machine: str, records: list[Mapping[str, Any]], probe: Mapping[str, Any] | None) -> list[Finding]:
    """A machine whose swiotlb pool was full or nearly so during executions: its "swiotlb buffer is full"
    lines (mappings that failed: dropped packets or I/O errors the workload saw) or a high-water mark
    at the pool's size. Said with whether the kernel can grow the pool."""
    full = _full_executions(records, probe)
    if not full:
        return []
    failed = sum(entry["full_lines"] or 0 for entry in full)
    workloads = sorted({str(entry["workload"]) for entry in full})
    dynamic = dynamic_pool(records, probe)
    grows = {
        True: "the kernel grows the pool when full (SWIOTLB_DYNAMIC), each new slab a private-to-shared conversion",
        False: "the kernel cannot grow it (no SWIOTLB_DYNAMIC): a full pool fails the mapping",
        None: "whether the kernel can grow it (SWIOTLB_DYNAMIC) is not known",
    }[dynamic]
    said = (
        f"the kernel printed 'swiotlb buffer is full' {failed} time{'s' if failed != 1 else ''} (at least that many "
        "mappings failed: dropped packets or I/O errors that never say swiotlb)"
        if failed
        else f"the used slabs reached {NEARLY_FULL:.0%} or more of the pool"
    )
    pool = next((e["pool_slabs"] for e in full if e["pool_slabs"]), None)
    size = f" of {pool * SLAB_BYTES / 2**20:.0f} MiB" if pool else ""
    return [
        make_finding(
            "full-bounce-pool",
            HIGH if failed else MEDIUM,
            f"{machine} ({tee_technology(probe)}): the bounce-buffer pool{size} was full during {len(full)} "
            f"execution{'s' if len(full) != 1 else ''} of {', '.join(workloads)}: {said}; {grows}. Those numbers "
            "measure a starved pool, not the layer's steady cost",
            # the first few executions stand for the rest (a long run may fill the pool in hundreds)
            {machine: {"executions": full[:5], "full_executions": len(full), "swiotlb_dynamic": dynamic}},
            "boot the guest with a larger pool (swiotlb=<slabs of 2 KiB>, the kernel's own default is 6% of memory up "
            "to 1 GiB) or a kernel with CONFIG_SWIOTLB_DYNAMIC, and measure again",
        )
    ]


def full_bounce_pools(
    executions: Mapping[str, list[Mapping[str, Any]]],
    machines: Mapping[str, Mapping[str, Any]],
    labels: Mapping[Any, Any],
) -> list[Finding]:
    """``full_bounce_pool`` for each bundle ({bundle: its execution records}), named as the comparison
    names its machine."""
    findings = []
    for bundle, records in executions.items():
        probe = machines.get(bundle)
        name = str(labels.get(bundle) or (probe or {}).get("hostname") or bundle)
        findings += full_bounce_pool(name, list(records or []), probe)
    return findings


def execution_findings(
    executions: Mapping[str, list[Mapping[str, Any]]],
    machines: Mapping[str, Mapping[str, Any]],
    labels: Mapping[Any, Any],
) -> list[Finding]:
    """The findings of each bundle's execution records: a full bounce pool, failed executions."""
    return full_bounce_pools(executions, machines, labels) + failed_executions(executions, machines, labels)


def failed_executions(
    executions: Mapping[str, list[Mapping[str, Any]]],
    machines: Mapping[str, Mapping[str, Any]],
    labels: Mapping[Any, Any],
) -> list[Finding]:
    """A bundle whose executions failed (an imported hyperfine command whose every run exited non-zero,
    a workload that failed in a run): a failed execution has no sample, so the comparison has no figure
    for what it would have measured; said, so that a missing row (or a missing side) is not read as
    nothing to see."""
    findings = []
    for bundle, records in executions.items():
        failed = [r for r in records or [] if r.get("status") not in (None, "ok") and not r.get("warmup")]
        if not failed:
            continue
        probe = machines.get(bundle)
        name = str(labels.get(bundle) or (probe or {}).get("hostname") or bundle)
        per_workload: dict[str, list[Mapping[str, Any]]] = {}
        for record in records:
            if not record.get("warmup"):
                per_workload.setdefault(str(record.get("workload")), []).append(record)
        counts = {
            workload: (sum(r in failed for r in ones), len(ones))
            for workload, ones in per_workload.items()
            if any(r in failed for r in ones)
        }
        every = any(bad == total for bad, total in counts.values())
        said = "; ".join(f"{workload}: {bad} of {total} failed" for workload, (bad, total) in counts.items())
        reasons = sorted({str(r.get("error") or r.get("status"))[:160] for r in failed})
        findings.append(
            make_finding(
                "failed-executions",
                HIGH if every else MEDIUM,
                f"{name}: executions failed ({said}: {'; '.join(reasons[:3])}); a failed execution has no sample, "
                "so the comparison has no figure for what it would have measured",
                {name: {"failed": [{k: r.get(k) for k in ("key", "status", "error")} for r in failed[:5]]}},
                "fix what made them fail and measure again; read the rows that are left as the executions that ran",
            )
        )
    return findings


#: the fewest operations beyond a percentile for its figure to rest on more than a handful of them
#: (a p99 on 100 tail operations: 10,000 operations of the kind in an execution)
MIN_TAIL = 100
PERCENTILE = re.compile(r"_p(\d{2,})$")


def beyond(metric: str, operations: int) -> float | None:
    """The operations beyond the percentile a metric names (latency_p99 of 2,500: 25), None for a
    metric that names none. p99 is 0.99, p999 0.999, p50 0.5."""
    found = PERCENTILE.search(metric)
    if not found:
        return None
    digits = found.group(1)
    return operations * (1 - int(digits) / 10 ** len(digits))


def few_tail_operations(tails: Any, table: Any) -> list[Finding]:
    """One finding per workload whose compared percentile rows rest on fewer than MIN_TAIL operations
    beyond the percentile in some execution (``tails``: ccbench.analysis.samples.series.tail_series,
    the fewest operations per series and configuration, as the samples record them)."""
    if tails is None or getattr(tails, "empty", True) or table is None or table.empty:
        return []
    compared = set()
    for side in ("config", "baseline"):
        compared |= set(zip(*(table[c].astype(str).tolist() for c in ("workload", "metric", "params", side))))
    # per workload and row (case, metric): the fewest operations in an execution and the configuration
    few: dict[str, dict[tuple[str, str], tuple[int, float, str]]] = {}
    columns = ("workload", "params", "case", "metric", "config", "operations")
    for workload, params, case, metric, config, operations in zip(*(tails[c].tolist() for c in columns)):
        tail = beyond(str(metric), int(operations))
        if tail is None or tail >= MIN_TAIL or (str(workload), str(metric), str(params), str(config)) not in compared:
            continue
        key = (str(case or params), str(metric))
        if key not in few.setdefault(str(workload), {}) or tail < few[str(workload)][key][1]:
            few[str(workload)][key] = (int(operations), tail, str(config))
    findings = []
    for workload, rows in few.items():
        ordered = sorted(rows.items(), key=lambda item: item[1][1])
        shown = "; ".join(
            f"{case} {metric} on {config}: {ops:,} operations, {tail:.0f} beyond it"
            for (case, metric), (ops, tail, config) in ordered[:3]
        )
        more = f"; and {len(ordered) - 3} more" if len(ordered) > 3 else ""
        findings.append(
            make_finding(
                "few-tail-operations",
                INFO,
                f"{workload}: {len(ordered)} percentile {'rows rest' if len(ordered) != 1 else 'row rests'} on fewer than "
                f"{MIN_TAIL} operations beyond the percentile in an execution (the fewest per row: {shown}{more}): "
                "such a figure moves with a handful of operations, and more rounds do not steady it",
                # per row, as the report's evidence column reads it ("row: key=value, ...")
                {
                    f"{workload} {case} {metric} on {config}": {
                        "operations": ops,
                        "beyond the percentile": round(tail, 1),
                    }
                    for (case, metric), (ops, tail, config) in ordered
                },
                "give each execution more operations (YCSB's operationcount: a p99 of an operation on 100 needs "
                "10,000 of it; fio's runtime or size), not more repetitions (docs/analysis.md, 'Operations per "
                "execution')",
            )
        )
    return findings


# ---- a --storage-path directory that is not what its name says ---------------------------------------

#: what describe_path found a directory to be, in words (``{fs}``: its file system type)
FOUND_WORDS = {
    "plain": "a plain directory ({fs}: no cipher, not in memory)",
    "tmpfs": "a tmpfs (in memory)",
    "ramfs": "a ramfs (in memory)",
    "dm-crypt": "on dm-crypt ({fs} on an encrypted block device)",
    "fscrypt": "an fscrypt-encrypted directory ({fs})",
    "fuse": "on a FUSE file system ({fs}: counted as encryption, as gocryptfs is)",
}
#: what a variant's name says its storage is, in words; what to point it at instead; the name that says
#: what a directory is
CLAIMED_WORDS = {IN_MEMORY: "memory", LOOP_FILE: "loop file", NO_PROTECTION: "plain disk"}
WANTED = {
    IN_MEMORY: "a tmpfs mount (mount -t tmpfs tmpfs DIR)",
    NO_PROTECTION: "a plain directory",
    LOOP_FILE: "a plain directory",
}
NAME_FOR = {IN_MEMORY: "tmpfs", NO_PROTECTION: "disk"}


def misnamed_storage_paths(
    own_paths: Mapping[str, list[Mapping[str, Any]]], labels: Mapping[Any, Any]
) -> list[Finding]:
    """One finding per ``--storage-path NAME=DIR`` variant whose directory was found to be other
    storage than NAME says (``tmpfs`` on a plain directory, ``encrypted`` on a tmpfs, ``disk`` on
    dm-crypt): the comparison layers it by what the directory is, and the user is told. ``own_paths``:
    {bundle: its user-path variants} (ccbench.analysis.samples.load.own_path_variants). A loop file
    looks plain (ext4 on a loop device, no cipher): ``ext4-loop`` on a plain directory agrees;
    a directory nothing was found about (``unknown``, a bundle from before it was recorded) is not judged."""
    findings = []
    seen = set()
    for bundle, variants in own_paths.items():
        machine = str(labels.get(bundle) or bundle)
        for variant in variants:
            name, found = str(variant.get("storage")), variant.get("storage_protection")
            claimed = named_kind(name)
            if found not in FOUND or {LOOP_FILE: NO_PROTECTION}.get(claimed, claimed) == FOUND[found]:
                continue
            directory = str(variant.get("storage_path") or "its directory")
            if (machine, name, directory, found) in seen:
                continue
            seen.add((machine, name, directory, found))
            fstype = variant.get("storage_fstype")
            label = own_path_label(name, found)
            findings.append(
                make_finding(
                    "misnamed-storage-path",
                    MEDIUM,
                    f"{machine}: the storage variant {name} ran in {directory}, found to be "
                    f"{FOUND_WORDS[found].format(fs=fstype or 'file system unknown')}, not the "
                    f"{CLAIMED_WORDS.get(claimed, 'encrypted storage')} its name says: compared as "
                    f"{FOUND[found]} ('{label}'), not as {claimed}",
                    {
                        f"{machine} {name}": {
                            "directory": directory,
                            "storage_protection": found,
                            "storage_fstype": fstype,
                            "compared as": label,
                        }
                    },
                    f"point --storage-path {name}= at "
                    + WANTED.get(claimed, "a directory on dm-crypt (LUKS), fscrypt or gocryptfs")
                    + (
                        # a plain directory's only name is disk, which the run's baseline has already
                        " and run again: as it ran, its rows compare two unprotected directories (docs/storage.md)"
                        if FOUND[found] == NO_PROTECTION
                        else f", or name the variant for what {directory} is (--storage-path "
                        f"{NAME_FOR.get(FOUND[found], 'encrypted')}={directory}) and run again (docs/storage.md)"
                    ),
                )
            )
    return findings
