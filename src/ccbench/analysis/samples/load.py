"""Load bundles into one pandas DataFrame, one row per sample, with a configuration label.

Columns: bundle, machine, machine_id (the machine the bundle was measured on: the probe's
``machine_id``, else its hostname, else the bundle's path; bundles sharing a label are replicas
when their machine ids differ), tee, storage, transport, config, workload, kind, params (canonical
JSON), case (short label of the sub-case, e.g. "4k randread"), metric, unit, value, better, repetition,
warmup, timestamp, contended (bool; False where the bundle does not say), execution and raw (the
execution key and its raw directory inside the bundle, bundle format 2; empty before), and what
served each protection layer, from the variant: storage_cipher_driver, storage_cipher_accelerated,
transport_cipher (the sample's own ``transport_cipher`` metadata where the workload negotiated one,
e.g. the TLS suite), transport_aes_accelerated (None where not recorded). ``config`` is
"machine / TEE / storage / transport" with absent parts left out.
"""

from __future__ import annotations

import gc
import warnings
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pandas as pd
import pyarrow as pa

from ccbench.analysis.labels import OWN_PATH, own_path_label
from ccbench.basics.cases import case_text
from ccbench.basics.errors import BundleError
from ccbench.basics.helper import Helper, outcome
from ccbench.bundle import SAMPLES, Bundle, find_bundles, read_bundle
from ccbench.bundle.columnar import read_samples
from ccbench.probe.facts import machine_of

#: optional variant keys naming the implementation behind a protection layer (see COMMON contract)
CAUSE_KEYS = [
    "storage_cipher_driver",
    "storage_cipher_accelerated",
    "transport_cipher",
    "transport_aes_accelerated",
    # the kernel cipher's own speed, measured when the storage variant was set up (ccbench.analysis.judgement.lint)
    "storage_cipher_MBps",
]

#: columns that hold one value per bundle (or per variant, for storage, transport and config)
BUNDLE_COLUMNS = ["bundle", "machine", "machine_id", "tee", "storage", "transport", "config"]
#: columns read from each sample
SAMPLE_COLUMNS = [
    "workload",
    "kind",
    "params",
    "case",
    "metric",
    "unit",
    "value",
    "better",
    "repetition",
    "warmup",
    "timestamp",
    "contended",
    "execution",
    "raw",
]
#: whether a sample is a summary statistic (an imported console log's mean) rather than one measured value
SUMMARY_COLUMN = "summary_statistic"
COLUMNS = [*BUNDLE_COLUMNS, *SAMPLE_COLUMNS, *CAUSE_KEYS, SUMMARY_COLUMN]
#: what the frame needs of a bundle's Parquet file (the flattened params and variant columns are not read)
READ_COLUMNS = [
    *(name for name in SAMPLE_COLUMNS if name != "case"),  # the case text is derived from metadata
    "variant",
    "metadata",
]

TEE_NAMES = {
    "none": "no TEE",
    "sev": "SEV",
    "sev-es": "SEV-ES",
    "sev-snp": "SEV-SNP",
    "tdx": "TDX",
    "sgx": "SGX",
    "unknown": "TEE unknown",
}


def storage_label(variant: dict[str, Any]) -> str | None:
    """A variant's storage as the comparison names it: its mechanism for ``encrypted`` ("luks2"), and
    for a ``--storage-path`` variant its name with what its directory was found to be ("tmpfs (own
    path, plain)": ccbench.analysis.labels.own_path_label), which decides its layer."""
    storage = variant.get("storage")
    if not storage:
        return None
    mechanism = variant.get("storage_mechanism")
    if mechanism == "user-path":
        return own_path_label(str(storage), variant.get("storage_protection"))
    if storage == "encrypted" and mechanism:
        return str(mechanism)
    return str(storage)


def own_path_variants(bundles: Iterable[Bundle], frame: pd.DataFrame | None) -> dict[str, list[dict[str, Any]]]:
    """{bundle path: the distinct storage variants it ran in directories the user gave (``--storage-path``:
    ``storage_mechanism`` user-path), as its samples record them (name, directory, what it was found to
    be)}. Only the bundles whose configurations in ``frame`` (a frame with ``bundle`` and ``storage``)
    hold such a variant are read again, and only their ``variant`` column."""
    if frame is None or frame.empty or "storage" not in frame:
        return {}
    own = frame["storage"].astype(str).str.contains(f" ({OWN_PATH}", regex=False)
    wanted = set(frame.loc[own, "bundle"].astype(str))
    found: dict[str, list[dict[str, Any]]] = {}
    for bundle in bundles:
        if str(bundle.path) not in wanted:
            continue
        table = read_samples(bundle, ["variant"])
        if "variant" not in table.column_names:
            continue
        encoded = table.column("variant").combine_chunks()
        texts = encoded.dictionary if pa.types.is_dictionary(encoded.type) else encoded.unique()
        for text in texts.to_pylist():
            variant = orjson.loads(text or "null") or {}
            if isinstance(variant, dict) and variant.get("storage_mechanism") == "user-path":
                seen = found.setdefault(str(bundle.path), [])
                if variant not in seen:
                    seen.append(variant)
    return found


def config_label(machine: str, tee: str, storage: str | None, transport: str | None) -> str:
    parts = [machine, TEE_NAMES.get(tee, tee)]
    if storage:
        parts.append(storage)
    if transport:
        parts.append(transport)
    return " / ".join(parts)


def parse_labels(items: Iterable[str], within: Iterable[str | Path] | None = None) -> dict[str, str]:
    """``--label BUNDLE=NAME`` values as {the bundle's resolved path: NAME}; with ``within`` (the paths
    the command was given), a BUNDLE that is none of the bundles under them is a one-line error that
    names the bundles there are (a label that labels nothing would be silently ignored)."""
    labels = {}
    given = {}
    for item in items:
        path, sep, name = item.rpartition("=")
        if not sep or not path or not name:
            raise BundleError(f"--label {item!r}: expected BUNDLE=NAME")
        labels[str(Path(path).resolve())] = name
        given[str(Path(path).resolve())] = item
    if within is not None and labels:
        bundles = find_bundles(within)
        there = {str(Path(b).resolve()) for b in bundles}
        for key, item in given.items():
            if key not in there:
                names = "; ".join(str(b) for b in bundles[:10]) + (
                    f" and {len(bundles) - 10} more" if len(bundles) > 10 else ""
                )
                raise BundleError(
                    f"--label {item!r}: {item.rpartition('=')[0]} is none of the bundles given; "
                    f"give BUNDLE=NAME with one of them: {names}"
                )
    return labels


def load_bundles(paths: Iterable[str | Path], samples: bool = True) -> list[Bundle]:
    """The bundles under ``paths``; with samples=False the samples stay on disk until
    frame_from_bundles reads them a chunk at a time (less memory, and faster)."""
    # many small dicts: the cyclic garbage collector would re-scan them again and again while they
    # are created (a third of the load time); none of them can form a cycle
    gc.disable()
    try:
        return _load_bundles(paths, samples)
    finally:
        gc.enable()


def _load_bundles(paths: Iterable[str | Path], samples: bool) -> list[Bundle]:
    bundles = []
    for path in find_bundles(paths):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            bundle = read_bundle(path, samples=samples)
        for warning in caught:
            warnings.warn(str(warning.message), stacklevel=2)
        bundles.append(bundle)
    return bundles


def frame_from_bundles(
    bundles: list[Bundle], labels: dict[str, str] | None = None, helper: Helper | None = None
) -> pd.DataFrame:
    """One frame of all samples, bundles in the order given. With a ccbench.basics.helper.Helper, bundles
    whose samples are still on disk are shared out: the helpers read some while this process reads
    the others (the largest first, each to the least loaded)."""
    labels = labels or {}
    futures: dict[int, Any] = {}
    if helper is not None and helper.enabled and len(bundles) > 1:
        sizes = [_size(bundle) for bundle in bundles]
        load = [0] * helper.jobs
        for index in sorted(range(len(bundles)), key=lambda i: -sizes[i]):
            worker = load.index(min(load))
            load[worker] += sizes[index] or 1
            if worker and bundles[index].samples is None:
                futures[index] = helper.submit(_frame_in_helper, bundles[index], labels)
    gc.disable()  # as in load_bundles: hundreds of thousands of acyclic objects
    try:
        frames = {i: _bundle_frame(bundle, labels) for i, bundle in enumerate(bundles) if futures.get(i) is None}
    finally:
        gc.enable()
    for index, future in futures.items():
        if future is not None:
            # a helper that failed is redone here, where a bundle's own error is raised for the user
            frames[index], messages = outcome(future, lambda index=index: (_bundle_frame(bundles[index], labels), []))
            for message in messages:
                warnings.warn(message, stacklevel=2)
    present = [frames[i] for i in range(len(bundles)) if frames[i] is not None]
    if not present:
        return pd.DataFrame(columns=COLUMNS)
    frame = pd.concat(present, ignore_index=True) if len(present) > 1 else present[0]
    return frame[COLUMNS]


def _size(bundle: Bundle) -> int:
    try:
        return (Path(bundle.path) / SAMPLES).stat().st_size
    except OSError:
        return 0


def _frame_in_helper(bundle: Bundle, labels: dict[str, str]) -> tuple[pd.DataFrame | None, list[str]]:
    """In a helper process: one bundle's frame, and the warnings it raised (to be repeated by the caller)."""
    gc.disable()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            frame = _bundle_frame(bundle, labels)
    finally:
        gc.enable()  # the helper goes on to draw charts, whose figures do form cycles
    return frame, [str(w.message) for w in caught]


def _bundle_frame(bundle: Bundle, labels: dict[str, str]) -> pd.DataFrame | None:
    """One bundle's samples as columns, read from its Parquet file (or the cache's; see
    ccbench.bundle.columnar) with Arrow."""
    return frame_of_table(bundle, read_samples(bundle, READ_COLUMNS), labels)


def describe_variant(text: str | None) -> tuple[str | None, str | None, tuple]:
    """(storage label, transport, the CAUSE_KEYS values) of a variant's JSON text."""
    variant = orjson.loads(text or "null") or {}
    return storage_label(variant), variant.get("transport"), tuple(variant.get(name) for name in CAUSE_KEYS)


def describe_metadata(text: str | None) -> tuple[str, bool, str | None, int]:
    """(case text, whether the sample is a summary statistic, the sample's own transport cipher, the
    operations a percentile rests on: 0 where not recorded) of a sample's metadata JSON text."""
    metadata = orjson.loads(text or "null")
    metadata = metadata if isinstance(metadata, dict) else {}
    operations = metadata.get("operations")
    return (
        case_text(_case_dict(metadata)) or "",
        metadata.get("statistic") == "mean",
        metadata.get("transport_cipher") or None,
        operations if isinstance(operations, int) and not isinstance(operations, bool) else 0,
    )


def canonical_params(text: str | None) -> str:
    """The params' JSON text with sorted keys, "{}" for none: one text per distinct params."""
    return orjson.dumps(orjson.loads(text or "null") or {}, option=orjson.OPT_SORT_KEYS).decode()


def frame_of_table(bundle: Bundle, table: pa.Table, labels: dict[str, str]) -> pd.DataFrame | None:
    """The frame of a table of a bundle's samples (READ_COLUMNS of ccbench.bundle.columnar's layout).

    The string columns come dictionary-encoded: each distinct variant, params, metadata and string
    is described once (labels, case text) and spread to the rows by the dictionary's indices, so the
    per-sample work is array indexing, never a Python loop over records.
    """
    if not table.num_rows:
        return None
    machine, machine_id, tee = machine_of(bundle.probe, bundle.path, labels)

    def described_variant(text: str | None) -> tuple:
        storage, transport, causes = describe_variant(text)
        return (storage, transport, config_label(machine, tee, storage, transport), *causes)

    variants = Described(table.column("variant"), described_variant)
    metadata = Described(table.column("metadata"), describe_metadata)
    sample_cipher = metadata.objects(2)
    causes = {name: variants.objects(3 + i) for i, name in enumerate(CAUSE_KEYS)}
    # a workload that negotiates its own cipher (TLS) records it on the sample; it wins over the
    # variant's, which was fixed before the run
    if any(sample_cipher):
        causes["transport_cipher"] = [
            own or variant for own, variant in zip(sample_cipher, causes["transport_cipher"], strict=True)
        ]

    def strings(name: str, missing: str | None = None) -> np.ndarray:
        return Described(table.column(name), lambda value: missing if value is None else value).part()

    return pd.DataFrame(
        {
            "bundle": str(bundle.path),
            "machine": machine,
            "machine_id": machine_id,
            "tee": tee,
            "storage": variants.part(0),
            "transport": variants.part(1),
            "config": variants.part(2),
            "workload": strings("workload"),
            "kind": strings("kind", ""),
            "params": Described(table.column("params"), canonical_params).part(),
            "case": metadata.part(0),
            "metric": strings("metric"),
            "unit": strings("unit"),
            "better": strings("better"),
            "timestamp": table.column("timestamp").to_numpy(zero_copy_only=False),
            "execution": strings("execution", ""),
            "raw": strings("raw", ""),
            "value": table.column("value").to_numpy(zero_copy_only=False).astype(float),
            "repetition": table.column("repetition").to_numpy(zero_copy_only=False).astype(int),
            "warmup": table.column("warmup").to_numpy(zero_copy_only=False).astype(bool),
            "contended": table.column("contended").fill_null(False).to_numpy(zero_copy_only=False).astype(bool),
            **causes,
            SUMMARY_COLUMN: metadata.objects(1).astype(bool),
        }
    )


class Described:
    """``describe`` of each row's value of a column, called once per distinct value (the column
    dictionary-encoded, as read_samples reads strings) and spread to the rows by the indices."""

    def __init__(self, column: pa.ChunkedArray, describe: Callable[[Any], Any]):
        encoded = column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()
        if not pa.types.is_dictionary(encoded.type):
            encoded = encoded.dictionary_encode()
        self.distinct = [describe(value) for value in encoded.dictionary.to_pylist()]
        self.distinct.append(describe(None))  # for the rows whose value is null
        self.indices = encoded.indices.fill_null(len(encoded.dictionary)).to_numpy(zero_copy_only=False)

        self._used: np.ndarray | None = None

    def part(self, position: int | None = None) -> np.ndarray | pd.api.extensions.ExtensionArray:
        """Per row: the description, or the element ``position`` of it (a tuple). Strings (with
        None where missing) come as pandas' string array, made from Arrow directly: the dtype pandas
        would infer from the objects, without it looking at every row's object to infer it."""
        values = [described if position is None else described[position] for described in self.distinct]
        if self._used is None:
            self._used = np.flatnonzero(np.bincount(self.indices))  # np.unique's, without its sort
        used = [values[index] for index in self._used]
        if any(type(v) is str for v in used) and all(v is None or type(v) is str for v in used):
            strings = pa.array(values, type=pa.large_string()).take(pa.array(self.indices))
            return pd.array(pd.arrays.ArrowExtensionArray(strings), dtype=pd.StringDtype(na_value=np.nan))
        return self.objects(position)

    def objects(self, position: int | None = None) -> np.ndarray:
        """As part, always an array of Python objects."""
        objects = np.empty(len(self.distinct), dtype=object)
        for index, described in enumerate(self.distinct):  # one by one: a tuple is one object here
            objects[index] = described if position is None else described[position]
        return objects[self.indices]


def _case_dict(metadata) -> dict:
    case = metadata.get("case") if isinstance(metadata, dict) else None
    return case if isinstance(case, dict) else {}


def load(paths, labels: dict[str, str] | Iterable[str] | None = None) -> pd.DataFrame:
    """All samples of the bundles (or directories of bundles) under ``paths`` as one DataFrame."""
    if isinstance(paths, (str, Path)):
        paths = [paths]
    if labels is not None and not isinstance(labels, dict):
        labels = parse_labels(labels)
    elif labels:
        labels = {str(Path(k).resolve()): v for k, v in labels.items()}
    return frame_from_bundles(load_bundles(paths, samples=False), labels)
