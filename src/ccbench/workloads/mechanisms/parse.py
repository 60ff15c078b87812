"""The mechanism workload's figures from its tools' own documents: ccmech's JSON (exits, memory,
first touch) and cyclictest's --json file (idle wake-up). Pure functions: each returns the
measurements and the figures it could not give, each with the reason."""

from __future__ import annotations

import statistics
from typing import Any

from ccbench.model import Measurement

#: a figure missing from an execution and why: {"figure": ..., "why": ...}
Missing = dict[str, str]


def _median(values: list[float]) -> float:
    return float(statistics.median(values))


def exit_measurements(document: dict[str, Any]) -> tuple[list[Measurement], list[Missing]]:
    """Per instruction: ns and TSC cycles per operation with the empty loop's subtracted (the median
    batch of each), the unsubtracted figures and every batch in the metadata."""
    if "skipped" in document:
        return [], [{"figure": "exits", "why": document["skipped"]}]
    cases = {(c["name"], c.get("leaf")): c for c in document["cases"]}
    empty = cases[("empty", None)]
    empty_ns, empty_cycles = _median(empty["ns_per_op"]), _median(empty["cycles_per_op"])
    out: list[Measurement] = []
    missing: list[Missing] = []
    for (name, leaf), case in cases.items():
        if name == "empty":
            continue
        what = {"mechanism": "exits", "instruction": "cpuid" if name == "cpuid" else "out"}
        what.update({"leaf": leaf} if leaf else {"port": case.get("port")})
        if "skipped" in case:
            missing.append({"figure": f"exit {what['instruction']} {leaf or case.get('port')}", "why": case["skipped"]})
            continue
        ns, cycles = _median(case["ns_per_op"]), _median(case["cycles_per_op"])
        metadata = {
            "ns_per_op_raw": ns,
            "cycles_per_op_raw": cycles,
            "empty_loop_ns": empty_ns,
            "empty_loop_cycles": empty_cycles,
            "batches_ns": case["ns_per_op"],
            "iterations": document["iterations"],
            "served_by": case.get("served_by"),
        }
        out += [
            Measurement(metric="exit_ns", unit="ns", value=ns - empty_ns, case=what, metadata=metadata),
            Measurement(metric="exit_cycles", unit="cycles", value=cycles - empty_cycles, case=what),
        ]
    return out, missing


def memory_measurements(document: dict[str, Any]) -> tuple[list[Measurement], list[Missing]]:
    """Copy and triad bandwidth (GB/s, the median pass) and the dependent-load latency (ns), with the
    share of the bytes the kernel backed with 2M pages."""
    pages = document["pages"]
    case = {"mechanism": "encrypted-memory", "pages": pages}
    huge_share = document["huge_bytes_arrays"] / document["mapped_bytes_arrays"]
    metadata = {
        "array_bytes": document["array_bytes"],
        "chase_bytes": document["chase_bytes"],
        "huge_bytes_arrays": document["huge_bytes_arrays"],
        "huge_bytes_chase": document["huge_bytes_chase"],
        "huge_share": huge_share,
    }
    out = [
        Measurement(
            metric="copy_bandwidth",
            unit="GB/s",
            better="higher",
            value=_median(document["copy_bytes_per_s"]) / 1e9,
            case=case,
            metadata=metadata,
        ),
        Measurement(
            metric="triad_bandwidth",
            unit="GB/s",
            better="higher",
            value=_median(document["triad_bytes_per_s"]) / 1e9,
            case=case,
        ),
        Measurement(metric="load_latency", unit="ns", value=_median(document["chase_ns_per_load"]), case=case),
        Measurement(metric="huge_page_share", unit="fraction", better=None, value=huge_share, case=case),
    ]
    missing = []
    if pages == "2m" and huge_share < 0.5:
        missing.append(
            {
                "figure": "encrypted memory on 2M pages",
                "why": f"the kernel backed only {huge_share:.0%} of the region with 2M pages (THP off or memory "
                "fragmented): these figures are mostly 4K pages",
            }
        )
    return out, missing


def first_touch_measurements(document: dict[str, Any]) -> tuple[list[Measurement], list[Missing]]:
    """The time per page of the first touch (per 4K page on 4K pages, per 2M page on 2M pages), and
    the memory the kernel accepted meanwhile where it counts unaccepted memory."""
    pages = document["pages"]
    case = {"mechanism": "first-touch", "pages": pages}
    per_page = document["ns_per_4k_page"] if pages == "4k" else document["ns_per_2m_page"]
    huge_share = document["huge_bytes"] / document["bytes"]
    out = [
        Measurement(
            metric="first_touch_ns",
            unit="ns",
            value=per_page,
            case=case,
            metadata={
                "per": "4K page" if pages == "4k" else "2M page",
                "bytes": document["bytes"],
                "huge_share": huge_share,
            },
        )
    ]
    missing = []
    before, after = document["nr_unaccepted_before"], document["nr_unaccepted_after"]
    if before is None or after is None:
        missing.append(
            {
                "figure": f"pages accepted during the first touch ({pages})",
                "why": "the kernel has no nr_unaccepted in /proc/vmstat (no unaccepted-memory support: not a "
                "TDX or SEV-SNP guest with lazy acceptance, or a kernel before 6.5)",
            }
        )
    else:
        kb_before, kb_after = document["unaccepted_kb_before"], document["unaccepted_kb_after"]
        out.append(
            Measurement(
                metric="unaccepted_pages_accepted",
                unit="pages",
                better=None,
                value=max(before - after, 0),
                case=case,
                metadata={"nr_unaccepted": [before, after], "unaccepted_kb": [kb_before, kb_after]},
            )
        )
    return out, missing


def wakeup_measurements(document: dict[str, Any], interval_us: int) -> tuple[list[Measurement], list[Missing]]:
    """Timer wake-up latency (us) of cyclictest's first thread: min, average, max, and the median and
    99th percentile from its histogram where the histogram holds them (overflows beyond its range
    counted in the metadata)."""
    thread = document["thread"]["0"]
    histogram = {int(k): int(v) for k, v in (thread.get("histogram") or {}).items()}
    cycles = int(thread.get("cycles", 0))
    case = {"mechanism": "idle-wakeup", "interval_us": interval_us}
    if not cycles:
        return [], [{"figure": "idle wake-up", "why": "cyclictest completed no cycle"}]
    metadata = {"cycles": cycles, "overflows": cycles - sum(histogram.values()), "cpu": thread.get("cpu")}
    out = [
        Measurement(metric="wakeup_min", unit="us", value=thread["min"], case=case),
        Measurement(metric="wakeup_avg", unit="us", value=thread["avg"], case=case, metadata=metadata),
        Measurement(metric="wakeup_max", unit="us", value=thread["max"], case=case),
    ]
    missing = []
    for metric, quantile in (("wakeup_p50", 0.5), ("wakeup_p99", 0.99)):
        value = histogram_quantile(histogram, cycles, quantile)
        if value is None:
            missing.append(
                {"figure": metric, "why": f"beyond the histogram's range ({metadata['overflows']} overflows)"}
            )
        else:
            out.append(Measurement(metric=metric, unit="us", value=value, case=case))
    return out, missing


def histogram_quantile(histogram: dict[int, int], total: int, quantile: float) -> float | None:
    """The smallest latency (us) at or below which ``quantile`` of ``total`` wake-ups fell, or None
    where it lies among the overflows beyond the histogram."""
    needed, seen = quantile * total, 0
    for latency in sorted(histogram):
        seen += histogram[latency]
        if seen >= needed:
            return float(latency)
    return None
