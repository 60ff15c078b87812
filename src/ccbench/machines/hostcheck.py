"""What the host lacks for a study's arms, said before anything starts, and the host's facts that go
beside each guest's evidence (host kernel, CPU, QEMU, SEV firmware or TDX module, host firmware).

Every read goes through ``root`` (default "/"), so a test can show a fake SEV-SNP or TDX host tree."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import uuid
from pathlib import Path
from typing import Any

from ccbench.machines.study import Study
from ccbench.probe.sources import Sources

#: the QEMU each kind needs: SEV-SNP guests since QEMU 9.1, TDX guests since 10.1
MIN_QEMU = {"sev-snp": (9, 1), "tdx": (10, 1)}
#: where distributions put OVMF builds, per kind (a build with the SEV hash table or TDVF support first)
FIRMWARE = {
    "sev-snp": (
        "/usr/share/OVMF/OVMF.amdsev.fd",
        "/usr/share/edk2/ovmf/OVMF.amdsev.fd",
        "/usr/share/ovmf/OVMF.amdsev.fd",
        "/usr/share/ovmf/OVMF.fd",
        "/usr/share/OVMF/OVMF.fd",
        "/usr/share/edk2/ovmf/OVMF.fd",
    ),
    "tdx": (
        "/usr/share/OVMF/OVMF.inteltdx.fd",
        "/usr/share/edk2/ovmf/OVMF.inteltdx.fd",
        "/usr/share/ovmf/OVMF.inteltdx.fd",
        "/usr/share/ovmf/OVMF.fd",
        "/usr/share/OVMF/OVMF.fd",
        "/usr/share/edk2/ovmf/OVMF.fd",
    ),
}
TDX_MODULE_DIR = "/sys/firmware/tdx/tdx_module"
#: edk2's OVMF table as QEMU reads it (hw/i386/pc_sysfw_ovmf.c): a footer GUID 48 bytes before the end
#: of the firmware file, the table's length before it, and entries running backwards (data, 2-byte
#: length, GUID)
OVMF_TABLE_FOOTER = uuid.UUID("96b582de-1fb2-45f7-baea-a366c55a082d").bytes_le
#: the SEV hash table entry (SEV_HASH_TABLE_RV_GUID): base and size of the area QEMU writes the
#: kernel's, initrd's and command line's hashes to with kernel-hashes=on. OVMF's AmdSev build
#: reserves one; a generic build carries the entry zeroed, and QEMU then refuses to start the guest
#: ("guest firmware hashes table area is invalid (base=0x0 size=0x0)", target/i386/sev.c)
SEV_HASH_TABLE = uuid.UUID("7255371f-3a3b-4b04-927b-1da6efa8d454").bytes_le
#: sizeof(PaddedSevHashTable) in QEMU: the least area it accepts
SEV_HASH_TABLE_MIN = 176


def qemu_version(qemu: str = "qemu-system-x86_64") -> tuple[tuple[int, int, int] | None, str]:
    """(major, minor, micro) from ``qemu --version``, and the line it came from or why it is missing."""
    binary = shutil.which(qemu)
    if binary is None:
        return None, f"{qemu} not found"
    try:
        done = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"{qemu} --version failed: {exc}"
    first = (done.stdout or done.stderr).strip().splitlines()[:1]
    match = re.search(r"version (\d+)\.(\d+)(?:\.(\d+))?", first[0]) if first else None
    if not match:
        return None, f"{qemu} --version said nothing readable ({first[0] if first else 'no output'})"
    return (int(match.group(1)), int(match.group(2)), int(match.group(3) or 0)), first[0]


def _flags(sources: Sources) -> set[str]:
    text = sources.read_text("/proc/cpuinfo") or ""
    match = re.search(r"^flags\s*:\s*(.*)$", text, re.MULTILINE)
    return set(match.group(1).split()) if match else set()


def _param(sources: Sources, module: str, name: str) -> str | None:
    value = sources.read_text(f"/sys/module/{module}/parameters/{name}")
    return value.strip() if value is not None else None


def kvm_problem(root: Path = Path("/")) -> str | None:
    """Why KVM cannot run guests here, or None."""
    sources = Sources(root=root, live=root == Path("/"))
    if not sources.exists("/dev/kvm"):
        return "no /dev/kvm (the kvm module is not loaded, or this is a container without it)"
    flags = _flags(sources)
    if not flags & {"vmx", "svm"}:
        return "/dev/kvm exists but the CPU shows no vmx or svm flag (a guest without nested virtualization)"
    if sources.live and not os.access("/dev/kvm", os.R_OK | os.W_OK):
        return "no permission to open /dev/kvm (run as root, or join the kvm group)"
    return None


def accel(root: Path = Path("/")) -> str:
    """ "kvm" where KVM can run guests, else "tcg" (software emulation: plain arms only)."""
    return "tcg" if kvm_problem(root) else "kvm"


def find_firmware(kind: str, root: Path = Path("/")) -> Path | None:
    for candidate in FIRMWARE.get(kind, ()):
        path = root / candidate.lstrip("/")
        if path.is_file():
            return path
    return None


def firmware_digest(path: Path | None) -> str:
    """The firmware's identity: ``sha256:`` and the digest of its file; "" without a file."""
    if path is None or not Path(path).is_file():
        return ""
    with open(path, "rb") as handle:
        return "sha256:" + hashlib.file_digest(handle, "sha256").hexdigest()


def sev_hash_area(firmware: Path) -> tuple[int, int] | None:
    """(base, size) of the SEV hash table area an OVMF file reserves, as QEMU reads its OVMF table;
    None when the file has no OVMF table or no such entry (QEMU: "has no hashes table GUID")."""
    with open(firmware, "rb") as handle:
        handle.seek(0, os.SEEK_END)
        size = handle.tell()
        handle.seek(max(size - 0x10000 - 64, 0))  # the table's length is 16 bits: it ends in this tail
        tail = handle.read()
    end = len(tail) - 48
    if end < 2 or tail[end : end + 16] != OVMF_TABLE_FOOTER:
        return None
    total = int.from_bytes(tail[end - 2 : end], "little") - 18
    table = tail[max(end - 2 - total, 0) : end - 2] if 0 < total <= end - 2 else b""
    while len(table) >= 18:
        length = int.from_bytes(table[-18:-16], "little")
        if not 18 <= length <= len(table):
            return None
        if table[-16:] == SEV_HASH_TABLE and length >= 26:
            data = table[-length:-18]
            return int.from_bytes(data[:4], "little"), int.from_bytes(data[4:8], "little")
        table = table[:-length]
    return None


def firmware_warnings(study: Study, root: Path = Path("/")) -> list[str]:
    """What renders but QEMU would refuse at launch: an SEV-SNP arm measuring its direct-booted kernel
    (kernel_hashes, the default) on the OVMF found for it when that build reserves no SEV hash table
    area (a generic OVMF.fd, not the AmdSev build). The study names no firmware: it is looked for."""
    if study.image.kind == "disk":
        return []  # no direct kernel boot: no hashes to add
    lines = []
    for arm in study.arms:
        if arm.kind != "sev-snp" or dict(arm.knobs.confidential).get("kernel-hashes") != "on":
            continue
        firmware = find_firmware(arm.kind, root)
        if firmware is None:
            continue  # check() says no OVMF
        area = sev_hash_area(firmware)
        if area is not None and area[0] and area[1] >= SEV_HASH_TABLE_MIN:
            continue
        has = "no SEV hash table" if area is None else f"no SEV hash table area (base {area[0]:#x}, size {area[1]:#x})"
        lines.append(
            f"arm '{arm.name}': firmware {firmware} has {has}: a generic OVMF build, which QEMU refuses for "
            "measured direct boot (kernel_hashes = true, the default); install OVMF's AmdSev build "
            "(edk2 OvmfPkg/AmdSev/AmdSevX64.dsc) as /usr/share/OVMF/OVMF.amdsev.fd, or set "
            "kernel_hashes = false on the arm"
        )
    return lines


def _sev_snp(sources: Sources, flags: set[str]) -> list[str]:
    lacks = []
    if "svm" not in flags:
        lacks.append("not an AMD host with SVM (no svm flag)")
    if not sources.exists("/dev/sev"):
        lacks.append("no /dev/sev (the ccp driver found no SEV firmware, or SEV is off in the BIOS)")
    snp = _param(sources, "kvm_amd", "sev_snp")
    if snp is None:
        lacks.append("kvm_amd is not loaded or has no sev_snp parameter (SNP host support came with Linux 6.11)")
    elif snp not in ("Y", "1"):
        lacks.append(
            f"SNP is not enabled (kvm_amd sev_snp={snp}: enable SEV-SNP in the BIOS, then load kvm_amd sev_snp=1)"
        )
    return lacks


def _tdx(sources: Sources, flags: set[str]) -> list[str]:
    lacks = []
    if "vmx" not in flags:
        lacks.append("not an Intel host with VMX (no vmx flag)")
    tdx = _param(sources, "kvm_intel", "tdx")
    if tdx is None:
        lacks.append("kvm_intel is not loaded or has no tdx parameter (TDX host support came with Linux 6.16)")
    elif tdx not in ("Y", "1"):
        lacks.append(f"TDX is off in KVM (kvm_intel tdx={tdx}: enable TDX in the BIOS, then load kvm_intel tdx=1)")
    return lacks


def check(
    study: Study, qemu: str = "qemu-system-x86_64", root: Path = Path("/"), overlay_dir: Path | None = None
) -> list[str]:
    """One line per problem: the QEMU missing, each arm this host cannot launch with every reason, and
    what the shared machine asks of the host (a CPU model TCG lacks, O_DIRECT in ``overlay_dir`` for
    the disk's cache mode, pinned CPUs that are not online)."""
    sources = Sources(root=root, live=root == Path("/"))
    version, said = qemu_version(qemu)
    if version is None:
        return [
            f"{said}: install QEMU (Debian: apt-get install qemu-system-x86; bash scripts/setup.sh --with machines) or put its qemu-system-x86_64 first on PATH"
        ]
    problems = []
    flags = _flags(sources)
    kvm = kvm_problem(root)
    shown = ".".join(map(str, version))
    for arm in study.arms:
        lacks = []
        if arm.confidential:
            if version[:2] < MIN_QEMU[arm.kind]:
                need = ".".join(map(str, MIN_QEMU[arm.kind]))
                lacks.append(f"QEMU {shown} is too old (a {arm.kind} guest needs QEMU >= {need})")
            if kvm:
                lacks.append(f"no usable KVM: {kvm}")
            lacks += _sev_snp(sources, flags) if arm.kind == "sev-snp" else _tdx(sources, flags)
            if find_firmware(arm.kind, root) is None:
                lacks.append("no OVMF firmware (Debian: apt-get install ovmf)")
        lacks += _memory_lacks(study, arm, sources)
        if lacks:
            problems.append(f"arm '{arm.name}' ({arm.kind}) cannot run on this host: {'; '.join(lacks)}")
    problems += _pin_problems(study, sources)
    problems += _size_problems(study, sources)
    if kvm and study.machine.cpu == "host":
        problems.append(
            f"machine.cpu 'host' needs KVM, and this host has none ({kvm}): "
            'use cpu = "auto" (max under TCG) or a named model'
        )
    if overlay_dir is not None and study.machine.disk.cache in ("none", "directsync"):
        problem = _direct_io_problem(overlay_dir)
        if problem:
            problems.append(
                f"machine.disk.cache '{study.machine.disk.cache}' opens the disk with O_DIRECT, which {problem}: "
                'put the overlays on a disk filesystem or use cache = "writeback"'
            )
    return problems


def _direct_io_problem(folder: Path) -> str | None:
    """Why files in ``folder`` cannot be opened with O_DIRECT (tmpfs before 6.6 refuses it), or None."""
    import tempfile

    try:
        handle, name = tempfile.mkstemp(dir=folder, prefix=".ccbench-odirect-")
    except OSError as exc:
        return f"cannot be tried in {folder} ({exc.strerror})"
    os.close(handle)
    try:
        os.close(os.open(name, os.O_RDONLY | os.O_DIRECT))
    except OSError as exc:
        return f"the filesystem of {folder} refuses ({exc.strerror})"
    finally:
        os.unlink(name)
    return None


def _memory_lacks(study: Study, arm, sources: Sources) -> list[str]:
    if (arm.knobs.memory_backend or study.machine.memory_backend) != "hugepages":
        return []
    meminfo = sources.read_text("/proc/meminfo") or ""
    free = re.search(r"^HugePages_Free:\s*(\d+)", meminfo, re.MULTILINE)
    size = re.search(r"^Hugepagesize:\s*(\d+) kB", meminfo, re.MULTILINE)
    have = int(free.group(1)) * int(size.group(1)) // 1024 if free and size else 0
    need = study.machine.memory_mib
    if have < need:
        return [
            f"{have} MiB of free huge pages for {need} MiB of guest memory (reserve them: sysctl vm.nr_hugepages={need // 2})"
        ]
    return []


def _host_memory_mib(sources: Sources) -> int | None:
    meminfo = sources.read_text("/proc/meminfo") or ""
    total = re.search(r"^MemTotal:\s*(\d+) kB", meminfo, re.MULTILINE)
    return int(total.group(1)) // 1024 if total else None


def _host_cpus(sources: Sources) -> int | None:
    online = (sources.read_text("/sys/devices/system/cpu/online") or "").strip()
    count = 0
    for part in filter(None, online.split(",")):
        low, _, high = part.partition("-")
        if not low.isdigit() or (high and not high.isdigit()):
            return None
        count += int(high or low) - int(low) + 1
    return count or None


def _size_problems(study: Study, sources: Sources) -> list[str]:
    """A guest larger than the host's memory is refused: QEMU reserves it lazily, so it starts, and the
    guest then swaps or is killed by the OOM killer mid-run: no measurement of the arm."""
    have = _host_memory_mib(sources)
    need = study.machine.memory_mib
    if have is None or need <= have:
        return []
    return [
        f"machine.memory {need} MiB is more than this host's memory ({have} MiB, /proc/meminfo MemTotal): "
        "give each guest less memory than the host has"
    ]


def size_warnings(study: Study, root: Path = Path("/")) -> list[str]:
    """What is legal but skews the measurement: more vCPUs than the host has online CPUs (QEMU runs
    them, as threads that share the host's CPUs, so the guest's CPUs contend with each other)."""
    sources = Sources(root=root, live=root == Path("/"))
    have = _host_cpus(sources)
    if have is None or study.machine.vcpus <= have:
        return []
    return [
        f"machine.vcpus {study.machine.vcpus} is more than this host's {have} online CPUs: QEMU runs them, but "
        "they share the host's CPUs and contend, so CPU-bound results measure the host's scheduler; "
        f"use vcpus <= {have} for figures that stand"
    ]


def _pin_problems(study: Study, sources: Sources) -> list[str]:
    if not study.machine.pin:
        return []
    online = sources.read_text("/sys/devices/system/cpu/online") or ""
    cpus: set[int] = set()
    for part in online.strip().split(","):
        if "-" in part:
            low, high = part.split("-")
            cpus.update(range(int(low), int(high) + 1))
        elif part.isdigit():
            cpus.add(int(part))
    missing = sorted(set(study.machine.pin) - cpus)
    if cpus and missing:
        return [f"machine.pin names host CPUs {missing} that are not online here (online: {online.strip()})"]
    return []


def host_facts(
    qemu: str = "qemu-system-x86_64", root: Path = Path("/"), kernel_log: str | None = None
) -> dict[str, Any]:
    """The host's facts kept beside each guest's evidence; what cannot be read is named absent."""
    sources = Sources(root=root, live=root == Path("/"))
    version, said = qemu_version(qemu)
    cpuinfo = sources.read_text("/proc/cpuinfo") or ""
    model = re.search(r"^model name\s*:\s*(.*)$", cpuinfo, re.MULTILINE)
    facts: dict[str, Any] = {
        "kernel": (sources.read_text("/proc/sys/kernel/osrelease") or "").strip() or "absent",
        "cpu_model": model.group(1).strip() if model else "absent",
        "qemu_version": ".".join(map(str, version)) if version else f"absent ({said})",
        "kvm": kvm_problem(root) or "usable",
        "firmware": _dmi(sources),
    }
    if kernel_log is None and sources.live:
        kernel_log = sources.kernel_log()[0]
    facts["sev_firmware"] = _sev_firmware(sources, kernel_log or "")
    facts["sev_snp"] = _param(sources, "kvm_amd", "sev_snp") or "absent"
    facts["tdx_module"] = _tdx_module(sources, kernel_log or "")
    facts["kvm_intel_tdx"] = _param(sources, "kvm_intel", "tdx") or "absent"
    return facts


def _dmi(sources: Sources) -> dict[str, str]:
    out = {}
    for name in ("bios_vendor", "bios_version", "bios_date"):
        value = sources.read_text(f"/sys/class/dmi/id/{name}")
        out[name] = value.strip() if value else "absent"
    return out


def _sev_firmware(sources: Sources, kernel_log: str) -> str:
    """The SEV firmware's API version and build, as the ccp driver logs it at load
    ("SEV API:1.55 build:21", "SEV-SNP API:1.55 build:21")."""
    if not sources.exists("/dev/sev"):
        return "absent (no /dev/sev)"
    found = re.findall(r"\b(SEV(?:-SNP)? API:\d+\.\d+ build:\d+)", kernel_log)
    if found:
        return "; ".join(dict.fromkeys(found))
    return "absent (the kernel log has no 'SEV API:' line; it is printed when the ccp driver loads)"


def _tdx_module(sources: Sources, kernel_log: str) -> str:
    """The TDX module's version: sysfs where the kernel exports it, else the kernel log's line."""
    parts = {}
    for name in ("major_version", "minor_version", "update_version", "internal_version", "build_num", "build_date"):
        value = sources.read_text(f"{TDX_MODULE_DIR}/{name}")
        if value is not None:
            parts[name] = value.strip()
    if parts:
        version = ".".join(parts[k] for k in ("major_version", "minor_version", "update_version") if k in parts)
        extra = ", ".join(f"{k} {parts[k]}" for k in ("build_num", "build_date") if k in parts)
        return f"{version} ({extra})" if extra else version
    match = re.search(r"virt/tdx: (TDX module[^\n]*)", kernel_log)
    if match:
        return match.group(1).strip()
    return f"absent (no {TDX_MODULE_DIR} and no 'virt/tdx: TDX module' line in the kernel log)"
