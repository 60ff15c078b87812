"""The report as one self-contained HTML file: tables as HTML, figures inlined as SVG, no script."""

from __future__ import annotations

import html
from collections.abc import Callable
from datetime import UTC, datetime

from ccbench.analysis import format as fmt
from ccbench.basics.version import __version__
from ccbench.report.figures import draw_figures
from ccbench.report.sections import Figure, ReportContext, Section, Table

#: tables longer than this are folded (HTML <details>) in the report
FOLD_ROWS = 40

STYLE = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2rem auto;max-width:1200px;color:#222;padding:0 1rem}
h1{font-size:1.6rem}h2{border-bottom:1px solid #ddd;padding-bottom:.2rem;margin-top:2.2rem}h3{font-size:1rem;color:#444}
table{border-collapse:collapse;font-size:.8rem;margin:.5rem 0 1rem;display:block;overflow-x:auto}
th,td{border:1px solid #ddd;padding:.25rem .5rem;text-align:left;vertical-align:top}th{background:#f4f4f4}
tr:nth-child(even) td{background:#fafafa}figure{margin:1rem .5rem 1rem 0;display:inline-block;vertical-align:top;max-width:100%}
figure svg{max-width:100%;height:auto}figcaption{font-size:.8rem;color:#555;display:block}.meta{color:#666;font-size:.85rem}
nav a{margin-right:1rem}summary{cursor:pointer;color:#2a5db0;font-size:.85rem;margin:.3rem 0}
.verdict{background:#fff7e0;border:1px solid #e8d9a8;border-radius:6px;padding:.2rem 1rem 1rem}
.verdict h2{border-bottom-color:#e8d9a8}.verdict th{background:#fbeec4}.verdict td{background:#fffdf5}
.takeaway{font-size:.85rem;color:#222;display:block;margin-top:.2rem}
td.differs{background:#ffe3b3;font-weight:600}
"""


def _anchor(title: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in title.lower()).strip("-")


def render_html(
    sections: list[Section],
    ctx: ReportContext,
    title: str = "ccbench report",
    svgs: dict[int, str] | Callable[[], dict[int, str]] | None = None,
) -> str:
    """The report as one HTML file; ``svgs`` (from draw_figures) holds each figure's SVG by its
    position in the report, or is a function that returns them (called once the rest of the page is
    written: helpers draw the charts meanwhile), and figures are drawn here when it is not given."""
    if svgs is None:
        svgs = draw_figures(sections, svg=True)
    parts: list[str | tuple[int, Figure]] = list(_head(sections, ctx, title))
    position = 0  # the figures' positions run on across sections
    for section in sections:
        parts += _section(section, position)
        position += len(section.figures)
    parts.append("</body></html>")
    drawn = svgs() if callable(svgs) else svgs
    return "\n".join(part if isinstance(part, str) else _figure(part[1], drawn[part[0]]) for part in parts)


def _head(sections: list[Section], ctx: ReportContext, title: str) -> list[str]:
    """The document's head, the title, where the report came from, and the navigation."""
    return [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        f"<meta name='viewport' content='width=device-width, initial-scale=1'><title>{html.escape(title)}</title>",
        f"<style>{STYLE}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
        f"<p class='meta'>ccbench {__version__}, generated {datetime.now(UTC):%Y-%m-%d %H:%M UTC} from "
        f"{len(ctx.bundles)} bundle(s), {ctx.sample_count} samples{ctx.sampling_note}; baseline: {html.escape(str(ctx.baseline))}</p>",
        "<nav>" + "".join(f"<a href='#{_anchor(s.title)}'>{html.escape(s.title)}</a>" for s in sections) + "</nav>",
    ]


def _section(section: Section, first_figure: int) -> list[str | tuple[int, Figure]]:
    """One section: heading, intro, points, its HTML tables, then its figures, each as (its position
    in the report, the figure), for render_html to fill in; the first of them at ``first_figure``."""
    css = f" class='{html.escape(section.css_class)}'" if section.css_class else ""
    parts: list[str | tuple[int, Figure]] = [
        f"<section id='{_anchor(section.title)}'{css}><h2>{html.escape(section.title)}</h2>"
    ]
    if section.intro:
        parts.append(f"<p>{html.escape(section.intro)}</p>")
    if section.points:
        parts.append("<ul>" + "".join(f"<li>{html.escape(point)}</li>" for point in section.points) + "</ul>")
    for table in section.tables:
        if "html" in table.formats:
            parts += _table(table)
    parts += [(first_figure + offset, figure) for offset, figure in enumerate(section.figures)]
    parts.append("</section>")
    return parts


def _table(table: Table) -> list[str]:
    parts = [f"<h3>{html.escape(table.title)}</h3>"]
    if table.highlight is not None:
        rendered = _highlighted(table)
    else:
        rendered = table.frame.to_html(index=False, escape=True, border=0, na_rep="-", float_format=fmt.number)
    if len(table.frame) > FOLD_ROWS:
        # a long table (the comparison has a row per case, metric and configuration) folds
        # away so that the charts after it stay in reach; no script needed
        rendered = f"<details><summary>{len(table.frame)} rows: show the table</summary>{rendered}</details>"
    parts.append(rendered)
    if table.note:
        parts.append(f"<p class='meta'>{html.escape(table.note)}</p>")
    return parts


def _cell(value) -> str:
    text = fmt.number(value) if isinstance(value, float) or value is None else str(value)
    return html.escape(text)


def _highlighted(table: Table) -> str:
    """The table with the cells its ``highlight`` marks set apart (class 'differs')."""
    frame, marks = table.frame, table.highlight.reindex_like(table.frame).fillna(False)
    head = "".join(f"<th>{html.escape(str(column))}</th>" for column in frame.columns)
    rows = []
    for values, flags in zip(frame.itertuples(index=False), marks.itertuples(index=False), strict=True):
        cells = "".join(
            f"<td class='differs'>{_cell(v)}</td>" if bool(flag) else f"<td>{_cell(v)}</td>"
            for v, flag in zip(values, flags, strict=True)
        )
        rows.append(f"<tr>{cells}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def _figure(figure: Figure, svg: str) -> str:
    takeaway = (
        f"<span class='takeaway'><b>What to take from it:</b> {html.escape(figure.takeaway)}</span>"
        if figure.takeaway
        else ""
    )
    return f"<figure>{svg}<figcaption>{html.escape(figure.caption)}{takeaway}</figcaption></figure>"
