"""The environment probe: facts of the machine, which TEE protects it, and how storage is protected.

Everything is read under a root directory (default "/") so that the same code reads a live machine,
a captured snapshot of one, or a test fixture. A missing source yields "unknown" with the reason.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ccbench.probe.crypto import cipher_from_text, cpu_crypto
from ccbench.probe.sources import Sources
from ccbench.probe.storage import describe_path, probe_storage
from ccbench.probe.system import machine_id, machine_launch, probe_provenance, probe_system, virtio_devices
from ccbench.probe.tee import detect as detect_tee
from ccbench.probe.tee import tdx_idle_line

__all__ = ["probe", "describe_path", "Sources"]

PROBE_VERSION = 2

_HYPERVISOR_SIGNATURES = {
    "KVMKVMKVM": "kvm",
    "Microsoft Hv": "microsoft",
    "VMwareVMware": "vmware",
    "XenVMMXenVMM": "xen",
    "TCGTCGTCGTCG": "qemu",
    "ACRNACRNACRN": "acrn",
    "bhyve bhyve": "bhyve",
}


#: kernel ciphers worth naming in the environment (storage: xts, cts; transport in the kernel: gcm)
KERNEL_CIPHERS = ("aes", "xts(aes)", "cts(cbc(aes))", "gcm(aes)")


def _kernel_crypto(sources: Sources) -> dict[str, Any]:
    """The driver that serves each AES mode now (a template not used yet says what it would be built on)."""
    text = sources.read_text("/proc/crypto")
    if text is None:
        return {"reason": f"{sources.path('/proc/crypto')} unreadable"}
    found = {}
    for name in KERNEL_CIPHERS:
        entry = cipher_from_text(text, name)
        if entry is not None:
            found[name] = {key: entry[key] for key in ("driver", "accelerated", "implementation", "instantiated")}
    return found


def probe(
    root: str | Path = "/",
    dmesg: str | Path | None = None,
    bench_dir: str | Path | None = None,
    cpuid: str | Path | None = None,
) -> dict[str, Any]:
    """The probe document of the machine under ``root``; ``cpuid``: the CPUID dump (``cpuid -r -1``)
    recorded on a snapshot's machine (a live machine's CPUID is executed here)."""
    root = Path(root)
    live = root.resolve() == Path("/")
    sources = Sources(
        root=root, dmesg_file=Path(dmesg) if dmesg else None, live=live, cpuid_file=Path(cpuid) if cpuid else None
    )
    document = probe_system(sources)
    document["probe_version"] = PROBE_VERSION
    document["root"] = str(root)
    document["cpu_crypto"] = cpu_crypto(document["cpu"].get("flags"))
    document["kernel_crypto"] = _kernel_crypto(sources)
    document["tee"] = detect_tee(sources)
    if document["virtualization"].startswith("vm ("):
        for note in document["tee"]["notes"]:
            if note.startswith("hypervisor signature"):
                signature = note.split("'")[1] if "'" in note else ""
                document["virtualization"] = _HYPERVISOR_SIGNATURES.get(signature, document["virtualization"])
    bench = Path(bench_dir) if bench_dir else (Path(os.getcwd()) if live else Path("/"))
    document["storage"] = probe_storage(bench, sources)
    document["is_root"] = os.geteuid() == 0 if live else None
    document["provenance"] = probe_provenance(sources, document, tdx_idle_line(sources))
    document["machine_id"] = machine_id(sources)
    document["virtio_devices"] = virtio_devices(sources)
    document["machine_launch"] = machine_launch(sources)
    return document
