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
from pathlib import Path
from typing import Any

from pydantic import Field

from ccbench.errors import CCBenchError
from ccbench.variants.base import AxisOptions, PreparedVariant, VariantAxis

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


def _size_bytes(size: str) -> int:
    number, unit = re.fullmatch(r"(\d+)([KkMmGg]?)", size).groups()
    return int(number) * {"": 1, "k": 2**10, "m": 2**20, "g": 2**30}[unit.lower()]


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
    if mechanism == "luks":
        if not is_root():
            return "LUKS needs root (loop device, dm-crypt)"
        if not kernel_has_device_mapper():
            return "device-mapper is not available in this kernel (not in /proc/misc), so dm-crypt/LUKS cannot open"
        if shutil.which("cryptsetup") is None:
            return "cryptsetup is not installed (bash scripts/setup.sh --with storage)"
        return None
    if mechanism == "fscrypt":
        if not is_root():
            return "fscrypt on a loop file needs root (mkfs, mount)"
        if not fscrypt_supported():
            return "this kernel's ext4 has no encryption support (no /sys/fs/ext4/features/encryption) or mkfs.ext4 is missing"
        return None
    if mechanism == "gocryptfs":
        if shutil.which("gocryptfs") is None:
            return "gocryptfs is not installed (bash scripts/setup.sh --with storage)"
        if not os.path.exists("/dev/fuse"):
            return "FUSE is not available (/dev/fuse missing)"
        if not os.access("/dev/fuse", os.R_OK | os.W_OK):
            return "this user cannot open /dev/fuse (run as root, or get read-write access to /dev/fuse)"
        return None
    return f"unknown mechanism {mechanism!r}"


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
    return {"storage_cipher": segment["encryption"], "key_bits": int(keyslot["key_size"]) * 8,
            "luks_sector_size": int(segment["sector_size"])}


# --- the state file: what is mounted or attached, recorded before it happens ----------------------

def _state_path(root: Path) -> Path:
    return root / STATE_FILE


def _load_state(root: Path) -> list[dict[str, Any]]:
    try:
        return json.loads(_state_path(root).read_text())
    except (OSError, ValueError):
        return []


def _save_state(root: Path, entries: list[dict[str, Any]]) -> None:
    root.mkdir(parents=True, exist_ok=True)
    tmp = _state_path(root).with_suffix(".tmp")
    tmp.write_text(json.dumps(entries, indent=1))
    os.replace(tmp, _state_path(root))


def _record(root: Path, entry: dict[str, Any]) -> None:
    entries = _load_state(root)
    entries.append(entry)
    _save_state(root, entries)


def _forget(root: Path, directory: str) -> None:
    _save_state(root, [e for e in _load_state(root) if e.get("directory") != directory])


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
    if shutil.which("fusermount3") or shutil.which("fusermount"):
        fuse = shutil.which("fusermount3") or shutil.which("fusermount")
        if _run([fuse, "-u", point], check=False).returncode == 0:
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


def cleanup_stale(workdir: Path) -> list[str]:
    """Undo mounts, loop devices, dm-crypt mappings and key files a killed run left under workdir/storage."""
    root = Path(workdir) / "storage"
    if not root.exists():
        return []
    removed = []
    for entry in _load_state(root):
        name = entry.get("dm_name")
        if name and shutil.which("cryptsetup") and kernel_has_device_mapper():
            for point in _mount_points_under(Path(entry["directory"])):
                _unmount(point)
                removed.append(f"unmounted {point}")
            if _run(["cryptsetup", "close", name], check=False).returncode == 0:
                removed.append(f"closed dm-crypt mapping {name}")
    for entry in _load_state(root):
        # the one directory ccbench made inside a --storage-path directory, never anything else there
        user_directory = Path(entry.get("user_directory") or "/nonexistent")
        if re.fullmatch(r"ccbench-[0-9a-f]{8}", user_directory.name) and user_directory.is_dir():
            shutil.rmtree(user_directory, ignore_errors=True)
            removed.append(f"removed {user_directory}")
    for point in _mount_points_under(root):
        _unmount(point)
        removed.append(f"unmounted {point}")
    for image in root.glob("*/image.*"):
        _detach_loops(image)
    # loop devices whose backing file under the work directory is already gone
    if shutil.which("losetup"):
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
    _save_state(root, [])
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
        if value == "disk":
            return None
        if value == "tmpfs":
            return None if is_root() else "mounting a tmpfs needs root"
        if value == LOOP_CONTROL:
            if not is_root():
                return "ext4 on a loop file needs root (mkfs, losetup, mount)"
            missing = [tool for tool in ("mkfs.ext4", "losetup") if shutil.which(tool) is None]
            return f"{', '.join(missing)} not installed (bash scripts/setup.sh --with storage)" if missing else None
        if value == "encrypted":
            mechanism, passed_over = choose_mechanism()
            return None if mechanism else "no encryption mechanism is available: " + "; ".join(passed_over)
        return mechanism_reason(value.split(":", 1)[1])

    def setup(self, value: str, workdir: Path, options: AxisOptions) -> PreparedVariant:
        root = Path(workdir) / "storage"
        root.mkdir(parents=True, exist_ok=True)
        directory = root / f"{value.replace(':', '-')}-{uuid.uuid4().hex[:8]}"
        directory.mkdir()
        prepared = PreparedVariant(axis=self.axis, value=value, state={"directory": str(directory), "root": str(root)})
        try:
            if value in options.paths:
                return self._user_path(prepared, Path(options.paths[value]))
            if value == "disk":
                return self._disk(prepared, directory)
            if value == "tmpfs":
                return self._tmpfs(prepared, directory, options)
            if value == LOOP_CONTROL:
                return self._ext4_loop(prepared, directory, options)
            mechanism = value.split(":", 1)[1] if ":" in value else choose_mechanism()[0]
            reason = self.skip_reason(value, options)
            if mechanism is None or reason:
                # never start a mechanism the machine cannot finish (e.g. cryptsetup open without dm-crypt)
                raise CCBenchError(f"storage={value}: {reason or 'no encryption mechanism'}")
            setup = {"luks": self._luks, "fscrypt": self._fscrypt, "gocryptfs": self._gocryptfs}[mechanism]
            return setup(prepared, directory, options)
        except BaseException:
            self.teardown(prepared)
            raise

    # --- the variants ----------------------------------------------------------------------------
    def _describe(self, path: Path) -> dict[str, Any]:
        try:
            from ccbench.probe import describe_path

            return describe_path(path)
        except Exception as exc:  # the description is a nicety; never fail a run over it
            return {"protection": "unknown", "reason": str(exc)}

    def _disk(self, prepared: PreparedVariant, directory: Path) -> PreparedVariant:
        prepared.path = directory / "data"
        prepared.path.mkdir()
        protection = self._describe(prepared.path)
        prepared.info = {"storage": "disk", "storage_protection": protection.get("protection"),
                         "storage_fstype": protection.get("fstype")}
        return prepared

    def _user_path(self, prepared: PreparedVariant, base: Path) -> PreparedVariant:
        prepared.path = base / f"ccbench-{uuid.uuid4().hex[:8]}"
        # recorded first, so that a killed run's directory in the user's path is removed by cleanup_stale
        _record(Path(prepared.state["root"]), {"directory": prepared.state["directory"], "kind": "user-path",
                                               "user_directory": str(prepared.path)})
        prepared.path.mkdir()
        prepared.state["user_directory"] = str(prepared.path)
        protection = self._describe(prepared.path)
        prepared.info = {"storage": prepared.value, "storage_mechanism": "user-path", "storage_path": str(base),
                         "storage_protection": protection.get("protection"), "storage_fstype": protection.get("fstype")}
        if protection.get("cipher"):
            prepared.info["storage_cipher"] = protection["cipher"]
        return prepared

    def _tmpfs(self, prepared: PreparedVariant, directory: Path, options: StorageOptions) -> PreparedVariant:
        mount_point = directory / "mnt"
        mount_point.mkdir()
        _record(Path(prepared.state["root"]), {"directory": str(directory), "kind": "tmpfs"})
        _run(["mount", "-t", "tmpfs", "-o", f"size={options.tmpfs_size},mode=0700", "ccbench-tmpfs", str(mount_point)])
        prepared.state["mounts"] = [str(mount_point)]
        prepared.path = mount_point
        prepared.info = {"storage": "tmpfs", "storage_mechanism": "tmpfs", "tmpfs_size": options.tmpfs_size}
        return prepared

    def _image(self, directory: Path, options: StorageOptions) -> Path:
        image = directory / "image.img"
        with open(image, "wb") as handle:
            handle.truncate(_size_bytes(options.image_size))
        return image

    def _attach_loop(self, prepared: PreparedVariant, image: Path) -> str:
        """Attach ``image`` (a file ccbench just created) to a free loop device with direct I/O."""
        device = _run(["losetup", "--find", "--show", "--direct-io=on", str(image)]).stdout.strip()
        if not re.fullmatch(r"/dev/loop\d+", device):
            _detach_loops(image)
            raise CCBenchError(f"losetup attached {image} to an unexpected device {device!r}")
        prepared.state["loop_device"] = device
        try:
            direct = Path(f"/sys/block/{Path(device).name}/loop/dio").read_text().strip() == "1"
        except OSError:
            direct = None
        prepared.state["loop_direct_io"] = direct
        return device

    def _ext4_on_loop(self, prepared: PreparedVariant, directory: Path, options: StorageOptions,
                      kind: str, mkfs_options: list[str]) -> Path:
        """A fresh ext4 on a loop file under ``directory``, mounted at ``directory/mnt``."""
        image = self._image(directory, options)
        _run(["mkfs.ext4", "-q", "-F", *mkfs_options, "-L", "ccbench", str(image)])
        mount_point = directory / "mnt"
        mount_point.mkdir()
        _record(Path(prepared.state["root"]), {"directory": str(directory), "kind": kind, "image": str(image)})
        prepared.state["image"] = str(image)
        device = self._attach_loop(prepared, image)
        _run(["mount", device, str(mount_point)])
        prepared.state["mounts"] = [str(mount_point)]
        return mount_point

    def _ext4_loop(self, prepared: PreparedVariant, directory: Path, options: StorageOptions) -> PreparedVariant:
        mount_point = self._ext4_on_loop(prepared, directory, options, "ext4-loop", [])
        prepared.path = mount_point / "data"
        prepared.path.mkdir()
        prepared.info = {"storage": LOOP_CONTROL, "storage_mechanism": "none", "filesystem": "ext4 on a loop file",
                         "loop_direct_io": prepared.state["loop_direct_io"], "image_size": options.image_size}
        return prepared

    def _key_file(self, directory: Path, raw: bytes) -> Path:
        key = directory / "key"
        fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(raw)
        return key

    def _fscrypt(self, prepared: PreparedVariant, directory: Path, options: StorageOptions) -> PreparedVariant:
        from ccbench.variants import fscrypt

        mount_point = self._ext4_on_loop(prepared, directory, options, "fscrypt", ["-O", "encrypt"])
        key = secrets.token_bytes(fscrypt.KEY_BYTES)  # kept in memory only, handed to the kernel
        identifier = fscrypt.add_key(str(mount_point), key)
        del key
        prepared.state["fscrypt_identifier"] = identifier.hex()
        data = mount_point / "data"
        data.mkdir()
        fscrypt.set_policy(str(data), identifier)
        prepared.path = data
        prepared.info = {"storage": "encrypted", "storage_mechanism": "fscrypt", "storage_cipher": fscrypt.CIPHER,
                         "filenames_cipher": "AES-256-CTS", "fscrypt_policy": 2, "filesystem": "ext4 on a loop file",
                         "loop_direct_io": prepared.state["loop_direct_io"], "image_size": options.image_size}
        return prepared

    def _gocryptfs(self, prepared: PreparedVariant, directory: Path, options: StorageOptions) -> PreparedVariant:
        cipher_dir = directory / "cipher"
        mount_point = directory / "mnt"
        cipher_dir.mkdir()
        mount_point.mkdir()
        key = self._key_file(directory, secrets.token_hex(32).encode())
        try:
            _run(["gocryptfs", "-init", "-q", "-passfile", str(key), str(cipher_dir)])
            _record(Path(prepared.state["root"]), {"directory": str(directory), "kind": "gocryptfs"})
            _run(["gocryptfs", "-q", "-passfile", str(key), str(cipher_dir), str(mount_point)])
        finally:
            key.unlink(missing_ok=True)
        prepared.state["mounts"] = [str(mount_point)]
        prepared.path = mount_point
        prepared.info = {"storage": "encrypted", "storage_mechanism": "gocryptfs",
                         "storage_cipher": gocryptfs_cipher(cipher_dir / "gocryptfs.conf"), "filesystem": "FUSE"}
        version = _run(["gocryptfs", "-version"], check=False).stdout.split(";")[0].strip()
        if version:
            prepared.info["gocryptfs_version"] = version
        return prepared

    def luks_commands(self, device: str, key: Path, name: str, mount_point: Path) -> list[list[str]]:
        """The commands the LUKS variant runs on the loop device ccbench attached, in order
        (unit-tested; device-mapper is absent in CI). The key is 512 random bits, so a fast PBKDF
        loses nothing and keeps setup short."""
        if not re.fullmatch(r"/dev/loop\d+", device):
            raise CCBenchError(f"refusing to format {device}: ccbench only formats loop devices it attached")
        mapper = f"/dev/mapper/{name}"
        return [
            ["cryptsetup", "luksFormat", "--batch-mode", "--type", "luks2", "--cipher", "aes-xts-plain64",
             "--key-size", "512", "--pbkdf", "pbkdf2", "--pbkdf-force-iterations", "1000", "--key-file", str(key), device],
            ["cryptsetup", "open", "--type", "luks2", "--key-file", str(key), device, name],
            ["mkfs.ext4", "-q", "-F", mapper],
            ["mount", mapper, str(mount_point)],
        ]

    def _luks(self, prepared: PreparedVariant, directory: Path, options: StorageOptions) -> PreparedVariant:
        image = self._image(directory, options)
        mount_point = directory / "mnt"
        mount_point.mkdir()
        name = f"ccbench-{directory.name}"
        key = self._key_file(directory, secrets.token_bytes(64))
        _record(Path(prepared.state["root"]), {"directory": str(directory), "kind": "luks", "image": str(image), "dm_name": name})
        prepared.state.update({"image": str(image), "dm_name": name, "mounts": [str(mount_point)]})
        header: dict[str, Any] = {}
        try:
            device = self._attach_loop(prepared, image)
            format_command, *opening = self.luks_commands(device, key, name, mount_point)
            _run(format_command)
            # what was written, read back from the header rather than assumed from the command line
            header = luks_header(device)
            for argv in opening:
                _run(argv)
        finally:
            key.unlink(missing_ok=True)
        data = mount_point / "data"
        data.mkdir()
        prepared.path = data
        prepared.info = {"storage": "encrypted", "storage_mechanism": "luks2", "storage_cipher": "aes-xts-plain64",
                         "key_bits": 512, **header, "filesystem": "ext4 on dm-crypt on a loop file",
                         "loop_direct_io": prepared.state["loop_direct_io"], "image_size": options.image_size}
        return prepared

    def teardown(self, prepared: PreparedVariant) -> None:
        state = prepared.state
        if state.get("fscrypt_identifier") and state.get("mounts"):
            try:
                from ccbench.variants import fscrypt

                fscrypt.remove_key(state["mounts"][0], bytes.fromhex(state["fscrypt_identifier"]))
            except OSError:
                pass  # unmounting drops the filesystem's keys anyway
        for point in state.get("mounts", []):
            _unmount(point)
        if state.get("dm_name") and kernel_has_device_mapper():  # cryptsetup would create /dev/mapper/control
            _run(["cryptsetup", "close", state["dm_name"]], check=False)
        if state.get("image"):
            _detach_loops(Path(state["image"]))
        if state.get("user_directory"):
            shutil.rmtree(state["user_directory"], ignore_errors=True)
        directory = state.get("directory")
        if directory:
            still_mounted = _mount_points_under(Path(directory))
            if not still_mounted:
                shutil.rmtree(directory, ignore_errors=True)
                _forget(Path(state["root"]), directory)
