"""The mechanism workload's figures from its tools' own documents: ccmech's JSON (exits, memory,
first touch) and cyclictest's --json file (idle wake-up). Pure functions: each returns the
measurements and the figures it could not give, each with the reason."""

from __future__ import annotations

import json
import signal
import statistics
from typing import Any

from ccbench.model import Measurement

#: a figure missing from an execution and why: {"figure": ..., "why": ...}
Missing = dict[str, str]


def _median(values: list[float]) -> float:
    return float(statistics.median(values))


def exit_document(stdout: str, returncode: int = 0, stderr: str = "") -> tuple[dict[str, Any], list[Missing]]:
    """ccmech exits' output as one document ({"iterations", "batches", "cases": [...]}) from the lines
    it printed, one per case as each finished (a single document, as older builds print, is read too),
    and the cases it never printed where it died: each named with how it ended. A run that printed
    nothing readable gives no cases and one missing figure."""
    lines = [line for line in stdout.splitlines() if line.strip()]
    parsed: list[dict[str, Any]] = []
    for line in lines:
        try:
            value = json.loads(line)
        except ValueError:
            break  # a line cut off where the process died: the cases before it stand
        if isinstance(value, dict):
            parsed.append(value)
    ending = _ending(returncode)
    said = stderr.strip().splitlines()
    if said:
        ending += f": {said[-1]}"
    if len(parsed) == 1 and "cases" in parsed[0]:
        return parsed[0], []
    if not parsed:
        return {"skipped": f"ccmech exits printed nothing readable ({ending})"}, []
    header, cases = parsed[0], parsed[1:]
    if "skipped" in header:
        return header, []
    document = {"iterations": header.get("iterations"), "batches": header.get("batches"), "cases": cases}
    missing: list[Missing] = []
    if returncode != 0:
        printed = {(c.get("name"), c.get("leaf")) for c in cases}
        expected = [("empty", None), *(("cpuid", leaf) for leaf in header.get("leaves", []))]
        expected.append(("port_io", None))
        for name, leaf in expected:
            if (name, leaf) not in printed:
                figure = {"empty": "exit empty loop", "cpuid": f"exit cpuid {leaf}", "port_io": "exit out 0x80"}[name]
                missing.append({"figure": figure, "why": f"ccmech exits {ending} before printing it"})
    return document, missing


def _ending(returncode: int) -> str:
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"died by {name}"
    return f"exited with status {returncode}"


#: who serves a CPUID leaf or a port write on each platform (docs/mechanisms.md, Exits), from the
#: kernel's handlers: SEV-SNP's #VC handler answers from the CPUID table (snp_cpuid), fetching only
#: 0xB's x2APIC ID from the hypervisor; TDX's #VE handler sends only 0x40000000-0x4FFFFFFF to the VMM
#: (handle_cpuid) and answers other #VE leaves with zeros; SEV-ES sends every leaf through the GHCB
_SNP = {
    "0x0": "the SEV-SNP CPUID table, read by the guest's #VC handler (no exit to the hypervisor)",
    "0xb": "the SEV-SNP CPUID table, then the hypervisor for the x2APIC ID (#VC, a GHCB exit)",
    "0x40000000": "the SEV-SNP CPUID table, read by the guest's #VC handler (zeros where the table lacks the "
    "leaf; no exit to the hypervisor)",
}
_TDX_0XB = {
    True: "the TDX module (topology enumeration on: TD_CTLS ENUM_TOPOLOGY; no exit to the VMM)",
    False: "a #VE the guest kernel answers with zeros (no topology enumeration: TD_CTLS without ENUM_TOPOLOGY, "
    "or a kernel before 6.13 that prints no TD_CTLS; no exit to the VMM)",
    None: "the TDX module where topology enumeration is on, else a #VE the guest kernel answers with zeros "
    "(no TD_CTLS line in the kernel log to tell)",
}


def served_by(tee: dict[str, Any] | None, case: str, hypervisor: bool | None = True) -> str:
    """Who serves the exit case (a CPUID leaf like "0xb", or "port") on the machine the probe's
    ``tee`` section describes; ``hypervisor``: whether the CPU runs under one (False: bare metal)."""
    tee = tee or {}
    technology = tee.get("technology") or "unknown"
    paravisor = (tee.get("hyperv_isolation") or {}).get("paravisor_present")
    if technology == "unknown":
        return "unknown: the probe could not tell which TEE protects this machine"
    if technology in ("none", "sgx"):
        if hypervisor is False:
            return "the CPU (bare metal: no exit)"
        return "the hypervisor (a VM exit)"
    if paravisor and technology in ("sev-snp", "tdx"):
        if technology == "tdx":
            return "the paravisor (TD partitioning: an exit from the guest to the L1 VMM); the host only through it"
        return "the paravisor (the #VC reflected to it, ReflectVC); the host only through it"
    if case == "port":
        if technology == "tdx":
            return "not attempted: a user-space port write in a TD raises #VE, which Linux does not serve (SIGSEGV)"
        if technology in ("sev-es", "sev-snp"):
            return "the hypervisor, through the GHCB (#VC; the I/O bitmap checked by the guest kernel)"
        return "the hypervisor (a VM exit; SEV encrypts memory, not the registers)"
    if technology == "sev-snp":
        return _SNP.get(case, "the SEV-SNP CPUID table (#VC)")
    if technology == "sev-es":
        return "the hypervisor, through the GHCB (#VC: every leaf)"
    if technology == "sev":
        return "the hypervisor (a VM exit; SEV encrypts memory, not the registers)"
    # TDX without a paravisor
    if int(case, 16) >= 0x40000000:
        return "a #VE, then the VMM (TDVMCALL)"
    if case == "0xb":
        ctls = tee.get("tdx_td_ctls")
        return _TDX_0XB[None if ctls is None else "ENUM_TOPOLOGY" in ctls]
    return "the TDX module (no exit to the VMM)"


def exit_measurements(
    document: dict[str, Any], tee: dict[str, Any] | None = None, hypervisor: bool | None = None
) -> tuple[list[Measurement], list[Missing]]:
    """Per instruction: ns and TSC cycles per operation with the empty loop's subtracted (the median
    batch of each), the unsubtracted figures and every batch in the metadata, and who serves the exit
    on this machine (``served_by``, from the probe's ``tee``: None when no probe is given)."""
    if "skipped" in document:
        return [], [{"figure": "exits", "why": document["skipped"]}]
    cases = {(c["name"], c.get("leaf")): c for c in document["cases"]}
    out: list[Measurement] = []
    missing: list[Missing] = []
    empty = cases.get(("empty", None))
    if empty is None:
        return [], [{"figure": "exits", "why": "ccmech exits measured no empty loop to subtract"}]
    empty_ns, empty_cycles = _median(empty["ns_per_op"]), _median(empty["cycles_per_op"])
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
            "served_by": served_by(tee, leaf or "port", hypervisor) if tee is not None else None,
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
        return out, missing
    kb_before, kb_after = document["unaccepted_kb_before"], document["unaccepted_kb_after"]
    accepted = max(before - after, 0)
    out.append(
        Measurement(
            metric="unaccepted_pages_accepted",
            unit="pages",
            better=None,
            value=accepted,
            case=case,
            metadata={"nr_unaccepted": [before, after], "unaccepted_kb": [kb_before, kb_after]},
        )
    )
    if accepted:
        # the kernel accepts in MAX_ORDER chunks when a zone's accepted free memory runs low
        # (mm/page_alloc.c cond_accept_memory): the touch's whole time spread over the pages it
        # accepted is what one accepted 4K page costs, faults and zeroing included
        out.append(
            Measurement(
                metric="accept_ns_per_page",
                unit="ns",
                value=document["elapsed_ns"] / accepted,
                case={"mechanism": "page-acceptance", "pages": pages},
                metadata={"elapsed_ns": document["elapsed_ns"], "pages_accepted": accepted, "per": "accepted 4K page"},
            )
        )
    else:
        missing.append(
            {
                "figure": f"time per accepted page ({pages})",
                "why": "no acceptance: nr_unaccepted did not fall during the touch (the zone had accepted memory "
                "to spare, or all memory is accepted), so the touch timed faults, not acceptance",
            }
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
