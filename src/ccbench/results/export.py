"""ccbench export: every sample of some bundles as one table, joined with its machine's facts,
written as Parquet or CSV for pandas, DuckDB, R (arrow), Spark or BigQuery. The columns and their
types are declared here (SCHEMA) and documented in docs/bundle-format.md ("Export").

The export streams: one bundle at a time, its samples are read as Arrow columns from its Parquet
file (its own samples.parquet or the columnar cache's, ccbench.bundle.columnar, as the analysis
engine reads them), each distinct variant, params, metadata and timestamp text described once and
spread to the rows by the dictionary's indices, the bundle's facts (probe and provenance) added as
constant columns, and the batch written to one Parquet (or CSV) writer of the declared schema. At
most one bundle's samples are in memory, never a per-sample frame of them all.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ccbench.basics.errors import CCBenchError
from ccbench.bundle import Bundle

FORMATS = ("parquet", "csv")

_TIME = pa.timestamp("us", tz="UTC")
#: the export's columns and their types, in order (docs/bundle-format.md, "Export"): every file has
#: them, also where every value of a column is missing
SCHEMA = pa.schema(
    [
        *[(name, pa.string()) for name in ("label", "bundle", "machine_id", "storage", "transport", "config")],
        *[(name, pa.string()) for name in ("workload", "kind", "params", "case", "metric", "unit")],
        ("value", pa.float64()),
        ("better", pa.string()),
        ("repetition", pa.int64()),
        ("warmup", pa.bool_()),
        ("timestamp", _TIME),
        ("contended", pa.bool_()),
        ("execution", pa.string()),
        ("raw", pa.string()),
        ("storage_cipher_driver", pa.string()),
        ("storage_cipher_accelerated", pa.bool_()),
        ("transport_cipher", pa.string()),
        ("transport_aes_accelerated", pa.bool_()),
        ("storage_cipher_MBps", pa.float64()),
        ("summary_statistic", pa.bool_()),
        ("tee_technology", pa.string()),
        ("cpu_model", pa.string()),
        ("cpu_threads", pa.int64()),
        ("memory_bytes", pa.int64()),
        *[(name, pa.string()) for name in ("kernel_release", "virtualization", "storage_protection", "hostname")],
        ("ccbench_version", pa.string()),
        ("bundle_started_at", _TIME),
        ("imported", pa.bool_()),
        ("kernel_cmdline", pa.string()),
        ("swiotlb_bytes", pa.int64()),
        ("swiotlb_source", pa.string()),
        ("swiotlb_dynamic", pa.bool_()),
        ("page_size", pa.int64()),
        ("thp_enabled", pa.string()),
        ("thp_defrag", pa.string()),
        ("hugepages_total", pa.int64()),
        ("vcpus", pa.int64()),
        ("smt", pa.bool_()),
        *[(name, pa.string()) for name in ("microcode", "hypervisor", "tdx_idle", "clocksource")],
        ("tee_evidence_verified", pa.bool_()),
        ("tee_debug", pa.bool_()),
        ("snp_policy", pa.string()),
        ("snp_smt_allowed", pa.bool_()),
        ("snp_migrate_ma", pa.bool_()),
        ("snp_vmpl", pa.int64()),
        *[(name, pa.string()) for name in ("snp_reported_tcb", "snp_current_tcb", "snp_platform_info")],
        ("snp_platform_smt", pa.bool_()),
        ("snp_platform_tsme", pa.bool_()),
        *[(name, pa.string()) for name in ("tdx_tee_tcb_svn", "tdx_mrseam", "tdx_td_attributes")],
        ("tdx_sept_ve_disable", pa.bool_()),
        ("implausible", pa.string()),
    ]
)


def bundle_facts(bundle: Bundle) -> dict[str, Any]:
    """The machine facts joined to each of the bundle's samples (docs/bundle-format.md, Export): the
    probe's record (ccbench.probe.facts), the manifest's, and the CC provenance."""
    from ccbench.probe.facts import recorded_facts

    recorded = recorded_facts(bundle.probe)
    shown = ("cpu_model", "cpu_threads", "memory_bytes", "kernel_release", "virtualization", "storage_protection")
    return {
        "tee_technology": recorded["tee_technology"] or "unknown",
        **{name: recorded[name] for name in (*shown, "hostname")},
        "ccbench_version": (bundle.manifest.get("tool") or {}).get("version"),
        "bundle_started_at": bundle.manifest.get("started_at"),
        "imported": bool(bundle.manifest.get("imported")),
        **provenance_columns(bundle),
    }


def provenance_columns(bundle: Bundle) -> dict[str, Any]:
    """The bundle's CC provenance (probe and evidence, docs/bundle-format.md) as flat columns."""
    import json

    from ccbench.attestation.provenance import bundle_provenance

    provenance = bundle_provenance(bundle.path, bundle.probe)
    swiotlb, thp = provenance["swiotlb"] or {}, provenance["thp"] or {}
    evidence = provenance["tee_evidence"] or {}
    snp = evidence if evidence.get("technology") == "sev-snp" else {}
    tdx = evidence if evidence.get("technology") == "tdx" else {}
    policy, platform, attributes = (
        snp.get("policy") or {},
        snp.get("platform_info") or {},
        tdx.get("td_attributes") or {},
    )

    def tcb(value):
        return json.dumps(value, sort_keys=True) if value else None

    return {
        "kernel_cmdline": provenance["kernel_cmdline"],
        "swiotlb_bytes": swiotlb.get("bytes"),
        "swiotlb_source": swiotlb.get("source"),
        "swiotlb_dynamic": swiotlb.get("dynamic"),
        "page_size": provenance["page_size"],
        "thp_enabled": thp.get("enabled"),
        "thp_defrag": thp.get("defrag"),
        "hugepages_total": provenance["hugepages_total"],
        "vcpus": provenance["vcpus"],
        "smt": provenance["smt"],
        "microcode": provenance["microcode"],
        "hypervisor": provenance["hypervisor"],
        "tdx_idle": provenance["tdx_idle"],
        "clocksource": provenance["clocksource"],
        "tee_evidence_verified": evidence.get("verified"),
        "tee_debug": policy.get("debug") if snp else attributes.get("debug"),
        "snp_policy": policy.get("raw"),
        "snp_smt_allowed": policy.get("smt"),
        "snp_migrate_ma": policy.get("migrate_ma"),
        "snp_vmpl": snp.get("vmpl"),
        "snp_reported_tcb": tcb(snp.get("reported_tcb")),
        "snp_current_tcb": tcb(snp.get("current_tcb")),
        "snp_platform_info": platform.get("raw"),
        "snp_platform_smt": platform.get("smt_enabled"),
        "snp_platform_tsme": platform.get("tsme_enabled"),
        "tdx_tee_tcb_svn": tdx.get("tee_tcb_svn"),
        "tdx_mrseam": tdx.get("mrseam"),
        "tdx_td_attributes": attributes.get("raw"),
        "tdx_sept_ve_disable": attributes.get("sept_ve_disable"),
    }


def export(
    paths, out: Path, format_name: str, labels: dict[str, str] | None = None, force: bool = False
) -> tuple[int, int]:
    """Write the samples of every finished bundle under ``paths`` (each once, warmups included and
    flagged), one row each, to ``out``; returns (rows, bundles with samples).

    Written to a temporary file of this process beside ``out`` and made ``out`` by one rename (or one
    hard link without ``force``, so of two exports to one new name one wins whole and the other is
    refused): never half a table, never two tables mixed. A killed export's temporary file is
    removed by the next export to that directory."""
    from ccbench.analysis.samples.load import load_bundles
    from ccbench.basics.fsutil import staged_file

    out = check_output(out, format_name, force)
    found = distinct_bundles(paths)
    reasons = implausible_reasons(found, labels)
    bundles = load_bundles(found, samples=False)
    rows = taken = 0
    try:
        with staged_file(out, replace=force) as temporary, _Writer(temporary, format_name) as writer:
            made = (
                (i, batch)
                for i, bundle in enumerate(bundles)
                for batch in bundle_batches(bundle, labels or {}, reasons)
            )
            taken_from = set()
            for index, batch in _ahead(made):
                writer.write(batch)
                rows += batch.num_rows
                taken_from.add(index)
            taken = len(taken_from)
    except FileExistsError:
        raise CCBenchError(f"-o {out}: another process wrote it meanwhile; give another name, or --force") from None
    except OSError as exc:
        raise CCBenchError(f"-o {out}: cannot write it ({exc.strerror or exc})") from None
    return rows, taken


def implausible_reasons(paths: list[Path], labels: dict[str, str] | None) -> dict[tuple[str, str, str, str], str]:
    """{(workload, params, metric, configuration): reason} of the comparisons ``ccbench compare`` (its
    default baseline) leaves out as implausible, by the configuration compared: the export's
    ``implausible`` column, so that a table read without ccbench leaves out what every output of
    ccbench leaves out. Bundles with nothing to compare have no reasons."""
    from ccbench.analysis.comparison import comparison
    from ccbench.analysis.judgement.semantics import implausible_mask

    try:
        table = comparison(paths, labels, frame=False).table
    except CCBenchError:
        return {}
    if table.empty or "implausible" not in table:
        return {}
    marked = table[implausible_mask(table)]
    reasons: dict[tuple[str, str, str, str], list[str]] = {}
    columns = (marked[c] for c in ("workload", "params", "metric", "config"))
    for key, reason in zip(zip(*columns), marked["implausible"]):
        found = reasons.setdefault(tuple(map(str, key)), [])
        if reason not in found:  # one configuration against two baselines: each reason once
            found.append(reason)
    return {key: "; ".join(found) for key, found in reasons.items()}


def _implausible_column(
    encoded: dict[str, tuple[np.ndarray, pa.Array]], warmup: np.ndarray, reasons: dict
) -> tuple[np.ndarray, pa.Array]:
    """Each row's implausible reason ("" for none, and for a warmup, which no comparison holds) as
    indices into its distinct values: found once per distinct workload, params, metric and
    configuration, never per row."""
    keys = ("workload", "params", "metric", "config")
    if not reasons:
        return np.zeros(len(warmup), dtype=np.int32), pa.array([""], pa.string())
    stacked = np.stack([encoded[k][0].astype(np.int64) for k in keys] + [warmup.astype(np.int64)], axis=1)
    distinct, inverse = np.unique(stacked, axis=0, return_inverse=True)
    texts = []
    for row in distinct:
        key = tuple(str(encoded[k][1][int(i)].as_py()) for k, i in zip(keys, row[:4]))
        texts.append("" if row[4] else reasons.get(key, ""))
    return inverse.reshape(-1).astype(np.int32), pa.array(texts, pa.string())


def _ahead(items: Iterator[Any], depth: int = 2) -> Iterator[Any]:
    """The items, made by a thread while the caller uses the ones before: the next batch is read and
    built while this one is compressed and written (both mostly outside the GIL). At most ``depth``
    items wait; the maker's exception is raised here; the maker stops when the caller does."""
    import queue
    import threading

    waiting: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()
    done = object()

    def make() -> None:
        try:
            for item in items:
                while not stop.is_set():
                    try:
                        waiting.put((item, None), timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
            waiting.put((done, None))
        except BaseException as exc:  # handed to the caller, raised there
            waiting.put((done, exc))

    maker = threading.Thread(target=make, name="ccbench-export-reader", daemon=True)
    maker.start()
    try:
        while True:
            item, error = waiting.get()
            if item is done:
                if error is not None:
                    raise error
                return
            yield item
    finally:
        stop.set()
        while maker.is_alive():  # a maker waiting to put is let through, then ends
            try:
                waiting.get_nowait()
            except queue.Empty:
                maker.join(0.05)


class _Writer:
    """One Parquet (zstd) or CSV writer of SCHEMA."""

    def __init__(self, path: Path, format_name: str):
        self.path, self.format_name = path, format_name

    def __enter__(self) -> _Writer:
        if self.format_name == "parquet":
            import pyarrow.parquet as pq

            # the batches' text is dictionary-encoded, written as Parquet dictionary pages; without
            # Arrow's own schema in the file it reads back as plain text (SCHEMA), which is the
            # type every reader of the export is promised. The measured values are rarely repeated:
            # written plain (a dictionary of them is hashed, then dropped for being too large)
            dictionary = [name for name in WRITTEN.names if name != "value"]
            self.writer = pq.ParquetWriter(
                self.path, WRITTEN, compression="zstd", store_schema=False, use_dictionary=dictionary
            )
        else:
            import pyarrow.csv as pcsv

            self.writer = pcsv.CSVWriter(self.path, SCHEMA)
        return self

    def write(self, batch: pa.RecordBatch) -> None:
        self.writer.write_batch(batch if self.format_name == "parquet" else batch.cast(SCHEMA))

    def __exit__(self, *_: object) -> None:
        self.writer.close()


#: rows built and written at a time (a Parquet row group): the strings of a batch, the bundle's
#: facts repeated on every row, are what the export holds beside one bundle's encoded columns
BATCH_ROWS = 1 << 17


#: SCHEMA's text columns
_STRINGS = frozenset(f.name for f in SCHEMA if pa.types.is_string(f.type))
#: SCHEMA as the batches hold it: text dictionary-encoded (a file reads back as SCHEMA)
WRITTEN = pa.schema(
    [pa.field(f.name, pa.dictionary(pa.int32(), pa.string()) if f.name in _STRINGS else f.type) for f in SCHEMA]
)


def bundle_batches(
    bundle: Bundle, labels: dict[str, str], reasons: dict | None = None, rows: int = BATCH_ROWS
) -> Iterator[pa.RecordBatch]:
    """The bundle's rows of the export (SCHEMA), ``rows`` at a time; none for a bundle without samples.
    ``reasons``: implausible_reasons of the export's bundles (none: the column is empty).

    The bundle's samples as ccbench.analysis.samples.load reads them (its Parquet file, string and JSON
    columns dictionary-encoded); each distinct value is described once and spread to the rows by
    the dictionary's indices (the per-sample view's own columns: ccbench.analysis.samples.load)."""
    from ccbench.analysis.samples import load as loading
    from ccbench.bundle.columnar import read_samples
    from ccbench.probe.facts import machine_of

    table = read_samples(bundle, loading.READ_COLUMNS)
    if not table.num_rows:
        return
    machine, machine_id, tee = machine_of(bundle.probe, bundle.path, labels)

    def described_variant(text: str | None) -> tuple:
        storage, transport, causes = loading.describe_variant(text)
        return (storage, transport, loading.config_label(machine, tee, storage, transport), *causes)

    variant = loading.Described(table.column("variant"), described_variant)
    metadata = loading.Described(table.column("metadata"), loading.describe_metadata)
    # per column: the rows' indices into its distinct values, and those values as SCHEMA types them
    encoded: dict[str, tuple[np.ndarray, pa.Array]] = {
        "params": _encoded(loading.Described(table.column("params"), loading.canonical_params), pa.string()),
        "timestamp": _timestamps(loading.Described(table.column("timestamp"), _same(None))),
        "summary_statistic": _encoded(metadata, pa.bool_(), lambda d: bool(d[1])),
        "case": _encoded(metadata, pa.string(), lambda d: d[0]),
        "own_cipher": _encoded(metadata, pa.string(), lambda d: d[2]),
    }
    for position, name in enumerate(["storage", "transport", "config", *loading.CAUSE_KEYS]):
        encoded[name] = _encoded(variant, SCHEMA.field(name).type, lambda d, p=position: d[p])
    for name, missing in [("workload", None), ("kind", ""), ("metric", None), ("unit", None), ("better", None)]:
        encoded[name] = _encoded(loading.Described(table.column(name), _same(missing)), pa.string())
    for name in ("execution", "raw"):
        encoded[name] = _encoded(loading.Described(table.column(name), _same("")), pa.string())
    warmups = table.column("warmup").combine_chunks().fill_null(False).to_numpy(zero_copy_only=False)
    encoded["implausible"] = _implausible_column(encoded, warmups, reasons or {})
    facts = {"label": machine, "bundle": str(bundle.path), "machine_id": machine_id, **bundle_facts(bundle)}
    constants = {}
    for name, value in facts.items():
        constant = _typed([value], SCHEMA.field(name).type)
        if name in _STRINGS:  # one value, and every row's index 0
            encoded[name] = (np.zeros(table.num_rows, dtype=np.int32), constant)
        else:
            constants[name] = constant[0]
    own_cipher = encoded.pop("own_cipher")
    own_used = bool(
        own_cipher[1].null_count < len(own_cipher[1])
        and own_cipher[1].is_valid().to_numpy(zero_copy_only=False)[own_cipher[0]].any()
    )
    nulls = {
        name: values.is_null().to_numpy(zero_copy_only=False) if values.null_count else None
        for name, (_, values) in encoded.items()
    }
    for start in range(0, table.num_rows, rows):
        part = table.slice(start, rows)
        size = part.num_rows
        columns: dict[str, pa.Array] = {name: pa.repeat(constant, size) for name, constant in constants.items()}
        for name, (indices, values) in encoded.items():
            chosen = indices[start : start + size]
            if name in _STRINGS:  # written as the dictionary it is: no string repeated per row, none hashed again
                mask = None if nulls[name] is None else nulls[name][chosen]
                columns[name] = pa.DictionaryArray.from_arrays(
                    pa.array(chosen.astype(np.int32, copy=False), mask=mask), values.fill_null("")
                )
            else:
                columns[name] = values.take(pa.array(chosen))
        if own_used:
            # a workload that negotiates its own cipher (TLS) records it on the sample; it wins over
            # the variant's, which was fixed before the run
            own = own_cipher[1].take(pa.array(own_cipher[0][start : start + size]))
            chosen = pc.coalesce(own, columns["transport_cipher"].cast(pa.string()))
            columns["transport_cipher"] = chosen.dictionary_encode()
        value = part.column("value").combine_chunks().cast(pa.float64())
        columns["value"] = pc.if_else(pc.is_nan(value), pa.scalar(None, pa.float64()), value)  # NaN: missing
        columns["repetition"] = part.column("repetition").combine_chunks().cast(pa.int64())
        for name in ("warmup", "contended"):
            columns[name] = part.column(name).combine_chunks().fill_null(False).cast(pa.bool_())
        yield pa.RecordBatch.from_arrays([columns[name] for name in SCHEMA.names], schema=WRITTEN)


def _same(missing: str | None) -> Callable[[Any], Any]:
    return lambda value: missing if value is None else value


def _encoded(described, kind: pa.DataType, pick: Callable[[Any], Any] = lambda d: d) -> tuple[np.ndarray, pa.Array]:
    return described.indices, _typed([pick(d) for d in described.distinct], kind)


def _timestamps(described) -> tuple[np.ndarray, pa.Array]:
    return described.indices, _times(described.distinct)


def _times(texts: list[Any]) -> pa.Array:
    """ISO 8601 texts as UTC times (one without a zone is UTC); what is not one, missing."""
    import pandas as pd

    parsed = pd.to_datetime(pd.Series(texts, dtype=object), utc=True, format="ISO8601", errors="coerce")
    return pa.array(parsed, from_pandas=True).cast(_TIME, safe=False)


def _typed(values: list[Any], kind: pa.DataType) -> pa.Array:
    """Values read from JSON as an array of SCHEMA's type ``kind``: text as it is (another value as
    its str(), as pandas' string type makes it), flags and whole numbers where they are such, a time
    parsed; anything else missing."""
    if pa.types.is_timestamp(kind):
        return _times(values)
    if pa.types.is_string(kind):
        converted = [None if _missing(v) else v if isinstance(v, str) else str(v) for v in values]
    elif pa.types.is_boolean(kind):
        converted = [bool(v) if isinstance(v, (bool, np.bool_)) else None for v in values]
    elif pa.types.is_integer(kind):
        converted = [int(v) if _number(v) and float(v).is_integer() else None for v in values]
    else:
        converted = [float(v) if _number(v) else None for v in values]
    return pa.array(converted, type=kind)


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and value != value)


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and not _missing(value)


def distinct_bundles(paths) -> list[Path]:
    """The finished bundles under ``paths``, each once (named twice, or named and found under a
    directory also named), in the order first given."""
    from ccbench.bundle import find_bundles

    seen: dict[Path, Path] = {}
    for path in find_bundles(paths, finished_only=True):
        seen.setdefault(path.resolve(), path)
    if not seen:
        raise CCBenchError(f"{', '.join(map(str, paths))}: no finished bundle in it")
    return list(seen.values())


def check_output(out: Path, format_name: str, force: bool) -> Path:
    """Refuse an output that would replace a file unasked, land in a bundle, or cannot be written."""
    from ccbench.bundle import bundle_holding

    if format_name not in FORMATS:
        raise CCBenchError(f"--format {format_name!r}: choose parquet or csv")
    out = Path(out)
    if out.is_dir():
        raise CCBenchError(f"-o {out}: is a directory; give a file name (e.g. samples.{format_name})")
    if not out.parent.exists():
        raise CCBenchError(f"-o {out}: the directory {out.parent} does not exist")
    holder = bundle_holding(out.parent)
    if holder is not None:
        raise CCBenchError(f"-o {out}: inside the bundle {holder}, which must stay as it was: write it elsewhere")
    if out.exists() and not force:
        raise CCBenchError(f"-o {out}: exists; give another name, or --force to replace it")
    return out
