"""Each arm's QEMU command line as `machines run` would launch it on this host, without booting
anything (`ccbench machines check --print-commands`): rendered by ccbench.machines.qemu.render, the
one renderer a run uses. What exists only once a run starts (its directory, each arm's overlay,
console log, pid file, fw_cfg files, QMP socket and SSH port) is named by a placeholder in angle
brackets; the image's kernel and initrd are where `machines run` builds them (ccbench's own image)
or where the study names them (an image of your own)."""

from __future__ import annotations

import shlex
from dataclasses import replace
from pathlib import Path

from ccbench.machines import hostcheck, qemu
from ccbench.machines.image import BASE_APPEND, OWN_IMAGE, cache_root, recipe_key
from ccbench.machines.study import Arm, Study, StudyError

#: the files `machines run` hands each guest through fw_cfg (ccbench.machines.lifecycle)
FW_CFG_FILES = ("authorized_keys", "hostname", "launch", "machine_id", "ssh_host_ed25519_key")


def _image(study: Study) -> tuple[Path | None, Path | None, str]:
    """(kernel, initrd, base kernel command line) the arms boot: none where the image boots itself."""
    image = study.image
    if image.kind == OWN_IMAGE:
        built = cache_root() / f"{OWN_IMAGE}-{recipe_key()}"
        return built / "vmlinuz", built / "initrd.img", BASE_APPEND
    if image.kind == "kernel":
        return image.kernel, image.initrd, image.append
    return None, None, ""


def _boot(study: Study, arm: Arm, qemu_binary: str, accel: str) -> qemu.Boot:
    kernel, initrd, append = _image(study)
    arm_dir = Path(f"<run>/arms/{arm.name}")
    firmware = hostcheck.find_firmware(arm.kind) if arm.confidential else None
    return qemu.Boot(
        qemu=qemu_binary,
        accel=accel,
        kernel=kernel,
        initrd=initrd,
        disk=arm_dir / "overlay.qcow2",
        disk_format="qcow2",  # every arm boots a qcow2 overlay of the image, never the image itself
        base_append=append,
        ssh_port="<port>",  # type: ignore[arg-type]  # chosen free when the arm boots
        serial_log=arm_dir / "console.log",
        pidfile=arm_dir / "qemu.pid",
        qmp_socket=Path("<guest socket dir>/qmp.sock"),
        fw_cfg={name: arm_dir / "fw_cfg" / name for name in FW_CFG_FILES},
        firmware=firmware,
        firmware_digest=hostcheck.firmware_digest(firmware),
    )


def command_lines(study: Study, qemu_binary: str, accel: str) -> list[tuple[str, str, str]]:
    """(arm name, its QEMU command line for a shell, why this host would not launch it or "") per arm.
    An arm this host refuses (a SEV-SNP or TDX arm without KVM or OVMF) is rendered as a host that
    can would launch it (KVM, its OVMF as a placeholder where none is installed), with the reason;
    one no host could launch as the study stands has no line, only the reason."""
    out = []
    for arm in study.arms:
        boot = _boot(study, arm, qemu_binary, accel)
        try:
            out.append((arm.name, shlex.join(qemu.render(study, arm, boot).argv), ""))
            continue
        except StudyError as exc:
            refused = str(exc)
        elsewhere = replace(boot, accel="kvm", firmware=boot.firmware or Path(f"<OVMF for {arm.kind}>"))
        try:
            out.append((arm.name, shlex.join(qemu.render(study, arm, elsewhere).argv), refused))
        except StudyError as exc:
            out.append((arm.name, "", str(exc)))
    return out


def firmware_note(arm: Arm) -> str:
    """A confidential arm's firmware as this host would boot it: its path and digest (its identity)."""
    if not arm.confidential:
        return ""
    path = hostcheck.find_firmware(arm.kind)
    if path is None:
        return f"no OVMF for {arm.kind} on this host (digest unknown until one is installed)"
    return f"{path} {hostcheck.firmware_digest(path)}"


def arm_notes(arm: Arm) -> list[str]:
    """What a confidential arm's command line carries beyond its words: the firmware's identity and
    the memory-acceptance setting (the kernel's, and that the firmware's is set by its build)."""
    if not arm.confidential:
        return []
    acceptance = qemu.memory_acceptance(arm)
    return [
        f"firmware {firmware_note(arm)}",
        f"memory acceptance: {acceptance['says']}; the firmware's: {acceptance['firmware']}",
    ]


def sweep_points(study: Study) -> list[tuple[str, Study]]:
    """(what the point is, the study at it) for every point of the study's sweep; [("", study)] without one."""
    sweep = study.sweep
    points = [(f"{p.machine.memory_mib} MiB (launch time)", p) for p in sweep.memory_points]
    points += [(f"{p.machine.vcpus} vCPUs (the plan)", p) for p in sweep.vcpu_points]
    return points or [("", study)]
