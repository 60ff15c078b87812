"""The storage variants without encryption: the work directory's own disk (``Disk``), a directory in
one the user prepared (``UserPath``), a tmpfs (``Tmpfs``), and ext4 on a loop file (``Ext4Loop``:
the control, and the base of fscrypt) with its ``LoopImage``."""

from __future__ import annotations

import re
import shutil
import uuid
from pathlib import Path
from typing import Any, ClassVar

from ccbench.basics.errors import CCBenchError
from ccbench.variants.storage_base import (
    LOOP_CONTROL,
    Mechanism,
    StorageOptions,
    _describe,
    _detach_loops,
    _run,
    _unmount,
    is_root,
)
from ccbench.workloads.base import missing_tools, size_bytes


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
