"""The report: sections (ccbench.report.sections) rendered as one self-contained HTML file,
as Markdown, and as PNG + SVG figure files."""

from __future__ import annotations

import html
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterable

import pandas as pd

from ccbench import __version__
from ccbench.analysis.compare import compare, resolve_baseline, summary_by_config
from ccbench.analysis.load import frame_from_bundles, load_bundles
from ccbench.report import charts
from ccbench.report.sections import ReportContext, Section, discover

STYLE = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2rem auto;max-width:1200px;color:#222;padding:0 1rem}
h1{font-size:1.6rem}h2{border-bottom:1px solid #ddd;padding-bottom:.2rem;margin-top:2.2rem}h3{font-size:1rem;color:#444}
table{border-collapse:collapse;font-size:.8rem;margin:.5rem 0 1rem;display:block;overflow-x:auto}
th,td{border:1px solid #ddd;padding:.25rem .5rem;text-align:left;vertical-align:top}th{background:#f4f4f4}
tr:nth-child(even) td{background:#fafafa}figure{margin:1rem .5rem 1rem 0;display:inline-block;vertical-align:top;max-width:100%}
figure svg{max-width:100%;height:auto}figcaption{font-size:.8rem;color:#555;display:block}.meta{color:#666;font-size:.85rem}
nav a{margin-right:1rem}
"""


def build_context(paths: Iterable[str | Path], labels: dict[str, str] | None = None,
                  baseline: str | None = None) -> ReportContext:
    bundles = load_bundles(paths)
    samples = frame_from_bundles(bundles, labels)
    comparison = summary = None
    resolved = None
    if not samples.empty:
        measured = samples[~samples["warmup"]]
        if not measured.empty:
            resolved = resolve_baseline(measured, baseline)
            comparison = compare(samples, resolved)
            summary = summary_by_config(samples)
    return ReportContext(samples=samples, bundles=bundles, baseline=resolved, comparison=comparison, summary=summary)


def build_sections(ctx: ReportContext) -> list[Section]:
    sections = []
    for module in discover():
        section = module.build(ctx)
        if section is not None:
            sections.append(section)
    return sections


def _anchor(title: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in title.lower()).strip("-")


def render_html(sections: list[Section], ctx: ReportContext, title: str = "ccbench report") -> str:
    parts = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        f"<meta name='viewport' content='width=device-width, initial-scale=1'><title>{html.escape(title)}</title>",
        f"<style>{STYLE}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
        f"<p class='meta'>ccbench {__version__}, generated {datetime.now(timezone.utc):%Y-%m-%d %H:%M UTC} from "
        f"{len(ctx.bundles)} bundle(s), {len(ctx.samples)} samples; baseline: {html.escape(str(ctx.baseline))}</p>",
        "<nav>" + "".join(f"<a href='#{_anchor(s.title)}'>{html.escape(s.title)}</a>" for s in sections) + "</nav>",
    ]
    for section in sections:
        parts.append(f"<section id='{_anchor(section.title)}'><h2>{html.escape(section.title)}</h2>")
        if section.intro:
            parts.append(f"<p>{html.escape(section.intro)}</p>")
        for table in section.tables:
            parts.append(f"<h3>{html.escape(table.title)}</h3>")
            parts.append(table.frame.to_html(index=False, escape=True, border=0, na_rep="-"))
            if table.note:
                parts.append(f"<p class='meta'>{html.escape(table.note)}</p>")
        for figure in section.figures:
            parts.append(f"<figure>{charts.to_svg(figure.figure)}<figcaption>{html.escape(figure.caption)}</figcaption></figure>")
        parts.append("</section>")
    parts.append("</body></html>")
    return "\n".join(parts)


def markdown_table(frame: pd.DataFrame) -> str:
    def cell(value) -> str:
        text = "-" if value is None or (isinstance(value, float) and value != value) else str(value)
        return text.replace("|", "\\|").replace("\n", " ")

    header = "| " + " | ".join(cell(c) for c in frame.columns) + " |"
    rule = "|" + "|".join("---" for _ in frame.columns) + "|"
    rows = ["| " + " | ".join(cell(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join([header, rule, *rows])


def render_markdown(sections: list[Section], ctx: ReportContext, title: str = "ccbench report",
                    figure_links: dict[str, str] | None = None) -> str:
    lines = [f"# {title}", "", f"ccbench {__version__}: {len(ctx.bundles)} bundle(s), {len(ctx.samples)} samples; "
             f"baseline: {ctx.baseline}", ""]
    for section in sections:
        lines += [f"## {section.title}", ""]
        if section.intro:
            lines += [section.intro, ""]
        for table in section.tables:
            lines += [f"### {table.title}", "", markdown_table(table.frame), ""]
        for figure in section.figures:
            if figure_links and figure.name in figure_links:
                lines += [f"![{figure.caption}]({figure_links[figure.name]})", ""]
    return "\n".join(lines)


def save_figures(sections: list[Section], directory: Path) -> dict[str, str]:
    directory.mkdir(parents=True, exist_ok=True)
    written = {}
    used: set[str] = set()
    for section in sections:
        for figure in section.figures:
            name = figure.name
            counter = 2
            while name in used:
                name = f"{figure.name}-{counter}"
                counter += 1
            used.add(name)
            figure.figure.savefig(directory / f"{name}.svg", format="svg")
            figure.figure.savefig(directory / f"{name}.png", format="png", dpi=150)
            written[figure.name] = str(directory / f"{name}.png")
    return written


def close_figures(sections: list[Section]) -> None:
    for section in sections:
        for figure in section.figures:
            charts.close(figure.figure)
