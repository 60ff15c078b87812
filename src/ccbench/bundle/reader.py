"""Reading a bundle (its manifest, executions and samples, each line checked) and finding bundles
under a directory.

Older format versions are upgraded as they are read (FORMAT_HISTORY says what changed), so a
reader always sees the current shape; the files on disk are left as they are.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from ccbench.basics.errors import BundleError
from ccbench.basics.version import BUNDLE_FORMAT_VERSION
from ccbench.bundle.layout import (
    CHUNK,
    EXECUTIONS,
    FINISHED_STATUSES,
    FORMAT_HISTORY,
    MANIFEST,
    RAW,
    SAMPLE_FIELDS,
    SAMPLES,
)


@dataclass
class Bundle:
    path: Path
    manifest: dict[str, Any]
    #: the sample records; None when the bundle was read with samples=False (see sample_chunks)
    samples: list[dict[str, Any]] | None = field(default_factory=list)
    executions: list[dict[str, Any]] = field(default_factory=list)

    @property
    def probe(self) -> dict[str, Any]:
        return self.manifest.get("environment") or {}

    def sample_chunks(self, size: int = CHUNK) -> Iterator[list[dict[str, Any]]]:
        """The sample records in lists of up to ``size``: the ones in memory, or read from the file
        a chunk at a time (checked as read_bundle checks them), so that a consumer that keeps only
        columns never holds every record at once."""
        if self.samples is not None:
            yield self.samples
            return
        chunks = _iter_jsonl(self.path / SAMPLES, SAMPLE_FIELDS, size)
        if self.format_version == 1:
            chunks = _upgrade_v1_chunks(chunks, self.executions)
        yield from chunks

    @property
    def format_version(self) -> int:
        """The version the bundle was written in (the records read are always the current shape)."""
        return self.manifest.get("read_from_format_version", self.manifest.get("format_version"))


def _read_jsonl(file: Path, required: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = []
    for chunk in _iter_jsonl(file, required, None):
        records.extend(chunk)
    return records


def _iter_jsonl(file: Path, required: tuple[str, ...] = (), size: int | None = CHUNK) -> Iterator[list[dict[str, Any]]]:
    """The JSON objects of a JSON-lines file, ``size`` lines at a time (None: all at once).

    A corrupt line is a BundleError naming the file and line; a cut-off last line (no newline at
    the end and not a whole record: a run killed while writing it, or a copy cut short) is skipped
    with a warning (cut_last_line's words).
    """
    if not file.exists():
        return
    data = file.read_bytes()
    lines = data.split(b"\n")
    file_bytes = len(data)
    del data
    ends_with_newline = not lines[-1]
    if ends_with_newline:
        lines.pop()
    total = len(lines)
    required_keys = set(required)
    step = size or max(total, 1)
    for start in range(0, total, step):
        part = lines[start : start + step]
        try:
            # fast path: the whole chunk at once; any problem falls through to the line-by-line check
            records = orjson.loads(b"[" + b",".join(line for line in part if line.strip()) + b"]")
            if all(isinstance(r, dict) and required_keys <= r.keys() for r in records):
                yield records
                continue
        except orjson.JSONDecodeError:
            pass
        yield _check_lines(file, part, start, total, None if ends_with_newline else file_bytes, required)


def _check_lines(
    file: Path,
    part: list[bytes],
    start: int,
    total: int,
    cut: int | None,
    required: tuple[str, ...],
) -> list[dict[str, Any]]:
    """The records of ``part`` (lines ``start`` + 1 on of ``total``), each checked; ``cut``: the file's size
    when it does not end with a newline (its last line may be cut off there)."""
    records = []
    for number, raw in enumerate(part, start=start + 1):
        if not raw.strip():
            continue
        is_last = number == total
        try:
            record = orjson.loads(raw)
            if not isinstance(record, dict):
                raise ValueError("not a JSON object")
            missing = [key for key in required if key not in record]
            if missing:
                raise ValueError(f"missing field(s) {', '.join(missing)}")
        except (ValueError, orjson.JSONDecodeError) as exc:
            if is_last and cut is not None:
                warnings.warn(cut_last_line(file, number, cut), stacklevel=2)
                continue
            raise BundleError(f"{file}:{number}: corrupt line ({exc}); repair or delete that line") from None
        records.append(record)
    return records


def cut_last_line(file: Path | str, number: int, size: int) -> str:
    """The warning for a journal whose last line is cut off: what is known (where it is cut, that it
    is skipped), and the two ways that happens; whether the file is the one the run wrote is its
    digest's to say (ccbench verify, and every command that reads a bundle checks it first)."""
    return (
        f"{file}: the last line (line {number}) is cut off at byte {size:,}, the file's end "
        "(a run killed while writing it, or a copy cut short): it is skipped"
    )


def read_bundle(path: str | Path, samples: bool = True) -> Bundle:
    """The bundle at ``path``; with samples=False its samples are left on disk for
    Bundle.sample_chunks (the analysis reads them that way, a chunk at a time)."""
    path = Path(path)
    if not path.exists():
        raise BundleError(f"{path}: no such bundle; pass a directory written by 'ccbench run'")
    if not path.is_dir():
        raise BundleError(f"{path}: not a bundle directory; pass a directory written by 'ccbench run'")
    manifest_file = path / MANIFEST
    if not manifest_file.exists():
        raise BundleError(f"{manifest_file}: missing manifest; is {path} a ccbench bundle?")
    try:
        manifest = json.loads(manifest_file.read_text(encoding="utf-8"))
    except (ValueError, OSError) as exc:
        raise BundleError(f"{manifest_file}: unreadable manifest ({exc})") from None
    if not isinstance(manifest, dict):
        raise BundleError(f"{manifest_file}: manifest is not a JSON object")
    version = manifest.get("format_version")
    if version not in FORMAT_HISTORY:
        raise BundleError(
            f"{manifest_file}: unknown bundle format version {version!r} "
            f"(this ccbench reads versions {', '.join(map(str, FORMAT_HISTORY))}); use a matching ccbench release"
        )
    executions = _read_jsonl(path / EXECUTIONS)
    records = _read_jsonl(path / SAMPLES, SAMPLE_FIELDS) if samples else None
    if version == 1:
        # upgraded in memory: the reader sees format 2, the manifest says what was on disk
        manifest["read_from_format_version"] = 1
        manifest["format_version"] = BUNDLE_FORMAT_VERSION
        if records is not None:
            records = next(_upgrade_v1_chunks(iter([records]), executions), [])
    return Bundle(path=path, manifest=manifest, samples=records, executions=executions)


def _same_execution(record: dict[str, Any], sample: dict[str, Any]) -> bool:
    """Whether a format-1 sample can belong to this execution record. The record's variant holds the
    plan's values (``encrypted:fscrypt``), the sample's the variant info (``encrypted`` with its
    mechanism), so a value matches its own name or the part before the colon."""
    if (
        record.get("workload") != sample.get("workload")
        or record.get("repetition") != sample.get("repetition")
        or bool(record.get("warmup")) != bool(sample.get("warmup"))
    ):
        return False
    variant = sample.get("variant") or {}
    for axis, value in (record.get("variant") or {}).items():
        if variant.get(axis) not in (value, str(value).split(":", 1)[0]):
            return False
    return True


def _upgrade_v1_chunks(
    chunks: Iterator[list[dict[str, Any]]], executions: list[dict[str, Any]]
) -> Iterator[list[dict[str, Any]]]:
    """Format 1 -> 2: give each sample the key and raw directory of the execution that measured it.

    Format 1 wrote each execution's samples, then its record (with its sample count), so walking
    both files in order pairs them. Samples a killed execution left without a record are given the
    key of the next record that matches them (a resumed run repeats that execution under the same
    key and raw directory); a sample that matches no record keeps execution and raw null.
    """
    pending = [r for r in executions if r.get("samples") and r.get("status") == "ok" and "key" in r]
    position, left, current = 0, 0, None
    for chunk in chunks:
        for sample in chunk:
            sample.setdefault("contended", False)
            if left and current is not None and _same_execution(current, sample):
                left -= 1
            elif position < len(pending) and _same_execution(pending[position], sample):
                current, left = pending[position], pending[position]["samples"] - 1
                position += 1
            elif current is None or not _same_execution(current, sample):
                sample.setdefault("execution", None)
                sample.setdefault("raw", None)
                continue
            sample["execution"] = current["key"]
            raw = current.get("raw")
            sample["raw"] = f"{RAW}/{raw}" if raw else None
        yield chunk


def find_bundles(paths: Iterable[str | Path], *, finished_only: bool = False) -> list[Path]:
    """Expand each path: a bundle directory itself, or a directory holding bundles. A directory is
    searched at any depth, but never inside a dot-directory (an import or export still being staged,
    `.importing`, `.staging`) nor inside a bundle. With ``finished_only``, a named bundle whose run
    has not ended is a one-line error and one found under a directory is left out."""
    found: list[Path] = []
    for item in paths:
        p = Path(item)
        if not p.exists():
            raise BundleError(f"{p}: no such file or directory")
        if (p / MANIFEST).exists():
            if finished_only and (status := _manifest_status(p)) not in FINISHED_STATUSES:
                raise BundleError(
                    f"{p}: its run has not ended (status {status!r}): finish it (ccbench run --resume) "
                    "or give only finished bundles"
                )
            found.append(p)
            continue
        # a directory of bundles, at any depth (e.g. results/<machine>/<bundle>)
        children = _bundles_under(p) if p.is_dir() else []
        if not children:
            raise BundleError(f"{p}: neither a bundle nor a directory of bundles (no {MANIFEST} found)")
        found.extend(c for c in children if not finished_only or _manifest_status(c) in FINISHED_STATUSES)
    return found


def _bundles_under(directory: Path) -> list[Path]:
    found = []
    for root, dirs, files in os.walk(directory):
        if MANIFEST in files and root != str(directory):
            found.append(Path(root))
            dirs.clear()  # a bundle's raw/ holds no bundles
            continue
        dirs[:] = [d for d in dirs if not d.startswith(".")]
    return sorted(found)


def _manifest_status(bundle: Path) -> Any:
    """The manifest's status; None (read as finished) where the manifest cannot be read: a changed
    or damaged manifest says nothing of whether the run ended, and the reader after (the digest
    check, exit 3, or the manifest's own error) says what is wrong with it."""
    try:
        document = json.loads((bundle / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return document.get("status") if isinstance(document, dict) else None


def bundle_holding(path: Path) -> Path | None:
    """The bundle directory that ``path`` is (or lies inside), if any: where no output may go."""
    for candidate in (Path(path).resolve(), *Path(path).resolve().parents):
        if (candidate / MANIFEST).is_file():
            return candidate
    return None
