"""The report: sections (ccbench.report.sections) built over one context (context), rendered as one
self-contained HTML file (html), as Markdown (markdown), and as PNG + SVG figure files (figures).
The names below are the package's public interface; each lives in the module named."""

from __future__ import annotations

from ccbench.report import charts
from ccbench.report.context import build_context, build_sections
from ccbench.report.figures import FigureDrawer, draw_figures
from ccbench.report.html import FOLD_ROWS, STYLE, render_html
from ccbench.report.markdown import markdown_table, render_markdown

__all__ = [
    "FOLD_ROWS",
    "STYLE",
    "FigureDrawer",
    "build_context",
    "build_sections",
    "charts",
    "draw_figures",
    "markdown_table",
    "render_html",
    "render_markdown",
]
