"""Mechanism twins (docs/analysis.md, Breakdown): which configuration of a comparison is a twin of
one side with one mechanism forced on or taken away, recognised from the kernel command line in its
probe or named by the user, and whether it can stand for that mechanism at all: a bounce-buffer twin
must have bounced (VIRTIO_F_ACCESS_PLATFORM on its DMA devices, a non-zero bounce count where counters
ran, a pool as large as the CVM's), and its machines may differ from their reference in nothing
else. ccbench.analysis.rows.breakdown turns the twins found here into shares of a cost."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

#: the mechanisms a twin can isolate, by a kernel command-line parameter: one that forces the
#: mechanism on a plain VM (a "forced" twin: plain + swiotlb=force bounces like a CVM), or one that
#: takes it away from a CVM (a "removed" twin: the CVM with idle=poll never halts, so it has no halt
#: exits; a plain VM with idle=poll would only make the baseline faster)
TWIN_MARKERS = {
    "bounce-buffers": (re.compile(r"(?:^|\s)swiotlb=(?:[^\s]*,)?force(?:\s|,|$)"), "forced"),
    "idle": (re.compile(r"(?:^|\s)idle=poll(?:\s|$)"), "removed"),
}
PLAIN_OR_UNKNOWN = ("none", "unknown")


@dataclass(frozen=True)
class Twin:
    config: str
    #: "forced" (the baseline with the mechanism on) or "removed" (the CVM without it)
    kind: str
    #: what the share rests on beyond the twin's configuration ("assumed to bounce: no counters")
    note: str = ""

    @property
    def basis(self) -> str:
        return f"{self.config} ({self.note})" if self.note else self.config


#: the swiotlb tracepoint's counter in an execution record (ccbench.observe.counters): one per bounce mapping
BOUNCED = "trace.swiotlb:swiotlb_bounced"
#: virtio devices whose traffic is DMA a forced swiotlb would bounce, given VIRTIO_F_ACCESS_PLATFORM
DMA_VIRTIO = ("net", "block", "scsi", "fs")
#: the advice for a twin whose devices bypass the DMA API
ACCESS_PLATFORM_ADVICE = (
    "give the twin's virtio devices VIRTIO_F_ACCESS_PLATFORM (QEMU: iommu_platform=on on each -device virtio-*), "
    "as a CVM's are; without it virtio bypasses the DMA API and swiotlb=force bounces none of its I/O"
)


def vet_bounce_twin(
    sides: Mapping[str, list],
    config: str,
    twins: Mapping[str, Twin],
    twin_records: list[Mapping[str, Any]],
) -> tuple[dict[str, Twin], list]:
    """Keep a bounce-buffers twin only with evidence that it bounces: refused (with a finding) where its
    virtio devices lack VIRTIO_F_ACCESS_PLATFORM or where its executions' counters ran and counted no
    ``swiotlb:swiotlb_bounced``; kept and marked "assumed to bounce: no counters" where none of its
    executions has that counter (an import); a pool smaller than the CVM's is a finding (it fills
    and stalls sooner, overstating the share)."""
    from ccbench.probe.lint import HIGH, MEDIUM, Finding

    twin = twins.get("bounce-buffers")
    if twin is None or twin.kind != "forced":
        return dict(twins), []
    kept, findings = dict(twins), []
    source = "docs/mechanisms.md (Bounce buffers)"
    probes = _side_probes(sides, twin.config)
    lacking = sorted(
        {
            f"{device.get('name')} ({device.get('type')})"
            for probe in probes
            for device in (probe.get("virtio_devices") or [])
            if device.get("type") in DMA_VIRTIO and device.get("access_platform") is False
        }
    )
    counted = [float(r["counters"][BOUNCED]) for r in twin_records if BOUNCED in (r.get("counters") or {})]
    if lacking:
        findings.append(
            Finding(
                "twin-bounces-nothing",
                HIGH,
                f"the bounce-buffers twin {twin.config} has virtio devices without VIRTIO_F_ACCESS_PLATFORM "
                f"({', '.join(lacking)}): their I/O bypasses the DMA API, so swiotlb=force bounces none of it; the "
                "twin is not used",
                {"virtio_devices": lacking},
                ACCESS_PLATFORM_ADVICE,
                source,
            )
        )
        del kept["bounce-buffers"]
    elif counted and sum(counted) == 0:
        findings.append(
            Finding(
                "twin-bounces-nothing",
                HIGH,
                f"the bounce-buffers twin {twin.config} counted no swiotlb:swiotlb_bounced in its {len(counted)} "
                "execution(s) with counters: it bounced nothing, so it cannot stand for the CVM's bounce buffers; "
                "the twin is not used",
                {"swiotlb_bounced": counted},
                ACCESS_PLATFORM_ADVICE + "; check that the workload's I/O goes through a device (not emulated hosts)",
                source,
            )
        )
        del kept["bounce-buffers"]
    elif not counted:
        kept["bounce-buffers"] = Twin(twin.config, twin.kind, "assumed to bounce: no counters")
    pool = _pool_bytes(_side_probes(sides, twin.config))
    cvm_pool = _pool_bytes(_side_probes(sides, config))
    if "bounce-buffers" in kept and pool is not None and cvm_pool is not None and pool < cvm_pool:
        findings.append(
            Finding(
                "confounded-twin",
                MEDIUM,
                f"the bounce-buffers twin {twin.config} has a smaller swiotlb pool ({pool / 2**20:.0f} MiB) than "
                f"{config} ({cvm_pool / 2**20:.0f} MiB): it fills and stalls sooner, so its share overstates the "
                "CVM's bounce buffers",
                {"twin_swiotlb_bytes": pool, "cvm_swiotlb_bytes": cvm_pool},
                f"boot the twin with swiotlb={cvm_pool // 2048},force (slabs of 2 KiB: the CVM's pool)",
                source,
            )
        )
    return kept, findings


def _pool_bytes(probes: list[Mapping[str, Any]]) -> int | None:
    """The smallest swiotlb pool among the machines (provenance.swiotlb.bytes), or None where unknown."""
    sizes = [((p.get("provenance") or {}).get("swiotlb") or {}).get("bytes") for p in probes]
    known = [int(size) for size in sizes if isinstance(size, int | float)]
    return min(known) if known else None


def crosses_no_device(row: Mapping[str, Any]) -> bool:
    """Whether the row's workload ran between emulated hosts (its params say ``hosts = "emulated"``):
    veth and a bridge inside one guest, no DMA, nothing bounced."""
    import json

    params = row.get("params")
    if isinstance(params, str):
        if "emulated" not in params:
            return False
        try:
            params = json.loads(params)
        except ValueError:
            return False
    return isinstance(params, Mapping) and params.get("hosts") == "emulated"


def _technology(probe: Mapping[str, Any] | None) -> str:
    return str(((probe or {}).get("tee") or {}).get("technology") or "unknown")


def twin_mechanisms(probe: Mapping[str, Any] | None) -> set[str]:
    """The mechanisms a machine's kernel command line makes it a twin for: forced ones on a machine
    that is plain or whose TEE is unknown (an import stating its command line and nothing else; a
    CVM's ``swiotlb=force`` is what it does anyway), removed ones on a CVM or an unknown machine."""
    technology = _technology(probe)
    cmdline = ((probe or {}).get("provenance") or {}).get("kernel_cmdline") or ""
    cmdline = cmdline.split(" -- ")[0]  # what follows "--" is init's, not the kernel's
    found = set()
    for name, (marker, kind) in TWIN_MARKERS.items():
        fits = technology in PLAIN_OR_UNKNOWN if kind == "forced" else technology != "none"
        if fits and marker.search(cmdline):
            found.add(name)
    return found


def _side_probes(sides: Mapping[str, list], config: str) -> list[Mapping[str, Any]]:
    return [probe for _label, probe in sides.get(config, [])]


def _marked(sides: Mapping[str, list], config: str) -> set[str]:
    """The mechanisms every machine of a configuration is a twin for (none for no machine)."""
    probes = _side_probes(sides, config)
    return set.intersection(*(twin_mechanisms(p) for p in probes)) if probes else set()


def find_twins(
    sides: Mapping[str, list], baseline: str, config: str, named: Mapping[str, str] | None = None
) -> dict[str, Twin]:
    """{mechanism: its twin} for the row baseline -> config: a forced twin is a configuration of plain
    machines forcing a mechanism the baseline's do not; a removed twin is one of machines with the
    CVM's technology without a mechanism the CVM's have; the user's (a mechanism to a machine label
    or configuration) win."""
    base_marks, cvm_marks = _marked(sides, baseline), _marked(sides, config)
    cvm_techs = {_technology(p) for p in _side_probes(sides, config)}
    twins: dict[str, Twin] = {}
    for other in sides:
        if other in (baseline, config):
            continue
        marks = _marked(sides, other)
        for mechanism in sorted(marks):
            kind = TWIN_MARKERS[mechanism][1]
            if kind == "forced" and mechanism not in base_marks:
                twins.setdefault(mechanism, Twin(other, kind))
            elif kind == "removed" and mechanism not in cvm_marks:
                if {_technology(p) for p in _side_probes(sides, other)} == cvm_techs:
                    twins.setdefault(mechanism, Twin(other, kind))
    for mechanism, label in (named or {}).items():
        matches = [c for c, side in sides.items() if c == label or any(m == label for m, _p in side)]
        if matches and matches[0] not in (baseline, config):
            kind = TWIN_MARKERS[mechanism][1] if mechanism in TWIN_MARKERS else "forced"
            twins[mechanism] = Twin(matches[0], kind)
    return twins


def twin_findings(sides: Mapping[str, list], baseline: str, config: str, twins: Mapping[str, Twin]) -> list:
    """A lint finding for each twin whose machines differ from those it must equal (the baseline's for
    a forced twin, the CVM's for a removed one) in more than its mechanism (CPU model, vCPUs, memory,
    SMT, kernel: ccbench.analysis.rows.sides' confounders)."""
    from ccbench.analysis.rows.sides import confounded_by, differences
    from ccbench.probe.facts import machine_facts
    from ccbench.probe.lint import HIGH, Finding

    findings = []
    for mechanism, twin in twins.items():
        reference = baseline if twin.kind == "forced" else config
        base, other = sides.get(reference, []), sides.get(twin.config, [])
        found, _unknown = differences(base, other)
        if not found:
            continue
        findings.append(
            Finding(
                "confounded-twin",
                HIGH,
                f"the {mechanism} twin {twin.config} differs from {reference} in more than {mechanism}: "
                f"{confounded_by(found)}; its share of the breakdown is not that mechanism's alone",
                {label: machine_facts(probe) for label, probe in [*base, *other]},
                f"boot the twin on {reference}'s machine type and kernel, changing only the kernel command line",
                "docs/analysis.md (Breakdown)",
            )
        )
    return findings
