"""The report as Markdown: the sections' tables as pipe tables, each figure as its caption and
takeaway, with a link to its PNG file where --figures wrote one."""

from __future__ import annotations

import pandas as pd

from ccbench.analysis import format as fmt
from ccbench.basics.version import __version__
from ccbench.report.sections import Figure, ReportContext, Section


def markdown_table(frame: pd.DataFrame) -> str:
    def cell(value) -> str:
        # one number format in every table (no 3615.000000000001, no 6.657e+04 beside 66,573)
        text = fmt.number(value) if isinstance(value, float) or value is None else str(value)
        return text.replace("|", "\\|").replace("\n", " ")

    header = "| " + " | ".join(cell(c) for c in frame.columns) + " |"
    rule = "|" + "|".join("---" for _ in frame.columns) + "|"
    rows = ["| " + " | ".join(cell(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join([header, rule, *rows])


def render_markdown(
    sections: list[Section],
    ctx: ReportContext,
    title: str = "ccbench report",
    figure_links: dict[str, str] | None = None,
) -> str:
    lines = [
        f"# {title}",
        "",
        f"ccbench {__version__}: {len(ctx.bundles)} bundle(s), {ctx.sample_count} samples{ctx.sampling_note}; baseline: {ctx.baseline}",
        "",
    ]
    for section in sections:
        lines += _section(section, figure_links)
    return "\n".join(lines)


def _section(section: Section, figure_links: dict[str, str] | None) -> list[str]:
    lines = [f"## {section.title}", ""]
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
        lines += _figure(figure, figure_links)
    return lines


def _figure(figure: Figure, figure_links: dict[str, str] | None) -> list[str]:
    lines = []
    if figure_links and figure.name in figure_links:
        lines += [f"![{figure.caption}]({figure_links[figure.name]})", ""]
    if figure.caption or figure.takeaway:
        text = f"**{figure.caption}**" if figure.caption else ""
        if figure.takeaway:
            text += f" {figure.takeaway}"
        lines += [text.strip(), ""]
    return lines
