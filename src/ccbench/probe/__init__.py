"""The environment probe: facts of the machine, which TEE protects it, and how storage is protected.

Everything is read under a root directory (default "/") so that the same code reads a live machine,
a captured snapshot of one, or a test fixture. A missing source yields "unknown" with the reason.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ccbench.probe.sources import Sources
from ccbench.probe.storage import describe_path, probe_storage
from ccbench.probe.system import probe_system
from ccbench.probe.tee import detect as detect_tee

__all__ = ["probe", "describe_path", "Sources"]

PROBE_VERSION = 1

_HYPERVISOR_SIGNATURES = {
    "KVMKVMKVM": "kvm",
    "Microsoft Hv": "microsoft",
    "VMwareVMware": "vmware",
    "XenVMMXenVMM": "xen",
    "TCGTCGTCGTCG": "qemu",
    "ACRNACRNACRN": "acrn",
    "bhyve bhyve": "bhyve",
}


def probe(root: str | Path = "/", dmesg: str | Path | None = None, bench_dir: str | Path | None = None) -> dict[str, Any]:
    root = Path(root)
    live = root.resolve() == Path("/")
    sources = Sources(root=root, dmesg_file=Path(dmesg) if dmesg else None, live=live)
    document = probe_system(sources)
    document["probe_version"] = PROBE_VERSION
    document["root"] = str(root)
    document["tee"] = detect_tee(sources)
    if document["virtualization"].startswith("vm ("):
        for note in document["tee"]["notes"]:
            if note.startswith("hypervisor signature"):
                signature = note.split("'")[1] if "'" in note else ""
                document["virtualization"] = _HYPERVISOR_SIGNATURES.get(signature, document["virtualization"])
    bench = Path(bench_dir) if bench_dir else (Path(os.getcwd()) if live else Path("/"))
    document["storage"] = probe_storage(bench, sources)
    document["is_root"] = os.geteuid() == 0 if live else None
    return document
