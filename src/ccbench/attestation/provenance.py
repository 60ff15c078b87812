"""A bundle's CC provenance: the probe's `provenance` block with `tee_evidence` filled in from the
verifier's reading of the bundle's evidence (never from the probe's guesses).

The probe runs when a run starts, before there is evidence; the evidence is made when the run ends,
over the digests of every file including the manifest, so it cannot be written into the manifest.
Readers therefore ask ``bundle_provenance``: it takes the manifest's block and adds what ccverify
reads from ``attestation/evidence.bin`` (``--parse-only``: the report's own fields, its signature
not checked; ``verified`` says so). ``ccbench verify`` gives the verified claims' reading
(``Verdict.tee_evidence``, ``verified: true``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ccbench.attestation import ccverify
from ccbench.attestation.ccverify import tee_evidence
from ccbench.attestation.digests import ATTESTATION_FILE

#: the probe's provenance keys (docs/bundle-format.md, "provenance"): every one present, null when
#: unknown, so an older bundle (probe version 1) reads with the same shape
PROVENANCE_KEYS = (
    "kernel_cmdline",
    "swiotlb",
    "page_size",
    "thp",
    "hugepages_total",
    "vcpus",
    "smt",
    "memory_bytes",
    "cpu_model",
    "microcode",
    "hypervisor",
    "tdx_idle",
    "clocksource",
    "tee_evidence",
)
_NESTED_NULLS = {
    "swiotlb": {"bytes": None, "source": None, "cmdline": None, "dynamic": None},
    "thp": {"enabled": None, "defrag": None},
}


def parse_evidence(technology: str, evidence: Path) -> dict[str, Any] | None:
    """What the evidence says of itself, read by ccverify --parse-only; None when it cannot be read."""
    if technology not in ("sev-snp", "tdx") or not evidence.is_file():
        return None
    result = ccverify.parse_only(technology, evidence)
    if not result or not result.get("parsed"):
        return None
    return tee_evidence(technology, result.get("details"), verified=False)


def empty_provenance() -> dict[str, Any]:
    return {key: dict(_NESTED_NULLS[key]) if key in _NESTED_NULLS else None for key in PROVENANCE_KEYS}


def bundle_provenance(bundle: str | Path, environment: dict[str, Any] | None) -> dict[str, Any]:
    """The manifest's provenance block (every key, null when the probe did not record it), with
    tee_evidence read from the bundle's SEV-SNP or TDX evidence when it has some."""
    provenance = empty_provenance()
    recorded = (environment or {}).get("provenance")
    if isinstance(recorded, dict):
        provenance.update({key: value for key, value in recorded.items()})
    else:
        provenance.update(_from_older_probe(environment or {}))
    evidence = _bundle_evidence(Path(bundle))
    if evidence is not None:
        provenance["tee_evidence"] = parse_evidence(*evidence)
    return provenance


def _from_older_probe(environment: dict[str, Any]) -> dict[str, Any]:
    """A bundle whose probe predates the provenance block (or an imported one) still says its CPU,
    microcode, logical CPUs and memory in the same probe document: the same facts, not guesses."""
    cpu, memory = environment.get("cpu") or {}, environment.get("memory") or {}
    model = cpu.get("model")
    return {
        "cpu_model": None if model in (None, "unknown") else model,
        "microcode": cpu.get("microcode"),
        "vcpus": cpu.get("threads") or None,
        "memory_bytes": memory.get("total_bytes"),
        "hugepages_total": memory.get("hugepages_total"),
    }


def _bundle_evidence(bundle: Path) -> tuple[str, Path] | None:
    try:
        document = json.loads((bundle / ATTESTATION_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    info = document.get("evidence") if isinstance(document, dict) else None
    if document.get("status") != "attested" or not isinstance(info, dict) or not info.get("file"):
        return None
    return str(info.get("technology")), bundle / str(info["file"])


def describe(provenance: dict[str, Any]) -> list[tuple[str, str]]:
    """The provenance as (name, text) lines for `ccbench env`, `show` and the report; "unknown" for null."""
    swiotlb = provenance.get("swiotlb") or {}
    thp = provenance.get("thp") or {}
    memory = provenance.get("memory_bytes")
    lines = [
        ("kernel cmdline", _text(provenance.get("kernel_cmdline"))),
        ("swiotlb", _swiotlb_text(swiotlb)),
        ("page size", _text(provenance.get("page_size"), lambda v: f"{v // 1024} KiB")),
        ("THP", f"enabled {_text(thp.get('enabled'))}, defrag {_text(thp.get('defrag'))}"),
        ("huge pages", _text(provenance.get("hugepages_total"))),
        ("vCPUs / SMT", f"{_text(provenance.get('vcpus'))} / {_text(provenance.get('smt'), _on_off)}"),
        ("memory", _text(memory, lambda v: f"{v / 2**30:.1f} GiB")),
        ("CPU / microcode", f"{_text(provenance.get('cpu_model'))} / {_text(provenance.get('microcode'))}"),
        ("hypervisor", _text(provenance.get("hypervisor"))),
        ("TDX idle", _text(provenance.get("tdx_idle"))),
        ("clock source", _text(provenance.get("clocksource"))),
        ("TEE evidence", tee_evidence_text(provenance.get("tee_evidence"))),
    ]
    return lines


def tee_evidence_text(evidence: dict[str, Any] | None) -> str:
    """One line of what the evidence says: SNP policy, VMPL, TCBs, platform; TDX module and attributes."""
    if not evidence:
        return "none (no SEV-SNP or TDX evidence read: none made, or the verifier is not built)"
    checked = "verified" if evidence.get("verified") else "read from the evidence, signature not checked"
    if evidence.get("technology") == "sev-snp":
        policy, platform = evidence.get("policy") or {}, evidence.get("platform_info") or {}
        flags = ", ".join(f"{name} {_on_off(policy.get(name))}" for name in ("debug", "smt", "migrate_ma"))
        return (
            f"SEV-SNP policy {policy.get('raw')} ({flags}), VMPL {evidence.get('vmpl')}, "
            f"reported TCB {_tcb(evidence.get('reported_tcb'))}, current TCB {_tcb(evidence.get('current_tcb'))}, "
            f"platform {platform.get('raw')} (SMT {_on_off(platform.get('smt_enabled'))}, "
            f"TSME {_on_off(platform.get('tsme_enabled'))}) [{checked}]"
        )
    attributes = evidence.get("td_attributes") or {}
    status = f", TCB status {evidence['tcb_status']}" if evidence.get("tcb_status") else ""
    return (
        f"TDX TEE_TCB_SVN {evidence.get('tee_tcb_svn')}, MRSEAM {str(evidence.get('mrseam'))[:16]}..., "
        f"TD attributes {attributes.get('raw')} (debug {_on_off(attributes.get('debug'))}, "
        f"SEPT_VE_DISABLE {_on_off(attributes.get('sept_ve_disable'))}){status} [{checked}]"
    )


def _text(value: Any, render=str) -> str:
    return "unknown" if value is None else render(value)


def _on_off(value: Any) -> str:
    return "unknown" if value is None else ("on" if value else "off")


def _tcb(tcb: dict[str, Any] | None) -> str:
    if not tcb:
        return "unknown"
    return f"bl {tcb.get('bootloader')} tee {tcb.get('tee')} snp {tcb.get('snp')} ucode {tcb.get('microcode')}"


def _swiotlb_text(swiotlb: dict[str, Any]) -> str:
    size = swiotlb.get("bytes")
    given = f"; swiotlb={swiotlb['cmdline']} on the command line" if swiotlb.get("cmdline") else ""
    dynamic = swiotlb.get("dynamic")
    given += "" if dynamic is None else ("; grows when full (SWIOTLB_DYNAMIC)" if dynamic else "; fixed size")
    if size is None:
        return "unknown" + given
    return f"{size / 2**20:.0f} MiB (from the {swiotlb.get('source')}){given}"
