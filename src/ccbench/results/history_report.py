"""``ccbench history report``: one self-contained HTML page, the change points first (what moved,
by how much, and what changed around it), then one chart per metric over time with the change
points marked and contended runs drawn hollow."""

from __future__ import annotations

import html
import io
from datetime import UTC, datetime
from pathlib import Path

from ccbench.results.history import Series, describe
from ccbench.version import __version__

STYLE = (
    "body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;color:#222}"
    "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:4px 8px;text-align:left}"
    "th{background:#f4f4f4}.note{color:#666}figure{margin:1.5em 0}"
)


def _chart(series: list[Series]) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(10, 3.2))
    for s in series:
        points = s.points
        name = f"{s.key['config']} {s.key['case']}".strip()
        line = axes.plot(points["started_at"], points["median"], marker="o", markersize=3, label=name)[0]
        contended = points[points["contended"].astype(bool)]
        axes.scatter(contended["started_at"], contended["median"], facecolors="none", edgecolors=line.get_color())
        for cp in s.change_points:
            axes.axvline(points.loc[cp.index, "started_at"], color=line.get_color(), linestyle="--", linewidth=1)
    axes.set_ylabel(series[0].unit)
    axes.legend(fontsize=7, loc="best")
    axes.grid(alpha=0.3)
    figure.autofmt_xdate()
    buffer = io.StringIO()
    figure.savefig(buffer, format="svg", bbox_inches="tight")
    plt.close(figure)
    return buffer.getvalue()[buffer.getvalue().index("<svg") :]


def render(series: list[Series], reason: str | None, store: Path) -> str:
    changes = [(s, cp) for s in series for cp in s.change_points]
    parts = [
        f"<!doctype html><html><head><meta charset='utf-8'><title>ccbench history</title><style>{STYLE}</style>",
        "</head><body><h1>How the cost moved over time</h1>",
        f"<p class='note'>store {html.escape(str(store))}; {len(series)} series; ccbench {__version__}; "
        f"{datetime.now(UTC).isoformat(timespec='seconds')}</p>",
        "<h2>Verdict</h2>",
    ]
    if reason:
        parts.append(f"<p><b>Change points not computed:</b> {html.escape(reason)}</p>")
    elif not changes:
        parts.append("<p>No change point in any series: every series stayed at its level (Otava, p &lt; 0.0001).</p>")
    else:
        parts.append(f"<p>{len(changes)} change point(s) in {len({id(s) for s, _ in changes})} series.</p>")
        parts.append("<table><tr><th>series</th><th>metric</th><th>change</th></tr>")
        for s, cp in changes:
            name = f"{s.key['label']} / {s.key['config']} {s.key['workload']} {s.key['case']}"
            parts.append(
                f"<tr><td>{html.escape(name)}</td><td>{html.escape(s.key['metric'])}</td>"
                f"<td>{html.escape(describe(cp, s.unit))}</td></tr>"
            )
        parts.append("</table>")
    parts.append(
        "<p class='note'>Each point is one run's median; hollow points ran while other work used the machine "
        "(contended) and are left out of the change-point detection; dashed lines mark change points.</p>"
    )
    by_metric: dict[tuple[str, str], list[Series]] = {}
    for s in series:
        by_metric.setdefault((s.key["workload"], s.key["metric"]), []).append(s)
    for (workload, metric), group in by_metric.items():
        parts.append(f"<figure><h3>{html.escape(workload)}: {html.escape(metric)}</h3>{_chart(group)}</figure>")
    parts.append("</body></html>")
    return "\n".join(parts)
