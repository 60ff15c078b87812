"""The layout of samples.parquet (docs/bundle-format.md): its columns, their types and the file's
metadata keys, shared by the two ways a journal becomes the file (bundle/columnar.py's record reader
and bundle/journal_stream.py's DuckDB stream)."""

from __future__ import annotations

from typing import Any

import orjson
import pyarrow as pa

from ccbench.bundle.layout import SAMPLES_PARQUET

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
KNOWN = {name for name, _ in SCALARS} | set(JSON_FIELDS)
#: the columns a file of this layout has whatever its samples (the flattened ones vary)
REQUIRED_COLUMNS = KNOWN | {EXTRA}
SORT = orjson.OPT_SORT_KEYS

META_LAYOUT = b"ccbench.columnar"
META_JOURNAL_BYTES = b"ccbench.journal_bytes"
META_JOURNAL_SHA256 = b"ccbench.journal_sha256"
META_WARNINGS = b"ccbench.warnings"

#: rows per row group of the file written from a journal (DuckDB writes 122,880)
ROW_GROUP_ROWS = 131_072


def typed(values: list[Any]) -> pa.Array:
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
    return pa.array([None if v is None else orjson.dumps(v, option=SORT).decode() for v in values], type=pa.string())
