"""Storage protection variants: plain disk, tmpfs, and encrypted storage set up on files ccbench owns.

Values (plan: ``variants = { storage = [...] }``):

* ``disk``       a directory in the work directory, on whatever the filesystem is (the probe says
                 whether that is already dm-crypt, as on many confidential VMs' OS disks)
* ``tmpfs``      a tmpfs ccbench mounts (size from ``[storage] tmpfs_size``)
* ``encrypted``  the strongest option here: LUKS2 (dm-crypt aes-xts-plain64, 512-bit key) on a loop
                 file when device-mapper works, else ext4 + fscrypt (policy v2, AES-256-XTS) on a loop
                 file, else gocryptfs (FUSE, AES-256-GCM)
* ``encrypted:luks`` / ``encrypted:fscrypt`` / ``encrypted:gocryptfs``  exactly that one, or skipped
* ``ext4-loop``  a control: the same ext4 on a loop file as fscrypt and LUKS use, without encryption,
                 so that the cost of the cipher can be told from the cost of the loop-file stack
* any value given a directory with ``--storage-path VALUE=DIR``: a directory ccbench makes there

Each mechanism is one small class (Disk, UserPath, Tmpfs, Ext4Loop, Fscrypt, Gocryptfs, Luks) whose
``set_up`` makes things in order and whose ``tear_down`` undoes what was made, in reverse, from its
own attributes (an attribute still None was never made). The axis (StorageAxis) gives each set-up
its own directory ``<workdir>/storage/<value>-<id>/`` and removes it after the tear-down.

Loop files are attached with direct I/O (``losetup --direct-io=on``) so that the loop device does
not add a second page cache in front of the disk: an O_DIRECT workload on the variant reaches the
disk as it does on ``disk`` (recorded as ``loop_direct_io``).

Safety: everything is created under ``<workdir>/storage/`` and recorded in a state file there
before it is mounted or attached; ``cleanup_stale`` undoes whatever a killed run left (the runner
calls it at start, under the work-directory lock; ``ccbench cleanup`` too). Keys are random per
setup and live in a 0600 file only for the seconds a tool needs to read it.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import subprocess
import time
import uuid
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, ClassVar

from pydantic import Field

from ccbench.basics.errors import CCBenchError
from ccbench.basics.ledger import Ledger, read_entries
from ccbench.variants.base import AxisOptions, PreparedVariant, VariantAxis
from ccbench.workloads.base import missing_tools, size_bytes

MECHANISMS = ("luks", "fscrypt", "gocryptfs")
#: ext4 on a loop file without encryption: the fscrypt/LUKS stack minus the cipher (a control)
LOOP_CONTROL = "ext4-loop"
VALUES = ("disk", "tmpfs", LOOP_CONTROL, "encrypted", *(f"encrypted:{m}" for m in MECHANISMS))
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


def mechanism_reason(mechanism: str) -> str | None:
    """Why this encryption mechanism cannot be set up here, or None."""
    cls = ENCRYPTION.get(mechanism)
    return cls.unavailable() if cls else f"unknown mechanism {mechanism!r}"


def choose_mechanism() -> tuple[str | None, list[str]]:
    """The strongest available mechanism, and why the stronger ones were passed over."""
    passed_over = []
    for mechanism in MECHANISMS:
        reason = mechanism_reason(mechanism)
        if reason is None:
            return mechanism, passed_over
        passed_over.append(f"{mechanism}: {reason}")
    return None, passed_over


def gocryptfs_cipher(config: Path) -> str:
    """The content cipher a gocryptfs directory was initialised with, from its gocryptfs.conf."""
    try:
        flags = set(json.loads(config.read_text()).get("FeatureFlags") or [])
    except (OSError, ValueError):
        return "unknown"
    if "XChaCha20Poly1305" in flags:
        return "XChaCha20-Poly1305"
    if "AESSIV" in flags:
        return "AES-SIV-512"
    return "AES-256-GCM" if "GCMIV128" in flags else "AES-256-GCM (96-bit IV)"


def luks_header(device: str) -> dict[str, Any]:
    """Cipher, key size and sector size of the LUKS2 header on ``device`` (``cryptsetup luksDump``)."""
    done = _run(["cryptsetup", "luksDump", "--dump-json-metadata", device])
    metadata = json.loads(done.stdout)
    segment = next(iter(metadata["segments"].values()))
    keyslot = next(iter(metadata["keyslots"].values()))
    return {
        "storage_cipher": segment["encryption"],
        "key_bits": int(keyslot["key_size"]) * 8,
        "luks_sector_size": int(segment["sector_size"]),
    }


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


class Disk(Mechanism):
    """A plain directory in the work directory."""

    kind = "disk"

    def set_up(self):
        path = self.directory / "data"
        path.mkdir()
        protection = _describe(path)
        return path, {
            "storage": "disk",
            "storage_protection": protection.get("protection"),
            "storage_fstype": protection.get("fstype"),
        }


class UserPath(Mechanism):
    """A directory ccbench makes inside a directory the user prepared (``--storage-path``)."""

    kind = "user-path"
    NAME = re.compile(r"ccbench-[0-9a-f]{8}")

    def __init__(self, value: str, directory: Path, options: StorageOptions):
        super().__init__(value, directory, options)
        self.base = Path(options.paths[value])
        self.user_directory: Path | None = None

    def set_up(self):
        made = self.base / f"ccbench-{uuid.uuid4().hex[:8]}"
        # recorded first, so that a killed run's directory in the user's path is removed by cleanup_stale
        self.record(user_directory=str(made))
        made.mkdir()
        self.user_directory = made
        protection = _describe(made)
        info = {
            "storage": self.value,
            "storage_mechanism": "user-path",
            "storage_path": str(self.base),
            "storage_protection": protection.get("protection"),
            "storage_fstype": protection.get("fstype"),
        }
        if protection.get("cipher"):
            info["storage_cipher"] = protection["cipher"]
        return made, info

    def tear_down(self):
        if self.user_directory is not None:
            shutil.rmtree(self.user_directory, ignore_errors=True)

    @classmethod
    def clean_stale(cls, entry):
        # the one directory ccbench made inside a --storage-path directory, never anything else there
        made = Path(entry.get("user_directory") or "/nonexistent")
        if cls.NAME.fullmatch(made.name) and made.is_dir():
            shutil.rmtree(made, ignore_errors=True)
            return [f"removed {made}"]
        return []


class Tmpfs(Mechanism):
    kind = "tmpfs"

    def __init__(self, value, directory, options):
        super().__init__(value, directory, options)
        self.mount_point: Path | None = None

    @classmethod
    def unavailable(cls):
        return None if is_root() else "mounting a tmpfs needs root"

    def set_up(self):
        mount_point = self.directory / "mnt"
        mount_point.mkdir()
        self.record()
        self.mount_point = mount_point
        _run(
            [
                "mount",
                "-t",
                "tmpfs",
                "-o",
                f"size={self.options.tmpfs_size},mode=0700",
                "ccbench-tmpfs",
                str(mount_point),
            ]
        )
        return mount_point, {"storage": "tmpfs", "storage_mechanism": "tmpfs", "tmpfs_size": self.options.tmpfs_size}

    def tear_down(self):
        if self.mount_point is not None:
            _unmount(str(self.mount_point))


class LoopImage:
    """A file ccbench creates and attaches to a free loop device with direct I/O."""

    def __init__(self, path: Path, size: str):
        self.path = path
        self.size = size
        self.device: str | None = None
        self.direct_io: bool | None = None

    def create(self) -> None:
        with open(self.path, "wb") as handle:
            handle.truncate(size_bytes(self.size))

    def attach(self) -> str:
        device = _run(["losetup", "--find", "--show", "--direct-io=on", str(self.path)]).stdout.strip()
        if not re.fullmatch(r"/dev/loop\d+", device):
            _detach_loops(self.path)
            raise CCBenchError(f"losetup attached {self.path} to an unexpected device {device!r}")
        self.device = device
        try:
            self.direct_io = Path(f"/sys/block/{Path(device).name}/loop/dio").read_text().strip() == "1"
        except OSError:
            self.direct_io = None
        return device

    def detach(self) -> None:
        if self.device is not None:
            _detach_loops(self.path)


class Ext4Loop(Mechanism):
    """ext4 on a loop file, mounted at ``directory/mnt``: the control, and the base of fscrypt."""

    kind = "ext4-loop"
    #: extra mkfs.ext4 options
    mkfs_options: ClassVar[list[str]] = []

    def __init__(self, value, directory, options):
        super().__init__(value, directory, options)
        self.image = LoopImage(directory / "image.img", options.image_size)
        self.mount_point: Path | None = None

    @classmethod
    def unavailable(cls):
        if not is_root():
            return "ext4 on a loop file needs root (mkfs, losetup, mount)"
        missing = missing_tools("mkfs.ext4", "losetup")
        return f"{', '.join(missing)} not installed (bash scripts/setup.sh --with storage)" if missing else None

    def mount_filesystem(self) -> Path:
        self.image.create()
        _run(["mkfs.ext4", "-q", "-F", *self.mkfs_options, "-L", "ccbench", str(self.image.path)])
        mount_point = self.directory / "mnt"
        mount_point.mkdir()
        self.record(image=str(self.image.path))
        device = self.image.attach()
        self.mount_point = mount_point
        _run(["mount", device, str(mount_point)])
        return mount_point

    def loop_info(self) -> dict[str, Any]:
        return {"loop_direct_io": self.image.direct_io, "image_size": self.options.image_size}

    def serving(self) -> dict[str, list]:
        # the loop device's worker (loopN, or kworkers running its loopN workqueue)
        return {"layer_threads": [Path(self.image.device).name] if self.image.device else []}

    def set_up(self):
        path = self.mount_filesystem() / "data"
        path.mkdir()
        return path, {
            "storage": LOOP_CONTROL,
            "storage_mechanism": "none",
            "filesystem": "ext4 on a loop file",
            **self.loop_info(),
        }

    def tear_down(self):
        if self.mount_point is not None:
            _unmount(str(self.mount_point))
        self.image.detach()


class Fscrypt(Ext4Loop):
    """ext4 with fscrypt (policy v2) on a loop file; the encrypted directory is ``mnt/data``."""

    kind = "fscrypt"
    mkfs_options = ["-O", "encrypt"]

    def __init__(self, value, directory, options):
        super().__init__(value, directory, options)
        self.identifier: bytes | None = None

    @classmethod
    def unavailable(cls):
        if not is_root():
            return "fscrypt on a loop file needs root (mkfs, mount)"
        if not fscrypt_supported():
            return "this kernel's ext4 has no encryption support (no /sys/fs/ext4/features/encryption) or mkfs.ext4 is missing"
        return None

    def set_up(self):
        from ccbench.variants import fscrypt

        mount_point = self.mount_filesystem()
        key = secrets.token_bytes(fscrypt.KEY_BYTES)  # kept in memory only, handed to the kernel
        self.identifier = fscrypt.add_key(str(mount_point), key)
        del key
        data = mount_point / "data"
        data.mkdir()
        fscrypt.set_policy(str(data), self.identifier)
        return data, {
            "storage": "encrypted",
            "storage_mechanism": "fscrypt",
            "storage_cipher": fscrypt.CIPHER,
            "filenames_cipher": "AES-256-CTS",
            "fscrypt_policy": 2,
            "filesystem": "ext4 on a loop file",
            **self.loop_info(),
            **cipher_driver_info(fscrypt.CIPHER, data),
        }

    def tear_down(self):
        if self.identifier is not None and self.mount_point is not None:
            from ccbench.variants import fscrypt

            try:
                fscrypt.remove_key(str(self.mount_point), self.identifier)
            except OSError:
                pass  # unmounting drops the filesystem's keys anyway
        super().tear_down()

    def serving(self) -> dict[str, list]:
        # reads are decrypted by the kernel's fscrypt read queue (writes in the writer's own context)
        return {"layer_threads": ["fscrypt_read_queue", *super().serving()["layer_threads"]]}


class Gocryptfs(Mechanism):
    """gocryptfs (FUSE): ciphertext in ``directory/cipher``, plaintext view at ``directory/mnt``."""

    kind = "gocryptfs"

    def __init__(self, value, directory, options):
        super().__init__(value, directory, options)
        self.mount_point: Path | None = None

    @classmethod
    def unavailable(cls):
        if shutil.which("gocryptfs") is None:
            return "gocryptfs is not installed (bash scripts/setup.sh --with storage)"
        if not os.path.exists("/dev/fuse"):
            return "FUSE is not available (/dev/fuse missing)"
        if not os.access("/dev/fuse", os.R_OK | os.W_OK):
            return "this user cannot open /dev/fuse (run as root, or get read-write access to /dev/fuse)"
        return None

    def set_up(self):
        cipher_dir, mount_point = self.directory / "cipher", self.directory / "mnt"
        cipher_dir.mkdir()
        mount_point.mkdir()
        key = _key_file(self.directory, secrets.token_hex(32).encode())
        try:
            _run(["gocryptfs", "-init", "-q", "-passfile", str(key), str(cipher_dir)])
            self.record()
            self.mount_point = mount_point
            _run(["gocryptfs", "-q", "-passfile", str(key), str(cipher_dir), str(mount_point)])
        finally:
            key.unlink(missing_ok=True)
        info = {
            "storage": "encrypted",
            "storage_mechanism": "gocryptfs",
            "storage_cipher": gocryptfs_cipher(cipher_dir / "gocryptfs.conf"),
            "filesystem": "FUSE",
            **userspace_aes_info(),
        }
        version = _run(["gocryptfs", "-version"], check=False).stdout.split(";")[0].strip()
        if version:
            info["gocryptfs_version"] = version
        return mount_point, info

    def tear_down(self):
        if self.mount_point is not None:
            _unmount(str(self.mount_point))

    def serving(self) -> dict[str, list]:
        # the gocryptfs daemon that serves this mount point (it forks into the background)
        import psutil

        mount_point = str(self.mount_point)
        pids = []
        for process in psutil.process_iter(["name", "cmdline"]):
            if process.info["name"] == "gocryptfs" and mount_point in (process.info["cmdline"] or []):
                pids.append(process.pid)
        return {"layer_pids": pids}


def dm_crypt_info(name: str) -> dict[str, Any]:
    """The live mapping's sector size and options (no_read_workqueue, ...) from ``dmsetup table``
    (the key field is never kept); {} where it cannot be read."""
    if shutil.which("dmsetup") is None:
        return {}
    done = _run(["dmsetup", "table", name], check=False)
    try:
        from ccbench.probe.storage import parse_dm_crypt_table

        parsed = parse_dm_crypt_table(done.stdout) if done.returncode == 0 else None
    except Exception:
        return {}
    return {f"dm_crypt_{k}" if not k.startswith(("dm_crypt", "no_")) else k: v for k, v in (parsed or {}).items()}


class Luks(Mechanism):
    """LUKS2 (dm-crypt) on a loop file, ext4 inside, mounted at ``directory/mnt``."""

    kind = "luks"

    def __init__(self, value, directory, options):
        super().__init__(value, directory, options)
        self.image = LoopImage(directory / "image.img", options.image_size)
        self.dm_name = f"ccbench-{directory.name}"
        self.opened = False
        self.mount_point: Path | None = None

    def serving(self) -> dict[str, list]:
        # dm-crypt's workers (kcryptd/<dev>, dmcrypt_write/<dev>) and the loop device's
        loop = [Path(self.image.device).name] if self.image.device else []
        return {"layer_threads": ["kcryptd", "dmcrypt_write", *loop]}

    @classmethod
    def unavailable(cls):
        if not is_root():
            return "LUKS needs root (loop device, dm-crypt)"
        if not kernel_has_device_mapper():
            return "device-mapper is not available in this kernel (not in /proc/misc), so dm-crypt/LUKS cannot open"
        if shutil.which("cryptsetup") is None:
            return "cryptsetup is not installed (bash scripts/setup.sh --with storage)"
        return None

    @staticmethod
    def commands(device: str, key: Path, name: str, mount_point: Path) -> list[list[str]]:
        """The commands run on the loop device ccbench attached, in order: format, open, mkfs,
        mount (unit-tested; device-mapper is absent in CI). The key is 512 random bits, so a fast
        PBKDF loses nothing and keeps setup short."""
        if not re.fullmatch(r"/dev/loop\d+", device):
            raise CCBenchError(f"refusing to format {device}: ccbench only formats loop devices it attached")
        mapper = f"/dev/mapper/{name}"
        return [
            [
                "cryptsetup",
                "luksFormat",
                "--batch-mode",
                "--type",
                "luks2",
                "--cipher",
                "aes-xts-plain64",
                "--key-size",
                "512",
                "--pbkdf",
                "pbkdf2",
                "--pbkdf-force-iterations",
                "1000",
                "--key-file",
                str(key),
                device,
            ],
            ["cryptsetup", "open", "--type", "luks2", "--key-file", str(key), device, name],
            ["mkfs.ext4", "-q", "-F", mapper],
            ["mount", mapper, str(mount_point)],
        ]

    def set_up(self):
        self.image.create()
        mount_point = self.directory / "mnt"
        mount_point.mkdir()
        key = _key_file(self.directory, secrets.token_bytes(64))
        self.record(image=str(self.image.path), dm_name=self.dm_name)
        try:
            device = self.image.attach()
            format_command, open_command, *rest = self.commands(device, key, self.dm_name, mount_point)
            _run(format_command)
            # what was written, read back from the header rather than assumed from the command line
            header = luks_header(device)
            self.opened = True  # from here a half-done open is closed again by tear_down
            _run(open_command)
            self.mount_point = mount_point
            for argv in rest:
                _run(argv)
        finally:
            key.unlink(missing_ok=True)
        data = mount_point / "data"
        data.mkdir()
        return data, {
            "storage": "encrypted",
            "storage_mechanism": "luks2",
            "storage_cipher": "aes-xts-plain64",
            "key_bits": 512,
            **header,
            "filesystem": "ext4 on dm-crypt on a loop file",
            "loop_direct_io": self.image.direct_io,
            "image_size": self.options.image_size,
            **cipher_driver_info(header.get("storage_cipher", "aes-xts-plain64"), data),
            **dm_crypt_info(self.dm_name),
        }

    def tear_down(self):
        if self.mount_point is not None:
            _unmount(str(self.mount_point))
        if self.opened and kernel_has_device_mapper():  # cryptsetup would create /dev/mapper/control
            _run(["cryptsetup", "close", self.dm_name], check=False)
        self.image.detach()

    @classmethod
    def clean_stale(cls, entry):
        name = entry.get("dm_name")
        if not (name and shutil.which("cryptsetup") and kernel_has_device_mapper()):
            return []
        removed = []
        for point in _mount_points_under(Path(entry["directory"])):
            _unmount(point)
            removed.append(f"unmounted {point}")
        if _run(["cryptsetup", "close", name], check=False).returncode == 0:
            removed.append(f"closed dm-crypt mapping {name}")
        return removed


#: encryption mechanisms by the name after ``encrypted:``, strongest first (see MECHANISMS)
ENCRYPTION: dict[str, type[Mechanism]] = {"luks": Luks, "fscrypt": Fscrypt, "gocryptfs": Gocryptfs}
#: every mechanism by the kind recorded in the state file
KINDS: dict[str, type[Mechanism]] = {cls.kind: cls for cls in (Disk, UserPath, Tmpfs, Ext4Loop, *ENCRYPTION.values())}


def cleanup_stale(workdir: Path) -> list[str]:
    """Undo mounts, loop devices, dm-crypt mappings and key files a killed run left under workdir/storage."""
    root = Path(workdir) / "storage"
    if not root.exists():
        return []
    removed = []
    for entry in read_entries(_state_path(root))[0]:
        cls = KINDS.get(entry.get("kind"))
        if cls is not None:
            removed += cls.clean_stale(entry)
    for point in _mount_points_under(root):
        _unmount(point)
        removed.append(f"unmounted {point}")
    for image in root.glob("*/image.*"):
        _detach_loops(image)
    if shutil.which("losetup"):
        # loop devices whose backing file was already deleted still name it in losetup -a
        listing = _run(["losetup", "-a"], check=False).stdout
        prefix = str(root).rstrip("/") + "/"
        for line in listing.splitlines():
            device, _, rest = line.partition(":")
            if device.startswith("/dev/loop") and f"({prefix}" in rest:
                _run(["losetup", "-d", device], check=False)
                removed.append(f"detached {device}")
    for key in root.glob("*/key*"):
        key.unlink(missing_ok=True)
        removed.append(f"removed key file {key}")
    for child in root.iterdir():
        if child.is_dir() and not _mount_points_under(child):
            shutil.rmtree(child, ignore_errors=True)
            removed.append(f"removed {child}")
    Ledger(_state_path(root)).save()
    return removed


class StorageAxis(VariantAxis):
    axis = "storage"
    Options = StorageOptions
    default_value = "disk"
    VALUES = VALUES

    def validate(self, value: str) -> None:
        if value not in VALUES:
            raise ValueError(f"unknown storage variant {value!r}; expected one of: {', '.join(VALUES)}")

    def skip_reason(self, value: str, options: AxisOptions) -> str | None:
        if value in options.paths:
            path = Path(options.paths[value])
            return None if path.is_dir() else f"--storage-path {value}={path}: no such directory"
        if value == "encrypted":
            mechanism, passed_over = choose_mechanism()
            return None if mechanism else "no encryption mechanism is available: " + "; ".join(passed_over)
        if value.startswith("encrypted:"):
            return mechanism_reason(value.split(":", 1)[1])
        return {"disk": Disk, "tmpfs": Tmpfs, LOOP_CONTROL: Ext4Loop}[value].unavailable()

    def mechanism_class(self, value: str, options: StorageOptions) -> type[Mechanism]:
        """The class that provides ``value`` here; a CCBenchError when none can."""
        if value in options.paths:
            return UserPath
        if value in ("disk", "tmpfs", LOOP_CONTROL):
            return {"disk": Disk, "tmpfs": Tmpfs, LOOP_CONTROL: Ext4Loop}[value]
        mechanism = value.split(":", 1)[1] if ":" in value else choose_mechanism()[0]
        reason = self.skip_reason(value, options)
        if mechanism is None or reason:
            # never start a mechanism the machine cannot finish (e.g. cryptsetup open without dm-crypt)
            raise CCBenchError(f"storage={value}: {reason or 'no encryption mechanism'}")
        return ENCRYPTION[mechanism]

    def setup(self, value: str, workdir: Path, options: AxisOptions) -> PreparedVariant:
        root = Path(workdir) / "storage"
        if not _state_path(root).exists():
            root.mkdir(parents=True, exist_ok=True)
            Ledger(_state_path(root)).save()  # the storage root and its state file come first
        cls = self.mechanism_class(value, options)
        directory = root / f"{value.replace(':', '-')}-{uuid.uuid4().hex[:8]}"
        directory.mkdir()
        mechanism = cls(value, directory, options)
        prepared = PreparedVariant(axis=self.axis, value=value, handle=mechanism)
        try:
            prepared.path, prepared.info = mechanism.set_up()
            prepared.serving = mechanism.serving()
        except BaseException:
            self.teardown(prepared)
            raise
        return prepared

    def teardown(self, prepared: PreparedVariant) -> None:
        mechanism: Mechanism = prepared.handle
        mechanism.tear_down()
        if not _mount_points_under(mechanism.directory):
            shutil.rmtree(mechanism.directory, ignore_errors=True)
            _forget(mechanism.root, str(mechanism.directory))
