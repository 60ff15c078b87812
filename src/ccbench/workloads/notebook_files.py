"""The files beside a notebook, copied onto the storage variant before it is timed.

A notebook as people write it reads its data by a relative path (``pd.read_csv('data/x.csv')``),
from the folder that holds it, which is where Jupyter starts its kernel. To run it that way *and*
measure the protection layer, the folder holding the notebook (that folder only, never its parents)
is copied into the variant's directory in ``prepare`` and the kernel starts in the copy, so the
notebook's reads and writes go through the layer being measured.

The copy is bounded (``copy_limit`` bytes, ``copy_max_files`` files; a notebook lying in a home
directory must not copy gigabytes) and leaves out what is never a notebook's input: version-control
and cache folders, ccbench's own work directory and result bundles (the run's own ones included,
which may lie inside that folder), folders reached through a symbolic link. Each copied file is
fsynced and dropped from the page cache, so the copy is on the variant's storage and the first read
goes through the layer rather than the cache; the copy's time is its own figure, never in a timed
metric. What was copied is recorded (:class:`StagedFiles`) in the prepare step's raw directory and
beside the copy, where each execution reads it back for its samples' metadata.
"""

from __future__ import annotations

import os
import shutil
import stat
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ccbench.basics.fsutil import fsync_dir, write_json_atomic
from ccbench.workloads.base import WorkloadFailed

#: folders that hold no notebook input: version control, editor and interpreter caches, ccbench's own
SKIPPED_NAMES = frozenset({".git", ".hg", ".svn", ".ipynb_checkpoints", "__pycache__", ".ccbench"})
#: the record's name, in the prepare step's raw directory and beside the copy
RECORD_NAME = "staged-files.json"


@dataclass
class StagedFiles:
    """What prepare copied for one notebook onto one storage variant."""

    source: str
    destination: str
    files: list[dict[str, Any]] = field(default_factory=list)
    file_count: int = 0
    bytes: int = 0
    copy_s: float = 0.0
    skipped: list[dict[str, str]] = field(default_factory=list)
    limit_bytes: int = 0
    max_files: int = 0

    def metadata(self) -> dict[str, Any]:
        """The figures a sample carries (the file list stays in the record)."""
        return {
            "staged_from": self.source,
            "staged_files": self.file_count,
            "staged_bytes": self.bytes,
            "staged_copy_s": round(self.copy_s, 6),
        }


def staging_root(workdir: Path, workload_name: str) -> Path:
    """Where a workload's copies live inside the variant's directory (one per workload: a user's
    own storage path may be shared by several workloads of a plan)."""
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in workload_name) or "notebook"
    return Path(workdir) / "notebook-files" / safe


def working_directory(workdir: Path, workload_name: str) -> Path:
    """The kernel's working directory: the copy of the notebook's folder."""
    return staging_root(workdir, workload_name) / "files"


def read_record(workdir: Path, workload_name: str) -> StagedFiles | None:
    """The record prepare left beside the copy, or None when nothing was staged."""
    import json

    path = staging_root(workdir, workload_name) / RECORD_NAME
    try:
        return StagedFiles(**json.loads(path.read_text()))
    except (OSError, ValueError, TypeError):
        return None


def _human(count: int) -> str:
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if count >= size:
            return f"{count / size:.1f} {unit}"
    return f"{count} bytes"


def _is_within(path: Path, other: Path) -> bool:
    """Whether ``other`` is ``path`` or lies below it."""
    try:
        other.relative_to(path)
        return True
    except ValueError:
        return False


def _skip_reason(directory: Path, protected: list[Path]) -> str | None:
    if directory.name in SKIPPED_NAMES:
        return "not notebook input (version control, cache or ccbench's own folder)"
    if directory.is_symlink():
        return "a symbolic link to a folder (not followed)"
    resolved = directory.resolve()
    if any(_is_within(resolved, inner) for inner in protected):
        return "holds this run's own work directory or bundle"
    if (directory / "manifest.json").is_file() and (directory / "samples.jsonl").is_file():
        return "a ccbench result bundle"
    return None


def list_files(
    folder: Path, protected: list[Path], limit_bytes: int, max_files: int
) -> tuple[list[tuple[str, int]], list[dict[str, str]]]:
    """The files to copy under ``folder`` as (relative path, bytes), and what was left out and why.

    Stops as soon as the bounds are passed: a WorkloadFailed says by how much and what to do.
    """
    files: list[tuple[str, int]] = []
    skipped: list[dict[str, str]] = []
    total = 0
    for current, directories, names in os.walk(folder, followlinks=False):
        here = Path(current)
        kept = []
        for name in sorted(directories):
            reason = _skip_reason(here / name, protected)
            if reason:
                skipped.append({"path": str((here / name).relative_to(folder)), "why": reason})
            else:
                kept.append(name)
        directories[:] = kept
        for name in sorted(names):
            path = here / name
            relative = str(path.relative_to(folder))
            try:
                info = path.stat()  # a symbolic link to a file is copied as the file it names
            except OSError:
                skipped.append({"path": relative, "why": "unreadable or a broken link"})
                continue
            if not stat.S_ISREG(info.st_mode):
                skipped.append({"path": relative, "why": "not a regular file"})
                continue
            files.append((relative, info.st_size))
            total += info.st_size
            if total > limit_bytes or len(files) > max_files:
                raise WorkloadFailed(
                    f"the folder holding the notebook, {folder}, has more than {_human(limit_bytes)} or "
                    f"{max_files} files to copy onto the storage variant (at least {_human(total)} in "
                    f"{len(files)} files so far); put the notebook and the files it reads in a folder of their "
                    "own, or raise copy_limit / copy_max_files in the plan"
                )
    return files, skipped


def _copy_file(source: Path, destination: Path) -> None:
    """Copy one file, durable on the destination's storage and out of the page cache."""
    destination.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, destination)
    shutil.copystat(source, destination)
    fd = os.open(destination, os.O_RDONLY)
    try:
        os.fsync(fd)
        # the first read by the notebook should go through the storage layer, not the cache
        # (a no-op on tmpfs, whose pages are its storage)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def stage(
    notebook: Path,
    workdir: Path,
    workload_name: str,
    raw_dir: Path,
    *,
    limit_bytes: int,
    max_files: int,
    protected: list[Path],
) -> StagedFiles:
    """Copy the folder holding ``notebook`` to the kernel's working directory on the variant.

    ``protected`` lists paths that must not be copied into themselves (the run's work directory,
    the bundle). The record goes to ``raw_dir`` and beside the copy.
    """
    folder = notebook.parent
    root = staging_root(workdir, workload_name)
    destination = working_directory(workdir, workload_name)
    shutil.rmtree(root, ignore_errors=True)  # a copy left by a killed run is stale
    files, skipped = list_files(folder, [p.resolve() for p in [root, *protected]], limit_bytes, max_files)
    destination.mkdir(parents=True)
    started = time.perf_counter()
    for relative, _ in files:
        _copy_file(folder / relative, destination / relative)
    for directory in {(destination / relative).parent for relative, _ in files} | {destination}:
        fsync_dir(directory)
    copy_s = time.perf_counter() - started
    record = StagedFiles(
        source=str(folder),
        destination=str(destination),
        files=[{"path": relative, "bytes": size} for relative, size in files],
        file_count=len(files),
        bytes=sum(size for _, size in files),
        copy_s=copy_s,
        skipped=skipped,
        limit_bytes=limit_bytes,
        max_files=max_files,
    )
    raw_dir.mkdir(parents=True, exist_ok=True)
    write_json_atomic(raw_dir / RECORD_NAME, asdict(record))
    write_json_atomic(root / RECORD_NAME, asdict(record))
    return record


def unstage(workdir: Path, workload_name: str) -> None:
    """Remove the copy (a user's own storage path keeps nothing of ccbench's after the run)."""
    root = staging_root(workdir, workload_name)
    shutil.rmtree(root, ignore_errors=True)
    parent = root.parent
    if parent.is_dir() and not any(parent.iterdir()):
        parent.rmdir()
