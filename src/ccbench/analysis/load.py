"""Load bundles into one pandas DataFrame, one row per sample, with a configuration label.

Columns: bundle, machine, tee, storage, transport, config, workload, kind, params (canonical JSON),
case (short label of the sub-case, e.g. "4k randread"), metric, unit, value, better, repetition,
warmup, timestamp. ``config`` is "machine / TEE / storage / transport" with absent parts left out.
"""

from __future__ import annotations

import gc
import warnings
from pathlib import Path
from typing import Any, Iterable

import numpy as np
import orjson
import pandas as pd

from ccbench.bundle import Bundle, find_bundles, read_bundle
from ccbench.errors import BundleError
from ccbench.model import case_text

COLUMNS = ["bundle", "machine", "tee", "storage", "transport", "config", "workload", "kind", "params", "case",
           "metric", "unit", "value", "better", "repetition", "warmup", "timestamp"]

TEE_NAMES = {"none": "no TEE", "sev": "SEV", "sev-es": "SEV-ES", "sev-snp": "SEV-SNP", "tdx": "TDX", "sgx": "SGX",
             "unknown": "TEE unknown"}


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


def load_bundles(paths: Iterable[str | Path]) -> list[Bundle]:
    # many small dicts: the cyclic garbage collector would re-scan them again and again while they
    # are created (a third of the load time); none of them can form a cycle
    gc.disable()
    try:
        return _load_bundles(paths)
    finally:
        gc.enable()


def _load_bundles(paths: Iterable[str | Path]) -> list[Bundle]:
    bundles = []
    for path in find_bundles(paths):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            bundle = read_bundle(path)
        for warning in caught:
            warnings.warn(str(warning.message), stacklevel=2)
        bundles.append(bundle)
    return bundles


def frame_from_bundles(bundles: list[Bundle], labels: dict[str, str] | None = None) -> pd.DataFrame:
    gc.disable()  # as in load_bundles: hundreds of thousands of acyclic objects
    try:
        return _frame_from_bundles(bundles, labels or {})
    finally:
        gc.enable()


def _frame_from_bundles(bundles: list[Bundle], labels: dict[str, str]) -> pd.DataFrame:
    frames = []
    for bundle in bundles:
        if bundle.samples:
            frames.append(_bundle_frame(bundle, labels))
    if not frames:
        return pd.DataFrame(columns=COLUMNS)
    frame = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
    return frame[COLUMNS]


def _bundle_frame(bundle: Bundle, labels: dict[str, str]) -> pd.DataFrame:
    """One bundle's samples as columns, in one pass over the records.

    Variants, params and cases repeat across thousands of samples: each is serialised to a key, and
    each distinct key is described once (labels, case text) and spread back by index.
    """
    probe = bundle.probe
    machine = labels.get(str(Path(bundle.path).resolve())) or probe.get("hostname") or Path(bundle.path).name
    tee = (probe.get("tee") or {}).get("technology") or "unknown"
    samples = bundle.samples
    dumps, sort = orjson.dumps, orjson.OPT_SORT_KEYS
    variant_keys = [dumps(s["variant"] or {}, option=sort) for s in samples]
    params = [dumps(s["params"] or {}, option=sort).decode() for s in samples]
    # the case label keeps the case's own key order ("4k randread"), so its key is not sorted
    case_keys = [dumps(_case_dict(s.get("metadata"))) for s in samples]

    variant_codes, variant_uniques = pd.factorize(pd.Series(variant_keys, dtype=object), sort=False)
    described = []
    for key in variant_uniques:
        variant = orjson.loads(key)
        storage, transport = storage_label(variant), variant.get("transport")
        described.append((storage, transport, config_label(machine, tee, storage, transport)))
    case_codes, case_uniques = pd.factorize(pd.Series(case_keys, dtype=object), sort=False)
    case_labels = np.array([case_text(c) if c else "" for c in map(orjson.loads, case_uniques)] or [""], dtype=object)

    def spread(position: int) -> np.ndarray:
        return np.array([d[position] for d in described], dtype=object)[variant_codes]

    return pd.DataFrame({
        "bundle": str(bundle.path),
        "machine": machine,
        "tee": tee,
        "storage": spread(0),
        "transport": spread(1),
        "config": spread(2),
        "workload": [s["workload"] for s in samples],
        "kind": [s.get("kind", "") for s in samples],
        "params": params,
        "case": case_labels[case_codes],
        "metric": [s["metric"] for s in samples],
        "unit": [s["unit"] for s in samples],
        "value": np.array([s["value"] for s in samples], dtype=float),
        "better": [s.get("better") for s in samples],
        "repetition": np.array([s["repetition"] for s in samples], dtype=int),
        "warmup": np.array([bool(s["warmup"]) for s in samples], dtype=bool),
        "timestamp": [s["timestamp"] for s in samples],
    })


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
    return frame_from_bundles(load_bundles(paths), labels)
