"""Load bundles into one pandas DataFrame, one row per sample, with a configuration label.

Columns: bundle, machine, tee, storage, transport, config, workload, kind, params (canonical JSON),
case (short label of the sub-case, e.g. "4k randread"), metric, unit, value, better, repetition,
warmup, timestamp. ``config`` is "machine / TEE / storage / transport" with absent parts left out.
"""

from __future__ import annotations

import gc
import json
import warnings
from pathlib import Path
from typing import Any, Iterable

import orjson
import pandas as pd

from ccbench.bundle import Bundle, find_bundles, read_bundle
from ccbench.errors import BundleError

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
    labels = labels or {}
    frames = []
    for bundle in bundles:
        if not bundle.samples:
            continue
        probe = bundle.probe
        machine = labels.get(str(Path(bundle.path).resolve())) or probe.get("hostname") or Path(bundle.path).name
        tee = (probe.get("tee") or {}).get("technology") or "unknown"
        raw = pd.DataFrame.from_records(bundle.samples)
        # variants, params and cases repeat: describe each distinct one once
        variant_keys = raw["variant"].map(_canonical)
        described = {}
        for key in variant_keys.unique():
            variant = json.loads(key)
            storage, transport = storage_label(variant), variant.get("transport")
            described[key] = (storage, transport, config_label(machine, tee, storage, transport))
        frame = pd.DataFrame({
            "bundle": str(bundle.path),
            "machine": machine,
            "tee": tee,
            "storage": variant_keys.map(lambda k: described[k][0]),
            "transport": variant_keys.map(lambda k: described[k][1]),
            "config": variant_keys.map(lambda k: described[k][2]),
            "workload": raw["workload"],
            "kind": raw["kind"] if "kind" in raw else "",
            "params": raw["params"].map(_canonical),
            "case": raw["metadata"].map(_case_of) if "metadata" in raw else "",
            "metric": raw["metric"],
            "unit": raw["unit"],
            "value": raw["value"].astype(float),
            "better": raw["better"] if "better" in raw else "lower",
            "repetition": raw["repetition"].astype(int),
            "warmup": raw["warmup"].astype(bool),
            "timestamp": raw["timestamp"],
        })
        frames.append(frame)
    if not frames:
        return pd.DataFrame(columns=COLUMNS)
    frame = pd.concat(frames, ignore_index=True)
    frame["better"] = frame["better"].where(frame["better"].notna(), None)
    return frame[COLUMNS]


def _canonical(value) -> str:
    return orjson.dumps(value or {}, option=orjson.OPT_SORT_KEYS).decode()


def _case_of(metadata) -> str:
    from ccbench.runner import case_text

    case = (metadata or {}).get("case") if isinstance(metadata, dict) else None
    return case_text(case) if isinstance(case, dict) and case else ""


def load(paths, labels: dict[str, str] | Iterable[str] | None = None) -> pd.DataFrame:
    """All samples of the bundles (or directories of bundles) under ``paths`` as one DataFrame."""
    if isinstance(paths, (str, Path)):
        paths = [paths]
    if labels is not None and not isinstance(labels, dict):
        labels = parse_labels(labels)
    elif labels:
        labels = {str(Path(k).resolve()): v for k, v in labels.items()}
    return frame_from_bundles(load_bundles(paths), labels)
