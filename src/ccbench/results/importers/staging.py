"""The staged bundle writer: an import becomes visible by one rename, complete or not at all.

A bundle is written in ``OUT/.importing/<name>`` with manifest status ``importing``; its samples
are journalled in bulk (one line per value, without one object per value); the manifest's final
status (``complete``) is written after the journals and their Parquet copy, then the digest list, then one rename
puts the bundle at ``OUT/<name>``. Beside each staging directory lies ``<name>.owner.json`` (the
importing process's pid and start time), written before the directory is made: the next import
into the same ``OUT`` removes the staging directories whose owner is gone (killed), and only those.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ccbench.basics.fsutil import write_json_atomic
from ccbench.model import ExecutionKey
from ccbench.results.importers.base import (
    ALWAYS_UNKNOWN,
    Execution,
    Imported,
    ImportProblem,
    Series,
    iso,
    safe_component,
)

STAGING = ".importing"
OWNER_SUFFIX = ".owner.json"


def _own_start_time() -> float:
    import psutil

    return psutil.Process().create_time()


def clean_leftovers(out: Path) -> list[Path]:
    """Remove the staging directories of imports into ``out`` whose process is gone; return them."""
    from ccbench.basics.procs import same_process

    staging = Path(out) / STAGING
    removed = []
    for owner in sorted(staging.glob(f"*{OWNER_SUFFIX}")) if staging.is_dir() else []:
        try:
            record = json.loads(owner.read_text())
            pid, started = int(record["pid"]), float(record["create_time"])
        except (OSError, ValueError, KeyError, TypeError):
            continue  # not ours to judge: leave it
        if same_process(pid, started) is not None:
            continue  # an import still under way
        directory = staging / owner.name[: -len(OWNER_SUFFIX)]
        shutil.rmtree(directory, ignore_errors=True)
        owner.unlink(missing_ok=True)
        removed.append(directory)
    try:
        staging.rmdir()
    except OSError:
        pass
    return removed


def _environment(imported: Imported, stated: dict[str, Any]) -> dict[str, Any]:
    from ccbench.results.importers.stated import apply_stated

    facts = imported.facts
    cpu_model = facts.get("cpu_model")
    unknown = list(ALWAYS_UNKNOWN)
    if not cpu_model:
        unknown.append("cpu: the source names no CPU model")
    if not facts.get("kernel_release"):
        unknown.append("kernel: not in the source")
    if not facts.get("memory_bytes"):
        unknown.append("memory: not in the source")
    storage: dict[str, Any] = {"protection": "unknown"}
    if imported.storage_protection:
        storage = {"protection": imported.storage_protection, "from_source": imported.storage_protection_source}
    elif "storage_protection" not in stated:
        unknown.append("storage protection: not in the source (state it with --storage-protection)")
    cpu = {"model": cpu_model}
    cpu.update({key: facts[f"cpu_{key}"] for key in ("threads", "cores") if facts.get(f"cpu_{key}")})
    if "threads" not in cpu and isinstance(facts.get("cpu_count"), int) and facts["cpu_count"] > 0:
        cpu["threads"] = facts["cpu_count"]  # pyperf's cpu_count is os.cpu_count(): the logical CPUs
    environment = {
        # the label, not the source's host name: two Pythons measured on one host are two bundles
        # that compare must tell apart (the host name is kept as source_hostname)
        "hostname": imported.label,
        **({"source_hostname": str(facts["hostname"])} if facts.get("hostname") else {}),
        "imported": True,
        "cpu": cpu,
        "memory": {"total_bytes": facts["memory_bytes"]} if facts.get("memory_bytes") else {},
        "kernel": {"release": facts.get("kernel_release")},
        "os": {},
        "virtualization": "unknown",
        "tee": {"technology": "unknown", "evidence": [], "note": "imported: no TEE evidence"},
        "storage": storage,
        "source_facts": facts,
        "unknown": unknown + imported.unknown,
    }
    tools: dict[str, set[str]] = {}
    for execution in imported.executions:
        for key, value in execution.tool.items():
            if value is not None:
                tools.setdefault(key, set()).add(str(value))
    if tools:  # one value per tool, or the list of them where the sources differ
        environment["tools"] = {k: next(iter(v)) if len(v) == 1 else sorted(v) for k, v in tools.items()}
    return apply_stated(environment, stated)


def number_executions(executions: list[Execution]) -> None:
    executions.sort(key=lambda e: (e.started_at, str(e.source)))
    seen: dict[str, int] = {}
    for execution in executions:
        execution.repetition = seen.get(execution.workload, 0)
        seen[execution.workload] = execution.repetition + 1


def _manifest(imported: Imported, stated: dict[str, Any]) -> dict[str, Any]:
    from ccbench.workloads import declarations

    executions = imported.executions
    started = executions[0].started_at if executions else iso(datetime.now(UTC))
    return {
        "imported": {
            "format": imported.format,
            "sources": sorted({str(e.source) for e in executions}),
            "note": "imported, not measured by ccbench",
            **({"notes": imported.notes} if imported.notes else {}),
        },
        "label": imported.label,
        "plan": {"name": f"imported-{imported.format}", "workloads": []},
        "declarations": declarations({(e.workload, e.kind) for e in executions}),
        "environment": _environment(imported, stated),
        "started_at": started,
        "ended_at": executions[-1].started_at if executions else started,
        "status": "importing",
        "outcomes": outcomes(executions),
    }


def outcomes(executions: list[Execution]) -> dict[str, dict[str, Any]]:
    """Per workload, how its executions ended, as a run's manifest records it (``ok``, ``partial``:
    some failed, ``failed``: every one), with the failures' notes as the reason."""
    found: dict[str, dict[str, Any]] = {}
    for execution in executions:
        outcome = found.setdefault(execution.workload, {"status": "ok", "executions_ok": 0, "executions_failed": 0})
        if execution.status == "ok":
            outcome["executions_ok"] += 1
            continue
        outcome["executions_failed"] += 1
        reason = "; ".join(execution.notes) or "the source says it failed"
        outcome["reason"] = "; ".join(filter(None, [outcome.get("reason"), reason]))
    for outcome in found.values():
        if outcome["executions_failed"]:
            outcome["status"] = "partial" if outcome["executions_ok"] else "failed"
    return found


def visible_name(label: str, fallback: str) -> str:
    """The label as the start of a bundle directory's name that ``ls`` and ``DIR/*/`` see: without
    the leading dots, slashes and dashes of a command like ``./server-bench`` (the manifest keeps the
    label whole; two labels that come out alike land in two directories, ``unused_path``'s ``-2``)."""
    return re.sub(r"^[^A-Za-z0-9]+", "", label) or fallback


def write_bundle(imported: Imported, out: Path, stated: dict[str, Any] | None = None) -> Path:
    """Write one bundle under ``out`` through its staging directory; return where it landed."""
    from ccbench import attestation
    from ccbench.bundle import BundleWriter, bundle_dir_name, unused_path
    from ccbench.bundle.columnar import write_bundle_parquet
    from ccbench.results.importers.stated import STORAGE_CHOICES

    out = Path(out)
    clean_leftovers(out)
    number_executions(imported.executions)
    stated = stated or {}
    manifest = _manifest(imported, stated)
    protection = stated.get("storage_protection") or imported.storage_protection
    variant = dict(STORAGE_CHOICES[protection]) if protection else {}
    staging = out / STAGING
    name = unused_path(staging, bundle_dir_name(visible_name(imported.label, imported.format))).name
    owner = staging / f"{name}{OWNER_SUFFIX}"
    try:
        staging.mkdir(parents=True, exist_ok=True)
        # the owner record comes first: a staging directory without one is never ours to remove
        write_json_atomic(owner, {"pid": os.getpid(), "create_time": _own_start_time()})
    except OSError as exc:
        raise ImportProblem(
            f"cannot write under {out}: {exc.strerror}; choose a writable directory with --out"
        ) from None
    writer = None
    try:
        writer = BundleWriter.create(staging, manifest, name=name)
        writer.close()
        _write_journals(writer.path, imported.executions, variant)
        write_bundle_parquet(writer.path)  # as a run ends: the samples as Parquet, under the digest list
        writer.manifest["status"] = "complete"  # last, just before the digest list that covers it
        writer.write_manifest()
        attestation.finish_bundle(writer.path, provider=None)  # nothing here was measured in a TEE
        target = unused_path(out, name)
        writer.path.rename(target)
    except BaseException:
        if writer is not None:
            shutil.rmtree(writer.path, ignore_errors=True)
        raise
    finally:
        owner.unlink(missing_ok=True)
        try:
            staging.rmdir()
        except OSError:
            pass
    return target


def _sample_lines(
    execution: Execution, key: str, raw: str, variant: dict[str, Any] | None = None
) -> tuple[list[str], int, int]:
    """The journal text of an execution's samples (the fields of ccbench.model.Sample, in its order),
    one line per value, in chunks (one per series); the number of samples; the values a JSON document
    cannot hold (NaN, infinities), counted, not written."""
    params = {k: v for k, v in execution.params.items() if v is not None}
    imported_from = {"imported": True, "source": str(execution.source)}
    lines: list[str] = []
    dropped = count = 0
    series = execution.series + [
        Series(m.metric, m.unit, [m.value], m.better, m.case, m.metadata) for m in execution.measurements
    ]
    for one in series:
        head = {
            "workload": execution.workload,
            "kind": execution.kind,
            "params": {**params, **one.case},
            "variant": variant or {},
            "metric": one.metric,
            "unit": one.unit,
        }
        tail = {
            "better": one.better,
            "repetition": execution.repetition,
            "warmup": False,
            "timestamp": execution.started_at,
            "metadata": {**one.metadata, **({"case": one.case} if one.case else {}), **imported_from},
            "execution": key,
            "raw": raw,
            "contended": False,
        }
        prefix = json.dumps(head, separators=(",", ":"), default=str)[:-1] + ',"value":'
        suffix = "," + json.dumps(tail, separators=(",", ":"), default=str)[1:] + "\n"
        values = one.values
        if not all(map(math.isfinite, values)):
            kept = [v for v in values if math.isfinite(v)]
            dropped += len(values) - len(kept)
            values = kept
        if values:
            # one join per series: the per-value cost is float's repr, in C
            lines.append(prefix + (suffix + prefix).join(map(repr, map(float, values))) + suffix)
            count += len(values)
    return lines, count, dropped


def variant_key(variant: dict[str, Any]) -> str:
    """The executions' variant key (``storage=encrypted``; ``-`` without one), as a run writes it."""
    return f"storage={variant['storage']}" if variant.get("storage") else "-"


def _write_journals(bundle: Path, executions: list[Execution], variant: dict[str, Any] | None = None) -> None:
    from ccbench.bundle import EXECUTIONS, SAMPLES

    copied: dict[Path, str] = {}
    with open(bundle / SAMPLES, "a", encoding="utf-8") as samples, open(bundle / EXECUTIONS, "a") as records:
        for execution in executions:
            if execution.source not in copied:
                raw = f"raw/sources/{len(copied)}-{safe_component(execution.source.name)}"
                (bundle / raw).mkdir(parents=True)
                shutil.copy2(execution.source, bundle / raw / safe_component(execution.source.name))
                copied[execution.source] = raw
            raw = copied[execution.source]
            key = str(ExecutionKey(execution.workload, variant_key(variant or {}), False, execution.repetition))
            lines, count, dropped = _sample_lines(execution, key, raw, variant)
            samples.writelines(lines)
            notes = execution.notes + ([f"{dropped} value(s) that are not finite numbers left out"] if dropped else [])
            record = {
                "key": key,
                "workload": execution.workload,
                "variant": variant or {},
                "repetition": execution.repetition,
                "warmup": False,
                "status": execution.status,
                "started_at": execution.started_at,
                "elapsed_s": execution.elapsed_s if execution.elapsed_s is not None else 0.0,
                "samples": count,
                "raw": raw,
                "imported": True,
                **({"notes": notes} if notes else {}),
                **({"failed_runs": execution.failed_runs} if execution.failed_runs else {}),
                **({"error": "; ".join(notes) or "the source says it failed"} if execution.status != "ok" else {}),
            }
            records.write(json.dumps(record, default=str) + "\n")
        for handle in (samples, records):
            handle.flush()
            os.fsync(handle.fileno())
