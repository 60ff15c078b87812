"""The study file (TOML, docs/machines.md): which arms to launch, the machine they all share, the
image they boot and the plan each runs. Loading checks everything a launch would trip over later and
refuses it in one line that names the file, the key and what to do."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ccbench.basics.errors import CCBenchError

KINDS = ("plain", "sev-snp", "tdx")
CVM_KINDS = ("sev-snp", "tdx")
ORDERS = ("interleaved", "rounds")
#: images ccbench builds itself (the lead's machines/image.py)
OWN_IMAGES = ("debian-12",)
DISK_BUSES = ("virtio-blk", "virtio-scsi")
DISK_CACHES = ("none", "writeback", "writethrough", "directsync", "unsafe")
DISK_AIO = ("threads", "native", "io_uring")
NIC_MODELS = ("virtio-net-pci", "e1000e")
MEMORY_BACKENDS = ("ram", "memfd", "hugepages")

MIB = 1 << 20
#: swiotlb's slab (IO_TLB_SHIFT = 11 in include/linux/swiotlb.h) and its segment (IO_TLB_SEGSIZE)
SLAB_BYTES = 2048
SEGMENT_SLABS = 128
#: the pool a confidential guest's kernel sizes for itself (arch/x86/mm/mem_encrypt.c,
#: mem_encrypt_setup_arch): 6% of memory, clamped to [IO_TLB_DEFAULT_SIZE = 64 MiB, 1 GiB]
CVM_POOL_PERCENT = 6
CVM_POOL_MIN = 64 * MIB
CVM_POOL_MAX = 1024 * MIB

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]*")
KERNEL_PARAM = re.compile(r"[^\s\"']+")


class StudyError(CCBenchError):
    """The study file is malformed, or asks for an arm that makes no sense."""


@dataclass(frozen=True)
class Twin:
    """A twin preset: the knobs it sets, the kinds it makes sense for, and what it isolates."""

    name: str
    kinds: tuple[str, ...]
    isolates: str
    #: why it is refused on the other kinds
    refused: str


TWINS: dict[str, Twin] = {
    t.name: t
    for t in (
        Twin(
            "bounce",
            ("plain",),
            "the copy through shared memory on every DMA (swiotlb), without encryption or exits",
            "a confidential guest bounces every DMA already; the bounce twin is a plain VM that bounces too",
        ),
        Twin(
            "poll-idle",
            CVM_KINDS,
            "the halt and wake-up path of an idle vCPU (and the reschedule IPIs a polling CPU does not get)",
            "a plain VM with idle=poll is no twin: it only makes the baseline faster (docs/mechanisms.md, section 3)",
        ),
        Twin(
            "haltpoll",
            CVM_KINDS,
            "the halt exits that guest halt polling avoids, at a smaller CPU cost than idle=poll",
            "a plain VM with halt polling is no twin: it only makes the baseline faster (docs/mechanisms.md, section 3)",
        ),
        Twin(
            "eager-accept",
            CVM_KINDS,
            "lazy page acceptance during the run (PVALIDATE / TDG.MEM.PAGE.ACCEPT)",
            "a plain VM accepts no memory: accept_memory= changes nothing there",
        ),
        Twin(
            "hugepages",
            ("plain",),
            "the host's 4K page-walk share: guest memory backed by 2M huge pages on the host",
            "a confidential guest's private memory comes from guest_memfd, which the memory backend's huge "
            "pages do not reach (they would back only its shared memory); use transparent_hugepage= in "
            "kernel_params for the guest's own page size",
        ),
    )
}


def _power_of_two_at_least(n: int) -> int:
    return 1 << max(n - 1, 0).bit_length()


def cvm_swiotlb_slabs(memory_mib: int, vcpus: int) -> int:
    """The bounce-buffer pool, in 2 KiB slabs, that a confidential guest's kernel gives itself with this
    much memory and this many vCPUs: 6% of memory clamped to [64 MiB, 1 GiB] (mem_encrypt_setup_arch),
    in whole 128-slab segments (swiotlb_adjust_size), then, with one area per possible CPU, at least a
    segment per area and rounded up to a power of two (swiotlb_adjust_nareas, round_up_default_nslabs,
    kernel/dma/swiotlb.c since 6.0). Computed from the configured memory: the guest's own total is a
    little lower, which the power-of-two rounding hides unless 6% sits just above a power of two."""
    size = memory_mib * MIB * CVM_POOL_PERCENT // 100
    size = min(max(size, CVM_POOL_MIN), CVM_POOL_MAX)
    slabs = -(-size // SLAB_BYTES)
    return swiotlb_pool(slabs, vcpus)


def swiotlb_pool(slabs: int, vcpus: int) -> int:
    """The slabs a kernel allocates when asked for this many (swiotlb=N or its own size): whole
    128-slab segments, at least one per area (one area per possible CPU, a power of two), rounded
    up to a power of two."""
    slabs = -(-slabs // SEGMENT_SLABS) * SEGMENT_SLABS
    areas = _power_of_two_at_least(max(vcpus, 1))
    return _power_of_two_at_least(max(slabs, SEGMENT_SLABS * areas))


@dataclass(frozen=True)
class Disk:
    bus: str = "virtio-blk"
    cache: str = "none"
    aio: str = "threads"
    queues: int = 1


@dataclass(frozen=True)
class Nic:
    model: str = "virtio-net-pci"
    vhost: bool = False
    queues: int = 1


@dataclass(frozen=True)
class Machine:
    """What every arm shares: the same vCPUs, memory, CPU model and topology, pinning and devices."""

    vcpus: int = 2
    memory_mib: int = 2048
    #: "auto": "host" under KVM, "max" under TCG (the same for every arm of one host)
    cpu: str = "auto"
    sockets: int = 1
    cores: int = 2
    threads: int = 1
    #: host CPU of each vCPU (index = vCPU), empty: not pinned
    pin: tuple[int, ...] = ()
    disk: Disk = field(default_factory=Disk)
    nic: Nic = field(default_factory=Nic)
    memory_backend: str = "memfd"
    prealloc: bool = False

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["pin"] = list(self.pin)
        return out


@dataclass(frozen=True)
class Image:
    """``debian-12`` (ccbench's own), ``kernel`` (a user's disk with its kernel and initrd: direct
    kernel boot) or ``disk`` (a user's disk that boots itself through firmware and its boot loader)."""

    kind: str
    disk: Path | None = None
    kernel: Path | None = None
    initrd: Path | None = None
    #: the kernel command line the image needs (root=, console=); ccbench's own image brings its own
    append: str = ""
    format: str = "qcow2"

    @property
    def takes_kernel_params(self) -> bool:
        return self.kind != "disk"

    def as_dict(self) -> dict[str, Any]:
        return {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(self).items()}


@dataclass(frozen=True)
class Knobs:
    """What an arm sets beyond the shared machine: the twins' knobs and the explicit ones, resolved."""

    kernel_params: tuple[str, ...] = ()
    #: VIRTIO_F_ACCESS_PLATFORM on every virtio device (QEMU iommu_platform=on)
    iommu_platform: bool = False
    #: modern-only virtio devices (virtio 1.0 with iommu_platform needs it)
    disable_legacy: bool = False
    #: the arm's memory backend when it differs from [machine]'s (the hugepages twin), else None
    memory_backend: str | None = None
    #: the confidential guest object's properties (QEMU names), e.g. (("policy", "0x30000"), ...)
    confidential: tuple[tuple[str, str], ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {
            "kernel_params": list(self.kernel_params),
            "iommu_platform": self.iommu_platform,
            "disable_legacy": self.disable_legacy,
            "memory_backend": self.memory_backend,
            "confidential": dict(self.confidential),
        }


@dataclass(frozen=True)
class Arm:
    name: str
    kind: str
    twins: tuple[str, ...]
    knobs: Knobs

    @property
    def confidential(self) -> bool:
        return self.kind in CVM_KINDS


@dataclass(frozen=True)
class Sweep:
    """A study's sweep (``[sweep]``, docs/machines.md section 12): each arm's launch time at every
    memory size, and the plan run at every vCPU count. The loader makes the study at each point (the
    same file with that memory or vCPU count: the bounce twin's pool and the topology follow it)."""

    #: memory sizes (MiB) each arm is launched at and timed (launch to a ready guest)
    memory_mib: tuple[int, ...] = ()
    #: vCPU counts the plan runs at, every arm at each
    vcpus: tuple[int, ...] = ()
    #: launches of each arm at each memory size
    launches: int = 1
    #: the study at each memory size (at the machine's vCPUs), and at each vCPU count (at its memory)
    memory_points: tuple[Study, ...] = ()
    vcpu_points: tuple[Study, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {"memory_mib": list(self.memory_mib), "vcpus": list(self.vcpus), "launches": self.launches}


@dataclass(frozen=True)
class Study:
    name: str
    #: a bundled plan's name, or the absolute path of a plan file
    plan: str
    image: Image
    order: str
    rounds: int
    machine: Machine
    arms: tuple[Arm, ...]
    baseline: str
    source: Path
    description: str = ""
    sweep: Sweep = field(default_factory=Sweep)

    def arm(self, name: str) -> Arm:
        for arm in self.arms:
            if arm.name == name:
                return arm
        raise StudyError(f"{self.source}: no arm named {name!r}; its arms: {', '.join(a.name for a in self.arms)}")

    def schedule(self) -> list[tuple[int, tuple[str, ...]]]:
        """The arms of each round, in order: round r starts r places further along the arm list
        (A B, B A, A B, ...), so that no arm is always first after a quiet host or always last."""
        names = [a.name for a in self.arms]
        return [(r, tuple(names[r % len(names) :] + names[: r % len(names)])) for r in range(self.rounds)]


# ---- loading ------------------------------------------------------------------------------------
