"""Application impact: which comparison rows are a workload's application-level result, and what a
transport protection's per-message costs add to one unit of application work measured beside them.

Each workload kind declares its primary metrics (a notebook's wall time, an inference's time, a
request's latency at a rate) and, for a benchmark of per-message costs, how they translate to an
application (``Workload.message_costs``). A run records the declarations in its manifest
(``declarations``: workload name -> kind, primary metrics, message costs), so this module needs no
workload code; for bundles written before that (and imports of them) it asks the registry by kind.

The verdict (ccbench.analysis.judgement.verdict) takes a layer's typical cost from primary rows alone. Where
a layer has none but a workload declares message costs, it leads with the share of one unit of
application work the protection adds: the extra time of one request (its round trip under the
protection minus the unprotected one), and of one request that opens its connection (the handshake
too), each divided by the application's median on the same machine; then each protected
configuration against the floors measured in the same run (a handshake against its X25519
operations, throughput against the AEAD ceiling of one core). All from medians of measured samples.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ccbench.analysis import format as fmt
from ccbench.basics.cases import case_text

#: seconds per unit of the time units workloads record
SECONDS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}


@dataclass(frozen=True)
class Declared:
    """What a workload declares about its results; ``primary`` None where nothing is known (a kind
    the registry does not have and a bundle that does not say)."""

    primary: frozenset[str] | None
    message_costs: dict[str, Any] | None = None


def declarations(samples: pd.DataFrame | None) -> dict[str, Declared]:
    """{workload name: Declared} for the workloads in ``samples``: from each bundle's manifest, else
    from the registry by the samples' kind. A name declared differently by several bundles gets the
    union of their primary metrics."""
    if samples is None or samples.empty:
        return {}
    found: dict[str, Declared] = {}
    manifests: dict[Any, dict[str, Any]] = {}
    columns = [c for c in ("bundle", "workload", "kind") if c in samples]
    for record in samples[columns].drop_duplicates().to_dict(orient="records"):
        bundle = record.get("bundle")
        if bundle not in manifests:
            manifests[bundle] = _manifest_declarations(bundle)
        recorded = manifests[bundle].get(record["workload"])
        declared = _parse(recorded) if recorded else _registry(record.get("kind"))
        found[record["workload"]] = _merge(found.get(record["workload"]), declared)
    return found


def _manifest_declarations(bundle: Any) -> dict[str, Any]:
    """The manifest's ``declarations`` ({} where the bundle has none or cannot be read: a frame made
    in memory, a bundle written before declarations were recorded)."""
    if not isinstance(bundle, str) or not bundle:
        return {}
    try:
        manifest = json.loads((Path(bundle) / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    declared = manifest.get("declarations") if isinstance(manifest, dict) else None
    return declared if isinstance(declared, dict) else {}


def _parse(recorded: dict[str, Any]) -> Declared:
    primary = recorded.get("primary_metrics")
    costs = recorded.get("message_costs")
    return Declared(
        primary=frozenset(primary) if isinstance(primary, list) else None,
        message_costs=costs if isinstance(costs, dict) else None,
    )


def _registry(kind: Any) -> Declared:
    """The declaration of ``kind`` in this build's registry (older bundles carry none)."""
    from ccbench.basics.errors import EnvironmentProblem
    from ccbench.workloads import REGISTRY, declaration, workload_class

    if not isinstance(kind, str) or kind not in REGISTRY:
        return Declared(primary=None)
    try:
        return _parse(declaration(workload_class(kind)))
    except EnvironmentProblem:
        return Declared(primary=None)


def _merge(first: Declared | None, second: Declared) -> Declared:
    if first is None:
        return second
    if first.primary is None or second.primary is None:
        return Declared(first.primary or second.primary, first.message_costs or second.message_costs)
    return Declared(first.primary | second.primary, first.message_costs or second.message_costs)


def primary_mask(comparison: pd.DataFrame, declared: dict[str, Declared]) -> np.ndarray:
    """Per comparison row: whether its metric is a primary metric of its workload."""
    pairs = [(name, metric) for name, d in declared.items() for metric in d.primary or ()]
    if not pairs:
        return np.zeros(len(comparison), dtype=bool)
    rows = pd.MultiIndex.from_arrays([comparison["workload"].astype(object), comparison["metric"].astype(object)])
    return np.asarray(rows.isin(pairs), dtype=bool)


def rests_on(rows: pd.DataFrame) -> str:
    """The metrics behind a typical cost, per workload: "notebook total_s; fio throughput"."""
    metrics = rows.groupby("workload", sort=False)["metric"].agg(lambda m: ", ".join(dict.fromkeys(m)))
    return "; ".join(f"{workload} {names}" for workload, names in metrics.items())


def message_cost(
    workload: str,
    config: str,
    application_text: str,
    application_s: float | None,
    request: tuple[float | None, str],
    connection: tuple[float | None, str],
    floors: list[dict[str, Any]],
) -> dict[str, Any]:
    """What one protected configuration's per-message costs add to one unit of application work
    (times in the units named by the keys; None where not measured), as the verdict keeps it (plain
    values: ``compare --summary --json`` prints it)."""
    request_s, connection_s = request[0], connection[0]
    share_open = request_s / application_s if request_s is not None and application_s else None
    share_new = share_open
    if share_open is not None and connection_s is not None:
        share_new = (request_s + connection_s) / application_s
    return {
        "workload": workload,
        "config": config,
        "application": application_text,
        "application_ms": None if application_s is None else application_s * 1000,
        "request_us": None if request_s is None else request_s * 1e6,
        "request_where": request[1],
        "connection_us": None if connection_s is None else connection_s * 1e6,
        "connection_where": connection[1],
        "share_open_connection": share_open,
        "share_new_connection": share_new,
        "floors": floors,
    }


def share_phrase(cost: dict[str, Any]) -> str:
    """ "0.18% to one MiniLM-L6-v2 sentence embedding (205 ms) per request that opens its connection
    (handshake 366 us, tcp; round trip +2.07 us, 1536 B, tcp), 0.001% per request on an open
    connection" ("" where the application or the round trip was not measured)."""
    if cost["share_open_connection"] is None:
        return ""
    application = f"{cost['application']} ({fmt.number(cost['application_ms'], 'ms')})"
    round_trip = f"round trip {_microseconds(cost['request_us'])}, {cost['request_where']}"
    if cost["connection_us"] is None:
        return f"{share_text(cost['share_open_connection'])} to {application} per request ({round_trip})"
    return (
        f"{share_text(cost['share_new_connection'])} to {application} per request that opens its connection "
        f"(handshake {_microseconds(cost['connection_us'], signed=False)}, {cost['connection_where']}; {round_trip}), "
        f"{share_text(cost['share_open_connection'])} per request on an open connection"
    )


def floors_sentence(cost: dict[str, Any]) -> str:
    """ "handshake_p50 duplex 314 us = 2.68x the X25519 floor (117 us); throughput 1048576 duplex
    1,167 MB/s = 41% of the AEAD ceiling (2,810 MB/s)" """
    return "; ".join(floor_text(floor) for floor in cost["floors"])


def share_text(share: float) -> str:
    """A small share with two significant digits: 2.8%, 0.21%, 0.0011%."""
    percent = share * 100
    if percent != 0 and abs(percent) < 0.0001:
        return "<0.0001%"
    return f"{percent:.2g}%" if abs(percent) < 10 else f"{percent:.0f}%"


def floor_text(floor: dict[str, Any]) -> str:
    what = " ".join(p for p in (floor["metric"], _case_label(floor.get("case") or {})) if p)
    measured = fmt.number(floor["measured"], floor["unit"])
    bound = fmt.number(floor["floor"], floor["unit"])
    if floor["better"] == "higher":
        return f"{what} {measured} = {floor['ratio']:.0%} of the {floor['what']} ({bound})"
    return f"{what} {measured} = {floor['ratio']:.2f}x the {floor['what']} ({bound})"


def _case_label(case: dict[str, Any]) -> str:
    """A case as a reader reads it: a payload in bytes as "1536 B" or "1 MiB"."""
    return case_text({key: _bytes(value) if key == "payload" else value for key, value in case.items()})


def _bytes(size: Any) -> str:
    if not isinstance(size, int):
        return str(size)
    for unit, name in ((2**20, "MiB"), (2**10, "KiB")):
        if size >= unit and size % unit == 0:
            return f"{size // unit} {name}"
    return f"{size} B"


def _microseconds(value: float, signed: bool = True) -> str:
    return f"{'+' if signed and value >= 0 else ''}{fmt.number(value, 'us')}"


def message_costs(
    rows: pd.DataFrame, samples: pd.DataFrame | None, declared: dict[str, Declared]
) -> list[dict[str, Any]]:
    """One message_cost per protected configuration of ``rows`` (one layer's comparison rows) whose
    workload declares message costs, in the rows' order."""
    if samples is None or samples.empty:
        return []
    out = []
    medians: dict[str, _Medians] = {}
    pairs = rows[["workload", "baseline", "config"]].drop_duplicates()
    for workload, baseline, config in pairs.itertuples(index=False):
        spec = (declared.get(workload) or Declared(None)).message_costs
        if spec:
            if workload not in medians:
                medians[workload] = _Medians(samples, workload)
            out.append(_message_cost(medians[workload], spec, workload, baseline, config))
    return out


class _Medians:
    """Medians of one workload's measured samples per configuration, metric and params."""

    def __init__(self, samples: pd.DataFrame, workload: str):
        data = samples[(samples["workload"] == workload) & ~samples["warmup"].astype(bool)]
        self.machine = data.drop_duplicates("config").set_index("config")["machine"]
        self.bundles = data.groupby("config")["bundle"].agg(set) if "bundle" in data else pd.Series(dtype=object)
        self.data = data

    def of(self, configs: set[str], metric: str, case: dict[str, Any]) -> dict[str, tuple[float, str]]:
        """{params: (median, unit)} of ``metric`` on ``configs``, for the params holding ``case``."""
        rows = self.data[self.data["config"].isin(configs) & (self.data["metric"] == metric)]
        out = {}
        for (params, unit), values in rows.groupby(["params", "unit"], sort=False)["value"]:
            if _holds(params, case):
                out[params] = (float(values.median()), unit)
        return out

    def on_machine(self, config: str, metric: str, case: dict[str, Any]) -> dict[str, tuple[float, str]]:
        """As ``of``, over every configuration of ``config``'s machine."""
        machine = self.machine.get(config)
        return self.of(set(self.machine[self.machine == machine].index), metric, case)

    def in_same_run(self, config: str, metric: str) -> float | None:
        """The median of ``metric`` over the bundles ``config`` was measured in (the same runs)."""
        bundles = self.bundles.get(config, set())
        rows = self.data[self.data["bundle"].isin(bundles) & (self.data["metric"] == metric)]
        return float(rows["value"].median()) if not rows.empty else None


def _holds(params: str, case: dict[str, Any]) -> bool:
    try:
        values = json.loads(params) if params else {}
    except ValueError:
        return False
    return all(values.get(key) == want for key, want in case.items())


def _seconds(value: float, unit: str) -> float | None:
    return value * SECONDS[unit] if unit in SECONDS else None


def _where(params: str, keys: tuple[str, ...] = ("payload", "pipe")) -> str:
    """Which payload and pipe a figure was measured at, e.g. "1536 B, tcp"."""
    values = json.loads(params) if params else {}
    return ", ".join(_bytes(values[key]) if key == "payload" else str(values[key]) for key in keys if key in values)


def _extra(medians: _Medians, spec: dict[str, Any], baseline: str, config: str) -> tuple[float | None, str]:
    """The largest extra time (s) of ``spec``'s metric on ``config`` over ``baseline``, over the
    params that hold its case, and where; the baseline counts as 0 where it has no such metric
    (plaintext has no handshake)."""
    metric, case = spec["metric"], dict(spec.get("case") or {})
    protected = medians.of({config}, metric, case)
    unprotected = medians.of({baseline}, metric, case)
    best: tuple[float | None, str] = (None, "")
    for params, (value, unit) in protected.items():
        if params in unprotected:
            base_value = unprotected[params][0]
        elif not unprotected:
            base_value = 0.0  # the unprotected side has no such cost at all (plaintext has no handshake)
        else:
            continue
        extra = _seconds(value - base_value, unit)
        if extra is not None and (best[0] is None or extra > best[0]):
            best = (extra, _where(params))
    return best


def _message_cost(medians: _Medians, spec: dict[str, Any], workload: str, baseline: str, config: str) -> dict[str, Any]:
    application = spec["application"]
    found = medians.on_machine(config, application["metric"], dict(application.get("case") or {}))
    times = [_seconds(value, unit) for value, unit in found.values()]
    times = [t for t in times if t is not None and t > 0]
    return message_cost(
        workload,
        config,
        spec.get("application_text") or application["metric"],
        float(np.median(times)) if times else None,
        _extra(medians, spec["per_request"], baseline, config),
        _extra(medians, spec["per_connection"], baseline, config),
        [f for f in (_floor(medians, floor, config) for floor in spec.get("floors") or []) if f],
    )


def _floor(medians: _Medians, spec: dict[str, Any], config: str) -> dict[str, Any] | None:
    """One protected configuration's figure against a floor measured in the same run(s)."""
    measured = spec["measured"]
    found = medians.of({config}, measured["metric"], dict(measured.get("case") or {}))
    bound = medians.in_same_run(config, spec["floor"])
    if not found or not bound:
        return None
    value, unit = next(iter(found.values()))
    rows = medians.data[(medians.data["config"] == config) & (medians.data["metric"] == measured["metric"])]
    better = rows["better"].iloc[0] if not rows.empty else "lower"
    if math.isnan(value) or value <= 0:
        return None
    return {
        "what": spec["what"],
        "metric": measured["metric"],
        "case": dict(measured.get("case") or {}),
        "measured": value,
        "floor": bound,
        "unit": unit,
        "ratio": value / bound,
        "better": better,
    }
