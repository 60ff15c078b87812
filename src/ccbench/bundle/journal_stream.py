"""A journal streamed into samples.parquet by DuckDB's JSON reader (the conversion bundle/columnar.py
uses where it can): bounded record batches, their strings numbered in one dictionary per column,
spilled to a temporary Arrow file, then written in row groups. Memory is a few batches and the
distinct values, whatever the journal's size."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from ccbench.bundle import columnar_layout as layout
from ccbench.bundle.columnar_layout import EXTRA, FLATTENED, JSON_FIELDS, SCALARS, typed
from ccbench.bundle.layout import SAMPLE_FIELDS

#: DuckDB's types for the journal's fields, for read_json (the JSON fields read as their text)
DUCKDB_TYPES = {pa.string(): "VARCHAR", pa.float64(): "DOUBLE", pa.int64(): "BIGINT", pa.bool_(): "BOOLEAN"}
#: the string columns kept dictionary-encoded, by their index into one dictionary per column and file
_ENCODED = ("workload", "kind", "metric", "unit", "better", "execution", "raw", *JSON_FIELDS)
#: rows per record batch DuckDB hands over (bounded, so that a journal's size does not set the memory)
_BATCH_ROWS = 16_384


def connect() -> Any:
    """An in-memory DuckDB connection without the progress bar (on by default, and drawn on stdout
    past 2 s: into a compare's JSON); the conversion here and the analysis engine use it."""
    import duckdb

    connection = duckdb.connect()
    connection.execute("SET enable_progress_bar = false")
    return connection


def stream_journal(journal: Path, target: Any, metadata: dict[bytes, bytes], scratch: Path | None = None) -> bool:
    """Write the journal's samples in the layout above to ``target`` (a path or an Arrow output
    stream) as Parquet, parsed by DuckDB's JSON reader (multi-threaded, in C++: a fifth of the CPU
    time of parsing records in Python) and streamed: record batches of _BATCH_ROWS rows, their
    strings replaced by indices into one dictionary per column, go to a temporary Arrow file (in
    ``scratch``, the target's directory by default; unlinked from the start), since the flattened
    columns' names and types are known only once every line is read; that file is then read back in
    row groups of layout.ROW_GROUP_ROWS rows into the Parquet file. The memory is a few batches and the
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
    columns = {name: DUCKDB_TYPES[kind] for name, kind in SCALARS} | {name: "JSON" for name in JSON_FIELDS}
    source = f"read_json({_quoted(exact)}, format='newline_delimited', columns={struct_type(columns)})"
    objects = f"read_ndjson_objects({_quoted(exact)})"
    dictionaries = {name: _Dictionary(name) for name in _ENCODED}
    types = dict(SCALARS)
    spill_schema = pa.schema(
        [(name, pa.int32() if name in dictionaries else types[name]) for name, _ in SCALARS]
        + [(name, pa.int32()) for name in JSON_FIELDS]
    )
    connection = connect()
    try:
        if not _only_known_fields(handle):
            # a line with other fields than the layout's (a Sample may carry extra ones, kept in
            # ``extra``) is rare: the record reader converts such a journal
            keys = "json_keys(json)"
            odd = connection.sql(
                f"SELECT count(*) FROM {objects} WHERE NOT list_has_all({sorted(layout.KNOWN)}, {keys})"
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
        self.option = 0 if name == "metadata" else orjson.OPT_SORT_KEYS
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
                typed([obj.get(key) if isinstance(obj, dict) else None for obj in objects]),
            )
    types = dict(SCALARS)
    dictionary = pa.dictionary(pa.int32(), pa.string())
    schema = pa.schema(
        [(name, dictionary if name in values else types[name]) for name, _ in SCALARS]
        + [(name, dictionary) for name in JSON_FIELDS]
        + [(EXTRA, pa.string())]
        + [(name, column.type) for name, (_, column) in flattened.items()],
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
            while rows >= layout.ROW_GROUP_ROWS or (batch is None and rows):
                held = pa.Table.from_batches(pending, schema=reader.schema)
                group = held.slice(0, layout.ROW_GROUP_ROWS).combine_chunks()
                pending = held.slice(group.num_rows).to_batches()
                rows -= group.num_rows
                writer.write_table(_row_group(group, schema, values, flattened), row_group_size=layout.ROW_GROUP_ROWS)


def _row_group(group: pa.Table, schema: pa.Schema, values: dict, flattened: dict) -> pa.Table:
    """One row group of the layout from the spilled columns."""
    columns: dict[str, pa.Array] = {}
    for name in schema.names[: len(SCALARS) + len(JSON_FIELDS)]:
        column = group.column(name).combine_chunks()
        columns[name] = _used(column, values[name]) if name in values else column
    columns[EXTRA] = pa.nulls(group.num_rows, type=pa.string())
    for name, (prefix, values_typed) in flattened.items():
        columns[name] = values_typed.take(group.column(prefix).combine_chunks())
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


def struct_type(columns: dict[str, str]) -> str:
    return "{" + ", ".join(f"{_quoted(Path(name))}: '{kind}'" for name, kind in columns.items()) + "}"
