"""``ccbench history report``: one self-contained HTML page people can work with.

It opens on what moved, as ``history show`` says it: one line per configuration (its series and runs,
how many moved), under it one line per series that moved with its change points (their size, interval
and what changed around them), the others counted by why they did not move; then a series picker
(grouped by configuration; series of one run, which cannot move, left out unless asked for) with
filters (machine, workload, metric, free text), and one interactive chart of the chosen series (uPlot, inlined from the package's assets: drag to zoom, double-click to reset; change
points drawn as dashed lines; contended runs hollow). Hovering a point shows its run: the median,
how many samples, the run id, the bundle and the run's provenance. The data is one JSON blob: one
entry per run (its facts once) and per series only times, medians and run numbers. Nothing is
fetched when the page is viewed. A link may carry filters and a series in its fragment
(``#workload=NAME&metric=NAME&series=3``).
"""

from __future__ import annotations

import html
import json
import math
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import Any

from ccbench.analysis import format as fmt
from ccbench.basics.version import __version__
from ccbench.results.history import EXPLAINING, Series
from ccbench.results.history_show import describe, overview

#: the run facts shown on hover (the change-point causes, plus what identifies the run)
RUN_FACTS = ["bundle", *EXPLAINING]


def _asset(name: str) -> str:
    return resources.files("ccbench.results").joinpath("assets", name).read_text(encoding="utf-8")


def _plain(value: Any) -> Any:
    """A JSON value of a store cell (pandas' missing values become null)."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return None
    if hasattr(value, "isoformat"):
        return value.isoformat()
    if type(value).__name__ in ("NAType", "NaTType"):
        return None
    if hasattr(value, "item"):
        return value.item()
    return value


def page_data(series: list[Series], reason: str | None, store: Path) -> dict[str, Any]:
    """The page's one JSON document: runs (facts once each) and series (points as run numbers)."""
    runs: list[dict[str, Any]] = []
    run_number: dict[str, int] = {}
    out_series = []
    for number, s in enumerate(series):
        points = s.points
        numbers = []
        for row in points.to_dict("records"):
            run_id = str(row.get("run_id") or row.get("bundle"))
            if run_id not in run_number:
                run_number[run_id] = len(runs)
                runs.append(
                    {
                        "id": run_id,
                        "started_at": _plain(row["started_at"]),
                        **{name: _plain(row.get(name)) for name in RUN_FACTS},
                    }
                )
            numbers.append(run_number[run_id])
        out_series.append(
            {
                "id": number,
                **{key: _plain(value) for key, value in s.key.items()},
                "unit": _plain(s.unit),
                "better": _plain(s.better),  # a fact's (systeminfo's memory) is none: null, never NaN
                "note": s.note,
                "t": [row.timestamp() for row in points["started_at"]],
                "y": [fmt.finite(v) for v in points["median"]],
                # as history show writes it (a time in a unit that needs no exponent: "12.3 µs")
                "ytext": [fmt.quantity(v, s.unit) for v in points["median"]],
                "n": [int(v) for v in points["n"]],
                "contended": [bool(v) for v in points["contended"]],
                "run": numbers,
                "changes": [
                    {
                        "index": cp.index,
                        "percent": fmt.finite(cp.change_percent),
                        "interval": [fmt.finite(v) for v in cp.interval] if cp.interval else None,
                        "p": fmt.finite(cp.p_value),
                        "before": fmt.finite(cp.mean_before),
                        "after": fmt.finite(cp.mean_after),
                        "changed": {k: [_plain(a), _plain(b)] for k, (a, b) in cp.changed.items()},
                        "text": describe(cp, s.unit, s.better),
                    }
                    for cp in s.change_points
                ],
            }
        )
    return {
        "store": str(store),
        "generated": datetime.now(UTC).isoformat(timespec="seconds"),
        "ccbench": __version__,
        "reason": reason,
        "runs": runs,
        "series": out_series,
    }


def _json_for_script(document: dict[str, Any]) -> str:
    """JSON that cannot end its <script> element early (labels are the user's text)."""
    text = json.dumps(document, separators=(",", ":"), allow_nan=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _overview_html(series: list[Series]) -> str:
    """What moved, as ``history show`` says it: a line per configuration, a line per series that
    moved (click: its chart) with its change points, the others counted."""
    _, groups = overview(series)
    items = []
    for group in groups:
        moved = "".join(
            f"<li class='pick' data-series='{number}'>{html.escape(line)}<ul>"
            + "".join(
                f"<li class='change'>change point {html.escape(describe(cp, s.unit, s.better))}</li>"
                for cp in s.change_points
            )
            + "</ul></li>"
            for number, s, line in group.moved
        )
        steady = "".join(
            f"<li class='note'>{count:,} series: {html.escape(note)}</li>" for note, count in group.steady.items()
        )
        items.append(
            f"<li class='config'><span class='head'>{html.escape(group.line)}</span><ul>{moved}{steady}</ul></li>"
        )
    return f"<ul id='overview'>{''.join(items)}</ul>"


def render(series: list[Series], reason: str | None, store: Path) -> str:
    head, _ = overview(series)
    summary = f"{head}; change points not computed: {reason}" if reason else head
    return "\n".join(
        [
            "<!doctype html><html lang='en'><head><meta charset='utf-8'>",
            "<meta name='viewport' content='width=device-width, initial-scale=1'>",
            "<title>ccbench history</title>",
            f"<style>{_asset('uPlot.min.css')}\n{_asset('history.css')}</style></head><body>",
            "<h1>How the cost moved over time</h1>",
            f"<p class='note'>store {html.escape(str(store))}; ccbench {html.escape(__version__)}</p>",
            "<h2 id='verdict'>Verdict: what moved</h2>",
            f"<p id='summary'>{html.escape(summary)}</p>",
            f"<div id='moved'>{_overview_html(series)}</div>",
            "<h2>Series</h2>",
            "<div id='filters'>"
            "<label>machine <select id='f-label'></select></label>"
            "<label>workload <select id='f-workload'></select></label>"
            "<label>metric <select id='f-metric'></select></label>"
            "<label>search <input id='f-text' type='search' placeholder='case, configuration'></label>"
            "<label><input id='f-moved' type='checkbox'> only series that moved</label>"
            "<label><input id='f-single' type='checkbox'> series of one run (none can move)</label></div>",
            "<p id='count' class='note'></p>",
            "<div id='layout'><select id='picker' size='14'></select>",
            "<div id='main'><h3 id='title'></h3><div id='chart'></div>",
            "<p class='note'>Each point is one run's median; hollow points ran while other work used the machine "
            "(contended, left out of the detection); dashed lines mark change points. Drag to zoom, double-click "
            "to reset, hover a point for its run.</p>",
            "<div id='changes'></div><div id='hover'></div></div></div>",
            f"<script>{_asset('uPlot.iife.min.js')}</script>",
            f"<script id='data' type='application/json'>{_json_for_script(page_data(series, reason, store))}</script>",
            f"<script>{_asset('history.js')}</script>",
            "</body></html>",
        ]
    )
