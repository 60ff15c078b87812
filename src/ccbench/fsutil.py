"""Writing files so that a crash at any moment leaves either the old or the new content.

The one atomic writer of the project: write a temporary file beside the target, flush and fsync it,
rename it over the target, fsync the directory. Every state file (bundle manifests, the records of
what ccbench made, fleet records) goes through here, so a SIGKILL or power loss never leaves half a
JSON document that a later cleanup or resume would misread.
"""

from __future__ import annotations

import json
import os
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


@contextmanager
def atomic_output(path: Path) -> Iterator[Path]:
    """For a file made by a writer of its own (``tar``, ``tarfile``, a tool): yields the temporary
    path beside ``path`` (``<name>.tmp``) to write to; when the block ends without an error the
    file is fsynced, renamed over ``path`` and the directory fsynced, else it is removed. A
    leftover temporary file of an earlier, killed attempt is replaced."""
    path = Path(path)
    temporary = path.with_name(path.name + ".tmp")
    temporary.unlink(missing_ok=True)
    try:
        yield temporary
        fd = os.open(temporary, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def write_text_atomic(path: Path, text: str) -> None:
    write_bytes_atomic(path, text.encode("utf-8"))


def write_json_atomic(path: Path, document: Any, *, indent: int | None = 2) -> None:
    """``document`` as JSON (values JSON does not know are written as their str())."""
    text = json.dumps(document, indent=indent, default=str)
    write_text_atomic(path, text + "\n")
