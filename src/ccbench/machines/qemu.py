"""One arm's QEMU command line (docs/machines.md, "How an arm is launched").

Every arm of a study gets the same machine: q35, the same -cpu, -smp, -m, memory backend, disk and
NIC, user-mode networking (nothing to clean up on the host) restricted to one forwarded SSH port,
direct kernel boot where the image allows it. What differs is only what the arm declares: its kernel
parameters, iommu_platform/disable-legacy on the virtio devices, the memory backend of the hugepages
twin, and for SEV-SNP and TDX arms the confidential guest object, its firmware and what it needs.

SEV-SNP is rendered as QEMU >= 9.1 documents it (docs/system/i386/amd-memory-encryption.rst: an
``sev-snp-guest`` object named by ``-machine confidential-guest-support``; qapi/qom.json,
SevSnpGuestProperties), TDX as QEMU >= 10.1 does (docs/system/i386/tdx.rst: a ``tdx-guest`` object,
``kernel-irqchip=split`` (a property of the kvm accelerator), the firmware by ``-bios``; qapi/qom.json, TdxGuestProperties)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ccbench.machines.study import Arm, Study, StudyError

#: the ids the command line uses for its objects and devices
MEMORY_ID = "mem0"
CVM_ID = "cvm0"
DISK_ID = "disk0"
NET_ID = "net0"
HUGEPAGE_SIZE = "2M"
#: the properties the iommu knobs add to every virtio device
KNOB_DEVICE_PROPS = ("iommu_platform=on", "disable-legacy=on")
CVM_OBJECTS = {"sev-snp": "sev-snp-guest", "tdx": "tdx-guest"}
#: where the guest finds the launcher's files: /sys/firmware/qemu_fw_cfg/by_name/opt/ccbench/NAME/raw
FW_CFG_PREFIX = "opt/ccbench/"


@dataclass(frozen=True)
class Boot:
    """What the launcher (machines/lifecycle.py) knows of one arm's boot on this host."""

    qemu: str
    accel: str
    kernel: Path | None
    initrd: Path | None
    disk: Path
    disk_format: str
    base_append: str
    ssh_port: int
    serial_log: Path
    pidfile: Path
    qmp_socket: Path
    fw_cfg: dict[str, Path] = field(default_factory=dict)
    #: OVMF for SEV-SNP and TDX arms (hostcheck.find_firmware); plain arms boot with QEMU's SeaBIOS
    firmware: Path | None = None
    #: the image's content digest, kept in the record
    image_digest: str = ""
    #: the firmware's identity: the sha256 of its file (hostcheck.firmware_digest), "" when not read
    firmware_digest: str = ""


@dataclass
class Launch:
    argv: list[str]
    #: the full kernel command line ("" when the image boots itself)
    append: str
    #: provenance for the bundle: argv, append, knobs, machine settings, kind (arms.differences reads it)
    record: dict[str, Any]
    #: host CPU of each vCPU, to apply once QEMU runs (pin_vcpus); empty: not pinned
    pin: tuple[int, ...] = ()


def _escape(value: str | Path) -> str:
    """A value inside a QEMU option list: a comma is written twice."""
    return str(value).replace(",", ",,")


def cpu_model(study: Study, accel: str) -> str:
    if study.machine.cpu != "auto":
        return study.machine.cpu
    return "host" if accel == "kvm" else "max"


def _memory_object(study: Study, arm: Arm) -> tuple[str, dict[str, Any]]:
    machine = study.machine
    backend = arm.knobs.memory_backend or machine.memory_backend
    props = [f"id={MEMORY_ID}", f"size={machine.memory_mib}M"]
    if backend == "ram":
        qom = "memory-backend-ram"
    else:
        qom = "memory-backend-memfd"
        if backend == "hugepages":
            props += ["hugetlb=on", f"hugetlbsize={HUGEPAGE_SIZE}"]
    if machine.prealloc:
        props.append("prealloc=on")
    return f"{qom},{','.join(props)}", {"backend": backend, "object": qom, "prealloc": machine.prealloc}


def _cvm(arm: Arm, boot: Boot) -> list[str]:
    props = [f"id={CVM_ID}"]
    for name, value in arm.knobs.confidential:
        if name == "kernel-hashes" and boot.kernel is None:
            continue  # hashes of a kernel QEMU does not load
        props.append(f"{name}={value}")
    return ["-object", f"{CVM_OBJECTS[arm.kind]},{','.join(props)}", "-bios", str(boot.firmware)]


def _devices(study: Study, arm: Arm) -> list[str]:
    """The -device values: the same for every arm but for the knobs' properties on virtio devices."""
    machine = study.machine
    flags = (arm.knobs.iommu_platform, arm.knobs.disable_legacy)
    extra = "".join(f",{prop}" for prop, on in zip(KNOB_DEVICE_PROPS, flags, strict=True) if on)
    devices = []
    if machine.disk.bus == "virtio-blk":
        devices.append(f"virtio-blk-pci,drive={DISK_ID},num-queues={machine.disk.queues}{extra}")
    else:
        devices.append(f"virtio-scsi-pci,id=scsi0,num_queues={machine.disk.queues}{extra}")
        devices.append(f"scsi-hd,drive={DISK_ID},bus=scsi0.0")
    if machine.nic.model == "virtio-net-pci":
        devices.append(f"virtio-net-pci,netdev={NET_ID}{extra}")
    else:
        devices.append(f"{machine.nic.model},netdev={NET_ID}")
    devices.append(f"virtio-rng-pci,rng=rng0{extra}")
    return devices


def base_device(device: str) -> str:
    """A -device value without the knobs' properties: what must be equal across arms."""
    parts = [p for p in device.split(",") if p not in KNOB_DEVICE_PROPS]
    return ",".join(parts)


def _refuse(study: Study, arm: Arm, boot: Boot) -> None:
    where = f"{study.source}: arm '{arm.name}'"
    if arm.confidential and boot.accel != "kvm":
        raise StudyError(
            f"{where}: a {arm.kind} guest needs KVM, and this launch is under {boot.accel}; run the study on a {arm.kind} host"
        )
    if arm.confidential and boot.firmware is None:
        raise StudyError(
            f"{where}: a {arm.kind} guest boots through OVMF, and none was given; install OVMF (Debian: apt-get install ovmf)"
        )
    if arm.knobs.kernel_params and boot.kernel is None:
        raise StudyError(
            f"{where}: its kernel parameters need direct kernel boot, and this image boots itself; name its kernel in [image]"
        )
    if boot.accel not in ("kvm", "tcg"):
        raise StudyError(f"{where}: accelerator {boot.accel!r} is not kvm or tcg")
    for name in boot.fw_cfg:
        # QEMU keeps a fw_cfg file name in 56 bytes with its NUL (FW_CFG_MAX_FILE_PATH)
        if not name or "," in name or name.startswith("/") or len(f"{FW_CFG_PREFIX}{name}".encode()) > 55:
            raise StudyError(
                f"{where}: fw_cfg name {name!r} must be a relative name without commas, "
                f"at most {55 - len(FW_CFG_PREFIX)} bytes (it goes under {FW_CFG_PREFIX})"
            )


#: what a confidential guest's firmware does with memory, which no QEMU or fw_cfg option sets: OVMF's
#: TDX build accepts the first part of memory itself and leaves the rest unaccepted for the kernel only
#: when built with PcdLazyAcceptPartialMemorySize (edk2 PR 3572); an SEV-SNP OVMF accepts everything at
#: ExitBootServices unless the kernel's EFI stub announces it can accept memory itself (the SEV memory
#: acceptance protocol, Linux >= 6.5). The firmware's digest is its identity.
FIRMWARE_ACCEPTANCE = "set by its OVMF build, not from QEMU: its digest identifies it"


def memory_acceptance(arm: Arm) -> dict[str, Any]:
    """An arm's memory-acceptance setting: the kernel's (``accept_memory=lazy``, its default, or
    ``eager``, from the eager-accept twin or the arm's kernel_params) and what sets the firmware's."""
    if not arm.confidential:
        return {"kernel": None, "firmware": None, "says": "none: a plain VM accepts no memory"}
    eager = [p for p in arm.knobs.kernel_params if p.startswith("accept_memory=")]
    kernel = eager[-1].split("=", 1)[1] if eager else "lazy"
    how = f"kernel {eager[-1]}" if eager else "kernel lazy (accept_memory= unset: the default)"
    return {"kernel": kernel, "firmware": FIRMWARE_ACCEPTANCE, "says": how}


def render(study: Study, arm: Arm, boot: Boot) -> Launch:
    """The QEMU command line of one arm on this host."""
    _refuse(study, arm, boot)
    machine = study.machine
    memory, memory_record = _memory_object(study, arm)
    machine_opts = ["q35", f"memory-backend={MEMORY_ID}"]
    if arm.confidential:
        machine_opts.append(f"confidential-guest-support={CVM_ID}")
    accel = boot.accel
    if arm.kind == "tdx":
        # a TD's interrupt controller: the local APIC in KVM, the IOAPIC in QEMU (tdx.rst, Restrictions)
        accel += ",kernel-irqchip=split"
    cpu = cpu_model(study, boot.accel)
    argv = [
        boot.qemu,
        "-accel", accel,
        "-machine", ",".join(machine_opts),
        "-cpu", cpu,
        "-smp", f"{machine.vcpus},sockets={machine.sockets},cores={machine.cores},threads={machine.threads}",
        "-m", f"{machine.memory_mib}M",
        "-object", memory,
    ]  # fmt: skip
    if arm.confidential:
        argv += _cvm(arm, boot)
    argv += ["-nodefaults", "-no-reboot", "-display", "none"]
    append = ""
    if boot.kernel is not None:
        append = " ".join(p for p in (boot.base_append.strip(), *arm.knobs.kernel_params) if p)
        argv += ["-kernel", str(boot.kernel)]
        if boot.initrd is not None:
            argv += ["-initrd", str(boot.initrd)]
        argv += ["-append", append]
    disk = machine.disk
    argv += [
        "-drive",
        f"if=none,id={DISK_ID},file={_escape(boot.disk)},format={boot.disk_format},cache={disk.cache},aio={disk.aio}",
        "-netdev",
        f"user,id={NET_ID},restrict=on,hostfwd=tcp:127.0.0.1:{boot.ssh_port}-:22",
        "-object",
        "rng-random,id=rng0,filename=/dev/urandom",
    ]
    devices = _devices(study, arm)
    for device in devices:
        argv += ["-device", device]
    for name, path in sorted(boot.fw_cfg.items()):
        argv += ["-fw_cfg", f"name={FW_CFG_PREFIX}{name},file={_escape(path)}"]
    argv += [
        "-serial", f"file:{boot.serial_log}",
        "-pidfile", str(boot.pidfile),
        "-qmp", f"unix:{_escape(boot.qmp_socket)},server=on,wait=off",
    ]  # fmt: skip
    record = {
        "study": study.name,
        "arm": arm.name,
        "kind": arm.kind,
        "twins": list(arm.twins),
        "knobs": arm.knobs.as_dict(),
        "machine": machine.as_dict(),
        "image": {**study.image.as_dict(), "digest": boot.image_digest},
        "accel": boot.accel,
        "cpu": cpu,
        "qemu": boot.qemu,
        "firmware": str(boot.firmware) if boot.firmware else None,
        "firmware_sha256": boot.firmware_digest or None,
        "memory_acceptance": memory_acceptance(arm),
        "memory_backend": memory_record,
        "devices": [base_device(d) for d in devices],
        "base_append": boot.base_append.strip(),
        "argv": argv,
        "append": append,
    }
    return Launch(argv=argv, append=append, record=record, pin=machine.pin)


def pin_vcpus(cpus_fast: list[dict[str, Any]], pin: tuple[int, ...]) -> dict[int, int]:
    """Pin each vCPU thread (QMP ``query-cpus-fast``: ``cpu-index``, ``thread-id``) to its host CPU.
    Returns thread id -> host CPU. A thread that is gone is skipped (QEMU exited meanwhile)."""
    pinned = {}
    for cpu in cpus_fast:
        index, thread = cpu.get("cpu-index"), cpu.get("thread-id")
        if index is None or thread is None or index >= len(pin):
            continue
        try:
            os.sched_setaffinity(thread, {pin[index]})
        except ProcessLookupError:
            continue
        pinned[thread] = pin[index]
    return pinned
