"""Writing files so that a crash at any moment leaves either the old or the new content.

The one atomic writer of the project: write a temporary file beside the target, flush and fsync it,
rename it over the target, fsync the directory. Every state file (bundle manifests, the records of
what ccbench made, fleet records) goes through here, so a SIGKILL or power loss never leaves half a
JSON document that a later cleanup or resume would misread.
"""

from __future__ import annotations

import json
import os
import re
import secrets
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
    try:
        with open(temporary, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:  # a full disk, or a stop signal in the middle: no half file left beside it
        temporary.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def write_text_atomic(path: Path, text: str) -> None:
    write_bytes_atomic(path, text.encode("utf-8"))


def write_json_atomic(path: Path, document: Any, *, indent: int | None = 2) -> None:
    """``document`` as JSON (values JSON does not know are written as their str())."""
    text = json.dumps(document, indent=indent, default=str)
    write_text_atomic(path, text + "\n")


# ------------------------------------------------------------------------------- staged whole files
#: a file being written by a ccbench process: `.<target>.ccbench-<pid>-<start ms>-<random>.partial`;
#: the writer's pid and start time let a later process prove a leftover is a dead writer's own
_STAGED = re.compile(r"^\.(?P<target>.+)\.ccbench-(?P<pid>\d+)-(?P<start>\d+)-[0-9a-f]{8}\.partial$")


def staged_name(target: Path) -> Path:
    """A name beside ``target`` unique to this process and call, invisible to readers (a dot file)."""
    import psutil

    start_ms = int(psutil.Process().create_time() * 1000)
    return target.with_name(f".{target.name}.ccbench-{os.getpid()}-{start_ms}-{secrets.token_hex(4)}.partial")


@contextmanager
def staged_file(target: Path, *, replace: bool) -> Iterator[Path]:
    """Yield a temporary path to write ``target``'s whole content to; when the block ends without an
    exception the file is fsynced and becomes ``target`` by one rename (``replace``) or one hard link
    (not ``replace``: FileExistsError when ``target`` exists, also when another process made it a
    moment ago), then the directory is fsynced. The temporary file never outlives the block, and
    stale ones of dead writers of the same directory are removed first."""
    target = Path(target)
    remove_stale_staged(target.parent)
    temporary = staged_name(target)
    try:
        yield temporary
        with open(temporary, "rb+") as handle:
            os.fsync(handle.fileno())
        if replace:
            os.replace(temporary, target)
        else:
            _link_new(temporary, target)
        fsync_dir(target.parent)
    finally:
        temporary.unlink(missing_ok=True)


def _link_new(temporary: Path, target: Path) -> None:
    try:
        os.link(temporary, target)
    except FileExistsError:
        raise
    except OSError:  # a filesystem without hard links: a check and a rename (a narrow race)
        if target.exists():
            raise FileExistsError(target) from None
        os.replace(temporary, target)


def remove_stale_staged(directory: Path) -> list[Path]:
    """Remove the staged files in ``directory`` whose writer is gone (its pid no longer runs the
    process that started at the recorded time); returns them. Files of live writers and every
    file not named by ``staged_name`` are left alone."""
    from ccbench.basics.procs import same_process

    removed = []
    try:
        names = os.listdir(directory)
    except OSError:
        return removed
    for name in names:
        match = _STAGED.match(name)
        if not match or same_process(int(match["pid"]), int(match["start"]) / 1000) is not None:
            continue
        try:
            (Path(directory) / name).unlink()
            removed.append(Path(directory) / name)
        except OSError:
            pass
    return removed


@contextmanager
def atomic_target(path: Path, *, durable: bool = True) -> Iterator[Path]:
    """A temporary path of its own beside ``path`` for a writer that wants a file name (pyarrow,
    DuckDB, ``tar``, ``tarfile``); when the block ends it is fsynced (``durable``), renamed over ``path`` and the
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


def make_new_dir(parent: Path, name: str) -> Path:
    """Make ``parent/name``, or ``name-2``, ``name-3``... where that is taken, and return it. Each try
    is the mkdir itself (no look first): two processes that start in the same second with the same
    parent and name (the UTC second names runs, bundles and studies) get a directory each."""
    parent = Path(parent)
    path, suffix = parent / name, 1
    while True:
        try:
            path.mkdir()
            return path
        except FileExistsError:
            suffix += 1
            path = parent / f"{name}-{suffix}"
