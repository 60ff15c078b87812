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
own attributes (an attribute still None was never made): the plain ones in ``storage_plain``, the
encrypted ones in ``storage_encrypted``, on the common ground of ``storage_base`` (the options, the
state file, unmounting and detaching, ``Mechanism``). The axis (StorageAxis, here) gives each set-up
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

import shutil
import uuid
from pathlib import Path

from ccbench.basics.errors import CCBenchError
from ccbench.basics.ledger import Ledger, read_entries
from ccbench.variants.base import AxisOptions, PreparedVariant, VariantAxis
from ccbench.variants.storage_base import (
    LOOP_CONTROL,
    Mechanism,
    StorageOptions,
    _detach_loops,
    _forget,
    _mount_points_under,
    _run,
    _state_path,
    _unmount,
)
from ccbench.variants.storage_encrypted import Fscrypt, Gocryptfs, Luks
from ccbench.variants.storage_plain import Disk, Ext4Loop, Tmpfs, UserPath

MECHANISMS = ("luks", "fscrypt", "gocryptfs")
VALUES = ("disk", "tmpfs", LOOP_CONTROL, "encrypted", *(f"encrypted:{m}" for m in MECHANISMS))


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
