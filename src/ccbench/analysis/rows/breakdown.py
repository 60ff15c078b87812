"""Why a confidential machine costs what it costs: the share of a cross-machine row's cost that each
mechanism explains, with intervals, and the unexplained rest (docs/analysis.md, Breakdown).

A row that compares two machines (the TEE layer, or machines whose TEE is unknown) has a cost on its
own metric's scale, oriented so that worse is positive: the time added, ``cvm / baseline - 1``, for a
time; the rate lost, ``1 - cvm / baseline``, for a throughput. A share is the part of that cost a
mechanism explains: the reading of issue 31's published example (a plain VM's UDP receive rate 1.0,
its ``swiotlb=force`` twin 0.75, the SEV-SNP VM 0.17: the twin loses (1 - 0.75) / (1 - 0.17) = 0.30 of
what the CVM loses). Each part also carries ``log_share``, the same part of the log of the ratio,
which does not depend on whether the work is read as a time or a rate (0.16 in that example).
Two sources attribute parts of the cost:

* a **mechanism twin**: a configuration equal to one side except for one mechanism, recognised from
  the kernel command line in its probe's provenance or named by the user (``--twin
  bounce-buffers=LABEL``): the baseline with a mechanism forced on (a plain VM booted with
  ``swiotlb=force``: bounce buffers), share ``cost(twin) / cost(cvm)``; or the CVM with a mechanism
  taken away (booted with ``idle=poll``: no halt exits), share ``1 - cost(twin) / cost(cvm)``; every
  cost against the same baseline.
* **counts times unit costs**: a mechanism's count in the CVM's executions (the mechanism counters
  of each execution record, ``counters``: the pages accepted as ``vmstat.nr_unaccepted`` falls) times
  its unit cost measured by the ``mechanisms`` workload on the same machine (the time per accepted
  page, from touches that accepted), less the baseline machine's where it has one. For a row whose metric is an
  execution's time: the counted time's part of the time the CVM adds,
  ``count x unit / (T_cvm - T_base)``.

Intervals are percentile bootstrap intervals over the executions (each side resampled on its own,
the same draws for every part, so the unexplained rest ``1 - sum(shares)`` has an interval too).
Shares are clipped to 0..1 (a noisy twin can measure a little below its baseline); a row whose CVM
is not significantly worse gets no breakdown: there is no cost to split.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pandas as pd

# the twins (what counts as one, whether it may stand for its mechanism) live in their own module;
# their names are this module's too, as before
from ccbench.analysis import format as fmt
from ccbench.analysis.rows.twins import (  # noqa: F401
    PLAIN_OR_UNKNOWN,
    TWIN_MARKERS,
    Twin,
    crosses_no_device,
    find_twins,
    twin_findings,
    twin_mechanisms,
    vet_bounce_twin,
)

#: every mechanism a breakdown names (docs/mechanisms.md), and the rest
MECHANISMS = ("exits", "bounce-buffers", "page-acceptance", "encrypted-memory", "idle")
UNEXPLAINED = "unexplained"
TIME_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}
BOOTSTRAP_DRAWS = 2000
CONFIDENCE = 0.95


@dataclass(frozen=True)
class CountRule:
    """How a mechanism's count in an execution turns into seconds: the count (a mechanism counter of
    the execution record, ccbench's ``counters``: the difference over the execution, times ``sign``)
    times the unit cost read from the ``mechanisms`` workload's samples on the same machine."""

    #: the execution record's counter names (the first recorded is used)
    counters: tuple[str, ...]
    #: +1 where the counter grows with the mechanism, -1 where it falls (a level of what is left)
    sign: float
    #: the mechanisms workload's metric and case holding the unit cost
    unit_metric: str
    unit_case: Mapping[str, Any]
    #: seconds per counted unit from that metric's value
    seconds_per_count: Callable[[float], float]


#: A page accepted during the execution (nr_unaccepted falls) costs the mechanisms workload's time per
#: accepted page (``accept_ns_per_page``: measured only by touches during which nr_unaccepted fell),
#: less the baseline machine's. Bounce buffers have no count rule: the only bounce counter a guest
#: has, ``trace.swiotlb:swiotlb_bounced``, counts mappings, not bytes, and no unit cost per mapping
#: is measured; their share comes from a twin alone.
COUNT_RULES = {
    "page-acceptance": CountRule(
        ("vmstat.nr_unaccepted",),
        -1.0,
        "accept_ns_per_page",
        {"mechanism": "page-acceptance", "pages": "4k"},
        lambda ns: ns * 1e-9,
    ),
}


@dataclass
class Part:
    mechanism: str
    share: float
    ci_low: float
    ci_high: float
    #: "twin", "counts" or "rest"
    source: str
    #: the twin's configuration, or what was counted
    basis: str = ""
    #: the same part of the log of the row's ratio (the scale on which a time and a rate agree)
    log_share: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _cost_sign(better: Any) -> float:
    """+1 where a larger value is worse (times), -1 where it is better (rates)."""
    return -1.0 if better == "higher" else 1.0


#: above this many values a side's bootstrap means are drawn from their normal limit (mean, variance
#: / n), which the resampled means follow closely by then, instead of resampling every value
RESAMPLE_UP_TO = 30


def _resampled_log_means(values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """The point estimate first, then BOOTSTRAP_DRAWS bootstrap means of log values."""
    logs = np.log(values)
    if len(logs) > RESAMPLE_UP_TO:
        spread = logs.std() / np.sqrt(len(logs))
        return np.concatenate([[logs.mean()], rng.normal(logs.mean(), spread, BOOTSTRAP_DRAWS)])
    draws = rng.integers(0, len(logs), size=(BOOTSTRAP_DRAWS, len(logs)))
    return np.concatenate([[logs.mean()], logs[draws].mean(axis=1)])


def _interval(draws: np.ndarray) -> tuple[float, float, float]:
    tail = (1 - CONFIDENCE) / 2 * 100
    low, high = np.nanpercentile(draws[1:], [tail, 100 - tail])
    return tuple(float(np.clip(v, 0.0, 1.0)) for v in (draws[0], low, high))


def _point(draws: np.ndarray) -> float | None:
    """The point estimate of a share's draws, clipped to 0..1 like the share (None where undefined)."""
    value = float(draws[0])
    return round(float(np.clip(value, 0.0, 1.0)), 6) if np.isfinite(value) else None


def row_breakdown(
    values: Mapping[str, np.ndarray],
    baseline: str,
    config: str,
    better: Any,
    twins: Mapping[str, Twin],
    counted: Mapping[str, tuple[float, str]] | None = None,
    seed: int = 0,
) -> list[Part]:
    """The parts of one row's cost. ``values``: each configuration's measured values of the row's
    group; ``counted``: {mechanism: (seconds it took per execution on the CVM, what was counted)} for
    a row whose metric is an execution's time (in the row's unit). Empty when the CVM is not worse."""
    rng = np.random.default_rng(seed)
    sign = _cost_sign(better)
    base = _resampled_log_means(values[baseline], rng)
    cvm = _resampled_log_means(values[config], rng)
    cost = sign * (np.exp(cvm - base) - 1.0)
    log_cost = sign * (cvm - base)
    if not cost[0] > 0:
        return []
    # (mechanism, share draws, log share draws, source, basis)
    parts: list[tuple[str, np.ndarray, np.ndarray, str, str]] = []
    for mechanism, twin in sorted(twins.items()):
        if twin.config in values and len(values[twin.config]):
            twin_log = _resampled_log_means(values[twin.config], rng) - base
            share, log_share = sign * (np.exp(twin_log) - 1.0) / cost, sign * twin_log / log_cost
            # forced: the twin's cost is the mechanism's; removed: what the CVM loses without it
            if twin.kind != "forced":
                share, log_share = 1.0 - share, 1.0 - log_share
            parts.append((mechanism, share, log_share, "twin", twin.basis))
    for mechanism, (seconds, what) in sorted((counted or {}).items()):
        if mechanism in twins or sign < 0:
            continue
        cvm_time, base_time = np.exp(cvm), np.exp(base)
        remaining = np.where(cvm_time > seconds, cvm_time - seconds, np.nan)
        share = seconds / (cvm_time - base_time)
        parts.append((mechanism, share, np.log(cvm_time / remaining) / log_cost, "counts", what))
    out = [Part(m, *_interval(share), source, basis, _point(log_share)) for m, share, log_share, source, basis in parts]
    clipped = [np.clip(share, 0, 1) for _m, share, _l, _s, _b in parts] or [0.0 * cost]
    rest = np.ones_like(cost) - np.nansum(clipped, axis=0)
    log_rest = 1.0 - sum(float(np.clip(log_share[0], 0, 1)) for _m, _s, log_share, _src, _b in parts)
    out.append(Part(UNEXPLAINED, *_interval(rest), "rest", log_share=round(log_rest, 6)))
    return out


def _unit_cost(frame: pd.DataFrame, config: str, rule: CountRule) -> float | None:
    """The median unit cost (seconds per count) measured on the configuration's machines, or None."""
    rows = frame[(frame["config"] == config) & (frame["metric"] == rule.unit_metric)]
    # a sample's params hold its case (Workload.sample_params)
    rows = rows[[_case_matches(params, rule.unit_case) for params in rows["params"]]] if len(rows) else rows
    values = rows["value"].to_numpy(dtype=float)
    return float(rule.seconds_per_count(np.median(values))) if len(values) else None


def _case_matches(case: Any, wanted: Mapping[str, Any]) -> bool:
    import json

    if isinstance(case, str):
        try:
            case = json.loads(case)
        except ValueError:
            return False
    return isinstance(case, Mapping) and all(case.get(k) == v for k, v in wanted.items())


def execution_counts(records: list[Mapping[str, Any]], workload: str, config: str, rule: CountRule) -> list[float]:
    """The rule's count in each measured execution of ``workload`` among ``records`` (execution
    records of the configuration's bundles) whose variant values all appear in the configuration's
    label."""
    parts = set(config.split(" / "))
    counts = []
    for record in records:
        if record.get("workload") != workload or record.get("warmup") or record.get("status", "ok") != "ok":
            continue
        if not {str(v) for v in (record.get("variant") or {}).values()} <= parts:
            continue
        counters = record.get("counters") or {}
        name = next((n for n in rule.counters if n in counters), None)
        if name is not None:
            counts.append(rule.sign * float(counters[name]))
    return counts


def counted_seconds(
    frame: pd.DataFrame, records: list[Mapping[str, Any]], workload: str, baseline: str, config: str
) -> dict[str, tuple[float, str]]:
    """{mechanism: (seconds per execution its count costs on the CVM, what was counted)}: the median
    count over the CVM's executions of the workload times the unit cost there, less the unit cost on
    the baseline's machines where they measured it (only the CVM's excess is the mechanism's)."""
    out = {}
    for mechanism, rule in COUNT_RULES.items():
        counts = execution_counts(records, workload, config, rule)
        unit = _unit_cost(frame, config, rule)
        if not counts or unit is None:
            continue
        base_unit = _unit_cost(frame, baseline, rule)
        excess = unit - base_unit if base_unit is not None else unit
        count = float(np.median(counts))
        if excess > 0 and count > 0:
            said = f"{fmt.significant(count, 4)} x {fmt.quantity(excess, 's')} ({rule.counters[0]})"
            out[mechanism] = (count * excess, said)
    return out


def cross_machine(row: Mapping[str, Any], sides: Mapping[str, list]) -> bool:
    """Whether a comparison row puts two machines against each other with a TEE (or an unknown one)
    on the compared side: the rows a breakdown applies to."""
    base = {label for label, _p in sides.get(row["baseline"], [])}
    other = sides.get(row["config"], [])
    if not other or base == {label for label, _p in other}:
        return False
    techs = {((probe.get("tee") or {}).get("technology") or "unknown") for _l, probe in other}
    return techs != {"none"}


def _isolates_a_mechanism(row: Mapping[str, Any]) -> bool:
    """Whether the row measures one mechanism on its own (its case names it: ``{"mechanism": ...}``):
    a unit cost the breakdown uses, not a workload's cost to split."""
    import json

    params = row.get("params")
    if isinstance(params, str):
        if "mechanism" not in params:  # canonical JSON writes the key as it is: no object to parse
            return False
        try:
            params = json.loads(params)
        except ValueError:
            return False
    return isinstance(params, Mapping) and "mechanism" in params


def _forced_twin_row(sides: Mapping[str, list], row: Mapping[str, Any], named: Mapping[str, str] | None) -> bool:
    """Whether the row's compared configuration is a forced twin of its baseline."""
    return any(
        twin.config == row["config"] and twin.kind == "forced"
        for twin in find_twins(sides, row["baseline"], "", named).values()
    )


def breakdowns(
    table: pd.DataFrame,
    frame: pd.DataFrame,
    machines: Mapping[str, Mapping[str, Any]],
    named_twins: Mapping[str, str] | None = None,
    executions: Mapping[str, list[Mapping[str, Any]]] | None = None,
    sides: Mapping[str, list] | None = None,
) -> tuple[list[list[dict[str, Any]]], list]:
    """(per row of ``table``: its breakdown as dicts, empty where none applies; the lint's findings on
    the twins). ``frame``: the measured samples of the rows' groups (engine.SampleSet.measured_frame),
    with the configuration of every sample: a row whose group it lacks and that has neither twin nor
    count is all unexplained where the CVM is worse (the table's ratio says); ``machines``: {bundle:
    probe}; ``executions``: {bundle: its execution records} (their mechanism counters, for counts
    times unit costs); ``sides``: the machines behind each configuration, where the frame is not
    enough to tell them (sides.config_sides)."""
    from ccbench.analysis.rows.sides import config_sides

    if table.empty or (frame.empty and sides is None):
        return [[] for _ in range(len(table))], []
    if frame.empty:
        frame = pd.DataFrame(columns=["workload", "params", "case", "metric", "config", "bundle", "value"])
    sides = sides if sides is not None else config_sides(frame, machines)
    keys = ["workload", "params", "case", "metric"]
    grouped = _values_by_group(frame, keys)
    # what every row of a pair, or of a workload, shares: worked out once (a table has thousands of rows)
    units = frame[frame["metric"].isin({rule.unit_metric for rule in COUNT_RULES.values()})]
    bundles_of = {config: list(b) for config, b in frame.groupby("config", sort=False)["bundle"].unique().items()}
    pairs: dict[tuple[str, str], tuple[bool, dict[str, Twin]]] = {}
    counted: dict[tuple[str, str, str], dict[str, tuple[float, str]]] = {}
    out, findings = [], []
    from ccbench.analysis.rows.compare import records

    for seed, row in enumerate(records(table)):
        pair = (row["baseline"], row["config"])
        if pair not in pairs:
            applies = cross_machine(row, sides) and not _forced_twin_row(sides, row, named_twins)
            twins = find_twins(sides, *pair, named_twins) if applies else {}
            findings += twin_findings(sides, *pair, twins)
            if "bounce-buffers" in twins:
                twin_config = twins["bounce-buffers"].config
                twin_records = [r for b in bundles_of.get(twin_config, []) for r in (executions or {}).get(str(b), [])]
                twins, refused = vet_bounce_twin(sides, row["config"], twins, twin_records)
                findings += refused
            pairs[pair] = (applies, twins)
        applies, twins = pairs[pair]
        if "bounce-buffers" in twins and crosses_no_device(row):
            # emulated hosts move packets in memory: no bounce-buffer share, whatever the twin measured
            twins = {m: t for m, t in twins.items() if m != "bounce-buffers"}
        group = grouped.get(tuple(str(row[k]) if k in ("params", "case") else row[k] for k in keys))
        # a row that measures one mechanism on its own is a unit cost, not a cost to split
        if not applies or _isolates_a_mechanism(row):
            out.append([])
            continue
        if group is None:
            out.append(_all_unexplained(row))
            continue
        key = (row["workload"], *pair)
        if key not in counted and row.get("unit") in TIME_UNITS:
            records = [r for b in bundles_of.get(row["config"], []) for r in (executions or {}).get(str(b), [])]
            counted[key] = counted_seconds(units, records, *key)
        parts = _row_parts(row, group, counted.get(key, {}), twins, seed)
        if "idle" in twins:
            _add_ipis(parts, row, twins["idle"], bundles_of, executions or {})
        out.append(parts)
    return out, findings


#: the IPIs a polling idle loop takes away with the halts (set_nr_if_polling skips the reschedule
#: IPI to a polling CPU): each an exit in a CVM (an x2APIC ICR write: #VE or #VC)
IPI_KINDS = ("RES", "CAL")


def _add_ipis(parts: list[dict], row: Mapping[str, Any], twin: Twin, bundles_of, executions) -> None:
    """Beside the idle share: the median reschedule (RES) and function-call (CAL) interrupts per
    execution on the CVM and on its idle=poll twin, where their counters were recorded: the idle
    share includes those IPIs' exits, not only the halts'."""
    seen: dict[str, dict[str, float]] = {}
    for side, config in (("cvm", row["config"]), ("twin", twin.config)):
        records = [r for b in bundles_of.get(config, []) for r in executions.get(str(b), [])]
        for kind in IPI_KINDS:
            rule = CountRule((f"interrupts.{kind}",), 1.0, "", {}, float)
            counts = execution_counts(records, row["workload"], config, rule)
            if counts:
                seen.setdefault(kind, {})[side] = float(np.median(counts))
    if not seen:
        return
    for part in parts:
        if part["mechanism"] == "idle":
            part["ipis"] = seen


def _values_by_group(frame: pd.DataFrame, keys: list[str]) -> dict[tuple, dict[str, np.ndarray]]:
    """{(workload, params, case, metric) with params and case as text: {config: its values, in the
    frame's order}}: one grouping of the narrow key columns, the values taken by position (grouping
    the whole frame once per row took most of the breakdown's time)."""
    text = frame[[*keys, "config"]].assign(params=frame["params"].astype(str), case=frame["case"].astype(str))
    values = frame["value"].to_numpy(dtype=float)
    grouped: dict[tuple, dict[str, np.ndarray]] = {}
    for (*key, config), positions in text.groupby([*keys, "config"], sort=False).indices.items():
        grouped.setdefault(tuple(key), {})[config] = values[positions]
    return grouped


def _all_unexplained(row: Mapping[str, Any]) -> list[dict]:
    """A row with neither twin nor count: all of a worse CVM's cost is unexplained (its samples unread)."""
    ratio = row.get("ratio")
    if ratio is None or not np.isfinite(ratio):
        return []
    worse = ratio < 1 if row.get("better") == "higher" else ratio > 1
    return [dict(_ALL_UNEXPLAINED)] if worse else []


#: the one part of a row that is all unexplained (a copy per row: thousands of rows, one asdict)
_ALL_UNEXPLAINED = Part(UNEXPLAINED, 1.0, 1.0, 1.0, "rest", log_share=1.0).to_dict()


def _row_parts(
    row: Mapping[str, Any], values: Mapping[str, np.ndarray], seconds: Mapping[str, tuple[float, str]], twins, seed: int
) -> list[dict]:
    """One cross-machine row's breakdown from its group's values by configuration and, for a row whose
    metric is a time, the seconds per execution its counted mechanisms took on the CVM."""
    if row["baseline"] not in values or row["config"] not in values:
        return []
    counted = None
    if row.get("unit") in TIME_UNITS:
        scale = TIME_UNITS[row["unit"]]
        counted = {mechanism: (value / scale, what) for mechanism, (value, what) in seconds.items()}
    parts = row_breakdown(values, row["baseline"], row["config"], row.get("better"), twins, counted, seed)
    return [part.to_dict() for part in parts]


def wanted_groups(table: pd.DataFrame):
    """The filter of groups (workload, params, case, metric) the breakdown reads samples of, for
    engine.SampleSet.measured_frame: the table's rows and the unit costs."""
    rows = {(w, m) for w, m in zip(table["workload"], table["metric"], strict=True)}
    extra = {rule.unit_metric for rule in COUNT_RULES.values()}
    return lambda group: (group[0], group[3]) in rows or group[3] in extra


def parse_twins(values: tuple[str, ...] | list[str]) -> dict[str, str]:
    """``--twin MECHANISM=LABEL`` options as {mechanism: label}; a bad one is a one-line error."""
    from ccbench.basics.errors import CCBenchError

    twins = {}
    for value in values:
        mechanism, _, label = value.partition("=")
        if mechanism not in MECHANISMS or not label:
            raise CCBenchError(
                f"--twin {value!r}: give MECHANISM=LABEL with MECHANISM one of {', '.join(MECHANISMS)} and LABEL a "
                "machine's label or a configuration (e.g. --twin bounce-buffers=plain-swiotlb)"
            )
        twins[mechanism] = label
    return twins


def for_comparison(
    samples: Any, table: pd.DataFrame, machines: Mapping[str, Mapping[str, Any]], named: Mapping[str, str]
):
    """breakdowns() of a comparison of an engine.SampleSet: reads only the samples it needs. A named
    twin that names no configuration or machine is an error."""
    from ccbench.analysis.rows.sides import config_sides
    from ccbench.basics.errors import CCBenchError

    # only the rows between two machines get a breakdown, and only those with a twin or a count need
    # their samples (the others are all unexplained): read those alone, the machines behind each
    # configuration known from the facts
    sides = config_sides(samples.facts, machines) if len(table) else {}
    executions = {str(bundle.path): bundle.executions for bundle in samples.bundles}
    counters = {name for rule in COUNT_RULES.values() for name in rule.counters}
    counted = any(counters & set(r.get("counters") or {}) for records in executions.values() for r in records)
    pairs = list(zip(table["baseline"], table["config"], strict=True))
    needed = {
        pair: cross_machine({"baseline": pair[0], "config": pair[1]}, sides)
        and (counted or bool(find_twins(sides, *pair, named)))
        for pair in set(pairs)
    }
    reading = [needed[pair] for pair in pairs]
    frame = samples.measured_frame(wanted_groups(table[reading])) if any(reading) else pd.DataFrame()
    if named:
        known = set(sides) | {label for side in sides.values() for label, _p in side}
        for mechanism, label in named.items():
            if label not in known:
                raise CCBenchError(
                    f"--twin {mechanism}={label}: no machine or configuration is called {label!r}; they are: "
                    + "; ".join(sorted(known))
                )
    return breakdowns(table, frame, machines, named, executions, sides)


def breakdown_text(part: Mapping[str, Any]) -> str:
    """ "bounce-buffers 16% [10%, 22%] (twin plain-swiotlb / no TEE)" """
    basis = f" ({part['source']} {part['basis']})" if part.get("basis") else ""
    return (
        f"{part['mechanism']} {part['share'] * 100:.0f}% [{part['ci_low'] * 100:.0f}%, {part['ci_high'] * 100:.0f}%]"
        + basis
    )
