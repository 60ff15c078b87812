"""Writing a bundle: the journal, appended and fsynced as measured, and the manifest beside it.

Nothing here is ever rewritten in place except manifest.json, which is replaced atomically
(write to a temporary file, fsync, rename), so a SIGKILL at any moment leaves a readable bundle. A
resumed run reopens the bundle (``BundleWriter.reopen``): a last line a kill left half written is
cut away first, so that the next append starts a line of its own.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ccbench.basics.errors import CCBenchError
from ccbench.basics.fsutil import make_new_dir, write_json_atomic
from ccbench.basics.version import BUNDLE_FORMAT_VERSION, __version__
from ccbench.bundle.layout import CHUNK, EXECUTIONS, MANIFEST, RAW, SAMPLES, SAMPLES_PARQUET
from ccbench.bundle.reader import read_bundle

if TYPE_CHECKING:  # writing needs Samples; reading bundles does not import pydantic
    from ccbench.model import Sample


def bundle_dir_name(hostname: str | None = None, when: datetime | None = None) -> str:
    hostname = hostname or socket.gethostname() or "host"
    when = when or datetime.now(UTC)
    safe_host = "".join(c if c.isalnum() or c in "-_." else "_" for c in hostname)
    return f"{safe_host}-{when.strftime('%Y%m%dT%H%M%SZ')}"


def unused_path(parent: Path, name: str) -> Path:
    """``parent/name``, or ``name-2``, ``name-3``... where that is taken: a bundle never lands on another."""
    path, suffix = Path(parent) / name, 1
    while path.exists():
        suffix += 1
        path = Path(parent) / f"{name}-{suffix}"
    return path


def cut_torn_line(file: Path) -> int:
    """Cut away a last line a kill left without its newline (half a record), so that the file ends
    where its last whole record does and the next append starts a line of its own; the cut is
    fsynced. Returns the bytes cut. Completing the line with a newline instead would leave a corrupt
    record in the middle of the journal once more lines follow it."""
    if not file.exists():
        return 0
    with open(file, "rb+") as handle:
        size = handle.seek(0, os.SEEK_END)
        end = size
        while end > 0:
            start = max(0, end - CHUNK * 16)
            handle.seek(start)
            block = handle.read(end - start)
            newline = block.rfind(b"\n")
            if newline >= 0:
                end = start + newline + 1
                break
            end = start
        if end == size:
            return 0
        handle.truncate(end)
        handle.flush()
        os.fsync(handle.fileno())
    return size - end


class BundleWriter:
    """Creates a bundle and journals into it. Every append is flushed and fsynced."""

    def __init__(self, path: Path, manifest: dict[str, Any]):
        self.path = path
        self.raw = path / RAW
        self.manifest = manifest
        self._samples = None
        self._executions = None

    @classmethod
    def create(cls, out_dir: Path, manifest: dict[str, Any], name: str | None = None) -> BundleWriter:
        """A new bundle under out_dir, named ``<host>-<UTC time>`` (or ``name``), never over another."""
        out_dir = Path(out_dir)
        try:
            out_dir.mkdir(parents=True, exist_ok=True)
            path = make_new_dir(out_dir, name or bundle_dir_name())
            (path / RAW).mkdir()
        except OSError as exc:
            raise CCBenchError(
                f"cannot create the result bundle under {out_dir}: {exc.strerror}; "
                "choose a writable directory with --out"
            ) from None
        manifest = {
            "format_version": BUNDLE_FORMAT_VERSION,
            "tool": {"name": "ccbench", "version": __version__},
            **manifest,
        }
        writer = cls(path, manifest)
        writer.write_manifest()
        writer._open()
        return writer

    @classmethod
    def reopen(cls, path: Path) -> BundleWriter:
        """Open an existing bundle to append to it (resume)."""
        bundle = read_bundle(path, samples=False)
        manifest = bundle.manifest
        if manifest.get("read_from_format_version") == 1:
            # stays a format-1 bundle on disk: the reader upgrades its old and new lines alike
            manifest["format_version"] = manifest.pop("read_from_format_version")
        writer = cls(Path(path), manifest)
        # the Parquet copy of the journal is written again when the resumed run ends; until then an
        # older one would no longer hold every sample
        (Path(path) / SAMPLES_PARQUET).unlink(missing_ok=True)
        for name in (SAMPLES, EXECUTIONS):
            cut_torn_line(Path(path) / name)
        writer._open()
        return writer

    def _open(self) -> None:
        self._samples = open(self.path / SAMPLES, "a", encoding="utf-8")
        self._executions = open(self.path / EXECUTIONS, "a", encoding="utf-8")

    def write_manifest(self) -> None:
        write_json_atomic(self.path / MANIFEST, self.manifest)

    @staticmethod
    def _append(handle, lines: Iterable[str]) -> None:
        for line in lines:
            handle.write(line + "\n")
        handle.flush()
        os.fsync(handle.fileno())

    def append_samples(self, samples: Iterable[Sample]) -> None:
        self._append(self._samples, (s.model_dump_json() for s in samples))

    def append_execution(self, record: dict[str, Any]) -> None:
        self._append(self._executions, [json.dumps(record, default=str)])

    def close(self) -> None:
        for handle in (self._samples, self._executions):
            if handle is not None and not handle.closed:
                handle.close()


def finish_samples(bundle: Path, report: Callable[[str], None]) -> None:
    """When a run ends, before its digest list: samples.parquet from the journal (bundle.columnar),
    where pyarrow is installed. A fleet host's wheelhouse has none: the journal stays the record (its
    digest is in the list) and the controller converts it when it gathers the bundle."""
    try:
        from ccbench.bundle.columnar import finish_run_samples  # pyarrow: only when a run ends
    except ImportError:
        report("samples.parquet not written (no pyarrow here): samples.jsonl holds every sample")
        return
    finish_run_samples(bundle, report)
