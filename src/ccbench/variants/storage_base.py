"""The storage variants' common ground (ccbench.variants.storage): their options, what the machine
offers (root, device-mapper, ext4 encryption), the state file that records what is mounted or
attached before it happens, unmounting and detaching, key files, the cipher evidence recorded on
samples, and ``Mechanism``, the base of each way of providing a variant (storage_plain,
storage_encrypted)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, ClassVar

from pydantic import Field

from ccbench.basics.errors import CCBenchError
from ccbench.basics.ledger import Ledger
from ccbench.variants.base import AxisOptions

#: ext4 on a loop file without encryption: the fscrypt/LUKS stack minus the cipher (a control)
LOOP_CONTROL = "ext4-loop"
STATE_FILE = "state.json"


class StorageOptions(AxisOptions):
    #: size of the tmpfs variant
    tmpfs_size: str = Field("2G", pattern=r"^\d+[KkMmGg%]?$")
    #: size of the loop file behind the LUKS and fscrypt variants
    image_size: str = Field("2G", pattern=r"^\d+[KkMmGg]?$")
    #: user-prepared directories per variant value (from --storage-path VALUE=DIR)
    paths: dict[str, str] = Field(default_factory=dict)


def _run(argv: list[str], *, input_text: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run(argv, capture_output=True, text=True, input=input_text, timeout=300)
    if check and done.returncode != 0:
        raise CCBenchError(f"{' '.join(argv[:3])} failed: {(done.stderr or done.stdout).strip()[-300:]}")
    return done


def is_root() -> bool:
    return os.geteuid() == 0


def kernel_has_device_mapper(misc: Path = Path("/proc/misc")) -> bool:
    """Whether the running kernel registered device-mapper's control device. /dev/mapper/control
    alone proves nothing: libdevmapper creates that node itself when it is missing."""
    try:
        return any(line.split()[1:] == ["device-mapper"] for line in misc.read_text().splitlines())
    except OSError:
        return False


def fscrypt_supported() -> bool:
    return os.path.exists("/sys/fs/ext4/features/encryption") and shutil.which("mkfs.ext4") is not None


# --- the state file: what is mounted or attached, recorded before it happens ----------------------


def _state_path(root: Path) -> Path:
    return root / STATE_FILE


def _ledger(root: Path) -> Ledger:
    return Ledger(_state_path(root), load=True)


def _record(root: Path, entry: dict[str, Any]) -> None:
    root.mkdir(parents=True, exist_ok=True)
    _ledger(root).record(entry)


def _forget(root: Path, directory: str) -> None:
    _ledger(root).forget(lambda entry: entry.get("directory") == directory)


def _mount_points_under(path: Path) -> list[str]:
    points = []
    try:
        text = Path("/proc/self/mountinfo").read_text()
    except OSError:
        return points
    prefix = str(path).rstrip("/") + "/"
    for line in text.splitlines():
        fields = line.split(" - ")[0].split()
        if len(fields) > 4:
            point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[4])
            if point.startswith(prefix):
                points.append(point)
    return sorted(points, key=len, reverse=True)


def _unmount(point: str) -> None:
    fuse = shutil.which("fusermount3") or shutil.which("fusermount")
    if fuse and _run([fuse, "-u", point], check=False).returncode == 0:
        return
    if _run(["umount", point], check=False).returncode != 0:
        _run(["umount", "-l", point], check=False)


def _detach_loops(image: Path, attempts: int = 20) -> None:
    """Detach every loop device backed by ``image``. Right after an unmount the kernel may still
    hold the device (autoclear is asynchronous), so try again for a couple of seconds."""
    if not shutil.which("losetup"):
        return
    for _ in range(attempts):
        done = _run(["losetup", "-j", str(image)], check=False)
        devices = [line.split(":", 1)[0] for line in done.stdout.splitlines() if line.startswith("/dev/loop")]
        if not devices:
            return
        for device in devices:
            _run(["losetup", "-d", device], check=False)
        time.sleep(0.1)


def _describe(path: Path) -> dict[str, Any]:
    try:
        from ccbench.probe import describe_path

        return describe_path(path)
    except Exception as exc:  # the description is a nicety; never fail a run over it
        return {"protection": "unknown", "reason": str(exc)}


def cipher_driver_info(storage_cipher: str, directory: Path | None = None) -> dict[str, Any]:
    """``storage_cipher_driver`` and ``storage_cipher_accelerated``: the kernel driver serving the
    variant's cipher, read from /proc/crypto once the mapping or policy is live. The kernel builds a
    cipher template on first use, so with ``directory`` a small file is written there (and removed)
    first: the first encrypted file makes the kernel instantiate the contents cipher."""
    if directory is not None:
        probe = directory / ".ccbench-cipher-probe"
        try:
            with open(probe, "wb") as handle:
                handle.write(b"\0" * 4096)
                handle.flush()
                os.fsync(handle.fileno())
        except OSError:
            pass
        finally:
            probe.unlink(missing_ok=True)
    try:
        from ccbench.probe.crypto import storage_variant_info

        return storage_variant_info(storage_cipher)
    except Exception as exc:  # evidence about the run, never a reason to fail the set-up
        return {"storage_cipher_driver": None, "storage_cipher_driver_note": f"not read: {exc}"}


def userspace_aes_info() -> dict[str, Any]:
    """For a userspace cipher (gocryptfs: Go's or OpenSSL's AES-GCM, no kernel driver): whether the
    CPU offers what both use for AES-GCM at speed (AES and carry-less multiply instructions)."""
    from ccbench.variants.transport import cpu_flags

    flags = cpu_flags()
    if not flags:
        return {}
    return {
        "storage_cipher_driver": "userspace AES-GCM (gocryptfs)",
        "storage_cipher_accelerated": {"aes", "pclmulqdq"} <= flags,
    }


def _key_file(directory: Path, raw: bytes) -> Path:
    """A 0600 file holding ``raw``, created exclusively (never over an existing file)."""
    key = directory / "key"
    fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(raw)
    return key


# --- the mechanisms ---------------------------------------------------------------------------------


class Mechanism(ABC):
    """One way of providing a storage variant in ``directory`` (which the axis made and removes).

    ``set_up`` records itself in the state file before it mounts or attaches anything and sets an
    attribute for each thing it made; ``tear_down`` undoes exactly those, in reverse order, and
    must work after a set-up that stopped half-way.
    """

    #: the ``kind`` recorded in the state file
    kind: ClassVar[str]

    def __init__(self, value: str, directory: Path, options: StorageOptions):
        self.value = value
        self.directory = directory
        self.root = directory.parent
        self.options = options

    @classmethod
    def unavailable(cls) -> str | None:
        """Why this mechanism cannot be set up here (with what to do), or None."""
        return None

    def record(self, **facts: Any) -> None:
        """Write this set-up into the state file (call before making anything outside ``directory``)."""
        _record(self.root, {"directory": str(self.directory), "kind": self.kind, **facts})

    @abstractmethod
    def set_up(self) -> tuple[Path, dict[str, Any]]:
        """Make the variant; returns the directory workloads use and the info recorded on samples."""

    def tear_down(self) -> None:  # noqa: B027 - nothing to undo by default
        pass

    def serving(self) -> dict[str, list]:
        """What serves this variant outside the workload's processes, for the interference watch:
        ``layer_threads`` (kernel thread or workqueue names) and ``layer_pids`` (daemons)."""
        return {}

    @classmethod
    def clean_stale(cls, entry: dict[str, Any]) -> list[str]:
        """Undo what only this mechanism knows about, for a state-file entry a killed run left
        (cleanup_stale then unmounts, detaches and removes everything under the storage root)."""
        return []
