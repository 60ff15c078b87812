"""Storage protection of a path: dm-crypt (LUKS version, cipher), fscrypt, tmpfs/ramfs, FUSE, or plain."""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import struct
import subprocess
from pathlib import Path
from typing import Any

from ccbench.probe.sources import Sources

FS_IOC_GETFLAGS = 0x80086601
FS_ENCRYPT_FL = 0x00000800


def _unescape(field: str) -> str:
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def mount_of(path: Path, sources: Sources) -> dict[str, Any] | None:
    """The mountinfo entry whose mount point is the longest prefix of ``path``."""
    text = sources.read_text("/proc/self/mountinfo")
    if text is None:
        return None
    best = None
    target = str(path)
    for line in text.splitlines():
        left, _, right = line.partition(" - ")
        fields = left.split()
        rest = right.split()
        if len(fields) < 5 or len(rest) < 2:
            continue
        mount_point = _unescape(fields[4])
        prefix = mount_point.rstrip("/") + "/"
        if target == mount_point or target.startswith(prefix) or mount_point == "/":
            if best is None or len(mount_point) >= len(best["mount_point"]):
                best = {
                    "mount_point": mount_point,
                    "device_numbers": fields[2],
                    "fstype": rest[0],
                    "source": _unescape(rest[1]),
                    "options": fields[5] if len(fields) > 5 else "",
                    "super_options": rest[2] if len(rest) > 2 else "",
                }
    return best


def _dm_chain(sys_block: Path, sources: Sources, seen: set[str] | None = None) -> list[dict[str, str]]:
    """Walk device-mapper devices and their slaves; return dm entries with their uuid and name."""
    seen = seen or set()
    found = []
    dm = sys_block / "dm"
    if dm.exists():
        uuid = (dm / "uuid").read_text().strip() if (dm / "uuid").exists() else ""
        name = (dm / "name").read_text().strip() if (dm / "name").exists() else ""
        found.append({"device": sys_block.name, "uuid": uuid, "name": name})
    slaves = sys_block / "slaves"
    if slaves.exists():
        for slave in sorted(slaves.iterdir()):
            if slave.name in seen:
                continue
            seen.add(slave.name)
            target = sources.path(f"/sys/block/{slave.name}")
            if target.exists():
                found.extend(_dm_chain(target, sources, seen))
    return found


def parse_dm_crypt_table(line: str) -> dict[str, Any] | None:
    """A ``dmsetup table`` crypt line: cipher, IV offset, sector size and the optional parameters.

    Format (Documentation/admin-guide/device-mapper/dm-crypt.rst): ``start length crypt cipher key
    iv_offset device offset [#opt_params opt_params...]``. The key field is never kept (dmsetup prints
    it as zeros or a keyring reference unless --showkeys, which ccbench never passes)."""
    parts = line.split()
    if len(parts) < 8 or parts[2] != "crypt":
        return None
    result: dict[str, Any] = {"cipher": parts[3], "iv_offset": parts[5], "sector_size": 512, "options": []}
    if len(parts) > 8 and parts[8].isdigit():
        options = parts[9:9 + int(parts[8])]
        result["options"] = options
        for option in options:
            if option.startswith("sector_size:"):
                result["sector_size"] = int(option.split(":", 1)[1])
    # the workqueue bypasses (Linux 5.9+) change dm-crypt's latency and CPU profile markedly
    result["no_read_workqueue"] = "no_read_workqueue" in result["options"]
    result["no_write_workqueue"] = "no_write_workqueue" in result["options"]
    return result


def _dm_crypt_table(name: str) -> dict[str, Any] | None:
    if not shutil.which("dmsetup"):
        return None
    try:
        done = subprocess.run(["dmsetup", "table", name], capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return parse_dm_crypt_table(done.stdout.strip().splitlines()[0]) if done.returncode == 0 and done.stdout.strip() else None


def _dm_cipher(name: str) -> str | None:
    """The cipher from ``dmsetup table``."""
    table = _dm_crypt_table(name)
    return table["cipher"] if table else None


def _is_fscrypt(path: Path) -> bool | None:
    """True when ``path`` (or its nearest existing ancestor) carries the encrypt flag."""
    probe_path = path
    while not probe_path.exists() and probe_path != probe_path.parent:
        probe_path = probe_path.parent
    try:
        fd = os.open(probe_path, os.O_RDONLY | os.O_DIRECTORY if probe_path.is_dir() else os.O_RDONLY)
    except OSError:
        return None
    try:
        buf = fcntl.ioctl(fd, FS_IOC_GETFLAGS, struct.pack("l", 0))
        return bool(struct.unpack("l", buf)[0] & FS_ENCRYPT_FL)
    except OSError:
        return None
    finally:
        os.close(fd)


def describe_path(path: str | Path, sources: Sources | None = None) -> dict[str, Any]:
    """Storage protection of ``path``.

    ``protection`` is one of dm-crypt, fscrypt, tmpfs, ramfs, fuse, plain, unknown; more keys say how.
    """
    sources = sources or Sources()
    path = Path(path)
    if sources.live:
        path = path.resolve() if path.exists() else Path(os.path.abspath(path))
    mount = mount_of(path, sources)
    if mount is None:
        return {"path": str(path), "protection": "unknown", "reason": "mountinfo unreadable"}
    result: dict[str, Any] = {
        "path": str(path),
        "mount_point": mount["mount_point"],
        "fstype": mount["fstype"],
        "source": mount["source"],
    }
    fstype = mount["fstype"]
    if fstype in ("tmpfs", "ramfs"):
        result["protection"] = fstype
        return result
    if fstype.startswith("fuse"):
        result["protection"] = "fuse"
        result["fuse_filesystem"] = fstype.split(".", 1)[1] if "." in fstype else mount["source"]
        return result
    # block device behind the mount, via its major:minor
    block = None
    major_minor = mount["device_numbers"]
    dev_link = sources.path(f"/sys/dev/block/{major_minor}")
    if dev_link.exists():
        block = sources.path(f"/sys/block/{Path(os.path.realpath(dev_link)).name}") if sources.live else dev_link
        if not block.exists():
            block = dev_link
        result["block_device"] = Path(os.path.realpath(dev_link)).name if sources.live else major_minor
        chain = _dm_chain(block, sources)
        crypt = [d for d in chain if d["uuid"].startswith("CRYPT-")]
        if crypt:
            top = crypt[0]
            result["protection"] = "dm-crypt"
            kind = top["uuid"].split("-")[1] if top["uuid"].count("-") >= 2 else "PLAIN"
            result["dm_crypt_type"] = kind  # LUKS1, LUKS2, PLAIN, ...
            result["dm_name"] = top["name"]
            if sources.live:
                table = _dm_crypt_table(top["name"])
                if table:
                    result["cipher"] = table["cipher"]
                    result["dm_crypt_sector_size"] = table["sector_size"]
                    result["dm_crypt_options"] = table["options"]
                    result["no_read_workqueue"] = table["no_read_workqueue"]
                    result["no_write_workqueue"] = table["no_write_workqueue"]
            result["inline_encryption"] = "inlinecrypt" in mount["super_options"].split(",")
            return result
    if sources.live:
        encrypted = _is_fscrypt(path)
        if encrypted:
            result["protection"] = "fscrypt"
            # with inlinecrypt, fscrypt hands the cipher to the block layer (inline encryption hardware,
            # or blk-crypto-fallback: the kernel's crypto API again); without it, fscrypt encrypts itself
            result["inline_encryption"] = "inlinecrypt" in mount["super_options"].split(",")
            return result
        if encrypted is None:
            result["note"] = "fscrypt flag unreadable"
    result["protection"] = "plain"
    return result


def probe_storage(bench_dir: Path, sources: Sources) -> dict[str, Any]:
    return describe_path(bench_dir, sources)
