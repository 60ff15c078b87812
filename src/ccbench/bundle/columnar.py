"""samples.parquet: a bundle's samples as typed columns, written when a run ends, cached for older bundles.

``samples.jsonl`` stays the journal (appended and fsynced per execution). When a run ends, however it
ends, ``finish_run_samples`` writes the same samples to ``samples.parquet`` beside it, before the
digest list, so ``attestation.json`` covers it and ``ccbench verify`` checks it (``check_bundle``).

Layout (docs/bundle-format.md): one row per sample; the sample's scalar fields as typed columns; its
``params``, ``variant`` and ``metadata`` as JSON text (exact: the analysis and ``verify`` read them
back) and, for querying, ``params`` and ``variant`` flattened into one typed column per key
(``params.bs``, ``variant.storage``). Flattened rather than structs: a struct's type is the union of
one bundle's keys, so two bundles of different workloads have different, incompatible struct types,
while flattened columns that one file lacks read as NULL with DuckDB's ``union_by_name`` (and the
JSON columns are the same in every file).

A bundle without the file (written before it existed, or killed before the run could end) is
converted on first load into a cache keyed by the journal's SHA-256 under
``$XDG_CACHE_HOME/ccbench/columnar/``; nothing is ever written into the bundle then, as that would
break its digests.
"""

from __future__ import annotations

import gc
import hashlib
import math
import os
import re
import tempfile
import time
import warnings
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from ccbench.basics.errors import BundleError, CCBenchError
from ccbench.basics.fsutil import atomic_target
from ccbench.bundle.columnar_layout import (  # noqa: F401 (the layout's names, as columnar's API)
    EXTRA,
    FLATTENED,
    JSON_FIELDS,
    KNOWN,
    LAYOUT,
    META_JOURNAL_BYTES,
    META_JOURNAL_SHA256,
    META_LAYOUT,
    META_WARNINGS,
    PARQUET,
    REQUIRED_COLUMNS,
    ROW_GROUP_ROWS,
    SCALARS,
    SORT,
)
from ccbench.bundle.columnar_layout import typed as _typed
from ccbench.bundle.digests import journal_sha256, sized_sha256
from ccbench.bundle.journal_stream import stream_journal
from ccbench.bundle.layout import SAMPLES
from ccbench.bundle.reader import Bundle, cut_last_line, read_bundle

# -- writing ---------------------------------------------------------------------------------------


def table_from_records(chunks: Iterable[list[dict[str, Any]]]) -> pa.Table:
    """The samples (lists of records as read from a journal) as one Arrow table in the layout above."""
    parts: dict[str, list[pa.Array]] = {name: [] for name in [n for n, _ in SCALARS] + [*JSON_FIELDS, EXTRA]}
    scalars = pa.struct(SCALARS)
    for chunk in chunks:
        if not chunk:
            continue
        # the scalar fields converted by Arrow from the records at once (other keys are ignored there)
        converted = pa.array(chunk, type=scalars)
        for index, (name, _) in enumerate(SCALARS):
            parts[name].append(converted.field(index))
        for name in JSON_FIELDS:
            option = 0 if name == "metadata" else SORT
            parts[name].append(pa.array([orjson.dumps(r.get(name), option=option).decode() for r in chunk]))
        parts[EXTRA].append(pa.array([_extra(r) for r in chunk], type=pa.string()))
    types = dict(SCALARS)
    return _laid_out(
        {
            name: pa.chunked_array(arrays, type=types.get(name, pa.string())).combine_chunks()
            for name, arrays in parts.items()
        }
    )


def _laid_out(columns: dict[str, pa.Array]) -> pa.Table:
    """The layout's table from its plain columns (scalars, JSON text, extra): strings dictionary-encoded,
    params and variant flattened."""
    for name in (*JSON_FIELDS, "workload", "kind", "metric", "unit", "better", "execution", "raw"):
        columns[name] = columns[name].dictionary_encode()
    for name in FLATTENED:
        columns.update(_flatten(name, columns[name]))
    return pa.table(columns)


def table_from_journal(journal: Path) -> pa.Table | None:
    """The journal's samples in the layout above as one table, as the streamed conversion writes them
    (stream_journal, into memory here: for tests and small journals); None where that conversion
    leaves the journal to the record reader."""
    sink = pa.BufferOutputStream()
    if not stream_journal(journal, sink, {}):
        return None
    return pq.read_table(pa.BufferReader(sink.getvalue()))


def _extra(record: dict[str, Any]) -> str | None:
    other = record.keys() - KNOWN
    return orjson.dumps({key: record[key] for key in other}, option=SORT).decode() if other else None


def _flatten(prefix: str, encoded: pa.DictionaryArray) -> dict[str, pa.Array]:
    """One typed column per key of the JSON objects in ``encoded``: each distinct object is parsed
    once, its values laid out per distinct object, then spread to the rows by the dictionary's indices."""
    objects = [orjson.loads(text) or {} for text in encoded.dictionary.to_pylist()]
    keys = sorted({key for obj in objects if isinstance(obj, dict) for key in obj})
    indices = encoded.indices
    flat = {}
    for key in keys:
        values = [obj.get(key) if isinstance(obj, dict) else None for obj in objects]
        flat[f"{prefix}.{key}"] = _typed(values).take(indices)
    return flat


def convert(bundle: Bundle | Path, target: Path, durable: bool = True, digest: tuple[int, str] | None = None) -> None:
    """Read the bundle's journal and write its samples to ``target`` (through a temporary file and a
    rename, so that a reader never sees half a file): streamed by DuckDB where it can read the
    journal (stream_journal), else by the record reader (a table in memory). ``digest``: the
    journal's size and SHA-256 where the caller has just computed them (else computed here)."""
    if not isinstance(bundle, Bundle):
        bundle = read_bundle(bundle, samples=False)
    journal = Path(bundle.path) / SAMPLES
    if digest is None:
        digest = sized_sha256(journal) if journal.exists() else (0, hashlib.sha256().hexdigest())
    size, sha = digest
    metadata = {META_LAYOUT: LAYOUT, META_JOURNAL_BYTES: str(size), META_JOURNAL_SHA256: sha}
    target = Path(target)
    # through fsutil: a name of its own per writer, the bundle's file mode (the umask's), fsync
    with atomic_target(target, durable=durable) as temporary:
        # a format-1 journal is upgraded record by record as it is read; the DuckDB path warns of nothing
        if journal.exists() and bundle.format_version != 1:
            streamed = stream_journal(journal, temporary, metadata | {META_WARNINGS: b"[]"})
        else:
            streamed = False
        if streamed:
            return
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            table = _records_table(bundle)
        # kept in the file: every load of it says them again (read_samples), the first one included;
        # the journal named as the bundle's own file, since the cache's copy serves every bundle
        # holding this journal, wherever it lies
        messages = [_relative(str(w.message), journal) for w in caught]
        table = table.replace_schema_metadata(metadata | {META_WARNINGS: orjson.dumps(messages)})
        pq.write_table(table, temporary, compression="zstd", row_group_size=ROW_GROUP_ROWS)


def _relative(message: str, journal: Path) -> str:
    """A warning about the journal with its path as the bundle's own name (samples.jsonl: ...)."""
    return SAMPLES + message[len(str(journal)) :] if message.startswith(f"{journal}:") else message


#: the words a file converted by an earlier ccbench stored for a cut last line (with the path of the
#: bundle it was converted for)
_EARLIER_CUT = re.compile(r"^.*samples\.jsonl:(\d+): skipping a truncated last line \(the run was interrupted\)$")


def _said(message: str, journal: Path | None) -> str:
    """A warning kept in a Parquet file as said of the journal read now: its file named by this
    bundle's path (the file may have been converted for another bundle holding the same journal, or
    before the bundle moved), in the reader's words of today."""
    if journal is None:
        return message
    if message.startswith(f"{SAMPLES}:"):
        return f"{journal}{message[len(SAMPLES) :]}"
    earlier = _EARLIER_CUT.match(message)
    if earlier is not None:
        try:
            return cut_last_line(journal, int(earlier[1]), journal.stat().st_size)
        except OSError:
            return message
    return message


def _records_table(bundle: Bundle) -> pa.Table:
    """table_from_records over the journal's records, the garbage collector paused: hundreds of
    thousands of acyclic dicts would make it scan again and again (as in analysis.samples.load)."""
    gc.disable()
    try:
        return table_from_records(bundle.sample_chunks())
    finally:
        gc.enable()


def write_bundle_parquet(bundle: Path) -> Path:
    """Write ``samples.parquet`` into the bundle from its journal (replacing an earlier one)."""
    target = Path(bundle) / PARQUET
    convert(Path(bundle), target)
    return target


def finish_run_samples(bundle: Path, report: Callable[[str], None] = print) -> None:
    """Called by the runner when a run ends (complete, failed, interrupted; a resumed run too), just
    before the digest list: the Parquet copy of the journal. A failure is reported, never raised: the
    journal still holds every sample and a later load converts it."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a truncated last line was already said by the run
            write_bundle_parquet(Path(bundle))
    except (OSError, BundleError, pa.ArrowException) as exc:
        report(f"samples.parquet could not be written ({exc}); the analysis will convert samples.jsonl itself")


# -- reading ---------------------------------------------------------------------------------------


#: the cache's size above which the least recently used files go (``$CCBENCH_COLUMNAR_CACHE_MB``)
DEFAULT_CACHE_MB = 2048
#: a file used this recently stays, whatever the size (another process may be about to read it)
IN_USE_S = 600


def cache_limit_bytes() -> int:
    value = os.environ.get("CCBENCH_COLUMNAR_CACHE_MB")
    if not value:
        return DEFAULT_CACHE_MB << 20
    try:
        megabytes = float(value)
    except ValueError:
        megabytes = -1.0
    # inf, nan and 1e400 (inf too) are no size: int() of them would raise
    if not math.isfinite(megabytes) or megabytes < 0 or megabytes > 1 << 40:
        raise CCBenchError(
            f"CCBENCH_COLUMNAR_CACHE_MB={value!r} is not a size in MB: give a number such as 2048, or unset it"
        )
    return int(megabytes * (1 << 20))


def prune_cache(keep: Path, limit: int | None = None) -> list[Path]:
    """Remove the least recently used cache files (a use sets a file's access time) while the
    cache is above its limit; never ``keep`` (just written) nor a file used in the last IN_USE_S
    seconds. Returns what was removed."""
    limit = cache_limit_bytes() if limit is None else limit
    files = []
    for path in cache_dir().glob("*.parquet"):
        try:
            stat = path.stat()
        except OSError:
            continue  # removed by another process meanwhile
        files.append((max(stat.st_atime, stat.st_mtime), stat.st_size, path))
    total = sum(size for _, size, _ in files)
    removed = []
    recent = time.time() - IN_USE_S
    for used, size, path in sorted(files):
        if total <= limit:
            break
        if path == keep or used > recent:
            continue
        path.unlink(missing_ok=True)
        total -= size
        removed.append(path)
    return removed


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "ccbench" / "columnar"


def cache_path(sha256: str) -> Path:
    return cache_dir() / f"{sha256}-layout{LAYOUT}.parquet"


def _fresh_in_bundle(path: Path) -> Path | None:
    """The bundle's own samples.parquet when it was made from the journal as it is now, by content:
    the journal's SHA-256 it records is the journal's (a resumed run that was killed leaves a longer
    journal beside an older file; another bundle's file may sit beside a journal of the same size:
    neither is used)."""
    parquet = path / PARQUET
    metadata = _layout_metadata(parquet)
    if metadata is None:
        return None
    try:
        sha = journal_sha256(path)
    except OSError:
        return None
    return parquet if metadata.get(META_JOURNAL_SHA256) == sha.encode() else None


def _layout_metadata(parquet: Path) -> dict[bytes, bytes] | None:
    """The file's metadata when it is a Parquet file of this layout with every column the
    analysis needs; None when it is not (missing, damaged, older, a column taken out)."""
    try:
        schema = pq.read_schema(parquet)
    except (OSError, pa.ArrowException):
        return None
    metadata = schema.metadata or {}
    if metadata.get(META_LAYOUT) != LAYOUT.encode() or not REQUIRED_COLUMNS <= set(schema.names):
        return None
    return metadata


def is_converted(bundle: Bundle) -> bool:
    """Whether the bundle's samples are in a current Parquet file already (its own, or the cache's)."""
    path = Path(bundle.path)
    if _fresh_in_bundle(path) is not None:
        return True
    return not (path / SAMPLES).exists() or cache_path(journal_sha256(path)).exists()


def columnar_file(bundle: Bundle) -> Path:
    """The Parquet file holding the bundle's samples: its own, or the cache's (converted now if
    missing). A cache that cannot be written (read-only home) is converted into a temporary one."""
    limit = cache_limit_bytes()  # a bad $CCBENCH_COLUMNAR_CACHE_MB is refused before the cache is written
    path = Path(bundle.path)
    own = _fresh_in_bundle(path)
    if own is not None:
        return own
    journal = path / SAMPLES
    # the journal's SHA-256 remembered by the file's identity (ccbench.bundle.digests), so that a
    # load of a cached bundle does not read its whole journal again
    sha = journal_sha256(path)
    cached = cache_path(sha)
    if cached.exists() and _layout_metadata(cached) is None:
        cached.unlink(missing_ok=True)  # damaged (a crash, a full disk, an edit): converted again
    if cached.exists():
        try:  # a use, as the access time (the content's time stays): the least recently used go first
            os.utime(cached, ns=(time.time_ns(), cached.stat().st_mtime_ns))
        except OSError:
            pass
        return cached
    # the size the digest was taken at (a journal appended to since is seen by the next load)
    digest = (journal.stat().st_size, sha) if journal.exists() else None
    try:
        convert(bundle, cached, durable=False, digest=digest)
    except OSError:
        cached = Path(tempfile.mkdtemp(prefix="ccbench-columnar-")) / f"{sha}.parquet"
        convert(bundle, cached, durable=False, digest=digest)
        return cached
    prune_cache(cached, limit)
    return cached


def read_samples(bundle: Bundle, columns: list[str] | None = None) -> pa.Table:
    """The bundle's samples as an Arrow table (string and JSON columns dictionary-encoded, so that a
    value repeated over thousands of rows is one object). Bundles whose samples are in memory are
    converted from there; warnings the conversion gave are given again."""
    if bundle.samples is not None:
        return table_from_records([bundle.samples]) if bundle.samples else pa.table({})
    file = columnar_file(bundle)
    journal = Path(bundle.path) / SAMPLES
    try:
        return _read(file, columns, journal)
    except (OSError, pa.ArrowException) as exc:
        if file.parent != cache_dir():
            raise BundleError(
                f"{file}: unreadable Parquet ({_first_line(exc)}); run 'ccbench verify' on the bundle"
            ) from None
        file.unlink(missing_ok=True)  # the cache's copy is damaged inside: converted again, once
    file = columnar_file(bundle)
    try:
        return _read(file, columns, journal)
    except (OSError, pa.ArrowException) as exc:
        raise BundleError(f"{file}: unreadable Parquet ({_first_line(exc)}); remove it and run again") from None


def _first_line(exc: Exception) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def _read(file: Path, columns: list[str] | None, journal: Path | None = None) -> pa.Table:
    parquet = pq.ParquetFile(file)
    metadata = parquet.schema_arrow.metadata or {}
    for message in orjson.loads(metadata.get(META_WARNINGS, b"[]")):
        warnings.warn(_said(message, journal), stacklevel=2)
    names = [n for n in (columns or parquet.schema_arrow.names) if n in parquet.schema_arrow.names]
    strings = {n for n in names if pa.types.is_dictionary(parquet.schema_arrow.field(n).type) or n in JSON_FIELDS}
    table = pq.read_table(file, columns=names, read_dictionary=sorted(strings))
    return table


def records_from_table(table: pa.Table) -> Iterator[dict[str, Any]]:
    """The samples of a table in this layout as records, normalised: every known field present."""
    names = [n for n, _ in SCALARS]
    columns = {name: table.column(name).to_pylist() for name in [*names, *JSON_FIELDS, EXTRA]}
    for row in range(table.num_rows):
        record = {name: columns[name][row] for name in names}
        for name in JSON_FIELDS:
            record[name] = orjson.loads(columns[name][row])
        if columns[EXTRA][row]:
            record.update(orjson.loads(columns[EXTRA][row]))
        yield record


def _normalised(record: dict[str, Any]) -> bytes:
    full = {name: record.get(name) for name, _ in SCALARS} | {n: record.get(n) for n in JSON_FIELDS}
    full |= {k: v for k, v in record.items() if k not in KNOWN}
    if full["value"] is not None:
        full["value"] = float(full["value"])
    return orjson.dumps(full, option=SORT)


def check_bundle(bundle: Path) -> str | None:
    """Whether the bundle's samples.parquet holds the journal's samples, row for row: None when it
    does (or when there is no such file), else what differs, in one sentence."""
    bundle = Path(bundle)
    parquet = bundle / PARQUET
    if not parquet.exists():
        return None
    try:
        table = pq.read_table(parquet)
    except (OSError, pa.ArrowException) as exc:
        return f"{PARQUET} is unreadable ({exc})"
    missing = [n for n in [*(n for n, _ in SCALARS), *JSON_FIELDS, EXTRA] if n not in table.column_names]
    if missing:
        return f"{PARQUET} lacks the column(s) {', '.join(missing)}"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        journal = [_normalised(r) for chunk in read_bundle(bundle, samples=False).sample_chunks() for r in chunk]
    columnar = [_normalised(r) for r in records_from_table(table)]
    if len(journal) != len(columnar):
        return f"{PARQUET} has {len(columnar)} samples, {SAMPLES} {len(journal)}"
    for number, (ours, theirs) in enumerate(zip(columnar, journal, strict=True), start=1):
        if ours != theirs:
            return f"{PARQUET} row {number} differs from line {number} of {SAMPLES}"
    return None
