"""The one accessor for a probe document (the manifest's ``environment``, ccbench.probe.collect):
what each reader asks of a machine, read here the same way for every bundle, old or new.

The machine facts come from the probe's ``provenance`` block where the bundle has one; older
bundles fall back to ``cpu.model``, ``cpu.threads``, ``memory.total_bytes`` and
``kernel.release``, and a fact neither records is None (never guessed). Pure functions: every one
takes a probe (or None) and never raises on odd input; ``machine_of`` also the bundle's path and the
labels a user gave (``--label``): which machine a bundle was measured on, as the engine, the
per-sample view and the history name it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

#: (vendor, CPUID family, model) -> microarchitecture, as Linux names them (intel-family.h) and AMD's
#: family/model guides number them: a name a reader recognises ("Ice Lake vs Sapphire Rapids")
#: where a brand string alone would not say it
MICROARCHITECTURES = {
    ("GenuineIntel", 6, 85): "Skylake/Cascade Lake",
    ("GenuineIntel", 6, 106): "Ice Lake",
    ("GenuineIntel", 6, 108): "Ice Lake",
    ("GenuineIntel", 6, 143): "Sapphire Rapids",
    ("GenuineIntel", 6, 207): "Emerald Rapids",
    ("GenuineIntel", 6, 173): "Granite Rapids",
    ("AuthenticAMD", 23, 49): "Rome",
    ("AuthenticAMD", 25, 1): "Milan",
    ("AuthenticAMD", 25, 17): "Genoa",
    ("AuthenticAMD", 26, 2): "Turin",
}


def provenance(probe: Mapping[str, Any] | None) -> dict[str, Any] | None:
    value = (probe or {}).get("provenance")
    return value if isinstance(value, dict) else None


def _known(value: Any) -> Any:
    return None if value in (None, "", "unknown") else value


def microarchitecture(probe: Mapping[str, Any]) -> str | None:
    cpu = probe.get("cpu") or {}
    try:
        key = (cpu.get("vendor"), int(cpu.get("family")), int(cpu.get("model_number")))
    except (TypeError, ValueError):
        return None
    return MICROARCHITECTURES.get(key)


def machine_facts(probe: Mapping[str, Any] | None) -> dict[str, Any]:
    """{fact: value or None} for the facts that confound a cross-machine comparison."""
    probe = probe or {}
    recorded = provenance(probe) or {}
    cpu, memory, kernel = probe.get("cpu") or {}, probe.get("memory") or {}, probe.get("kernel") or {}
    return {
        "CPU model": _known(recorded.get("cpu_model")) or _known(cpu.get("model")),
        "vCPUs": _known(recorded.get("vcpus")) or _known(cpu.get("threads")),
        "memory": _known(recorded.get("memory_bytes")) or _known(memory.get("total_bytes")),
        # SMT has no fallback: cores and threads of a VM's cpuinfo do not say whether siblings share a core
        "SMT": recorded.get("smt") if isinstance(recorded.get("smt"), bool) else None,
        "kernel": _known(kernel.get("release")),
    }


#: the CPU vendor a TEE technology implies: TDX and SGX run only on Intel CPUs, SEV in all its forms only on AMD
TEE_VENDOR = {"tdx": "Intel", "sgx": "Intel", "sev": "AMD", "sev-es": "AMD", "sev-snp": "AMD"}
_VENDOR_WORDS = {"intel": "Intel", "xeon": "Intel", "amd": "AMD", "epyc": "AMD", "ampere": "Ampere", "arm": "Arm"}


def cpu_vendor(model: str | None, tee: str | None = None, label: str | None = None) -> tuple[str | None, str]:
    """(the CPU vendor, what says so) of a machine: its CPU model's vendor ("Intel Xeon Platinum 8370C"),
    else the one its TEE implies (TDX: Intel, SEV-SNP: AMD), else the one its label names as a word of its
    own ("Intel-Non-TDX", "amd_plain": a name the user or the source gave, the weakest of the three);
    (None, "") where none says, or a label names two."""
    named = _named_vendor(model)
    if named:
        return named, "CPU model"
    implied = TEE_VENDOR.get(str(tee or "").lower())
    if implied:
        return implied, "implied by the TEE"
    named = _named_vendor(label)
    return (named, "named in the label") if named else (None, "")


def _named_vendor(text: str | None) -> str | None:
    """The one vendor ``text`` names as a word of its own, None for none or several."""
    words = {_VENDOR_WORDS[w] for w in re.split(r"[^a-z0-9]+", str(text or "").lower()) if w in _VENDOR_WORDS}
    return words.pop() if len(words) == 1 else None


def tee_technology(probe: Mapping[str, Any] | None) -> str:
    return str(section(probe, "tee").get("technology") or "unknown")


def page_sizes(probe: Mapping[str, Any]) -> dict[str, Any]:
    recorded = provenance(probe) or {}
    thp = recorded.get("thp") if isinstance(recorded.get("thp"), dict) else {}
    return {
        "page_size": recorded.get("page_size"),
        "thp": thp.get("enabled"),
        "hugepages_total": recorded.get("hugepages_total"),
    }


def section(probe: Mapping[str, Any] | None, name: str) -> dict[str, Any]:
    """One block of the probe (``cpu``, ``memory``, ``kernel``, ``tee``, ``storage``, ...), {} when absent."""
    value = (probe or {}).get(name)
    return value if isinstance(value, dict) else {}


def recorded_facts(probe: Mapping[str, Any] | None) -> dict[str, Any]:
    """The machine as the probe itself recorded it (no provenance block, no fallback, None where it
    said nothing): what the export joins to each sample and the history keeps with each run."""
    probe = probe or {}
    cpu = section(probe, "cpu")
    return {
        "tee_technology": section(probe, "tee").get("technology"),
        "cpu_model": cpu.get("model"),
        "cpu_threads": cpu.get("threads"),
        "microcode": cpu.get("microcode"),
        "memory_bytes": section(probe, "memory").get("total_bytes"),
        "kernel_release": section(probe, "kernel").get("release"),
        "virtualization": probe.get("virtualization"),
        "storage_protection": section(probe, "storage").get("protection"),
        "hostname": probe.get("hostname"),
    }


def machine_identity(probe: Mapping[str, Any] | None) -> tuple[str | None, str | None]:
    """(hostname, machine_id) as the probe recorded them; the machine_id falls back to the hostname."""
    probe = probe or {}
    hostname = probe.get("hostname") or None
    return hostname, probe.get("machine_id") or hostname


def machine_of(
    probe: Mapping[str, Any] | None, bundle_path: str | Path, labels: Mapping[str, str]
) -> tuple[str, str, str]:
    """(machine label, machine_id, TEE) of the bundle at ``bundle_path`` with this probe: the label
    given for its path, else the probe's hostname, else the bundle's directory name; the probe's
    machine_id, else its hostname, else the bundle's path (a bundle is one machine); the TEE
    technology or "unknown"."""
    hostname, machine_id = machine_identity(probe)
    machine = labels.get(str(Path(bundle_path).resolve())) or hostname or Path(bundle_path).name
    return str(machine), str(machine_id or bundle_path), tee_technology(probe)
