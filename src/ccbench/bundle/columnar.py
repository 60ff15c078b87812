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
import tempfile
import time
import warnings
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from ccbench.bundle.digests import journal_sha256, sized_sha256
from ccbench.bundle.layout import SAMPLE_FIELDS, SAMPLES, SAMPLES_PARQUET
from ccbench.bundle.reader import Bundle, read_bundle
from ccbench.errors import BundleError, CCBenchError
from ccbench.fsutil import atomic_target

PARQUET = SAMPLES_PARQUET
#: changes when the layout does, so that a cache written by an older ccbench is not read as current
LAYOUT = "1"
#: the sample fields kept as typed columns, in this order
SCALARS: list[tuple[str, pa.DataType]] = [
    ("workload", pa.string()),
    ("kind", pa.string()),
    ("metric", pa.string()),
    ("unit", pa.string()),
    ("value", pa.float64()),
    ("better", pa.string()),
    ("repetition", pa.int64()),
    ("warmup", pa.bool_()),
    ("timestamp", pa.string()),
    ("contended", pa.bool_()),
    ("execution", pa.string()),
    ("raw", pa.string()),
]
#: the sample fields kept as JSON text; params and variant with sorted keys (their canonical form),
#: metadata as written (the case label follows the order of its keys)
JSON_FIELDS = ("params", "variant", "metadata")
#: any other field a sample carries (Sample allows extra ones), as one JSON object; null when none
EXTRA = "extra"
FLATTENED = ("params", "variant")
_KNOWN = {name for name, _ in SCALARS} | set(JSON_FIELDS)
#: the columns a file of this layout has whatever its samples (the flattened ones vary)
REQUIRED_COLUMNS = _KNOWN | {EXTRA}
_SORT = orjson.OPT_SORT_KEYS

META_LAYOUT = b"ccbench.columnar"
META_JOURNAL_BYTES = b"ccbench.journal_bytes"
META_JOURNAL_SHA256 = b"ccbench.journal_sha256"
META_WARNINGS = b"ccbench.warnings"


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
            option = 0 if name == "metadata" else _SORT
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


#: DuckDB's types for the journal's fields, for read_json (the JSON fields read as their text)
_DUCKDB_TYPES = {pa.string(): "VARCHAR", pa.float64(): "DOUBLE", pa.int64(): "BIGINT", pa.bool_(): "BOOLEAN"}
#: the string columns kept dictionary-encoded, by their index into one dictionary per column and file
_ENCODED = ("workload", "kind", "metric", "unit", "better", "execution", "raw", *JSON_FIELDS)
#: rows per record batch DuckDB hands over (bounded, so that a journal's size does not set the memory)
_BATCH_ROWS = 16_384
#: rows per row group of the file written from a journal (DuckDB writes 122,880)
ROW_GROUP_ROWS = 131_072


def table_from_journal(journal: Path) -> pa.Table | None:
    """The journal's samples in the layout above as one table, as the streamed conversion writes them
    (stream_journal, into memory here: for tests and small journals); None where that conversion
    leaves the journal to the record reader."""
    sink = pa.BufferOutputStream()
    if not stream_journal(journal, sink, {}):
        return None
    return pq.read_table(pa.BufferReader(sink.getvalue()))


def stream_journal(journal: Path, target: Any, metadata: dict[bytes, bytes], scratch: Path | None = None) -> bool:
    """Write the journal's samples in the layout above to ``target`` (a path or an Arrow output
    stream) as Parquet, parsed by DuckDB's JSON reader (multi-threaded, in C++: a fifth of the CPU
    time of parsing records in Python) and streamed: record batches of _BATCH_ROWS rows, their
    strings replaced by indices into one dictionary per column, go to a temporary Arrow file (in
    ``scratch``, the target's directory by default; unlinked from the start), since the flattened
    columns' names and types are known only once every line is read; that file is then read back in
    row groups of ROW_GROUP_ROWS rows into the Parquet file. The memory is a few batches and the
    distinct values, whatever the journal's size. The JSON fields' text is rewritten by orjson once
    per distinct value, so the values are those table_from_records gives (tests/test_columnar.py).

    False, with nothing written, when the journal needs what only the record-by-record reader gives:
    a line that is not a complete sample (the one-line error, the warning about a cut last line), a
    value of another type than the layout's, a field beyond them; False too where DuckDB is not
    installed (a host whose environment lacks it): the record reader converts then."""
    try:
        import duckdb
    except ImportError:
        return False

    try:
        handle = open(journal, "rb")
    except OSError:
        return False
    with handle:
        try:
            handle.seek(-1, os.SEEK_END)
            if handle.read(1) != b"\n":
                return False  # a cut last line: the record reader warns about it
            handle.seek(0)
        except OSError:
            return False
        directory = scratch if scratch is not None else (Path(target).parent if isinstance(target, Path) else None)
        with tempfile.TemporaryFile(dir=directory) as spill:
            encoded = _duckdb_batches(duckdb, handle, spill)
            if encoded is None:
                return False
            spill.seek(0)
            _write_from_spill(spill, encoded, target, metadata)
    return True


def _duckdb_batches(duckdb: Any, handle: Any, spill: Any) -> dict[str, list[str]] | None:
    """stream_journal's first pass: the journal parsed by DuckDB into ``spill`` (an Arrow IPC
    stream: the encoded columns as int32 indices, the rest as they are). Returns each encoded
    column's dictionary (its values in order of first appearance), or None where the record reader
    must convert. DuckDB reads the journal through its open descriptor: it reads a path's ``*``,
    ``?`` and ``[`` as a glob, and a bundle's directory may be named with them (``[1]`` matches a
    sibling ``1``); ``/dev/fd/N`` names exactly this file."""
    exact = Path(f"/dev/fd/{handle.fileno()}")
    if not exact.exists():
        return None  # no /dev/fd on this system: the record reader converts
    columns = {name: _DUCKDB_TYPES[kind] for name, kind in SCALARS} | {name: "JSON" for name in JSON_FIELDS}
    source = f"read_json({_quoted(exact)}, format='newline_delimited', columns={_struct(columns)})"
    objects = f"read_ndjson_objects({_quoted(exact)})"
    dictionaries = {name: _Dictionary(name) for name in _ENCODED}
    types = dict(SCALARS)
    spill_schema = pa.schema(
        [(name, pa.int32() if name in dictionaries else types[name]) for name, _ in SCALARS]
        + [(name, pa.int32()) for name in JSON_FIELDS]
    )
    # no progress bar: DuckDB would draw it on stdout (a compare's JSON) for a long conversion
    connection = duckdb.connect()
    try:
        connection.execute("SET enable_progress_bar = false")
        if not _only_known_fields(handle):
            # a line with other fields than the layout's (a Sample may carry extra ones, kept in
            # ``extra``) is rare: the record reader converts such a journal
            keys = "json_keys(json)"
            odd = connection.sql(
                f"SELECT count(*) FROM {objects} WHERE NOT list_has_all({sorted(_KNOWN)}, {keys})"
            ).fetchall()
            if not odd or odd[0][0]:
                return None
        relation = connection.sql(f"SELECT * FROM {source}")
        # to_arrow_reader from DuckDB 1.4 (fetch_arrow_reader before, deprecated since)
        stream = getattr(relation, "to_arrow_reader", None) or relation.fetch_arrow_reader
        reader = stream(_BATCH_ROWS)
        with pa.ipc.new_stream(spill, spill_schema) as writer:
            for batch in reader:
                # a required field that is missing reads as NULL: the record reader says which line lacks it
                if any(batch.column(name).null_count for name in SAMPLE_FIELDS):
                    return None
                arrays = [
                    dictionaries[name].indices(batch.column(name))
                    if name in dictionaries
                    else batch.column(name).cast(spill_schema.field(name).type)
                    for name in spill_schema.names
                ]
                writer.write_batch(pa.record_batch(arrays, schema=spill_schema))
    except duckdb.Error:
        return None
    finally:
        connection.close()
    return {name: dictionary.values for name, dictionary in dictionaries.items()}


class _Dictionary:
    """One column's distinct values over a whole journal, numbered in order of first appearance (as
    dictionary_encode numbers them); the JSON fields' values rewritten by orjson into their form in
    the layout (params and variant with sorted keys), two texts of one value becoming one."""

    def __init__(self, name: str):
        self.json = name in JSON_FIELDS
        self.option = 0 if name == "metadata" else _SORT
        self.values: list[str] = []
        self.numbers: dict[str, int] = {}  # a value in the layout's form -> its number
        self.read: dict[str | None, int] = {}  # a value as read -> its number

    def indices(self, column: pa.Array) -> pa.Array:
        encoded = column.dictionary_encode()  # a null stays null (its index is)
        numbers = [self._number(value) for value in encoded.dictionary.to_pylist()]
        indices = encoded.indices
        if not indices.null_count:
            return pa.array(np.asarray(numbers, dtype=np.int32)[indices.to_numpy()], type=pa.int32())
        if self.json:  # a JSON field's null is the text null
            return pa.array(
                np.asarray([*numbers, self._number("null")], dtype=np.int32)[
                    indices.fill_null(len(numbers)).to_numpy()
                ],
                type=pa.int32(),
            )
        # better, execution, raw: null stays null
        numbers.append(0)
        mapped = np.asarray(numbers, dtype=np.int32)[indices.fill_null(len(numbers) - 1).to_numpy()]
        return pa.array(mapped, type=pa.int32(), mask=_nulls(indices))

    def _number(self, value: str) -> int:
        number = self.read.get(value)
        if number is None:  # a value not seen yet (as read: two texts of one value are read once each)
            text = orjson.dumps(orjson.loads(value), option=self.option).decode() if self.json else value
            number = self.numbers.setdefault(text, len(self.values))
            if number == len(self.values):
                self.values.append(text)
            self.read[value] = number
        return number


def _write_from_spill(spill: Any, dictionaries: dict[str, list[str]], target: Any, metadata: dict) -> None:
    """stream_journal's second pass: the spilled batches read back in row groups into the layout's
    Parquet file; each row group's dictionaries hold the values it uses, in order of first appearance."""
    values = {name: pa.array(texts, type=pa.string()) for name, texts in dictionaries.items()}
    flattened: dict[str, tuple[str, pa.Array]] = {}
    for prefix in FLATTENED:
        objects = [orjson.loads(text) or {} for text in dictionaries[prefix]]
        keys = sorted({key for obj in objects if isinstance(obj, dict) for key in obj})
        for key in keys:
            flattened[f"{prefix}.{key}"] = (
                prefix,
                _typed([obj.get(key) if isinstance(obj, dict) else None for obj in objects]),
            )
    types = dict(SCALARS)
    dictionary = pa.dictionary(pa.int32(), pa.string())
    schema = pa.schema(
        [(name, dictionary if name in values else types[name]) for name, _ in SCALARS]
        + [(name, dictionary) for name in JSON_FIELDS]
        + [(EXTRA, pa.string())]
        + [(name, typed.type) for name, (_, typed) in flattened.items()],
        metadata=metadata,
    )
    reader = pa.ipc.open_stream(spill)
    with pq.ParquetWriter(target, schema, compression="zstd") as writer:
        pending: list[pa.RecordBatch] = []
        rows = 0
        for batch in [*reader, None]:
            if batch is not None:
                pending.append(batch)
                rows += batch.num_rows
            # whole row groups while the batches hold one, then the rest at the end
            while rows >= ROW_GROUP_ROWS or (batch is None and rows):
                held = pa.Table.from_batches(pending, schema=reader.schema)
                group = held.slice(0, ROW_GROUP_ROWS).combine_chunks()
                pending = held.slice(group.num_rows).to_batches()
                rows -= group.num_rows
                writer.write_table(_row_group(group, schema, values, flattened), row_group_size=ROW_GROUP_ROWS)


def _row_group(group: pa.Table, schema: pa.Schema, values: dict, flattened: dict) -> pa.Table:
    """One row group of the layout from the spilled columns."""
    columns: dict[str, pa.Array] = {}
    for name in schema.names[: len(SCALARS) + len(JSON_FIELDS)]:
        column = group.column(name).combine_chunks()
        columns[name] = _used(column, values[name]) if name in values else column
    columns[EXTRA] = pa.nulls(group.num_rows, type=pa.string())
    for name, (prefix, typed) in flattened.items():
        columns[name] = typed.take(group.column(prefix).combine_chunks())
    return pa.table(columns, schema=schema)


def _used(indices: pa.Array, values: pa.Array) -> pa.DictionaryArray:
    """The column as a dictionary array of the values its rows use (renumbered in the whole
    dictionary's order: first appearance), nulls kept."""
    present = np.zeros(len(values), dtype=bool)
    present[indices.drop_null().to_numpy()] = True
    if present.all():  # every value (or none: a column of nulls)
        renumbered = indices
        used = values
    else:
        numbers = (np.cumsum(present, dtype=np.int32) - 1)[indices.fill_null(0).to_numpy()]
        renumbered = pa.array(numbers, type=pa.int32(), mask=_nulls(indices))
        used = values.filter(pa.array(present))
    return pa.DictionaryArray.from_arrays(renumbered, used)


def _nulls(array: pa.Array) -> Any:
    """The array's nulls as a numpy mask, or None when it has none."""
    return array.is_null().to_numpy(zero_copy_only=False) if array.null_count else None


#: how a line that ccbench's Sample wrote ends: its last field, ``contended``, and no other after it
_LINE_ENDS = (b'"contended":false}\n', b'"contended":true}\n', b'"contended":null}\n')
#: bytes kept from one block to the next, so that each newline's ending is seen whole
_CARRY = 32
_BLOCK = 1 << 20


def _only_known_fields(handle: Any) -> bool:
    """Whether every line ends with the Sample's last field, so that no line carries fields beyond
    the layout's (pydantic writes a Sample's extra fields after its declared ones); the bytes before
    each newline compared in blocks by numpy, eight at a time, where asking DuckDB for every line's
    keys would cost a third of the conversion. Reads the open journal from its start."""
    handle.seek(0)
    carry = b" " * _CARRY  # no sample's ending: a line shorter than one fails
    while block := handle.read(_BLOCK):
        data = np.frombuffer(carry + block, dtype=np.uint8)
        # the eight bytes from each offset on, as one number (overlapping, unaligned views)
        words = np.ndarray((len(data) - 7,), dtype="<u8", buffer=data, strides=(1,))
        newlines = np.flatnonzero(data[_CARRY:] == 10) + _CARRY
        fine = np.zeros(len(newlines), dtype=bool)
        for end in _LINE_ENDS:
            first = newlines - (len(end) - 1)
            match = np.ones(len(newlines), dtype=bool)
            for offset in (0, 8, len(end) - 8):  # the whole ending in three words (the last ones overlap)
                match &= words[first + offset] == int.from_bytes(end[offset : offset + 8], "little")
            fine |= match
        if not fine.all():
            return False
        carry = block[-_CARRY:] if len(block) >= _CARRY else (carry + block)[-_CARRY:]
    handle.seek(0)
    return True


def _quoted(path: Path) -> str:
    return "'" + str(path).replace("'", "''") + "'"


def _struct(columns: dict[str, str]) -> str:
    return "{" + ", ".join(f"{_quoted(Path(name))}: '{kind}'" for name, kind in columns.items()) + "}"


def _extra(record: dict[str, Any]) -> str | None:
    other = record.keys() - _KNOWN
    return orjson.dumps({key: record[key] for key in other}, option=_SORT).decode() if other else None


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


def _typed(values: list[Any]) -> pa.Array:
    """The values as one Arrow type: bool, int64, float64 or string as they are; a key whose values
    are of mixed or nested types becomes JSON text, so that every file has one type per column."""
    kinds = {type(v) for v in values if v is not None}
    if kinds and kinds <= {bool}:
        return pa.array(values, type=pa.bool_())
    if kinds and kinds <= {int}:
        return pa.array(values, type=pa.int64())
    if kinds and kinds <= {int, float}:
        return pa.array([None if v is None else float(v) for v in values], type=pa.float64())
    if kinds <= {str}:
        return pa.array(values, type=pa.string())
    return pa.array([None if v is None else orjson.dumps(v, option=_SORT).decode() for v in values], type=pa.string())


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
        # kept in the file: every load of it says them again (read_samples), the first one included
        messages = [str(w.message) for w in caught]
        table = table.replace_schema_metadata(metadata | {META_WARNINGS: orjson.dumps(messages)})
        pq.write_table(table, temporary, compression="zstd", row_group_size=ROW_GROUP_ROWS)


def _records_table(bundle: Bundle) -> pa.Table:
    """table_from_records over the journal's records, the garbage collector paused: hundreds of
    thousands of acyclic dicts would make it scan again and again (as in analysis.load)."""
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
    try:
        return _read(file, columns)
    except (OSError, pa.ArrowException) as exc:
        if file.parent != cache_dir():
            raise BundleError(
                f"{file}: unreadable Parquet ({_first_line(exc)}); run 'ccbench verify' on the bundle"
            ) from None
        file.unlink(missing_ok=True)  # the cache's copy is damaged inside: converted again, once
    file = columnar_file(bundle)
    try:
        return _read(file, columns)
    except (OSError, pa.ArrowException) as exc:
        raise BundleError(f"{file}: unreadable Parquet ({_first_line(exc)}); remove it and run again") from None


def _first_line(exc: Exception) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def _read(file: Path, columns: list[str] | None) -> pa.Table:
    parquet = pq.ParquetFile(file)
    metadata = parquet.schema_arrow.metadata or {}
    for message in orjson.loads(metadata.get(META_WARNINGS, b"[]")):
        warnings.warn(message, stacklevel=2)
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
    full |= {k: v for k, v in record.items() if k not in _KNOWN}
    if full["value"] is not None:
        full["value"] = float(full["value"])
    return orjson.dumps(full, option=_SORT)


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
