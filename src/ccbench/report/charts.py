"""The report's charts: the forest plot of ratios with their intervals, the latency percentile
lines, the overhead heatmap and the grouped bars are written as SVG directly
(ccbench.report.forestplot, .plots), without loading matplotlib; the breakdown's and the
microservices' charts are drawn with matplotlib (new_figure, literal_text, svg_document here).

matplotlib's figures are made with matplotlib.figure.Figure directly, not through pyplot: no global
figure registry to close, no GUI backend, and a lighter import (matplotlib's advice for servers)."""

from __future__ import annotations

import io
from typing import TYPE_CHECKING

# the SVG charts are the drawing modules' own functions, named here as the sections call them
from ccbench.report.forestplot import draw as forest
from ccbench.report.plots import grouped_bars, heatmap, percentile_lines

if TYPE_CHECKING:
    from matplotlib.figure import Figure

#: no creation date inside the files (with the salt set in new_figure, a figure's SVG depends on its data only)
SVG_METADATA = {"Date": None}


def new_figure(**options) -> Figure:
    """A matplotlib Figure (imported here, on the first chart: a report whose figures a helper
    process draws never loads matplotlib in the main process)."""
    import matplotlib
    from matplotlib.figure import Figure

    matplotlib.rcParams["svg.fonttype"] = "none"  # text stays text: smaller, searchable SVG
    # the same data gives the same SVG (element ids are hashes salted with this, not a random salt), so
    # reports can be diffed, and charts drawn in a helper process match those drawn here
    matplotlib.rcParams["svg.hashsalt"] = "ccbench"
    return Figure(**options)


def prepare() -> None:
    """Load matplotlib and what its first chart loads on first use (the fonts, text layout, the log
    axis, the SVG writer): a helper process calls this first, while the main one reads the bundles,
    so that the report's charts wait for none of it."""
    fig = new_figure(figsize=(1, 1))
    ax = fig.add_subplot()
    ax.set_xscale("log")
    ax.scatter([1.0, 2.0], [0.0, 1.0])
    ax.set_title("ccbench")
    svg_document(fig)


def literal_text(fig: Figure) -> Figure:
    """Every text the figure's maker put in it (titles, axis labels, legends, annotations, tick
    labels given as a list) shown as written: matplotlib reads a text between two ``$`` as math, and
    labels, case names and metric names are the user's (a machine named ``$x$`` would be drawn as
    math, ``$\\frac$`` would fail to parse). Tick labels a formatter makes (10^2 on a log axis) keep
    their math. Called on each figure as it is drawn (ccbench.report.figures)."""
    from matplotlib.text import Text
    from matplotlib.ticker import FixedFormatter, FuncFormatter

    def escaped(formatter):
        return FuncFormatter(lambda value, position: str(formatter(value, position)).replace("$", r"\$"))

    made_by_formatters = set()
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            # labels given as a list (set_xticklabels) or by ccbench's functions: text, never math
            if isinstance(axis.get_major_formatter(), FixedFormatter | FuncFormatter):
                axis.set_major_formatter(escaped(axis.get_major_formatter()))
            if isinstance(axis.get_minor_formatter(), FixedFormatter | FuncFormatter):
                axis.set_minor_formatter(escaped(axis.get_minor_formatter()))
            for tick in axis.get_major_ticks() + axis.get_minor_ticks():
                made_by_formatters.update((tick.label1, tick.label2))
    for text in fig.findobj(Text):
        if text not in made_by_formatters:
            text.set_parse_math(False)
    return fig


def svg_document(fig: Figure) -> str:
    """The figure as a standalone SVG file's text."""
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg", metadata=SVG_METADATA)
    return buffer.getvalue()


def inline_svg(document: str) -> str:
    """An SVG document without its XML prolog and doctype, to place inside an HTML page."""
    return document[document.find("<svg") :]


#: charts drawn as SVG by ccbench.report.svg (no matplotlib): drawn where the page is written
forest.native_svg = heatmap.native_svg = percentile_lines.native_svg = grouped_bars.native_svg = True
