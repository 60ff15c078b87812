"""``ccbench history show`` in words and in JSON: per plan its series, per configuration one line,
one line per series that moved with its change points (history_report draws the same lines).

A change point's size is said in the project's one convention (ccbench.analysis.format.effect, as
compare and the gate say it): the time-equivalent ratio after/before, a throughput's inverted, so
that 0.104 -> 0.0724 MB/s is "43.6% slower" everywhere.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ccbench.analysis import format as fmt
from ccbench.results.history import ChangePoint, Series


def series_json(s: Series) -> dict[str, Any]:
    return {
        **s.key,
        "unit": s.unit,
        "better": s.better,
        "runs": [
            {
                "run_id": row.run_id,
                "started_at": row.started_at.isoformat(),
                "median": row.median,
                "n": int(row.n),
                "contended": bool(row.contended),
                "bundle": row.bundle,
            }
            for row in s.points.itertuples()
        ],
        "change_points": [
            {
                "started_at": cp.started_at,
                "run": cp.index,
                # the values' change after/before (a throughput that fell: negative) ...
                "change_percent": cp.change_percent,
                "interval_percent": list(cp.interval) if cp.interval else None,
                # ... and in the project's one convention (compare's and the gate's)
                "time_equivalent": _time_equivalent(cp, s.better)[0],
                "effect": effect(cp, s.better),
                "p_value": cp.p_value,
                "mean_before": cp.mean_before,
                "mean_after": cp.mean_after,
                "changed": {k: list(v) for k, v in cp.changed.items()},
            }
            for cp in s.change_points
        ],
        "note": s.note,
    }


def _time_equivalent(cp: ChangePoint, better: str | None) -> tuple[float, float | None, float | None]:
    """The change's ratio after/before as time (> 1: slower; a throughput's inverted), with its
    interval's ends in the same sense (None without an interval)."""
    ratio = 1 + cp.change_percent / 100
    low, high = (1 + cp.interval[0] / 100, 1 + cp.interval[1] / 100) if cp.interval else (None, None)
    if better == "higher":
        invert = fmt.time_equivalent
        return invert(ratio, better), (invert(high, better) if high else None), (invert(low, better) if low else None)
    return ratio, low, high


def effect(cp: ChangePoint, better: str | None) -> str:
    """The change in words as compare and the gate word an effect: "43.6% slower [...]"; a metric
    without a direction (a fact such as memory size) as its values' change: "+2.0%"."""
    if better not in ("lower", "higher"):
        return f"{cp.change_percent:+.1f}%"
    return fmt.effect(*_time_equivalent(cp, better))


def describe(cp: ChangePoint, unit: str, better: str | None = None) -> str:
    what = (
        "; ".join(f"{name} {before} -> {after}" for name, (before, after) in cp.changed.items())
        or "nothing recorded changed"
    )
    return (
        f"{cp.started_at[:19]}Z: {effect(cp, better)} "
        f"({fmt.quantity(cp.mean_before, unit)} -> {fmt.quantity(cp.mean_after, unit)}, p {cp.p_value:.4f}); {what}"
    )


def _runs_text(items: list[Series]) -> str:
    """ "24 runs (1 contended)" when every series has as many, else the range."""
    runs = {len(s.points) for s in items}
    contended = {int(s.points["contended"].astype(bool).sum()) for s in items}
    if len(runs) == 1 and len(contended) == 1:
        count, busy = next(iter(runs)), next(iter(contended))
        return f"{count} run{'s' if count != 1 else ''} ({busy} contended)" + (" each" if len(items) > 1 else "")
    return f"{min(runs)} to {max(runs)} runs"


@dataclass
class Group:
    """One configuration's series as ``history show`` and the history page put them: its line, the
    series that moved (each with its own line), and the others counted by why they did not."""

    name: str
    line: str
    moved: list[tuple[int, Series, str]] = field(default_factory=list)  # (its index in ``series``, it, its line)
    steady: dict[str, int] = field(default_factory=dict)


def series_line(s: Series, with_params: bool = False) -> str:
    """A series that moved, named without its configuration (its group's line names that once);
    ``with_params``: with the workload's parameters (where another series of its group has the same
    names and other parameters)."""
    where = " ".join(str(p) for p in (s.key["workload"], s.key["case"]) if p and str(p) != "nan")
    params = s.points["params"].iloc[0] if "params" in s.points else None
    where += f" ({params})" if with_params and isinstance(params, str) else ""
    last = fmt.quantity(float(s.points["median"].iloc[-1]), s.unit)
    return f"{where} {s.key['metric']} ({s.unit}): {_runs_text([s])}, last {last}"


def per_plan(series: list[Series]) -> dict[str, int]:
    """How many series each plan holds ("(no plan)": runs of a store's older writer without one)."""
    counts: dict[str, int] = {}
    for s in series:
        plan = s.key.get("plan") or "(no plan)"
        counts[plan] = counts.get(plan, 0) + 1
    return counts


def overview(series: list[Series]) -> tuple[str, list[Group]]:
    """The first line (configurations, series per plan, how many moved) and one Group per
    configuration and plan (the plan named where the store holds several)."""
    groups: dict[tuple[str, str, str], list[tuple[int, Series]]] = {}
    for number, s in enumerate(series):
        groups.setdefault((str(s.key["label"]), str(s.key.get("plan") or ""), str(s.key["config"])), []).append(
            (number, s)
        )
    plans = per_plan(series)
    moved_total = sum(1 for s in series if s.change_points)
    configurations = len({(label, config) for label, _, config in groups})
    head = (
        f"{configurations} configuration{'s' if configurations != 1 else ''}, {len(series):,} series "
        f"({', '.join(f'plan {plan}: {count:,}' for plan, count in plans.items())}), "
        f"{moved_total} with a change point"
    )
    out = []
    for (label, plan, config), numbered in groups.items():
        items = [s for _, s in numbered]
        name = config if config == label or config.startswith(f"{label} /") else f"{label} / {config}"
        name = f"{name} (plan {plan or '(no plan)'})" if len(plans) > 1 else name
        names = [(s.key["workload"], s.key["case"], s.key["metric"]) for s in items]
        moved = [(n, s, series_line(s, names.count(names[items.index(s)]) > 1)) for n, s in numbered if s.change_points]
        group = Group(name, f"{name}: {len(items):,} series, {_runs_text(items)}; {len(moved)} moved", moved)
        for s in items:
            if not s.change_points:
                note = s.note or "no change point"
                group.steady[note] = group.steady.get(note, 0) + 1
        out.append(group)
    return head, out


def show_lines(series: list[Series], reason: str | None) -> list[str]:
    """``history show`` in words: per configuration one line (its series and runs, how many moved),
    then one line per series that moved with its change points; the series that did not move, or
    have too few runs to tell, counted by the reason, not listed. Numbers as the report prints them,
    times in a unit that needs no scientific notation ("12.3 µs")."""
    lines = [f"change points not computed: {reason}"] if reason else []
    head, groups = overview(series)
    lines.append(head)
    for group in groups:
        lines.append(group.line)
        for _, s, line in group.moved:
            lines.append(f"  {line}")
            lines += [f"    change point {describe(cp, s.unit, s.better)}" for cp in s.change_points]
        lines += [f"  {count:,} series: {note}" for note, count in group.steady.items()]
    return lines
