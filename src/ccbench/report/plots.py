"""The overhead heatmap and the latency percentile lines, drawn as SVG (ccbench.report.svg), without
matplotlib; the forest plot is in ccbench.report.forestplot."""

from __future__ import annotations

import hashlib
import math

import numpy as np
import pandas as pd

from ccbench.analysis import format as fmt
from ccbench.report import chartstyle
from ccbench.report.svg import Canvas, fit, text_width

#: ColorBrewer's 11-class RdBu diverging scheme, blue (faster) to red (slower)
BLUE_TO_RED = (
    "#053061", "#2166ac", "#4393c3", "#92c5de", "#d1e5f0", "#f7f7f7",
    "#fddbc7", "#f4a582", "#d6604d", "#b2182b", "#67001f",
)  # fmt: skip


def _key(prefix: str, *parts) -> str:
    return prefix + hashlib.sha1("|".join(map(str, parts)).encode()).hexdigest()[:8]


def diverging(value: float, limit: float) -> str:
    """The colour of ``value`` on BLUE_TO_RED from -limit to +limit (clipped), interpolated in RGB."""
    position = (min(max(value, -limit), limit) + limit) / (2 * limit) * (len(BLUE_TO_RED) - 1)
    index = min(int(position), len(BLUE_TO_RED) - 2)
    share = position - index
    low, high = BLUE_TO_RED[index], BLUE_TO_RED[index + 1]
    rgb = [round((1 - share) * int(low[i : i + 2], 16) + share * int(high[i : i + 2], 16)) for i in (1, 3, 5)]
    return "#" + "".join(f"{c:02x}" for c in rgb)


def _dark(colour: str) -> bool:
    r, g, b = (int(colour[i : i + 2], 16) for i in (1, 3, 5))
    return 0.299 * r + 0.587 * g + 0.114 * b < 110


#: the fill of a heatmap cell whose row the verdict left out (implausible, across CPU vendors)
LEFT_OUT_FILL = "#d9d9d9"
#: the stroke of a latency line whose comparison the verdict left out (the forest plot's grey)
LEFT_OUT_LINE = "#888888"


def _faint(colour: str, share: float = 0.3) -> str:
    """``colour`` mixed with white, ``share`` of it kept: a cell that is not significant."""
    rgb = [round(share * int(colour[i : i + 2], 16) + (1 - share) * 255) for i in (1, 3, 5)]
    return "#" + "".join(f"{c:02x}" for c in rgb)


def heatmap(
    matrix: pd.DataFrame,
    title: str,
    left_out: pd.DataFrame | None = None,
    significant: pd.DataFrame | None = None,
) -> Canvas:
    """Rows = workload/case/metric, columns = configuration, cells = time-equivalent overhead in
    percent (a throughput ratio of 0.8 is +25%), coloured by log2 of the time ratio, clipped at 1/4x
    and 4x (a 776x cell would otherwise turn every other cell the same pale colour); red = slower.
    Each cell is labelled with its effect in the one convention ("2.9x slower", "2.0x faster"), clipped
    or not (up to 400 cells); a cell the verdict
    left out (``left_out`` True) is grey, its label "left out", whatever its ratio; a cell that is not
    significant (``significant`` False) is pale, its label marked "~" as in compare's table (a user
    trial read a noisy 3.9x cell as the report's loudest)."""
    limit = chartstyle.HEATMAP_LIMIT
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = 1 + matrix.to_numpy(dtype=float) / 100
        values = np.log2(np.where(ratios > 0, ratios, np.nan))
    rows, columns = [str(i) for i in matrix.index], [str(c) for c in matrix.columns]
    width = max(5.0, 1.6 * len(columns) + 3) * 72
    height = max(2.5, 0.28 * len(rows) + 1.5) * 72
    canvas = Canvas(width, height, _key("h", title, *rows, *columns), title)
    left = min(0.6 * width, text_width(max(rows, key=len, default=""), 7) + 12)
    bar_width = 0.16 * 72 + 80  # the colour bar, its ticks and its label
    top, bottom, right = 0.45 * 72, height - 1.1 * 72, width - bar_width
    cell_w, cell_h = (right - left) / max(len(columns), 1), (bottom - top) / max(len(rows), 1)
    canvas.text(left + (right - left) / 2, top - 8, title, 10, "middle")
    labelled = values.size <= 400
    dropped = (
        left_out.reindex(index=matrix.index, columns=matrix.columns).fillna(False).to_numpy(dtype=bool)
        if left_out is not None
        else np.zeros(values.shape, dtype=bool)
    )
    faint = (
        ~significant.reindex(index=matrix.index, columns=matrix.columns).fillna(True).to_numpy(dtype=bool)
        if significant is not None
        else np.zeros(values.shape, dtype=bool)
    )
    with canvas.group("heatmap:cells"):
        for (i, j), value in np.ndenumerate(values):
            x, y = left + j * cell_w, top + i * cell_h
            if not np.isfinite(value):
                continue  # no ratio: the cell stays blank
            if dropped[i, j]:
                canvas.rect(x, y, cell_w, cell_h, LEFT_OUT_FILL)
                if labelled:
                    canvas.text(x + cell_w / 2, y + cell_h / 2 + 2.2, "left out", 6, "middle", colour="#000000")
                continue
            colour = diverging(float(value), limit)
            if faint[i, j]:
                colour = _faint(colour)
            canvas.rect(x, y, cell_w, cell_h, colour)
            if labelled:
                ratio = float(ratios[i, j])
                # the project's one convention ("2.0x faster", "20.0% slower"), as compare's table says it
                label = fmt.effect(ratio)
                label = f"~{label}" if faint[i, j] else label
                ink = "#ffffff" if _dark(colour) else "#000000"
                canvas.text(x + cell_w / 2, y + cell_h / 2 + 2.2, label, 6, "middle", colour=ink)
    canvas.rect(left, top, right - left, bottom - top, None, "#000000", 0.8)
    for i, label in enumerate(rows):
        canvas.text(left - 5, top + (i + 0.5) * cell_h + 2.5, fit(label, 7, left - 8), 7, "end")
    for j, label in enumerate(columns):
        x = left + (j + 0.5) * cell_w
        canvas.line([(x, bottom), (x, bottom + 3.5)], "#000000", 0.8)
        canvas.text(x + 3, bottom + 12, fit(label, 7, 1.0 * 72 / 0.34), 7, "end", rotate=20)
    _colour_bar(canvas, right + 18, top, bottom, limit)
    return canvas


def _colour_bar(canvas: Canvas, x: float, top: float, bottom: float, limit: float) -> None:
    """The heatmap's scale: the colours from 1/4x (bottom) to 4x (top), its ticks and label."""
    steps, bar = 64, 0.16 * 72
    with canvas.group("heatmap:scale"):
        for step in range(steps):
            value = -limit + (step + 0.5) / steps * 2 * limit
            y = bottom - (step + 1) / steps * (bottom - top)
            canvas.rect(x, y, bar, (bottom - top) / steps + 0.3, diverging(value, limit))
    canvas.rect(x, top, bar, bottom - top, None, "#000000", 0.8)
    for value, label in zip((-2, -1, 0, 1, 2), ("<=0.25x", "0.5x", "1x", "2x", ">=4x")):
        y = bottom - (value + limit) / (2 * limit) * (bottom - top)
        canvas.line([(x + bar, y), (x + bar + 3.5, y)], "#000000", 0.8)
        canvas.text(x + bar + 5, y + 3, label, 7)
    middle = (top + bottom) / 2
    for offset, line in ((40, "time ratio (log scale;"), (49, "clipped at 1/4x and 4x)")):
        canvas.text(x + bar + offset, middle, line, 7, "middle", rotate=90)


def nice_ticks(low: float, high: float, log: bool) -> list[float]:
    """Labelled values of an axis from ``low`` to ``high``: powers of ten (with 2x and 5x between
    them over a short span) on a log axis, else 1, 2, 2.5 or 5 times a power of ten, 4 to 8 of them."""
    if log:
        first, last = math.floor(math.log10(low)), math.ceil(math.log10(high))
        steps = (1,) if last - first > 2 else (1, 2, 5)
        found = [m * 10.0**e for e in range(first, last + 1) for m in steps]
        return [t for t in found if low <= t * (1 + 1e-9) and t <= high * (1 + 1e-9)]
    span = high - low if high > low else abs(high) or 1.0
    raw = span / 6
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)
    start = math.ceil(low / step - 1e-9) * step
    return [start + n * step for n in range(int((high - start) / step + 1e-9) + 1)]


def percentile_lines(
    summary: pd.DataFrame, title: str, unit: str, max_panels: int = 8, colours: dict[str, str] | None = None
) -> Canvas:
    """Per case a small panel: one line per configuration across the latency percentiles (p50, p95,
    p99 ... in one chart); a log axis in a panel whose values span more than LOG_SPAN. Each line is
    a group ``<series_id(config)>:panel<n>`` holding its <path>; a line whose rows carry ``left_out``
    (the verdict left their comparison out as implausible) is grey, faint and dashed, its group
    ``...:left-out``."""
    cases = list(dict.fromkeys(summary["case"].fillna("")))[:max_panels]
    configs = list(dict.fromkeys(summary["config"]))
    columns = min(4, max(len(cases), 1))
    count = (len(cases) + columns - 1) // columns
    width = (3.0 * columns + 1) * 72
    # the legend under the title, clear of every panel's lines, in as many lines as it needs
    places, x, line = [], 0.7 * 72, 0
    for config in configs:
        room = 15 + text_width(config, 7) + 12
        if x + room > width - 10 and x > 0.7 * 72:
            x, line = 0.7 * 72, line + 1
        places.append((x, 25 + 10 * line))
        x += room
    legend = 10 * line
    height = (2.6 * max(count, 1)) * 72 + 32 + legend
    canvas = Canvas(width, height, _key("p", title, *cases, *configs), title)
    canvas.text(width / 2, 14, title, 10, "middle")
    for index, (config, (x, y)) in enumerate(zip(configs, places)):
        canvas.line([(x, y), (x + 12, y)], chartstyle.panel_colour(config, index, colours), 1.5)
        canvas.text(x + 15, y + 2.5, fit(config, 7, width - x - 30), 7)
    panel_w, panel_h = 3.0 * 72 * 0.74, 2.6 * 72 * 0.62
    percentiles = sorted(summary["percentile"].dropna().unique())
    for number, case in enumerate(cases):
        left = 0.7 * 72 + (number % columns) * 3.0 * 72
        top = 32 + legend + 0.35 * 72 + (number // columns) * 2.6 * 72
        mine = summary[summary["case"].fillna("") == case]
        _percentile_panel(canvas, mine, (left, top, panel_w, panel_h), percentiles, configs, colours, number, unit)
        canvas.text(left + panel_w / 2, top - 5, fit(case or "(all)", 8, panel_w), 8, "middle")
    return canvas


def _percentile_panel(canvas, mine, box, percentiles, configs, colours, number, unit) -> None:
    left, top, panel_w, panel_h = box
    values = mine["median"].to_numpy(dtype=float)
    values = values[np.isfinite(values)]
    log = chartstyle.wants_log(values)
    low, high = (float(values.min()), float(values.max())) if len(values) else (0.0, 1.0)
    if log:
        low, high = low / 1.3, high * 1.3
    else:
        pad = (high - low) * 0.08 or abs(high) * 0.1 or 1.0
        low, high = low - pad, high + pad

    def y_of(value: float) -> float:
        if log:
            share = (math.log(value) - math.log(low)) / (math.log(high) - math.log(low))
        else:
            share = (value - low) / (high - low)
        return top + panel_h - share * panel_h

    def x_of(percentile: float) -> float:
        place = percentiles.index(percentile)
        return left + (place + 0.5) / len(percentiles) * panel_w

    for tick in nice_ticks(low, high, log):
        y = y_of(tick)
        canvas.line([(left, y), (left + panel_w, y)], "#b0b0b0", 0.8, 0.3)
        canvas.text(
            left - 4, y + 2.5, chartstyle.tick(tick) if log or abs(tick) >= 1000 else fmt.significant(tick, 6), 7, "end"
        )
    for percentile in percentiles:
        canvas.text(x_of(percentile), top + panel_h + 10, f"p{percentile:g}", 7, "middle")
    canvas.rect(left, top, panel_w, panel_h, None, "#000000", 0.8)
    canvas.text(left - 40, top + panel_h / 2, fit(unit + (", log scale" if log else ""), 7, panel_h), 7, "middle",
                rotate=90)  # fmt: skip
    for index, config in enumerate(configs):
        rows = mine[mine["config"] == config].sort_values("percentile")
        rows = rows[np.isfinite(rows["median"].to_numpy(dtype=float)) & (rows["median"] > 0 if log else True)]
        if rows.empty:
            continue
        colour = chartstyle.panel_colour(config, index, colours)
        # a line whose comparison the verdict left out (implausible): grey, faint and dashed, as the
        # forest plot's grey crosses and the heatmap's grey cells
        left_out = "left_out" in rows and bool(rows["left_out"].astype(bool).any())
        points = [(x_of(p), y_of(v)) for p, v in zip(rows["percentile"], rows["median"])]
        group = f"{chartstyle.series_id(config)}:panel{number}" + (":left-out" if left_out else "")
        with canvas.group(group):
            if left_out:
                canvas.line(points, LEFT_OUT_LINE, 1.2, 0.6, "3,2")
            else:
                canvas.line(points, colour, 1.5)
            for x, y in points:
                if left_out:
                    canvas.marker("o", x, y, 2.2, LEFT_OUT_LINE, LEFT_OUT_LINE, 0.8, 0.6)
                else:
                    canvas.marker("o", x, y, 2.2, colour, colour, 0.8)


def grouped_bars(
    summary: pd.DataFrame,
    title: str,
    unit: str,
    better: str | None,
    colours: dict[str, str] | None = None,
    log: bool | None = None,
) -> Canvas:
    """Bars = median per configuration for each case; error bars = interquartile range (q1 to q3).
    A log axis where the medians span more than LOG_SPAN (or as ``log`` says). Each bar is a group
    ``<series_id(config)>:<case number>`` holding its <path>; the legend is beside the bars."""
    cases = list(dict.fromkeys(summary["case"].fillna("")))
    configs = list(dict.fromkeys(summary["config"]))
    legend_width = (0.5 + 0.055 * max((len(str(c)) for c in configs), default=10)) * 72
    width = (
        min(chartstyle.MAX_WIDTH, max(5.0, 1.1 * len(cases) * max(1, len(configs)) * 0.5 + 2) + legend_width / 72) * 72
    )
    rotate = len(cases) > 4
    height = 3.4 * 72
    canvas = Canvas(width, height, _key("b", title, *cases, *configs), title)
    left, right = 0.8 * 72, width - legend_width
    top, bottom = 0.1 * height, height - (0.28 if rotate else 0.15) * height
    canvas.text((left + right) / 2, top - 7, title, 10, "middle")
    log = chartstyle.wants_log(summary["median"]) if log is None else log
    values = pd.concat([summary[c] for c in ("median", "q1", "q3")]).to_numpy(dtype=float)
    values = values[np.isfinite(values) & ((values > 0) if log else True)]
    high = float(values.max()) if len(values) else 1.0
    low = float(values.min()) / 1.5 if log and len(values) else 0.0
    high = high * 1.5 if log else high * 1.05 or 1.0

    def y_of(value: float) -> float:
        if log:
            value = max(value, low)
            return bottom - (math.log(value) - math.log(low)) / (math.log(high) - math.log(low)) * (bottom - top)
        return bottom - (value - low) / (high - low) * (bottom - top)

    for tick in nice_ticks(low if log else 0.0, high, log):
        canvas.line([(left, y_of(tick)), (right, y_of(tick))], "#b0b0b0", 0.8, 0.3)
        canvas.text(
            left - 4,
            y_of(tick) + 2.5,
            chartstyle.tick(tick) if log or tick >= 1000 else fmt.significant(tick, 6),
            7,
            "end",
        )
    slot = (right - left) / max(len(cases), 1)
    bar = 0.8 * slot / max(len(configs), 1)
    for index, config in enumerate(configs):
        colour = chartstyle.panel_colour(config, index, colours)
        rows = summary[summary["config"] == config].set_index("case").reindex(cases)
        for number, (median, q1, q3) in enumerate(zip(rows["median"], rows["q1"], rows["q3"])):
            if not np.isfinite(median) or (log and median <= 0):
                continue
            x = left + number * slot + 0.1 * slot + index * bar
            with canvas.group(f"{chartstyle.series_id(config)}:{number}"):
                canvas.rect(x, y_of(median), bar, y_of(low if log else 0.0) - y_of(median), colour)
            if np.isfinite(q1) and np.isfinite(q3) and q3 > q1:
                middle = x + bar / 2
                canvas.line([(middle, y_of(q1)), (middle, y_of(q3))], "#000000", 1.0)
                for end in (q1, q3):
                    canvas.line([(middle - 3, y_of(end)), (middle + 3, y_of(end))], "#000000", 1.0)
    canvas.rect(left, top, right - left, bottom - top, None, "#000000", 0.8)
    for number, case in enumerate(cases):
        x = left + (number + 0.5) * slot
        canvas.line([(x, bottom), (x, bottom + 3.5)], "#000000", 0.8)
        label = fit(case or "(all)", 8, 1.5 * 72 if rotate else slot)
        if rotate:
            canvas.text(x + 3, bottom + 12, label, 8, "end", rotate=20)
        else:
            canvas.text(x, bottom + 13, label, 8, "middle")
    direction = {"lower": " (lower is better)", "higher": " (higher is better)"}.get(better or "", "")
    axis = f"{unit}{direction}" + (", log scale" if log else "")
    canvas.text(left - 42, (top + bottom) / 2, fit(axis, 8, bottom - top), 8, "middle", rotate=90)
    for index, config in enumerate(configs):
        y = top + 8 + index * 10
        canvas.rect(right + 8, y - 6, 10, 7, chartstyle.panel_colour(config, index, colours))
        canvas.text(right + 22, y, fit(str(config), 7, legend_width - 26), 7)
    return canvas
