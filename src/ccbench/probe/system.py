"""Machine facts: CPU, memory, kernel, OS, virtualization, DMI hints, Python."""

from __future__ import annotations

import hashlib
import os
import platform
import re
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


_DMI_NEEDLES = (
    ("KVM", "kvm"),
    ("QEMU", "qemu"),
    ("VMware", "vmware"),
    ("VirtualBox", "oracle"),
    ("Microsoft", "microsoft"),
    ("Amazon EC2", "amazon"),
    ("Google", "google"),
    ("Xen", "xen"),
)


def _hypervisor_in_dmi_text(text: str) -> str | None:
    return next((name for needle, name in _DMI_NEEDLES if needle in text), None)


def _virtualization(flags: list[str], dmi: dict[str, Any], sources: Sources) -> str:
    product = (
        (dmi.get("product_name") or "") + " " + (dmi.get("sys_vendor") or "") + " " + (dmi.get("bios_vendor") or "")
    )
    xen = sources.read_text("/sys/hypervisor/type")
    if xen and xen.strip() == "xen":
        return "xen"
    named = _hypervisor_in_dmi_text(product)
    if named:
        return named
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
        # a snapshot (--root) without /etc/hostname is "unknown", never this machine's name
        "hostname": (hostname or (socket.gethostname() if sources.live else "unknown")).strip(),
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


#: the swiotlb default pool's size as the kernel prints it (kernel/dma/swiotlb.c, swiotlb_print_info:
#: "software IO TLB: mapped [mem 0x...-0x...] (64MB)"; before 5.12 "software IO TLB [mem ...] (64MB)
#: mapped at [...]"); the MB figure is the pool's bytes >> 20
_SWIOTLB_MAPPED = re.compile(r"software IO TLB:? (?:mapped )?\[mem [^\]]*\] \((\d+)MB\)")
#: swiotlb= on the command line (Documentation/admin-guide/kernel-parameters.txt): the number of 2 KiB
#: slabs (IO_TLB_SHIFT 11), then optionally ",<areas>" and ",force|noforce"
SWIOTLB_SLAB_BYTES = 2048
_KERNEL_LOG_CMDLINE = re.compile(r"Command line: (.*)$")
_KERNEL_LOG_HYPERVISOR = re.compile(r"Hypervisor detected: (.+?)\s*$")
_KERNEL_LOG_DMI = re.compile(r"\bDMI: (.+?)\s*$")
#: kernel/time/clocksource.c (pr_fmt "clocksource: "), each time the kernel changes its clock
_KERNEL_LOG_CLOCKSOURCE = re.compile(r"\bclocksource: Switched to clocksource (\S+)")
_TIMESTAMP = re.compile(r"^\[\s*[\d.]+\]\s*")


def _log_lines(sources: Sources) -> list[str]:
    log, _origin = sources.kernel_log()
    return [_TIMESTAMP.sub("", line.strip()) for line in (log or "").splitlines()]


def _first(pattern: re.Pattern[str], lines: list[str]) -> str | None:
    for line in lines:
        match = pattern.search(line)
        if match:
            return match.group(1).strip()
    return None


def _kernel_cmdline(sources: Sources, lines: list[str]) -> str | None:
    """/proc/cmdline; for a recorded machine without it, the kernel log's own "Command line:" line."""
    text = sources.read_text("/proc/cmdline")
    if text is not None and text.strip():
        return text.strip()
    return _first(_KERNEL_LOG_CMDLINE, lines)


def _swiotlb(sources: Sources, cmdline: str | None, lines: list[str]) -> dict[str, Any]:
    """The bounce-buffer pool: the size the kernel log says it mapped, else the slabs debugfs counts (the
    boot lines may have left a long-running machine's ring buffer), else the size swiotlb= asks for."""
    kernel_args = (cmdline or "").split(" -- ")[0].split()  # after "--" the arguments are init's
    given = next((arg.split("=", 1)[1] for arg in kernel_args if arg.startswith("swiotlb=")), None)
    mapped = _first(_SWIOTLB_MAPPED, lines)
    if mapped is not None:
        return {"bytes": int(mapped) << 20, "source": "kernel-log", "cmdline": given}
    # kernel/dma/swiotlb.c creates it where debugfs is mounted (root): the default pool's slab count
    nslabs = (sources.read_text("/sys/kernel/debug/swiotlb/io_tlb_nslabs") or "").strip()
    if nslabs.isdigit():
        return {"bytes": int(nslabs) * SWIOTLB_SLAB_BYTES, "source": "debugfs", "cmdline": given}
    slabs = (given or "").split(",")[0]
    if slabs.isdigit():
        return {"bytes": int(slabs) * SWIOTLB_SLAB_BYTES, "source": "cmdline", "cmdline": given}
    return {"bytes": None, "source": None, "cmdline": given}


def kernel_config(sources: Sources, release: str | None, option: str) -> bool | None:
    """Whether the kernel was built with ``option`` (CONFIG_...=y or =m), from /proc/config.gz or
    /boot/config-<release>; None where neither is there."""
    import gzip

    try:
        text = gzip.decompress(sources.path("/proc/config.gz").read_bytes()).decode(errors="replace")
    except (OSError, EOFError, gzip.BadGzipFile):
        text = sources.read_text(f"/boot/config-{release}") if release else None
    if not text:
        return None
    return any(line.startswith(f"{option}=") and line.strip()[-1] in "ym" for line in text.splitlines())


def _swiotlb_dynamic(sources: Sources, release: str | None) -> bool | None:
    """CONFIG_SWIOTLB_DYNAMIC (6.6+: the pool grows by transient pools instead of failing when full):
    the kernel's config, else debugfs' io_tlb_transient_nslabs, which only such a kernel creates."""
    built = kernel_config(sources, release, "CONFIG_SWIOTLB_DYNAMIC")
    if built is None and sources.exists("/sys/kernel/debug/swiotlb/io_tlb_transient_nslabs"):
        return True
    return built


def _clocksource(sources: Sources, lines: list[str]) -> str | None:
    """The clock the kernel reads time from now (kvm-clock, tsc, hyperv_clocksource_tsc_page, ...): the
    sysfs choice, else the last switch the kernel log names."""
    text = (sources.read_text("/sys/devices/system/clocksource/clocksource0/current_clocksource") or "").strip()
    if text:
        return text
    switched = [m.group(1) for line in lines if (m := _KERNEL_LOG_CLOCKSOURCE.search(line))]
    return switched[-1] if switched else None


def _bracketed(sources: Sources, absolute: str) -> str | None:
    """The selected choice of a sysfs multiple-choice file ("always [madvise] never" -> "madvise")."""
    text = sources.read_text(absolute)
    match = re.search(r"\[([^\]]+)\]", text or "")
    return match.group(1) if match else None


def _smt(sources: Sources) -> bool | None:
    text = (sources.read_text("/sys/devices/system/cpu/smt/active") or "").strip()
    return {"1": True, "0": False}.get(text)


def _hypervisor(document: dict[str, Any], lines: list[str], hyperv: dict[str, Any] | None) -> str | None:
    """The kernel's own "Hypervisor detected:" line first, then the probe's virtualization (CPUID, DMI),
    then the kernel log's DMI line; Hyper-V's isolation config adds whether a paravisor runs."""
    detected = _first(_KERNEL_LOG_HYPERVISOR, lines)
    # the kernel's names (arch/x86/kernel/cpu/*: "KVM", "Microsoft Hyper-V", "VMware", "Xen HVM") in the
    # probe's own vocabulary, so that two machines' values compare
    name = (_hypervisor_in_dmi_text(detected) or detected.lower()) if detected else None
    if name is None and document.get("virtualization") not in (None, "unknown", "none"):
        name = document["virtualization"]
    if name is None:
        name = _hypervisor_in_dmi_text(_first(_KERNEL_LOG_DMI, lines) or "")
    if name is None and document.get("virtualization") == "none":
        return "none"
    if name is not None and hyperv and hyperv.get("paravisor_present"):
        name += " (paravisor)"
    return name


def machine_id(sources: Sources) -> str | None:
    """A stable identity of the machine that does not reveal /etc/machine-id: its SHA-256, 16 hex digits.

    VMs cloned from one image can share /etc/machine-id; where the firmware gives the VM its own
    UUID (DMI product_uuid: clouds and QEMU's -uuid set it per VM; readable by root) it is hashed in
    too, so such clones stay distinct replicas."""
    text = (sources.read_text("/etc/machine-id") or "").strip()
    if not text:
        return None
    uuid = (sources.read_text("/sys/class/dmi/id/product_uuid") or "").strip().lower()
    return hashlib.sha256((f"{text}\n{uuid}" if uuid else text).encode()).hexdigest()[:16]


#: where a guest that ccbench launched (ccbench machines) finds its launch record: QEMU's fw_cfg
#: entry opt/ccbench/launch (the qemu_fw_cfg module), copied by the image's init to /run/ccbench
LAUNCH_SOURCES = ("/sys/firmware/qemu_fw_cfg/by_name/opt/ccbench/launch/raw", "/run/ccbench/launch.json")


def machine_launch(sources: Sources) -> dict[str, Any] | None:
    """How this guest was launched, as the launcher recorded it (the QEMU command line, the kernel
    command line, the arm's knobs, the image's digest), or None on a machine ccbench did not launch.
    The host wrote it: it says what the host claims, as the kernel command line does."""
    import json

    for path in LAUNCH_SOURCES:
        text = sources.read_text(path)
        if text:
            try:
                record = json.loads(text)
            except ValueError:
                return {"unreadable": f"{path}: not JSON"}
            return record if isinstance(record, dict) else {"unreadable": f"{path}: not an object"}
    return None


def probe_provenance(sources: Sources, document: dict[str, Any], tdx_idle: str | None) -> dict[str, Any]:
    """What decides a confidential machine's performance, each value null when not known (never guessed).

    ``document`` is the probe so far (cpu, memory, virtualization, tee); ``tee_evidence`` stays null here:
    it comes from the verifier's claims once a run has evidence (ccbench.attestation.provenance)."""
    lines = _log_lines(sources)
    cmdline = _kernel_cmdline(sources, lines)
    cpu, memory = document.get("cpu", {}), document.get("memory", {})
    return {
        "kernel_cmdline": cmdline,
        "swiotlb": {
            **_swiotlb(sources, cmdline, lines),
            "dynamic": _swiotlb_dynamic(sources, document.get("kernel", {}).get("release")),
        },
        "page_size": os.sysconf("SC_PAGE_SIZE") if sources.live else None,
        "thp": {
            "enabled": _bracketed(sources, "/sys/kernel/mm/transparent_hugepage/enabled"),
            "defrag": _bracketed(sources, "/sys/kernel/mm/transparent_hugepage/defrag"),
        },
        "hugepages_total": memory.get("hugepages_total"),
        "vcpus": cpu.get("threads") or None,
        "smt": _smt(sources),
        "memory_bytes": memory.get("total_bytes"),
        "cpu_model": None if cpu.get("model") in (None, "unknown") else cpu["model"],
        "microcode": cpu.get("microcode"),
        "hypervisor": _hypervisor(document, lines, document.get("tee", {}).get("hyperv_isolation")),
        "tdx_idle": tdx_idle,
        "clocksource": _clocksource(sources, lines),
        "tee_evidence": None,
    }


#: virtio device IDs (the virtio specification, 5 Device Types) of the devices whose traffic is DMA
VIRTIO_TYPES = {1: "net", 2: "block", 3: "console", 4: "rng", 5: "balloon", 8: "scsi", 9: "9p", 16: "gpu"}
VIRTIO_TYPES |= {18: "input", 19: "vsock", 26: "fs"}
#: VIRTIO_F_ACCESS_PLATFORM: the device goes through the platform's DMA API (and so through swiotlb
#: where it bounces); without it virtio_ring bypasses the DMA API (vring_use_dma_api)
ACCESS_PLATFORM_BIT = 33


def virtio_devices(sources: Sources) -> list[dict[str, Any]]:
    """Each virtio device with its type and whether VIRTIO_F_ACCESS_PLATFORM was negotiated, from
    /sys/bus/virtio/devices/*/features (one '0' or '1' per feature bit, bit 0 first)."""
    found = []
    for device in sorted(sources.path("/sys/bus/virtio/devices").glob("virtio*")):
        features = sources.read_text(f"/sys/bus/virtio/devices/{device.name}/features")
        kind = (sources.read_text(f"/sys/bus/virtio/devices/{device.name}/device") or "").strip()
        number = int(kind, 16) if re.fullmatch(r"0x[0-9a-fA-F]+", kind) else None
        bits = (features or "").strip()
        found.append(
            {
                "name": device.name,
                "type": VIRTIO_TYPES.get(number, kind or "unknown") if number is not None else kind or "unknown",
                "access_platform": (bits[ACCESS_PLATFORM_BIT] == "1")
                if len(bits) > ACCESS_PLATFORM_BIT and set(bits) <= {"0", "1"}
                else None,
            }
        )
    return found
