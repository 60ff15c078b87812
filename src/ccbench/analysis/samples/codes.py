"""Each bundle's rows as small integer codes (ccbench.analysis.samples.engine): its string and JSON
columns described once per distinct value, every row coded by indexing (no Python loop over rows), and
from the codes the narrow measured table DuckDB reduces, the configurations' facts, the distinct
executions, the raw directories per group; the integer-key ways to find each distinct combination's
first row."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from ccbench.analysis.samples import load as loading
from ccbench.bundle import Bundle

DIRECTED = ("lower", "higher")


class Codes:
    """Values numbered in the order they are first registered."""

    def __init__(self) -> None:
        self.values: list[Any] = []
        self._index: dict[Any, int] = {}

    def code(self, value: Any) -> int:
        found = self._index.get(value)
        if found is None:
            found = self._index[value] = len(self.values)
            self.values.append(value)
        return found


MEASURED_SCHEMA = pa.schema(
    [
        ("row", pa.int64()),
        ("bundle", pa.int32()),
        ("grp", pa.int32()),
        ("cfg", pa.int32()),
        ("unit", pa.int32()),
        ("better", pa.int32()),
        ("value", pa.float64()),
        ("contended", pa.bool_()),
        ("summary", pa.bool_()),
    ]
)
#: a configuration's facts: the frame's columns of one value per bundle and variant, and its first rows
FACT_COLUMNS = [*loading.BUNDLE_COLUMNS, *loading.CAUSE_KEYS, "first", "first_quiet"]
EXECUTION_COLUMNS = ["bundle", "execution", "workload", "config", "repetition", "warmup", "contended"]


def summed_counts(parts: list[pd.DataFrame]) -> pd.DataFrame:
    if not parts:
        return pd.DataFrame(columns=["cfg", "samples", "warmup", "measured", "contended"])
    counts = pd.concat(parts, ignore_index=True).groupby("cfg", sort=False).sum().reset_index()
    counts["measured"] = counts["samples"] - counts["warmup"]
    return counts


def concat_frames(frames: list[pd.DataFrame], columns: list[str]) -> pd.DataFrame:
    present = [f for f in frames if not f.empty]
    if not present:
        return pd.DataFrame(columns=columns)
    return pd.concat(present, ignore_index=True)[columns]


class Columns:
    """One bundle's columns, each string or JSON column described once per distinct value."""

    def __init__(self, table: pa.Table, machine: str, tee: str):
        self.rows = table.num_rows

        def describe_variant(text: str | None) -> tuple:
            storage, transport, causes = loading.describe_variant(text)
            return (storage, transport, loading.config_label(machine, tee, storage, transport), *causes)

        self.variant = loading.Described(table.column("variant"), describe_variant)
        self.metadata = loading.Described(table.column("metadata"), loading.describe_metadata)
        self.params = loading.Described(table.column("params"), loading.canonical_params)
        same: Callable[[Any], Any] = lambda value: value  # noqa: E731
        self.workload = loading.Described(table.column("workload"), same)
        self.metric = loading.Described(table.column("metric"), same)
        self.unit = loading.Described(table.column("unit"), same)
        self.better = loading.Described(table.column("better"), same)
        self.execution = loading.Described(table.column("execution"), lambda v: v or "")
        self.raw = loading.Described(table.column("raw"), lambda v: v or "")
        self.value = table.column("value").to_numpy(zero_copy_only=False).astype(float)
        self.repetition = table.column("repetition").fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
        self.warmup = table.column("warmup").fill_null(False).to_numpy(zero_copy_only=False).astype(bool)
        self.contended = table.column("contended").fill_null(False).to_numpy(zero_copy_only=False).astype(bool)


def _lookup(described: loading.Described, code: Callable[[Any], Any], dtype=np.int32) -> np.ndarray:
    """Per row: ``code`` of the row's description, computed once per distinct value."""
    return np.array([code(value) for value in described.distinct], dtype=dtype)[described.indices]


def _combined(parts: Iterable[loading.Described]) -> np.ndarray:
    """One int64 per row standing for the combination of the parts' distinct values."""
    key = np.zeros(0, dtype=np.int64)
    scale = 1
    for number, part in enumerate(parts):
        size = len(part.distinct)
        key = part.indices.astype(np.int64) if number == 0 else key + part.indices.astype(np.int64) * scale
        scale *= size
    if scale >= 2**62:  # too many distinct combinations to number this way: pandas numbers them
        return pd.MultiIndex.from_arrays([p.indices for p in parts]).factorize()[0].astype(np.int64)
    return key


class RowCodes:
    """One bundle's rows as codes of the reader's numbering."""

    def __init__(self, columns: Columns, reader: Any):
        """``reader``: the numbering the codes are of (its groups, configs, strings and raws: a Codes
        each; ccbench.analysis.samples.engine's reader)."""
        self.columns = columns
        self.reader = reader
        strings = reader.strings
        self.cfg = _lookup(columns.variant, lambda d: reader.configs.code(d[2]))
        self.unit = _lookup(columns.unit, strings.code)
        self.better = _lookup(columns.better, strings.code)
        directed = np.array([value in DIRECTED for value in columns.better.distinct], dtype=bool)
        self.directed = directed[columns.better.indices]
        self.summary = _lookup(columns.metadata, lambda d: bool(d[1]), bool)
        self.grp = self._groups()

    def _groups(self) -> np.ndarray:
        """Per row, the group code of (workload, params, case, metric)."""
        c = self.columns
        key = _combined([c.workload, c.params, c.metadata, c.metric])
        distinct, first, inverse = sorted_unique(key)
        codes = np.empty(len(distinct), dtype=np.int32)
        for number, row in enumerate(first):
            codes[number] = self.reader.groups.code(
                (
                    c.workload.distinct[c.workload.indices[row]],
                    c.params.distinct[c.params.indices[row]],
                    c.metadata.distinct[c.metadata.indices[row]][0],
                    c.metric.distinct[c.metric.indices[row]],
                )
            )
        return codes[inverse.reshape(-1)]

    def measured_table(self, bundle: int, offset: int) -> pa.Table:
        keep = ~self.columns.warmup
        keep = slice(None) if keep.all() else keep  # no warmups: the arrays as they are, not copied
        rows = np.arange(len(self.cfg))[keep]
        return pa.table(
            {
                "row": pa.array(rows + offset, type=pa.int64()),
                "bundle": pa.array(np.full(len(rows), bundle, dtype=np.int32)),
                "grp": pa.array(self.grp[keep]),
                "cfg": pa.array(self.cfg[keep]),
                "unit": pa.array(self.unit[keep]),
                "better": pa.array(self.better[keep]),
                "value": pa.array(self.columns.value[keep]),
                "contended": pa.array(self.columns.contended[keep]),
                "summary": pa.array(self.summary[keep]),
            },
            schema=MEASURED_SCHEMA,
        )

    def facts(self, bundle: Bundle, machine: str, machine_id: str, tee: str, offset: int) -> pd.DataFrame:
        c = self.columns
        cipher = _lookup(c.metadata, lambda d: self.reader.strings.code(d[2]))
        variant = c.variant.indices
        comparable = self.directed & ~c.warmup
        first = _first_of(variant, cipher, comparable)
        quiet = _first_of(variant, cipher, comparable & ~c.contended) if c.contended.any() else first
        combos = first_rows(variant, cipher)  # each (variant, cipher) once, in order of its first row
        rows = []
        for v, own in zip(variant[combos].tolist(), cipher[combos].tolist()):
            storage, transport, config, *causes = c.variant.distinct[v]
            causes = dict(zip(loading.CAUSE_KEYS, causes))
            # a workload that negotiates its own cipher (TLS) records it on the sample; it wins
            causes["transport_cipher"] = self.reader.strings.values[own] or causes["transport_cipher"]
            rows.append(
                {
                    "bundle": str(bundle.path),
                    "machine": machine,
                    "machine_id": machine_id,
                    "tee": tee,
                    "storage": storage,
                    "transport": transport,
                    "config": config,
                    **causes,
                    "first": _first(first, v, own, offset),
                    "first_quiet": _first(quiet, v, own, offset),
                }
            )
        return pd.DataFrame(rows)

    def executions(self, bundle: Bundle) -> pd.DataFrame:
        c = self.columns
        codes = (c.execution.indices, c.workload.indices, self.cfg, c.repetition, c.warmup, c.contended)
        rows = first_rows(*codes)
        execution, workload, cfg, repetition, warmup, contended = (column[rows] for column in codes)
        return pd.DataFrame(
            {
                "bundle": str(bundle.path),
                "execution": [c.execution.distinct[i] for i in execution.tolist()],
                "workload": [c.workload.distinct[i] for i in workload.tolist()],
                "config": [self.reader.configs.values[i] for i in cfg.tolist()],
                "repetition": repetition,
                "warmup": warmup,
                "contended": contended,
            }
        )

    def sources(self) -> np.ndarray:
        """The distinct (grp, cfg, raw) codes of the measured rows with a raw directory (raw: the
        reader's numbering of the directories, each numbered once per distinct value, not per row)."""
        c = self.columns
        raw = np.array([self.reader.raws.code(value) if value else -1 for value in c.raw.distinct], dtype=np.int64)
        raw = raw[c.raw.indices]
        rows = np.flatnonzero((raw >= 0) & ~c.warmup)
        if not len(rows):
            return np.zeros((0, 3), dtype=np.int64)
        codes = np.stack([self.grp[rows].astype(np.int64), self.cfg[rows].astype(np.int64), raw[rows]], axis=1)
        return codes[first_rows(*codes.T)]

    def tail_operations(self) -> pd.DataFrame:
        """Per (grp, cfg) of the measured samples that record the operations their percentile rests
        on (fio's and YCSB's latencies), the fewest: (grp, cfg, operations); empty where none do."""
        c = self.columns
        operations = _lookup(c.metadata, lambda d: d[3], np.int64)
        rows = (operations > 0) & ~c.warmup
        if not rows.any():
            return pd.DataFrame(columns=["grp", "cfg", "operations"])
        found = pd.DataFrame({"grp": self.grp[rows], "cfg": self.cfg[rows], "operations": operations[rows]})
        return found.groupby(["grp", "cfg"], sort=False, as_index=False)["operations"].min()

    def config_counts(self) -> pd.DataFrame:
        """Per configuration of this bundle (in order of appearance): samples, warmups, contended."""
        c = self.columns
        order = pd.unique(self.cfg)
        size = len(self.reader.configs.values)
        return pd.DataFrame(
            {
                "cfg": order,
                "samples": np.bincount(self.cfg, minlength=size)[order],
                "warmup": np.bincount(self.cfg[c.warmup], minlength=size)[order],
                "contended": np.bincount(self.cfg[c.contended], minlength=size)[order],
            }
        )

    def kept(self, stride: int) -> np.ndarray | None:
        """The rows of the bounded per-sample frame: every ``stride``-th of each group and
        configuration (all with stride 1: None)."""
        if stride == 1:
            return None
        key = pd.Series(self.grp.astype(np.int64) * (len(self.reader.configs.values) + 1) + self.cfg)
        rank = key.groupby(key.to_numpy()).cumcount().to_numpy()
        return np.flatnonzero(rank % stride == 0)


def sorted_unique(values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``np.unique(values, return_index=True, return_inverse=True)`` of a 1-D array, the same three
    arrays, by one stable argsort (numpy's own took ten times a sort's time on millions of int64), or
    where the values are a few small non-negative ints, by the table of their first positions."""
    values = np.asarray(values)
    if len(values) and values.dtype.kind in "iu" and values.min() >= 0:
        least = _least(values, int(values.max()) + 1)
        if least is not None:
            present = np.flatnonzero(least < len(values))
            number = np.empty(len(least), dtype=np.intp)
            number[present] = np.arange(len(present))
            return present.astype(values.dtype), least[present], number[values]
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    new = np.empty(len(ordered), dtype=bool)
    new[:1] = True
    np.not_equal(ordered[1:], ordered[:-1], out=new[1:])
    inverse = np.empty(len(values), dtype=np.intp)
    inverse[order] = np.cumsum(new) - 1
    return ordered[new], order[new], inverse


def first_rows(*columns: Any) -> np.ndarray:
    """The positions of the first row of each distinct combination of the columns' values, in row
    order (drop_duplicates on integers, numbered into one int64 key: by the table of each key's first
    position where the keys are few for the rows, else hashed)."""
    key = np.zeros(len(columns[0]), dtype=np.int64)
    scale = 1
    for column in columns:
        codes, size = _small_codes(np.asarray(column))
        key += codes * scale
        scale *= size
        if scale >= 2**62:
            return np.flatnonzero(~pd.DataFrame({i: np.asarray(c) for i, c in enumerate(columns)}).duplicated())
    least = _least(key, scale)
    if least is not None:
        return np.sort(least[least < len(key)])
    return np.flatnonzero(~pd.Series(key).duplicated().to_numpy())  # hashed: no sort


def _least(key: np.ndarray, size: int) -> np.ndarray | None:
    """Per key value 0..size-1, the first position holding it (len(key) where none), the positions
    scattered into a table (no sort, no hashing): None where that table would be large beside the keys."""
    if size > max(4 * len(key), 2**16):
        return None
    least = np.full(size, len(key), dtype=np.intp)
    np.minimum.at(least, key, np.arange(len(key)))
    return least


def _small_codes(values: np.ndarray) -> tuple[np.ndarray, int]:
    """The values as codes 0..size-1 (as they are where they already are small non-negative ints)."""
    if values.dtype == bool:
        return values.astype(np.int64), 2
    if values.dtype.kind in "iu" and len(values):
        low, high = int(values.min()), int(values.max())
        if low >= 0 and high < 2**20:
            return values.astype(np.int64), high + 1
    codes, uniques = pd.factorize(values, sort=False)
    return codes.astype(np.int64) + 1, len(uniques) + 1  # a missing value (-1) is code 0


def _first_of(variant: np.ndarray, cipher: np.ndarray, mask: np.ndarray) -> dict[tuple[int, int], int]:
    """{(variant, cipher) code: its first row} among the rows ``mask`` selects."""
    rows = np.flatnonzero(mask)
    if len(rows):
        rows = rows[first_rows(variant[rows], cipher[rows])]
    return dict(zip(zip(variant[rows].tolist(), cipher[rows].tolist()), rows.tolist()))


def _first(firsts: dict[tuple[int, int], int], variant: int, cipher: int, offset: int) -> float:
    row = firsts.get((variant, cipher))
    return math.inf if row is None else float(row + offset)
