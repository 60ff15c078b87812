"""Machine facts: CPU, memory, kernel, OS, virtualization, DMI hints, Python."""

from __future__ import annotations

import os
import platform
import socket
import sys
from typing import Any

from ccbench.probe.sources import Sources

DMI_FIELDS = ("sys_vendor", "product_name", "product_version", "board_vendor", "bios_vendor", "chassis_asset_tag")
AZURE_ASSET_TAG = "7783-7084-3265-9085-8269-3286-77"


def _cpuinfo(sources: Sources) -> dict[str, Any]:
    text = sources.read_text("/proc/cpuinfo")
    if text is None:
        return {"model": "unknown", "reason": "/proc/cpuinfo unreadable"}
    processors = []
    current: dict[str, str] = {}
    for line in text.splitlines() + [""]:
        if not line.strip():
            if current:
                processors.append(current)
                current = {}
            continue
        key, _, value = line.partition(":")
        current[key.strip()] = value.strip()
    first = processors[0] if processors else {}
    cores = {(p.get("physical id", "0"), p.get("core id", p.get("processor"))) for p in processors}
    return {
        "model": first.get("model name", "unknown"),
        "vendor": first.get("vendor_id", "unknown"),
        "family": first.get("cpu family"),
        "model_number": first.get("model"),
        "stepping": first.get("stepping"),
        "microcode": first.get("microcode"),
        "threads": len(processors),
        "cores": len(cores),
        "sockets": len({p.get("physical id", "0") for p in processors}) or 1,
        "flags": sorted(first.get("flags", "").split()),
    }


def _meminfo(sources: Sources) -> dict[str, Any]:
    text = sources.read_text("/proc/meminfo")
    if text is None:
        return {"total_bytes": None, "reason": "/proc/meminfo unreadable"}
    values = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        parts = rest.split()
        if parts and parts[0].isdigit():
            values[key] = int(parts[0]) * (1024 if len(parts) > 1 and parts[1] == "kB" else 1)
    return {"total_bytes": values.get("MemTotal"), "hugepages_total": values.get("HugePages_Total")}


def _os_release(sources: Sources) -> dict[str, Any]:
    text = sources.read_text("/etc/os-release") or sources.read_text("/usr/lib/os-release")
    if text is None:
        return {"pretty_name": "unknown"}
    values = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            values[key.strip()] = value.strip().strip('"')
    return {
        "pretty_name": values.get("PRETTY_NAME", "unknown"),
        "id": values.get("ID"),
        "version_id": values.get("VERSION_ID"),
    }


def _dmi(sources: Sources) -> dict[str, Any]:
    dmi = {}
    for name in DMI_FIELDS:
        value = sources.read_text(f"/sys/class/dmi/id/{name}")
        if value is not None:
            dmi[name] = value.strip()
    return dmi


def _cloud_hint(dmi: dict[str, Any]) -> str | None:
    vendor = (dmi.get("sys_vendor") or "") + " " + (dmi.get("bios_vendor") or "")
    if dmi.get("chassis_asset_tag") == AZURE_ASSET_TAG or (
        "Microsoft" in vendor and dmi.get("product_name") == "Virtual Machine"
    ):
        return "azure"
    if "Amazon" in vendor:
        return "aws"
    if "Google" in vendor:
        return "gcp"
    if "Alibaba" in vendor:
        return "alibaba"
    if "OpenStack" in (dmi.get("product_name") or ""):
        return "openstack"
    return None


def _virtualization(flags: list[str], dmi: dict[str, Any], sources: Sources) -> str:
    product = (
        (dmi.get("product_name") or "") + " " + (dmi.get("sys_vendor") or "") + " " + (dmi.get("bios_vendor") or "")
    )
    xen = sources.read_text("/sys/hypervisor/type")
    if xen and xen.strip() == "xen":
        return "xen"
    for needle, name in (
        ("KVM", "kvm"),
        ("QEMU", "qemu"),
        ("VMware", "vmware"),
        ("VirtualBox", "oracle"),
        ("Microsoft", "microsoft"),
        ("Amazon EC2", "amazon"),
        ("Google", "google"),
        ("Xen", "xen"),
    ):
        if needle in product:
            return name
    if "hypervisor" in flags:
        if sources.exists("/proc/xen"):
            return "xen"
        return "vm (hypervisor flag; vendor unknown)"
    if flags:
        return "none"
    return "unknown"


def probe_system(sources: Sources) -> dict[str, Any]:
    cpu = _cpuinfo(sources)
    dmi = _dmi(sources)
    release = sources.read_text("/proc/sys/kernel/osrelease")
    version = sources.read_text("/proc/sys/kernel/version")
    hostname = sources.read_text("/etc/hostname") if not sources.live else None
    return {
        "hostname": (hostname or socket.gethostname()).strip(),
        "cpu": cpu,
        "memory": _meminfo(sources),
        "kernel": {
            "release": release.strip() if release else (platform.release() if sources.live else "unknown"),
            "version": version.strip() if version else None,
        },
        "os": _os_release(sources),
        "virtualization": _virtualization(cpu.get("flags", []), dmi, sources),
        "dmi": dmi,
        "cloud": _cloud_hint(dmi),
        "python": {
            "version": platform.python_version(),
            "implementation": platform.python_implementation(),
            "executable": sys.executable,
        },
        "cpu_affinity": sorted(os.sched_getaffinity(0)) if sources.live else None,
    }
