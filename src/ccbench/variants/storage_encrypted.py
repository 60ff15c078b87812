"""The encrypted storage variants: ext4 + fscrypt on a loop file (``Fscrypt``), gocryptfs over FUSE
(``Gocryptfs``), LUKS2 (dm-crypt) on a loop file (``Luks``), and what each reads back of the
cipher it got (gocryptfs.conf, the LUKS header, the live dm-crypt table)."""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
from pathlib import Path
from typing import Any

from ccbench.basics.errors import CCBenchError
from ccbench.variants.storage_base import (
    Mechanism,
    _key_file,
    _mount_points_under,
    _run,
    _unmount,
    cipher_driver_info,
    fscrypt_supported,
    is_root,
    kernel_has_device_mapper,
    userspace_aes_info,
)
from ccbench.variants.storage_plain import Ext4Loop, LoopImage


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
