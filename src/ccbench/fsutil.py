"""Writing files so that a crash at any moment leaves either the old or the new content.

The one atomic writer of the project: write a temporary file beside the target, flush and fsync it,
rename it over the target, fsync the directory. Every state file (bundle manifests, the records of
what ccbench made, fleet records) goes through here, so a SIGKILL or power loss never leaves half a
JSON document that a later cleanup or resume would misread.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


def fsync_dir(path: Path) -> None:
    """Make a rename or a new file in ``path`` durable (best effort: some filesystems refuse)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_bytes_atomic(path: Path, data: bytes) -> None:
    path = Path(path)
    temporary = path.with_name(path.name + ".tmp")
    with open(temporary, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)
    fsync_dir(path.parent)


def write_text_atomic(path: Path, text: str) -> None:
    write_bytes_atomic(path, text.encode("utf-8"))


def write_json_atomic(path: Path, document: Any, *, indent: int | None = 2) -> None:
    """``document`` as JSON (values JSON does not know are written as their str())."""
    text = json.dumps(document, indent=indent, default=str)
    write_text_atomic(path, text + "\n")


@contextmanager
def atomic_target(path: Path, *, durable: bool = True) -> Iterator[Path]:
    """A temporary path of its own beside ``path`` for a writer that wants a file name (pyarrow,
    DuckDB); when the block ends it is fsynced (``durable``), renamed over ``path`` and the
    directory fsynced; when the block raises it is removed. The name is unique, so two processes
    writing the same target at once never write into one temporary file. The file's mode follows
    the umask, like any other file the process writes (mkstemp's would be 0600)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(handle)
    temporary = Path(name)
    try:
        os.chmod(temporary, 0o666 & ~_umask())
        yield temporary
        if durable:
            with open(temporary, "rb+") as written:
                os.fsync(written.fileno())
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    if durable:
        fsync_dir(path.parent)


def _umask() -> int:
    """The process's umask, read without changing it where Linux says it (setting and restoring it
    would let another thread create a file under the wrong mask meanwhile)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask
