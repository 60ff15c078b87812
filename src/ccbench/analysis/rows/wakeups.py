"""How much of a row's time its cross-vCPU wake-ups take: the wake-up share beside the breakdown
(docs/analysis.md, "Wake-up share"; docs/mechanisms.md, section 4).

Two things measured on the same machine meet here. Each execution record counts the rescheduling and
function-call IPIs the machine received over the execution (``counters``: ``interrupts.RES``,
``interrupts.CAL``, summed over CPUs) and its context switches (``stat.ctxt``); the ``mechanisms``
workload's ``cross-wakeup`` case measured, in the same bundle (or another bundle of the same
machine), the time of one futex hand-off to a thread on another vCPU (``cross_wakeup_ns``, the
ping-pong) and the IPIs each such hand-off sent (``ipis_per_wakeup``), at the largest vCPU count above
one it measured. An execution's cross-vCPU wake-ups are then its IPIs over the IPIs per wake-up, and
their time that many hand-offs at the measured latency; the share is that time over the execution's
wall time (``elapsed_s``), the median over the row's executions. It is an estimate of the time the
hand-offs would take one after another: wake-ups on several vCPUs at once can add up to more than the
wall time (a share above 1), and a wake-up that found its target polling sent no IPI and is not
counted. Context switches are reported beside it (they include every wake-up on the same CPU, which
sends no IPI). Where either input is missing, the side says which.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

WAKE_METRIC, IPI_METRIC = "cross_wakeup_ns", "ipis_per_wakeup"
PATTERN = "ping-pong"
IPI_COUNTERS = ("interrupts.RES", "interrupts.CAL")
SWITCHES = "stat.ctxt"
NO_CASE = (
    "no cross-vCPU wake-up case on this machine (the mechanisms workload's cross-wakeup case, at 2 or more "
    "vCPUs, with its IPIs per wake-up: run the mechanisms plan there)"
)
NO_COUNTERS = (
    "its executions recorded no RES or CAL interrupts (counters off, or a kernel without those /proc/interrupts rows)"
)


def _params(value: Any) -> Mapping[str, Any]:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return {}
    return value if isinstance(value, Mapping) else {}


def unit_costs(frame: pd.DataFrame) -> dict[str, dict[str, float]]:
    """Per bundle: the ping-pong's ns per wake-up and IPIs per wake-up at the largest vCPU count above
    one that measured both (medians of its samples), with that count."""
    out: dict[str, dict[str, float]] = {}
    if frame.empty:
        return out
    by: dict[tuple[str, int], dict[str, list[float]]] = {}
    for bundle, params, metric, value in zip(frame["bundle"], frame["params"], frame["metric"], frame["value"]):
        case = _params(params)
        vcpus = case.get("vcpus")
        if case.get("pattern") != PATTERN or not isinstance(vcpus, int) or vcpus < 2:
            continue
        by.setdefault((str(bundle), vcpus), {}).setdefault(metric, []).append(float(value))
    for (bundle, vcpus), metrics in sorted(by.items()):
        if WAKE_METRIC in metrics and IPI_METRIC in metrics:
            ipis = float(np.median(metrics[IPI_METRIC]))
            if ipis > 0:
                out[bundle] = {
                    "ns_per_wakeup": float(np.median(metrics[WAKE_METRIC])),
                    "ipis_per_wakeup": ipis,
                    "vcpus": vcpus,
                }
    return out


def side_share(
    records: list[tuple[str, Mapping[str, Any]]], units: Mapping[str, Mapping[str, float]], workload: str, config: str
) -> dict[str, Any]:
    """One side's wake-up share from its (bundle, execution record) pairs of ``workload`` whose variant
    values all appear in ``config``, each with its own bundle's unit cost; or what is missing."""
    parts = set(config.split(" / "))
    shares, wakeups, switches, counted, used = [], [], [], 0, {}
    for bundle, record in records:
        if record.get("workload") != workload or record.get("warmup") or record.get("status", "ok") != "ok":
            continue
        if not {str(v) for v in (record.get("variant") or {}).values()} <= parts:
            continue
        counters = record.get("counters") or {}
        if not any(name in counters for name in IPI_COUNTERS):
            continue
        counted += 1
        unit = units.get(bundle)
        elapsed = record.get("elapsed_s")
        if unit is None or not isinstance(elapsed, int | float) or elapsed <= 0:
            continue
        used = unit
        n = sum(float(counters.get(name, 0)) for name in IPI_COUNTERS) / unit["ipis_per_wakeup"]
        wakeups.append(n)
        shares.append(n * unit["ns_per_wakeup"] * 1e-9 / elapsed)
        if SWITCHES in counters:
            switches.append(float(counters[SWITCHES]))
    if not counted:
        unmeasured = not any(bundle in units for bundle, _r in records)
        return {"missing": NO_COUNTERS + ("; and " + NO_CASE if unmeasured else "")}
    if not shares:
        return {"missing": NO_CASE}
    return {
        "share": round(float(np.median(shares)), 6),
        "wakeups": round(float(np.median(wakeups)), 1),
        "ns_per_wakeup": used["ns_per_wakeup"],
        "ipis_per_wakeup": used["ipis_per_wakeup"],
        "vcpus": used["vcpus"],
        "context_switches": round(float(np.median(switches)), 1) if switches else None,
        "executions": len(shares),
    }


def wanted(group: tuple) -> bool:
    """The groups the unit costs come from (engine.SampleSet.measured_frame's filter)."""
    return group[3] in (WAKE_METRIC, IPI_METRIC)


def wakeup_shares(
    table: pd.DataFrame,
    frame: pd.DataFrame,
    facts: pd.DataFrame,
    executions: Mapping[str, list[Mapping[str, Any]]],
    machine_ids: Mapping[str, str] | None = None,
) -> list[dict[str, Any]]:
    """Per row of ``table``: {"config": side, "baseline": side} (side_share: the share, or what is
    missing), or {} for a row that measures one mechanism on its own (its case names it). ``frame``: the wake-up case's samples
    (``wanted``); ``facts``: the engine's (bundle, config) facts; ``executions``: {bundle: records}."""
    units = unit_costs(frame)
    # a bundle without the case takes another bundle's of the same machine
    machine_ids = machine_ids or {}
    by_machine = {machine_ids.get(b, b): unit for b, unit in units.items()}
    for bundle in executions:
        if bundle not in units and machine_ids.get(bundle, bundle) in by_machine:
            units[bundle] = by_machine[machine_ids.get(bundle, bundle)]
    bundles_of: dict[str, list[str]] = {}
    for bundle, config in zip(facts["bundle"], facts["config"]) if len(facts) else ():
        bundles_of.setdefault(config, [])
        if str(bundle) not in bundles_of[config]:
            bundles_of[config].append(str(bundle))
    cache: dict[tuple[str, str], dict[str, Any]] = {}
    out = []
    for workload, config, baseline, params in zip(
        table["workload"], table["config"], table["baseline"], table["params"]
    ):
        if "mechanism" in _params(params):
            out.append({})
            continue
        row = {}
        for side, label in (("config", config), ("baseline", baseline)):
            key = (workload, label)
            if key not in cache:
                records = [(b, r) for b in bundles_of.get(label, []) for r in executions.get(b, [])]
                cache[key] = side_share(records, units, workload, label)
            row[side] = cache[key]
        out.append(row)
    return out


def share_lines(table: pd.DataFrame, shares: list[dict[str, Any]]) -> list[str]:
    """One line per workload and pair of sides with a share (every metric of a workload's executions
    shares them): "- notebook: cross-vCPU wake-ups cvm / SEV-SNP: 20.0% of the execution's time (2,000
    wake-ups x 200 us at 2 vCPUs); plain / no TEE: 5.0% ..." """
    lines, seen = [], set()
    for workload, config, baseline, wakeups in zip(table["workload"], table["config"], table["baseline"], shares):
        key = (workload, config, baseline)
        if key in seen:
            continue
        seen.add(key)
        said = []
        for name, found in ((config, wakeups.get("config") or {}), (baseline, wakeups.get("baseline") or {})):
            if "share" in found:
                said.append(
                    f"{name}: {found['share'] * 100:.1f}% of the execution's time ({found['wakeups']:,.0f} wake-ups x "
                    f"{found['ns_per_wakeup'] / 1000:.3g} us at {found['vcpus']} vCPUs)"
                )
        if said:
            lines.append(f"- {workload}: cross-vCPU wake-ups " + "; ".join(said))
    return lines


def missing_text(table: pd.DataFrame, shares: list[dict[str, Any]]) -> str | None:
    """One line where the wake-up case was measured but no row has a share: what is missing (nothing
    where no bundle measured the case, so no wake-up figure was asked for: the rows' JSON says it)."""
    sides = [side for row in shares for side in row.values()]
    if not sides or any("share" in side for side in sides):
        return None
    # the case measured somewhere: among the rows, or on a side that lacks only the counters
    if not (table["metric"] == WAKE_METRIC).any() and not any(side.get("missing") == NO_COUNTERS for side in sides):
        return None
    reasons = sorted({side["missing"] for side in sides if "missing" in side and "; and " not in side["missing"]})
    return "cross-vCPU wake-up share: not computed: " + " / ".join(reasons) if reasons else None
