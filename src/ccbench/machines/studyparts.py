"""The study file's parts, each read and checked: the plan, the image, [machine] and each [[arm]]."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ccbench.basics.errors import PlanError
from ccbench.machines.study import (
    CVM_KINDS,
    DISK_AIO,
    DISK_BUSES,
    DISK_CACHES,
    KERNEL_PARAM,
    KINDS,
    MEMORY_BACKENDS,
    NAME,
    NIC_MODELS,
    OWN_IMAGES,
    TWINS,
    Arm,
    Disk,
    Image,
    Knobs,
    Machine,
    Nic,
    StudyError,
    cvm_swiotlb_slabs,
    swiotlb_pool,
)

CLOUD = (
    "a cloud study names its provider once, in a [cloud] table, with instance_type and image per arm "
    "(docs/machines.md, section 11); here, remove 'provider' to launch the arm on this host"
)
#: the confidential guest's properties an arm may set, per kind: study key -> (QEMU property, default)
CONFIDENTIAL = {
    "sev-snp": {
        "policy": ("policy", "0x30000"),
        "cbitpos": ("cbitpos", "51"),
        "reduced_phys_bits": ("reduced-phys-bits", "1"),
        "kernel_hashes": ("kernel-hashes", "on"),
    },
    "tdx": {
        "sept_ve_disable": ("sept-ve-disable", "on"),
        "attributes": ("attributes", None),
    },
}
ARM_KEYS = {"name", "kind", "baseline", "twins", "kernel_params", "iommu_platform", "disable_legacy", "provider"}


@dataclass(frozen=True)
class Where:
    source: Path

    def error(self, key: str, what: str) -> StudyError:
        return StudyError(f"{self.source}: {key}: {what}")


def no_unknown(table: dict[str, Any], allowed: set[str], where: Where, place: str) -> None:
    unknown = sorted(k for k in table if k not in allowed)
    if unknown:
        raise where.error(", ".join(unknown), f"unknown key in {place}; allowed there: {', '.join(sorted(allowed))}")


def no_provider(table: dict[str, Any], where: Where, place: str) -> None:
    if "provider" in table:
        raise where.error(f"{place}: provider", CLOUD)


def integer(value: Any, where: Where, key: str, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise where.error(key, f"{value!r} must be a whole number of at least {minimum}")
    return value


def boolean(value: Any, where: Where, key: str) -> bool:
    if not isinstance(value, bool):
        raise where.error(key, f"{value!r} must be true or false")
    return value


def choice(value: Any, options: tuple[str, ...], where: Where, key: str) -> str:
    if value not in options:
        raise where.error(key, f"{value!r} is not one of: {', '.join(options)}")
    return value


def memory_mib(value: Any, where: Where, key: str) -> int:
    """2048 (MiB), "2G", "2GiB", "512M", "512MiB" -> MiB."""
    if isinstance(value, int) and not isinstance(value, bool):
        mib = value
    else:
        match = re.fullmatch(r"\s*(\d+)\s*([MGT])(?:i?B)?\s*", str(value), re.IGNORECASE)
        if not match:
            raise where.error(key, f'{value!r}: write a size such as "2G", "512M" or a number of MiB')
        mib = int(match.group(1)) * {"M": 1, "G": 1024, "T": 1024 * 1024}[match.group(2).upper()]
    if mib < 128:
        raise where.error(key, f"{value!r} is below 128 MiB; a guest needs more to boot")
    return mib


def plan_of(value: Any, where: Where) -> str:
    from ccbench.planning.plan import bundled_plans, load_plan

    if not isinstance(value, str) or not value:
        raise where.error("plan", 'missing; name a bundled plan ("quick") or a plan file every arm runs')
    candidate = Path(value)
    if not candidate.is_absolute():
        candidate = where.source.parent / candidate
    resolved = str(candidate.resolve()) if candidate.exists() else value
    if not candidate.exists() and value not in bundled_plans():
        raise where.error(
            "plan",
            f"{value!r} is no plan file (looked at {candidate}) and no bundled plan; see 'ccbench plans'",
        )
    try:
        load_plan(resolved)
    except PlanError as exc:
        raise where.error("plan", f"the plan does not load: {exc}") from None
    return resolved


def _file(value: Any, where: Where, key: str) -> Path:
    if not isinstance(value, str) or not value:
        raise where.error(key, "must be the path of a file")
    path = Path(value).expanduser()
    if not path.is_absolute():
        path = where.source.parent / path
    if not path.is_file():
        raise where.error(key, f"{path} does not exist or is not a file; give the path of the file")
    return path.resolve()


def image_of(value: Any, where: Where) -> Image:
    if value is None:
        return Image(kind="debian-12", format="qcow2")
    if isinstance(value, str):
        if value in OWN_IMAGES:
            return Image(kind=value, format="qcow2")
        raise where.error(
            "image",
            f"{value!r}: ccbench builds only {', '.join(OWN_IMAGES)}; for an image of your own write "
            '[image] with disk = "guest.qcow2" (and kernel, initrd, append for direct kernel boot)',
        )
    if not isinstance(value, dict):
        raise where.error("image", 'must be "debian-12" or an [image] table')
    no_unknown(value, {"disk", "kernel", "initrd", "append", "format"}, where, "[image]")
    disk = _file(value.get("disk"), where, "image.disk")
    default_format = "raw" if disk.suffix in (".img", ".raw") else "qcow2"
    fmt = choice(value.get("format", default_format), ("qcow2", "raw"), where, "image.format")
    if "kernel" not in value:
        for key in ("initrd", "append"):
            if key in value:
                raise where.error(f"image.{key}", "only with image.kernel (direct kernel boot); add kernel = ...")
        return Image(kind="disk", disk=disk, format=fmt)
    kernel = _file(value["kernel"], where, "image.kernel")
    initrd = _file(value["initrd"], where, "image.initrd") if "initrd" in value else None
    append = value.get("append")
    if not isinstance(append, str) or "root=" not in append:
        raise where.error(
            "image.append",
            'a kernel needs its command line with the root device, e.g. append = "root=/dev/vda1 console=ttyS0"',
        )
    return Image(kind="kernel", disk=disk, kernel=kernel, initrd=initrd, append=append.strip(), format=fmt)


def machine_of(value: Any, where: Where) -> Machine:
    if not isinstance(value, dict):
        raise where.error("machine", "must be a table: [machine]")
    keys = {"vcpus", "memory", "cpu", "sockets", "cores", "threads", "pin", "disk", "nic", "memory_backend", "prealloc"}
    no_unknown(value, keys, where, "[machine]")
    vcpus = integer(value.get("vcpus", 2), where, "machine.vcpus", minimum=1)
    sockets = integer(value.get("sockets", 1), where, "machine.sockets", minimum=1)
    threads = integer(value.get("threads", 1), where, "machine.threads", minimum=1)
    cores = integer(value.get("cores", max(vcpus // (sockets * threads), 1)), where, "machine.cores", minimum=1)
    if sockets * cores * threads != vcpus:
        raise where.error(
            "machine.sockets/cores/threads",
            f"{sockets} x {cores} x {threads} is not {vcpus} vCPUs; make their product equal machine.vcpus",
        )
    cpu = value.get("cpu", "auto")
    if not isinstance(cpu, str) or not re.fullmatch(r"[A-Za-z0-9_.,+=-]+", cpu):
        raise where.error("machine.cpu", f'{cpu!r}: name a QEMU CPU model ("host", "EPYC-v4") or "auto"')
    pin = value.get("pin", [])
    if not isinstance(pin, list) or any(isinstance(c, bool) or not isinstance(c, int) or c < 0 for c in pin):
        raise where.error("machine.pin", "must be a list of host CPU numbers, one per vCPU")
    if pin and len(pin) != vcpus:
        raise where.error("machine.pin", f"lists {len(pin)} host CPUs for {vcpus} vCPUs; give one per vCPU")
    return Machine(
        vcpus=vcpus,
        memory_mib=memory_mib(value.get("memory", "2G"), where, "machine.memory"),
        cpu=cpu,
        sockets=sockets,
        cores=cores,
        threads=threads,
        pin=tuple(pin),
        disk=_disk(value.get("disk", {}), where),
        nic=_nic(value.get("nic", {}), where),
        memory_backend=choice(value.get("memory_backend", "memfd"), MEMORY_BACKENDS, where, "machine.memory_backend"),
        prealloc=boolean(value.get("prealloc", False), where, "machine.prealloc"),
    )


def _disk(value: Any, where: Where) -> Disk:
    if not isinstance(value, dict):
        raise where.error("machine.disk", "must be a table: [machine.disk]")
    no_unknown(value, {"bus", "cache", "aio", "queues"}, where, "[machine.disk]")
    disk = Disk(
        bus=choice(value.get("bus", "virtio-blk"), DISK_BUSES, where, "machine.disk.bus"),
        cache=choice(value.get("cache", "none"), DISK_CACHES, where, "machine.disk.cache"),
        aio=choice(value.get("aio", "threads"), DISK_AIO, where, "machine.disk.aio"),
        queues=integer(value.get("queues", 1), where, "machine.disk.queues", minimum=1),
    )
    if disk.aio == "native" and disk.cache not in ("none", "directsync"):
        raise where.error("machine.disk.aio", 'native AIO needs O_DIRECT: set cache = "none" or "directsync"')
    return disk


def _nic(value: Any, where: Where) -> Nic:
    if not isinstance(value, dict):
        raise where.error("machine.nic", "must be a table: [machine.nic]")
    no_unknown(value, {"model", "vhost", "queues"}, where, "[machine.nic]")
    nic = Nic(
        model=choice(value.get("model", "virtio-net-pci"), NIC_MODELS, where, "machine.nic.model"),
        vhost=boolean(value.get("vhost", False), where, "machine.nic.vhost"),
        queues=integer(value.get("queues", 1), where, "machine.nic.queues", minimum=1),
    )
    if nic.vhost or nic.queues > 1:
        raise where.error(
            "machine.nic",
            "vhost and several queues need a tap device; ccbench's machines use QEMU's user-mode network "
            "(nothing to clean up on the host), which has neither: leave vhost = false and queues = 1",
        )
    return nic


def bounce_pool(raw_arms: list[Any], machine: Machine) -> int:
    """The slabs of the bounce twin's pool: a CVM arm's own swiotlb= when one sets it (the largest:
    a bigger pool never fills sooner), else what a CVM's kernel gives itself with this memory."""
    pools = []
    for raw in raw_arms:
        if isinstance(raw, dict) and raw.get("kind") in CVM_KINDS and isinstance(raw.get("kernel_params"), list):
            for param in raw["kernel_params"]:
                match = re.fullmatch(r"swiotlb=(\d+)(?:,.*)?", str(param))
                if match:
                    pools.append(swiotlb_pool(int(match.group(1)), machine.vcpus))
    return max(pools) if pools else cvm_swiotlb_slabs(machine.memory_mib, machine.vcpus)


def _twins(value: Any, kind: str, where: Where, at: str) -> tuple[str, ...]:
    if value is None:
        return ()
    twins = [value] if isinstance(value, str) else value
    if not isinstance(twins, list) or not all(isinstance(t, str) for t in twins):
        raise where.error(f"{at}.twins", 'must be a list of twin presets, e.g. twins = ["bounce"]')
    for twin in twins:
        if twin not in TWINS:
            raise where.error(f"{at}.twins", f"{twin!r} is not a twin preset; known: {', '.join(TWINS)}")
        if kind not in TWINS[twin].kinds:
            raise where.error(f"{at}.twins", f"{twin!r} makes no sense on a {kind} arm: {TWINS[twin].refused}")
    if len(set(twins)) != len(twins):
        raise where.error(f"{at}.twins", "lists a preset twice")
    if {"poll-idle", "haltpoll"} <= set(twins):
        raise where.error(
            f"{at}.twins", "poll-idle and haltpoll both replace halting (idle=poll turns halt polling off); choose one"
        )
    return tuple(twins)


def _kernel_params(value: Any, where: Where, at: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(p, str) and KERNEL_PARAM.fullmatch(p) for p in value):
        raise where.error(
            f"{at}.kernel_params", 'must be a list of kernel parameters, e.g. ["transparent_hugepage=never"]'
        )
    return value


def _confidential(raw: dict[str, Any], kind: str, where: Where, at: str) -> tuple[tuple[str, str], ...]:
    props = []
    for key, (prop, default) in CONFIDENTIAL.get(kind, {}).items():
        value = raw.get(key, default)
        if value is None:
            continue
        if isinstance(value, bool):
            value = "on" if value else "off"
        elif isinstance(value, int):
            value = str(value)
        elif not isinstance(value, str) or not re.fullmatch(r"(0x[0-9a-fA-F]+|\d+|on|off)", value):
            raise where.error(f"{at}.{key}", f"{value!r} must be a number (0x30000 or 51) or true/false")
        props.append((prop, value))
    return tuple(props)


def _knobs(raw: dict[str, Any], kind: str, twins: tuple[str, ...], pool: int, where: Where, at: str) -> Knobs:
    derived: dict[str, str] = {}
    iommu = disable_legacy = kind in CVM_KINDS
    backend = None
    for twin in twins:
        if twin == "bounce":
            derived["swiotlb"] = f"swiotlb={pool},force"
            iommu = disable_legacy = True
        elif twin == "poll-idle":
            derived["idle"] = "idle=poll"
        elif twin == "haltpoll":
            derived["cpuidle_haltpoll.force"] = "cpuidle_haltpoll.force=1"
        elif twin == "eager-accept":
            derived["accept_memory"] = "accept_memory=eager"
        elif twin == "hugepages":
            backend = "hugepages"
    explicit = _kernel_params(raw.get("kernel_params"), where, at)
    for param in explicit:
        key = param.split("=", 1)[0]
        if key in derived:
            raise where.error(
                f"{at}.kernel_params", f"{param!r}: a twin of this arm sets {derived[key]!r} already; drop one"
            )
    for key, needed, why in (
        ("iommu_platform", iommu, "its virtio devices must use the DMA API"),
        ("disable_legacy", disable_legacy, "iommu_platform needs modern-only (virtio 1.0) devices"),
    ):
        if key in raw and not boolean(raw[key], where, f"{at}.{key}") and needed:
            reason = f"a {kind} guest needs it" if kind in CVM_KINDS else "the bounce twin needs it"
            raise where.error(f"{at}.{key}", f"cannot be false here: {reason} ({why}); remove the key")
    iommu = iommu or bool(raw.get("iommu_platform", False))
    disable_legacy = disable_legacy or bool(raw.get("disable_legacy", False)) or iommu
    forced = [p for p in explicit if re.fullmatch(r"swiotlb=(\d+,)?(\d+,)?force", p)]
    if forced and not iommu:
        raise where.error(
            f"{at}.kernel_params",
            f"{forced[0]!r} without iommu_platform bounces nothing: virtio devices without "
            'VIRTIO_F_ACCESS_PLATFORM bypass the DMA API; use twins = ["bounce"], or add iommu_platform = true',
        )
    return Knobs(
        kernel_params=tuple(derived.values()) + tuple(explicit),
        iommu_platform=iommu,
        disable_legacy=disable_legacy,
        memory_backend=backend,
        confidential=_confidential(raw, kind, where, at),
    )


def arm_of(raw: Any, index: int, where: Where, machine: Machine, image: Image, pool: int) -> tuple[Arm, bool]:
    at = f"arm[{index}]"
    if not isinstance(raw, dict):
        raise where.error(at, "must be a table: [[arm]]")
    name = raw.get("name")
    if not isinstance(name, str) or not NAME.fullmatch(name):
        no_provider(raw, where, at)
        raise where.error(f"{at}.name", f"{name!r}: every arm needs a name of letters, digits, '-', '_', '.' or '+'")
    at = f"arm '{name}'"
    no_provider(raw, where, at)
    kind = raw.get("kind")
    if kind not in KINDS:
        raise where.error(f"{at}.kind", f"{kind!r} is not a kind; use one of: {', '.join(KINDS)}")
    extra = set(CONFIDENTIAL.get(kind, {}))
    unknown = sorted(k for k in raw if k not in ARM_KEYS | extra)
    if unknown:
        others = sorted({k for props in CONFIDENTIAL.values() for k in props} & set(unknown))
        hint = f" ({', '.join(others)}: only on the kind that has them)" if others else ""
        raise where.error(
            f"{at}: {', '.join(unknown)}",
            f"unknown key for a {kind} arm{hint}; allowed: {', '.join(sorted(ARM_KEYS | extra))}",
        )
    twins = _twins(raw.get("twins"), kind, where, at)
    knobs = _knobs(raw, kind, twins, pool, where, at)
    if knobs.kernel_params and not image.takes_kernel_params:
        raise where.error(
            f"{at}.kernel_params",
            f"{' '.join(knobs.kernel_params)}: the image boots itself, so its boot loader decides the kernel "
            "command line; name its kernel and initrd in [image] (direct kernel boot) or set them in the image",
        )
    baseline = boolean(raw.get("baseline", False), where, f"{at}.baseline")
    return Arm(name=name, kind=kind, twins=twins, knobs=knobs), baseline


def check_machine_for_arms(machine: Machine, arms: list[Arm], where: Where) -> None:
    cvm = [a for a in arms if a.confidential]
    if cvm and machine.memory_backend != "memfd":
        raise where.error(
            "machine.memory_backend",
            f"{machine.memory_backend!r} with the {cvm[0].kind} arm '{cvm[0].name}': a confidential guest's "
            'memory backend is a memfd (its private memory comes from guest_memfd); use "memfd" for every arm',
        )
    for arm in arms:
        backend = arm.knobs.memory_backend or machine.memory_backend
        if backend == "hugepages" and machine.memory_mib % 2:
            raise where.error("machine.memory", "huge pages of 2 MiB need an even number of MiB")


def default_baseline(arms: list[Arm]) -> str:
    """The first plain arm with no twin and no knob of its own, else the first arm."""
    for arm in arms:
        if arm.kind == "plain" and not arm.twins and arm.knobs == Knobs():
            return arm.name
    return arms[0].name
