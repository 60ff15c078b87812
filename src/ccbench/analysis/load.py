"""Load bundles into one pandas DataFrame, one row per sample, with a configuration label.

Columns: bundle, machine, tee, storage, transport, config, workload, kind, params (canonical JSON),
case (short label of the sub-case, e.g. "4k randread"), metric, unit, value, better, repetition,
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
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pandas as pd

from ccbench.bundle import SAMPLES, Bundle, find_bundles, read_bundle
from ccbench.cases import case_text
from ccbench.errors import BundleError
from ccbench.helper import Helper, outcome

#: optional variant keys naming the implementation behind a protection layer (see COMMON contract)
CAUSE_KEYS = ["storage_cipher_driver", "storage_cipher_accelerated", "transport_cipher", "transport_aes_accelerated"]

#: columns that hold one value per bundle (or per variant, for storage, transport and config)
BUNDLE_COLUMNS = ["bundle", "machine", "tee", "storage", "transport", "config"]
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
    storage = variant.get("storage")
    if not storage:
        return None
    mechanism = variant.get("storage_mechanism")
    if storage == "encrypted" and mechanism:
        return str(mechanism)
    if mechanism == "user-path":
        return f"{storage} (own path)"
    return str(storage)


def config_label(machine: str, tee: str, storage: str | None, transport: str | None) -> str:
    parts = [machine, TEE_NAMES.get(tee, tee)]
    if storage:
        parts.append(storage)
    if transport:
        parts.append(transport)
    return " / ".join(parts)


def parse_labels(items: Iterable[str]) -> dict[str, str]:
    labels = {}
    for item in items:
        path, sep, name = item.rpartition("=")
        if not sep or not path or not name:
            raise BundleError(f"--label {item!r}: expected BUNDLE=NAME")
        labels[str(Path(path).resolve())] = name
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
    """One frame of all samples, bundles in the order given. With a ccbench.helper.Helper, bundles
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
    """One bundle's samples as columns, read a chunk of records at a time.

    Variants, params and cases repeat across thousands of samples: each is serialised to a key and
    each distinct key is described once (labels, case text); repeated strings share one object.
    Only the columns outlive a chunk, so the records of a large bundle are never all in memory.
    """
    probe = bundle.probe
    machine = labels.get(str(Path(bundle.path).resolve())) or probe.get("hostname") or Path(bundle.path).name
    tee = (probe.get("tee") or {}).get("technology") or "unknown"
    dumps, sort = orjson.dumps, orjson.OPT_SORT_KEYS
    variants: dict[bytes, tuple] = {}
    params_of: dict[bytes, str] = {}
    cases_of: dict[bytes, str] = {}
    shared: dict[Any, Any] = {}

    def describe_variant(key: bytes) -> tuple:
        variant = orjson.loads(key)
        storage, transport = storage_label(variant), variant.get("transport")
        causes = tuple(variant.get(name) for name in CAUSE_KEYS)
        return variants.setdefault(key, (storage, transport, config_label(machine, tee, storage, transport), *causes))

    def describe_case(key: bytes) -> str:
        return cases_of.setdefault(key, case_text(orjson.loads(key)) or "")

    # per sample: its variant (described once per distinct variant), the sample columns, and the
    # transport cipher a workload negotiated (it wins over the variant's)
    columns: dict[str, list] = {name: [] for name in ("variant", *SAMPLE_COLUMNS, "sample_cipher", SUMMARY_COLUMN)}
    # every key is looked up as soon as it is made and then dropped: only the distinct ones are kept
    # (orjson's output buffers are large for their size; a hundred thousand of them would cost
    # hundreds of megabytes)
    for chunk in bundle.sample_chunks():
        columns["variant"] += [
            variants.get(k) or describe_variant(k) for k in (dumps(s["variant"] or {}, option=sort) for s in chunk)
        ]
        columns["params"] += [
            params_of.get(k) or params_of.setdefault(k, k.decode())
            for k in (dumps(s["params"] or {}, option=sort) for s in chunk)
        ]
        # the case label keeps the case's own key order ("4k randread"), so its key is not sorted
        columns["case"] += [
            cases_of.get(k) if k in cases_of else describe_case(k)
            for k in (dumps(_case_dict(s.get("metadata"))) for s in chunk)
        ]
        share = shared.setdefault
        columns["workload"] += [share(s["workload"], s["workload"]) for s in chunk]
        columns["kind"] += [share(k, k) for k in (s.get("kind", "") for s in chunk)]
        columns["metric"] += [share(s["metric"], s["metric"]) for s in chunk]
        columns["unit"] += [share(s["unit"], s["unit"]) for s in chunk]
        columns["better"] += [share(b, b) for b in (s.get("better") for s in chunk)]
        columns["value"] += [s["value"] for s in chunk]
        columns["repetition"] += [s["repetition"] for s in chunk]
        columns["warmup"] += [s["warmup"] for s in chunk]
        columns["timestamp"] += [s["timestamp"] for s in chunk]
        # a workload that negotiates its own cipher (TLS) records it on the sample; it wins over the
        # variant's, which was fixed before the run
        columns[SUMMARY_COLUMN] += [(s.get("metadata") or {}).get("statistic") == "mean" for s in chunk]
        columns["sample_cipher"] += [
            share(c, c) if c else None for c in ((s.get("metadata") or {}).get("transport_cipher") for s in chunk)
        ]
        # bundle format 2 (absent in format 1: not contended, no execution key or raw path); a chunk's
        # first record tells which (a format-1 bundle pays nothing for these columns)
        if chunk and ("execution" in chunk[0] or "contended" in chunk[0]):
            columns["contended"] += [s.get("contended") is True for s in chunk]
            columns["execution"] += [share(e, e) for e in (s.get("execution") or "" for s in chunk)]
            columns["raw"] += [share(r, r) for r in (s.get("raw") or "" for s in chunk)]
        else:
            columns["contended"] += [False] * len(chunk)
            columns["execution"] += [""] * len(chunk)
            columns["raw"] += [""] * len(chunk)
        del chunk
    if not columns["value"]:
        return None
    described = columns.pop("variant")
    sample_cipher = columns.pop("sample_cipher")
    causes = {name: [d[3 + i] for d in described] for i, name in enumerate(CAUSE_KEYS)}
    if any(sample_cipher):
        causes["transport_cipher"] = [
            own or variant for own, variant in zip(sample_cipher, causes["transport_cipher"], strict=True)
        ]
    return pd.DataFrame(
        {
            "bundle": str(bundle.path),
            "machine": machine,
            "tee": tee,
            "storage": [d[0] for d in described],
            "transport": [d[1] for d in described],
            "config": [d[2] for d in described],
            **{
                name: values
                for name, values in columns.items()
                if name not in ("value", "repetition", "warmup", "contended", SUMMARY_COLUMN)
            },
            "value": np.array(columns["value"], dtype=float),
            "repetition": np.array(columns["repetition"], dtype=int),
            "warmup": np.array(columns["warmup"], dtype=bool),
            "contended": np.array(columns["contended"], dtype=bool),
            **causes,
            SUMMARY_COLUMN: np.array(columns[SUMMARY_COLUMN], dtype=bool),
        }
    )


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
