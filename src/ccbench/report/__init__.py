"""The report: sections (ccbench.report.sections) rendered as one self-contained HTML file,
as Markdown, and as PNG + SVG figure files."""

from __future__ import annotations

import html
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterable

import pandas as pd

from ccbench import __version__
from ccbench.analysis import format as fmt
from ccbench.analysis.compare import compare, resolve_baseline, summary_by_config
from ccbench.analysis.load import frame_from_bundles, load_bundles
from ccbench.helper import Helper, outcome
from ccbench.report import charts
from ccbench.report.sections import Figure, ReportContext, Section, discover

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
"""


def build_context(paths: Iterable[str | Path], labels: dict[str, str] | None = None,
                  baseline: str | None = None, helper: Helper | None = None, exclude_contended: bool = False,
                  model_by: str = "workload") -> ReportContext:
    # samples stay on disk until the frame reads them a chunk at a time: the records are never all in
    # memory beside the frame (sections read ctx.samples)
    bundles = load_bundles(paths, samples=False)
    samples = frame_from_bundles(bundles, labels, helper)
    comparison = summary = None
    resolved = None
    if not samples.empty:
        measured = samples[~samples["warmup"]]
        if not measured.empty:
            resolved = resolve_baseline(measured, baseline)
            comparison = compare(samples, resolved, exclude_contended=exclude_contended)
            summary = summary_by_config(samples[~samples["contended"]] if exclude_contended else samples)
    colours = charts.colour_map(pd.unique(samples["config"])) if not samples.empty else {}
    return ReportContext(samples=samples, bundles=bundles, baseline=resolved, comparison=comparison, summary=summary,
                         colours=colours, exclude_contended=exclude_contended, model_by=model_by)


def build_sections(ctx: ReportContext, drawer: "FigureDrawer | None" = None) -> list[Section]:
    """Every section with something to show, in order. With a FigureDrawer, each section's figures
    are handed to it as soon as the section is built (a helper draws them while later sections are
    being computed)."""
    sections = []
    for module in discover():
        section = module.build(ctx)
        if section is not None:
            sections.append(section)
            if drawer is not None:
                drawer.add(section.figures)
    return sections


def _anchor(title: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in title.lower()).strip("-")


def render_html(sections: list[Section], ctx: ReportContext, title: str = "ccbench report",
                svgs: dict[int, str] | None = None) -> str:
    """The report as one HTML file; ``svgs`` (from draw_figures) holds each figure's SVG by its
    position in the report, and figures are drawn here when it is not given."""
    if svgs is None:
        svgs = draw_figures(sections, svg=True)
    parts = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        f"<meta name='viewport' content='width=device-width, initial-scale=1'><title>{html.escape(title)}</title>",
        f"<style>{STYLE}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
        f"<p class='meta'>ccbench {__version__}, generated {datetime.now(timezone.utc):%Y-%m-%d %H:%M UTC} from "
        f"{len(ctx.bundles)} bundle(s), {len(ctx.samples)} samples; baseline: {html.escape(str(ctx.baseline))}</p>",
        "<nav>" + "".join(f"<a href='#{_anchor(s.title)}'>{html.escape(s.title)}</a>" for s in sections) + "</nav>",
    ]
    position = 0
    for section in sections:
        css = f" class='{html.escape(section.css_class)}'" if section.css_class else ""
        parts.append(f"<section id='{_anchor(section.title)}'{css}><h2>{html.escape(section.title)}</h2>")
        if section.intro:
            parts.append(f"<p>{html.escape(section.intro)}</p>")
        if section.points:
            parts.append("<ul>" + "".join(f"<li>{html.escape(point)}</li>" for point in section.points) + "</ul>")
        for table in section.tables:
            if "html" not in table.formats:
                continue
            parts.append(f"<h3>{html.escape(table.title)}</h3>")
            rendered = table.frame.to_html(index=False, escape=True, border=0, na_rep="-", float_format=fmt.number)
            if len(table.frame) > FOLD_ROWS:
                # a long table (the comparison has a row per case, metric and configuration) folds
                # away so that the charts after it stay in reach; no script needed
                rendered = (f"<details><summary>{len(table.frame)} rows: show the table</summary>"
                            f"{rendered}</details>")
            parts.append(rendered)
            if table.note:
                parts.append(f"<p class='meta'>{html.escape(table.note)}</p>")
        for figure in section.figures:
            takeaway = (f"<span class='takeaway'><b>What to take from it:</b> {html.escape(figure.takeaway)}</span>"
                        if figure.takeaway else "")
            parts.append(f"<figure>{svgs[position]}<figcaption>{html.escape(figure.caption)}{takeaway}</figcaption></figure>")
            position += 1
        parts.append("</section>")
    parts.append("</body></html>")
    return "\n".join(parts)


def markdown_table(frame: pd.DataFrame) -> str:
    def cell(value) -> str:
        # one number format in every table (no 3615.000000000001, no 6.657e+04 beside 66,573)
        text = fmt.number(value) if isinstance(value, float) or value is None else str(value)
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
        if section.points:
            lines += [f"- {point}" for point in section.points] + [""]
        for table in section.tables:
            if "md" not in table.formats:
                continue
            lines += [f"### {table.title}", "", markdown_table(table.frame), ""]
            if table.note:
                lines += [f"_{table.note}_", ""]
        for figure in section.figures:
            if figure_links and figure.name in figure_links:
                lines += [f"![{figure.caption}]({figure_links[figure.name]})", ""]
            if figure.caption or figure.takeaway:
                text = f"**{figure.caption}**" if figure.caption else ""
                if figure.takeaway:
                    text += f" {figure.takeaway}"
                lines += [text.strip(), ""]
    return "\n".join(lines)


def _unique_stem(name: str, used: set[str]) -> str:
    stem, counter = name, 2
    while stem in used:
        stem = f"{name}-{counter}"
        counter += 1
    used.add(stem)
    return stem


class FigureDrawer:
    """Draws figures once each: SVG text for the HTML report and, with ``directory``, PNG and SVG files.

    Figures added are queued to the helper processes at once; finish() then draws, here, every
    queued figure that no helper has started yet, from the last one back, and collects the rest:
    the two ends meet wherever the work splits evenly. A figure a helper could not draw (it died,
    or the drawing function does not pickle) is drawn here.
    """

    def __init__(self, svg: bool = True, directory: Path | None = None, helper: Helper | None = None):
        self.svg, self.directory, self.helper = svg, directory, helper
        self.jobs: list[tuple] = []
        self.futures: list = []
        self.names: list[str] = []  # each figure's name, in report order
        self.stems: set[str] = set()
        if directory is not None:
            directory.mkdir(parents=True, exist_ok=True)

    def add(self, figures: Iterable[Figure]) -> None:
        for figure in figures:
            self.names.append(figure.name)
            job = (figure.draw, self.svg, self.directory, _unique_stem(figure.name, self.stems))
            self.jobs.append(job)
            self.futures.append(self.helper.submit(_draw_one, *job) if self.helper is not None else None)

    def finish(self) -> dict[int, str]:
        """{position in the report: SVG text} for every figure added."""
        results: dict[int, str] = {}
        for index in reversed(range(len(self.jobs))):
            future = self.futures[index]
            if future is None or future.cancel():
                results[index] = _draw_one(*self.jobs[index])
        for index, future in enumerate(self.futures):
            if index not in results:
                results[index] = outcome(future, lambda: _draw_one(*self.jobs[index]))
        return results


    def links(self) -> dict[str, str]:
        """{figure name: absolute path of its PNG file} for the Markdown report; empty without a directory."""
        if self.directory is None:
            return {}
        return {name: str((self.directory / f"{job[3]}.png").resolve()) for name, job in zip(self.names, self.jobs)}


def draw_figures(sections: list[Section], svg: bool = True, directory: Path | None = None,
                 helper: Helper | None = None) -> dict[int, str]:
    """Draw the figures of ``sections``: {position in the report: SVG text} (see FigureDrawer)."""
    drawer = FigureDrawer(svg, directory, helper)
    for section in sections:
        drawer.add(section.figures)
    return drawer.finish()


def _draw_one(draw, svg: bool, directory: Path | None, stem: str) -> str:
    """Draw one figure; its SVG is rendered once, for the page and the file alike."""
    fig = draw()  # a matplotlib Figure outside pyplot: nothing to close, the garbage collector frees it
    document = charts.svg_document(fig) if svg or directory is not None else ""
    if directory is not None:
        (directory / f"{stem}.svg").write_text(document, encoding="utf-8")
        fig.savefig(directory / f"{stem}.png", format="png", dpi=150)
    return charts.inline_svg(document) if svg else ""
