"""Load bundles into one pandas DataFrame, one row per sample, with a configuration label.

Columns: bundle, machine, tee, storage, transport, config, workload, kind, params (canonical JSON),
case (short label of the sub-case, e.g. "4k randread"), metric, unit, value, better, repetition,
warmup, timestamp. ``config`` is "machine / TEE / storage / transport" with absent parts left out.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any, Iterable

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


def _case_text(sample: dict[str, Any]) -> str:
    from ccbench.runner import case_text

    case = (sample.get("metadata") or {}).get("case") or {}
    return case_text(case) if isinstance(case, dict) else ""


def parse_labels(items: Iterable[str]) -> dict[str, str]:
    labels = {}
    for item in items:
        path, sep, name = item.rpartition("=")
        if not sep or not path or not name:
            raise BundleError(f"--label {item!r}: expected BUNDLE=NAME")
        labels[str(Path(path).resolve())] = name
    return labels


def load_bundles(paths: Iterable[str | Path]) -> list[Bundle]:
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
    rows = []
    for bundle in bundles:
        probe = bundle.probe
        machine = labels.get(str(Path(bundle.path).resolve())) or probe.get("hostname") or Path(bundle.path).name
        tee = (probe.get("tee") or {}).get("technology") or "unknown"
        for sample in bundle.samples:
            variant = sample.get("variant") or {}
            storage = storage_label(variant)
            transport = variant.get("transport")
            rows.append((
                str(bundle.path), machine, tee, storage, transport, config_label(machine, tee, storage, transport),
                sample["workload"], sample.get("kind", ""), json.dumps(sample.get("params") or {}, sort_keys=True),
                _case_text(sample), sample["metric"], sample.get("unit", ""), float(sample["value"]),
                sample.get("better", "lower"), int(sample.get("repetition", 0)), bool(sample.get("warmup", False)),
                sample.get("timestamp"),
            ))
    return pd.DataFrame.from_records(rows, columns=COLUMNS)


def load(paths, labels: dict[str, str] | Iterable[str] | None = None) -> pd.DataFrame:
    """All samples of the bundles (or directories of bundles) under ``paths`` as one DataFrame."""
    if isinstance(paths, (str, Path)):
        paths = [paths]
    if labels is not None and not isinstance(labels, dict):
        labels = parse_labels(labels)
    elif labels:
        labels = {str(Path(k).resolve()): v for k, v in labels.items()}
    return frame_from_bundles(load_bundles(paths), labels)
