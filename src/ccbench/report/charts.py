"""Charts (matplotlib): the forest plot of ratios with their intervals, grouped bars with error bars,
percentile lines, the overhead heatmap.

Figures are made with matplotlib.figure.Figure directly, not through pyplot: no global figure
registry to close, no GUI backend, and a lighter import (matplotlib's advice for servers)."""

from __future__ import annotations

import io
import math
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

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


#: inches; the HTML page is about 12 inches wide at 96 dpi
MAX_WIDTH = 11.5
#: Paul Tol's colour-blind-safe qualitative palette, then his muted one for larger reports
PALETTE = [
    "#4477AA",
    "#EE6677",
    "#228833",
    "#CCBB44",
    "#66CCEE",
    "#AA3377",
    "#BBBBBB",
    "#000000",
    "#332288",
    "#88CCEE",
    "#44AA99",
    "#117733",
    "#999933",
    "#DDCC77",
    "#CC6677",
    "#882255",
]
#: a chart whose positive values span more than this factor gets a log axis (1536 B beside 1 MiB)
LOG_SPAN = 30.0


def colour_map(configs) -> dict[str, str]:
    """One colour per configuration for every chart of a report, in load order."""
    return {config: PALETTE[index % len(PALETTE)] for index, config in enumerate(dict.fromkeys(configs))}


def _colour(config: str, index: int, colours: dict[str, str] | None) -> str:
    if colours and config in colours:
        return colours[config]
    return PALETTE[index % len(PALETTE)]


def series_id(config: str) -> str:
    """An SVG group id naming a configuration's series (tests read the colours back from the SVG)."""
    return "series:" + "".join(c if c.isalnum() else "_" for c in config)


def _tick(value: float) -> str:
    return f"{value:,.0f}" if value >= 1 else f"{value:g}"


def _minor_tick(value: float, _position=None) -> str:
    """Minor ticks labelled at 2x and 5x a power of ten (a panel spanning less than a decade still
    gets numbers), the others left blank."""
    if value <= 0:
        return ""
    mantissa = value / 10 ** math.floor(math.log10(value))
    return _tick(value) if round(mantissa, 6) in (2.0, 5.0) else ""


def use_log_axis(ax) -> None:
    """A log y axis labelled in plain numbers (1, 10, 100, 1,000; 200 and 500 between them), not the
    repeated powers of ten matplotlib prints on minor ticks when the span is small."""
    from matplotlib.ticker import FuncFormatter

    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: _tick(value)))
    ax.yaxis.set_minor_formatter(FuncFormatter(_minor_tick))
    ax.tick_params(axis="y", which="minor", labelsize=6)


def wants_log(values) -> bool:
    values = np.asarray(values, dtype=float)
    values = values[np.isfinite(values) & (values > 0)]
    return len(values) > 1 and values.max() / values.min() > LOG_SPAN


def grouped_bars(
    summary: pd.DataFrame,
    title: str,
    unit: str,
    better: str | None,
    colours: dict[str, str] | None = None,
    log: bool | None = None,
) -> Figure:
    """Bars = median per configuration for each case; error bars = interquartile range. A log axis
    where the medians span more than LOG_SPAN (or as ``log`` says)."""
    cases = list(dict.fromkeys(summary["case"].fillna("")))
    configs = list(dict.fromkeys(summary["config"]))
    width = 0.8 / max(len(configs), 1)
    # wide enough for the bars plus the legend beside them, but no wider than a page: a figure
    # scaled down to fit is unreadable
    legend_width = 0.5 + 0.055 * max((len(str(c)) for c in configs), default=10)
    fig_width = min(MAX_WIDTH, max(5.0, 1.1 * len(cases) * max(1, len(configs)) * 0.5 + 2) + legend_width)
    fig = new_figure(figsize=(fig_width, 3.4))
    ax = fig.subplots()
    x = np.arange(len(cases))
    for index, config in enumerate(configs):
        rows = summary[summary["config"] == config].set_index("case").reindex(cases)
        medians = rows["median"].to_numpy(dtype=float)
        low = np.clip(medians - rows["q1"].to_numpy(dtype=float), 0, None)
        high = np.clip(rows["q3"].to_numpy(dtype=float) - medians, 0, None)
        bars = ax.bar(
            x + index * width - 0.4 + width / 2,
            medians,
            width,
            yerr=[low, high],
            capsize=3,
            label=config,
            color=_colour(config, index, colours),
        )
        for number, patch in enumerate(bars.patches):
            patch.set_gid(f"{series_id(config)}:{number}")
    log = wants_log(summary["median"]) if log is None else log
    if log:
        use_log_axis(ax)
    ax.set_xticks(x)
    ax.set_xticklabels(
        [c or "(all)" for c in cases], rotation=20 if len(cases) > 4 else 0, ha="right" if len(cases) > 4 else "center"
    )
    direction = {"lower": " (lower is better)", "higher": " (higher is better)"}.get(better or "", "")
    ax.set_ylabel(f"{unit}{direction}" + (", log scale" if log else ""))
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)  # beside, not over, the bars
    ax.grid(axis="y", alpha=0.3)
    # fixed margins instead of tight_layout, which draws every figure an extra time
    fig.subplots_adjust(
        left=0.8 / fig_width, right=1 - legend_width / fig_width, top=0.9, bottom=0.28 if len(cases) > 4 else 0.15
    )
    return fig


def percentile_lines(
    summary: pd.DataFrame, title: str, unit: str, max_panels: int = 8, colours: dict[str, str] | None = None
) -> Figure:
    """Per case a small panel: one line per configuration across the latency percentiles (p50, p95,
    p99 ... in one chart); a log axis in a panel whose values span more than LOG_SPAN."""
    cases = list(dict.fromkeys(summary["case"].fillna("")))[:max_panels]
    columns = min(4, len(cases))
    rows_count = (len(cases) + columns - 1) // columns
    fig = new_figure(figsize=(3.0 * columns + 1, 2.6 * rows_count))
    axes = fig.subplots(rows_count, columns, squeeze=False)
    configs = list(dict.fromkeys(summary["config"]))
    for number, (panel, case) in enumerate(zip(axes.flat, cases)):
        for index, config in enumerate(configs):
            rows = summary[(summary["case"].fillna("") == case) & (summary["config"] == config)].sort_values(
                "percentile"
            )
            if not rows.empty:
                lines = panel.plot(
                    [f"p{p:g}" for p in rows["percentile"]],
                    rows["median"],
                    marker="o",
                    label=config,
                    color=_colour(config, index, colours),
                )
                for line in lines:
                    line.set_gid(f"{series_id(config)}:panel{number}")
        if wants_log(summary[summary["case"].fillna("") == case]["median"]):
            use_log_axis(panel)
        panel.set_title(case or "(all)", fontsize=8)
        panel.set_ylabel(unit, fontsize=7)
        panel.tick_params(labelsize=7)
        panel.grid(alpha=0.3)
    for panel in list(axes.flat)[len(cases) :]:
        panel.set_visible(False)
    axes.flat[0].legend(fontsize=6)
    fig.suptitle(title, fontsize=10)
    # a fixed left margin in inches, wide enough for "10,000" on the axis
    fig.subplots_adjust(
        left=0.7 / (3.0 * columns + 1),
        right=0.98,
        top=0.85 if rows_count == 1 else 0.9,
        bottom=0.12,
        wspace=0.35,
        hspace=0.45,
    )
    return fig


#: the heatmap's colour scale ends here (log2 of the time ratio): 1/4x and 4x; beyond is clipped
HEATMAP_LIMIT = 2.0


def heatmap(matrix: pd.DataFrame, title: str) -> Figure:
    """Rows = workload/case/metric, columns = configuration, cells = time-equivalent overhead in
    percent (a throughput ratio of 0.8 is +25%), coloured by log2 of the time ratio, clipped at 1/4x
    and 4x (a 776x cell would otherwise turn every other cell the same pale colour); red = slower.
    Each cell is labelled with its ratio ("2.9x"), clipped or not."""
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = 1 + matrix.to_numpy(dtype=float) / 100
        values = np.log2(np.where(ratios > 0, ratios, np.nan))
    height = max(2.5, 0.28 * len(matrix) + 1.5)
    fig = new_figure(figsize=(max(5.0, 1.6 * len(matrix.columns) + 3), height))
    ax = fig.subplots()
    image = ax.imshow(
        np.clip(values, -HEATMAP_LIMIT, HEATMAP_LIMIT),
        cmap="RdBu_r",
        vmin=-HEATMAP_LIMIT,
        vmax=HEATMAP_LIMIT,
        aspect="auto",
    )
    ax.set_xticks(range(len(matrix.columns)))
    ax.set_xticklabels(matrix.columns, rotation=20, ha="right", fontsize=7)
    ax.set_yticks(range(len(matrix.index)))
    ax.set_yticklabels(matrix.index, fontsize=7)
    if values.size <= 400:
        for (i, j), value in np.ndenumerate(ratios):
            if np.isfinite(value) and value > 0:
                ax.text(
                    j, i, ratio_tick(value) if value >= 10 else f"{value:.2g}x", ha="center", va="center", fontsize=6
                )
    bar = fig.colorbar(image, ax=ax, label="time ratio (log scale; clipped at 1/4x and 4x)")
    bar.set_ticks([-2, -1, 0, 1, 2])
    bar.set_ticklabels(["<=0.25x", "0.5x", "1x", "2x", ">=4x"])
    ax.set_title(title, fontsize=10)
    longest = max((len(str(label)) for label in matrix.index), default=10)
    fig.subplots_adjust(
        left=min(0.6, 0.02 + 0.0105 * longest * 6 / max(5.0, 1.6 * len(matrix.columns) + 3)),
        right=0.95,
        top=1 - 0.45 / height,
        bottom=1.1 / height,
    )
    return fig


def svg_document(fig: Figure) -> str:
    """The figure as a standalone SVG file's text."""
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg", metadata=SVG_METADATA)
    return buffer.getvalue()


def inline_svg(document: str) -> str:
    """An SVG document without its XML prolog and doctype, to place inside an HTML page."""
    return document[document.find("<svg") :]


#: the ratios a forest plot's axis may label, and the closer ones used where the data span little
FOREST_TICKS = (0.001, 0.01, 0.1, 0.25, 0.5, 1, 2, 4, 10, 100, 1000)
FOREST_FINE_TICKS = (0.8, 0.9, 1.1, 1.25)
FOREST_FINER_TICKS = (0.95, 1.05)
#: inches per row of a forest plot, and for its title, axis and the panels' headings
FOREST_ROW = 0.17
FOREST_MARGIN = 0.95


def ratio_tick(value: float) -> str:
    """A ratio as an axis label: 4x, 1x, 0.25x (never 10^0)."""
    if value >= 1:
        return f"{value:,.0f}x" if value >= 10 else f"{value:g}x"
    return f"{value:.3g}x"


def _forest_limits(rows: pd.DataFrame) -> tuple[float, float]:
    values = pd.concat([rows[c] for c in ("te", "te_low", "te_high", "range_low", "range_high")]).to_numpy(float)
    values = values[np.isfinite(values) & (values > 0)]
    low, high = (float(values.min()), float(values.max())) if len(values) else (1.0, 1.0)
    low, high = min(low, 1 / 1.15), max(high, 1.15)
    pad = (math.log(high) - math.log(low)) * 0.06
    return math.exp(math.log(low) - pad), math.exp(math.log(high) + pad)


def forest(data, title: str, colours: dict[str, str] | None = None, width: float = MAX_WIDTH) -> Figure:
    """A forest plot of ``data`` (a ccbench.report.forest.Forest): one panel per configuration, one
    row per label (labels on the left, shared), each row the time ratio against the baseline with
    its 95% interval on one log axis for every panel (1x marked, "slower ->" to the right).
    Every row is in its configuration's colour; significant rows (interval clear of 1x) solid,
    the others faint and thin; a pooled row is a diamond with the range of its cases dotted; a row
    of one value is an open circle, and its label is marked "one value: no interval" on the right; an
    implausible row (left out of the verdict) is a grey cross.
    The artists carry SVG ids ``<series_id(config)>:forest-<what>`` (what: intervals, points,
    pooled, ranges, one-value, implausible: one element per row drawn) and ``forest:one-value:<row>`` for the
    marks on the right."""
    rows, labels, configs = data.rows, data.labels, data.configs
    one_value_labels = set(rows.loc[rows["kind"] == "one value", "label"])
    longest = max((len(label) for label in labels), default=10)
    label_width = min(4.2, 0.25 + 0.062 * longest)
    mark_width = 1.15 if one_value_labels else 0.1
    height = FOREST_MARGIN + FOREST_ROW * max(len(labels), 1) + 0.45
    fig = new_figure(figsize=(width, height))
    # the panels share the rows but not matplotlib's y axis: the labels are made once, on the first
    axes = fig.subplots(1, max(len(configs), 1), squeeze=False)[0]
    low, high = _forest_limits(rows)
    position = {label: index for index, label in enumerate(labels)}
    for panel_number, (ax, config) in enumerate(zip(axes, configs)):
        _forest_panel(ax, rows[rows["config"] == config], position, _colour(config, panel_number, colours), config)
        _forest_axis(ax, low, high)
        ax.set_title(f"{config}\n{data.layers.get(config, '')}", fontsize=7)
    _forest_rows(axes, labels, one_value_labels)
    # placed in inches from the top: as a fraction of a tall chart (92 rows) it fell onto the panels' titles
    fig.suptitle(title, fontsize=9, y=1 - 0.08 / height)
    fig.subplots_adjust(
        left=label_width / width,
        right=1 - mark_width / width,
        top=1 - 0.62 / height,
        bottom=0.42 / height,
        wspace=0.08,
    )
    return fig


FOREST_GREY = "#888888"


def _forest_panel(ax, mine: pd.DataFrame, position: dict[str, int], colour: str, config: str) -> None:
    """One configuration's rows: the cases' ranges of pooled rows, the intervals, the points."""
    from matplotlib.collections import LineCollection
    from matplotlib.colors import to_rgba

    ax.set_xscale("log")
    ax.axvline(1.0, color="#333333", linewidth=0.9, zorder=1)
    y = mine["label"].map(position).to_numpy(dtype=float)
    te, te_low, te_high = (mine[c].to_numpy(dtype=float) for c in ("te", "te_low", "te_high"))
    kind = mine["kind"].to_numpy()
    significant = mine["significant"].to_numpy(dtype=bool)
    shade = np.array([to_rgba(colour, 1.0 if sig else 0.4) for sig in significant]).reshape(-1, 4)
    shade[kind == "implausible"] = to_rgba(FOREST_GREY, 0.7)  # left out of the verdict: no layer's colour
    widths = np.where(significant, 1.8, 1.0)
    series = series_id(config)
    has_interval = np.isfinite(te_low) & np.isfinite(te_high) & (kind != "one value")
    pooled = kind == "pooled"
    ranges = pooled & np.isfinite(mine["range_low"].to_numpy(dtype=float))
    for what, mask, ends, style in (
        ("ranges", ranges, (mine["range_low"].to_numpy(dtype=float), mine["range_high"].to_numpy(dtype=float)), ":"),
        ("intervals", has_interval, (te_low, te_high), "-"),
    ):
        if mask.any():
            segments = [[(a, b), (c, b)] for a, b, c in zip(ends[0][mask], y[mask], ends[1][mask])]
            collection = LineCollection(
                segments,
                colors=FOREST_GREY if what == "ranges" else shade[mask],
                linestyles=style,
                linewidths=1.0 if what == "ranges" else widths[mask],
            )
            collection.set_gid(f"{series}:forest-{what}")
            ax.add_collection(collection)
    for what, mask, marker, face in (
        ("points", kind == "row", "o", None),
        ("pooled", pooled, "D", None),
        ("one-value", kind == "one value", "o", "white"),
        ("implausible", kind == "implausible", "x", None),
    ):
        if mask.any():
            points = ax.scatter(
                te[mask],
                y[mask],
                s=14 if marker == "D" else 10,
                marker=marker,
                c=shade[mask] if face is None else "white",
                # a cross has no edge (matplotlib warns about one): its colour is the face's
                edgecolors=None if marker == "x" else shade[mask] if face is None else colour,
                linewidths=0.8,
                zorder=3,
            )
            points.set_gid(f"{series}:forest-{what}")


def _forest_axis(ax, low: float, high: float) -> None:
    """The ratio axis: labelled ratios (powers of ten over a wide span, where labels of 0.25x and
    0.5x would collide; then halves and quarters; then closer ratios where the data span little),
    and the direction under it: faster at the left end, slower at the right."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    ticks = [t for t in FOREST_TICKS if low <= t <= high and math.log10(t).is_integer()]
    for extra in (FOREST_TICKS, FOREST_FINE_TICKS, FOREST_FINER_TICKS):
        if len(ticks) < 4:
            ticks = sorted({*ticks, *(t for t in extra if low <= t <= high)})
    ax.set_xlim(low, high)
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_major_formatter(FuncFormatter(lambda value, _: ratio_tick(value)))
    ax.tick_params(axis="x", labelsize=6.5)
    for x, text, align in ((0.0, "<- faster", "left"), (1.0, "slower ->", "right")):
        ax.annotate(
            text, (x, 0), xycoords="axes fraction", xytext=(0, -20), textcoords="offset points", ha=align, va="top",
            fontsize=7,
        )  # fmt: skip
    ax.grid(axis="x", alpha=0.3)


def _forest_rows(axes, labels: list[str], one_value_labels: set[str]) -> None:
    """The rows across the panels: labels on the first, every other row shaded, and on the right of
    the last the mark of each row that has one value on a side."""
    from matplotlib.collections import PolyCollection

    stripes = [[(0, y - 0.5), (1, y - 0.5), (1, y + 0.5), (0, y + 0.5)] for y in range(1, len(labels), 2)]
    for number, ax in enumerate(axes):
        ax.set_ylim(len(labels) - 0.5, -0.5)
        if number:
            ax.set_yticks([])
        # x in axes fraction, y in rows
        ax.add_collection(
            PolyCollection(
                stripes, facecolors="#ececec", edgecolors="none", zorder=0, transform=ax.get_yaxis_transform()
            )
        )
    axes[0].set_yticks(range(len(labels)))
    axes[0].set_yticklabels(labels, fontsize=7)
    for row, label in enumerate(labels):
        if label not in one_value_labels:
            continue
        mark = axes[-1].annotate(
            "one value: no interval",
            (1.0, row),
            xycoords=("axes fraction", "data"),
            xytext=(4, 0),
            textcoords="offset points",
            va="center",
            fontsize=6,
            color=FOREST_GREY,
            annotation_clip=False,
        )
        mark.set_gid(f"forest:one-value:{row}")
