"""The forest plot, drawn as SVG (ccbench.report.svg): one panel per configuration, one row per
label, each row the time ratio against the baseline with its 95% interval on a log axis shared by
the panels (1x marked, "<- faster" and "slower ->" under it)."""

from __future__ import annotations

import hashlib
import math

import numpy as np
import pandas as pd

from ccbench.report import chartstyle
from ccbench.report.forest import measured_config
from ccbench.report.svg import Canvas, fit, text_width

#: the ratios the axis may label, and the closer ones used where the data span little
TICKS = (0.001, 0.01, 0.1, 0.25, 0.5, 1, 2, 4, 10, 100, 1000)
FINE_TICKS = (0.8, 0.9, 1.1, 1.25)
FINER_TICKS = (0.95, 1.05)
#: inches per row, and for the title, the panels' headings and the axis
ROW = 0.17
MARGIN = 0.95
GREY = "#888888"
#: points: the chart's title, the panels' headings, the labels, the axis, the n = 1 marks
TITLE_SIZE, HEADING_SIZE, LABEL_SIZE, TICK_SIZE, MARK_SIZE = 9.0, 7.0, 7.0, 6.5, 6.0


def limits(rows: pd.DataFrame) -> tuple[float, float]:
    """The axis' ends: every ratio, interval and range drawn, 1/1.15x and 1.15x at least, 6% padding.
    Implausible rows (left out of the verdict) do not stretch it where other rows exist: a 1,000x
    artefact would squeeze every real interval into a few points; they are drawn at the edge."""
    if "kind" in rows and (rows["kind"] != "implausible").any():
        rows = rows[rows["kind"] != "implausible"]
    values = pd.concat([rows[c] for c in ("te", "te_low", "te_high", "range_low", "range_high")]).to_numpy(float)
    values = values[np.isfinite(values) & (values > 0)]
    low, high = (float(values.min()), float(values.max())) if len(values) else (1.0, 1.0)
    low, high = min(low, 1 / 1.15), max(high, 1.15)
    pad = (math.log(high) - math.log(low)) * 0.06
    return math.exp(math.log(low) - pad), math.exp(math.log(high) + pad)


def ticks(low: float, high: float) -> list[float]:
    """Labelled ratios: powers of ten over a wide span (where 0.25x and 0.5x would collide), then
    halves and quarters, then closer ratios where the data span little; at least four if it can."""
    chosen = [t for t in TICKS if low <= t <= high and math.log10(t).is_integer()]
    for extra in (TICKS, FINE_TICKS, FINER_TICKS):
        if len(chosen) < 4:
            chosen = sorted({*chosen, *(t for t in extra if low <= t <= high)})
    return chosen


def _labelled(chosen: list[float], x) -> set[float]:
    """The ticks whose labels are written: every one where they clear each other, else, from the
    one nearest 1x outwards, each that clears the last label written on its side (a wide span on a
    narrow panel: 0.001x to 1,000x would print over each other). Every tick keeps its grid line."""
    gap = 3.0

    def edges(tick: float) -> tuple[float, float]:
        half = text_width(chartstyle.ratio_tick(tick), TICK_SIZE) / 2
        return x(tick) - half, x(tick) + half

    if not chosen:
        return set()
    centre = min(chosen, key=lambda t: abs(math.log(t)))
    kept = {centre}
    for side in (sorted(t for t in chosen if t > centre), sorted((t for t in chosen if t < centre), reverse=True)):
        last = edges(centre)
        for tick in side:
            left, right = edges(tick)
            if (left >= last[1] + gap) if tick > centre else (right <= last[0] - gap):
                kept.add(tick)
                last = (left, right)
    return kept


class Layout:
    """Where things go, in points: the panels' left edges and width, the rows' centres."""

    def __init__(self, data, width_in: float):
        labels = data.labels
        self.one_value_labels = set(data.rows.loc[data.rows["kind"] == "one value", "label"])
        longest = max((len(label) for label in labels), default=10)
        self.width = width_in * 72
        self.label_width = min(4.2, 0.25 + 0.062 * longest) * 72
        mark_width = (1.15 if self.one_value_labels else 0.1) * 72
        self.height = (MARGIN + ROW * max(len(labels), 1) + 0.45) * 72
        self.top, self.bottom = 0.62 * 72, self.height - 0.42 * 72
        count = max(len(data.configs), 1)
        room = self.width - self.label_width - mark_width
        self.panel = room / (count + 0.08 * (count - 1))  # panels 8% of a panel apart
        self.lefts = [self.label_width + n * 1.08 * self.panel for n in range(count)]
        if any(len(_split(config, self.panel)) > 1 for config in data.configs):  # a heading of three lines
            self.height, self.top, self.bottom = self.height + 9, self.top + 9, self.bottom + 9
        self.row = (self.bottom - self.top) / max(len(labels), 1)

    def y(self, index: float) -> float:
        return self.top + (index + 0.5) * self.row


def draw(data, title: str, colours: dict[str, str] | None = None, width: float = chartstyle.MAX_WIDTH) -> Canvas:
    """The forest plot of ``data`` (a ccbench.report.forest.Forest). Every row is in its
    configuration's colour; significant rows (interval clear of 1x) solid, the others faint and
    thin; a pooled row is a diamond with the range of its cases dotted; a row of one value is an
    open circle, its label marked "one value: no interval" on the right; an implausible row (left
    out of the verdict) is a grey cross. Groups carry the ids ``<series_id(config)>:forest-<what>``
    (what: intervals, a <path> per row; points, pooled, one-value, implausible, a <use> per row;
    ranges) and the n = 1 marks ``forest:one-value:<row>``."""
    layout = Layout(data, width)
    key = "f" + hashlib.sha1(f"{title}|{'|'.join(data.labels)}".encode()).hexdigest()[:8]
    canvas = Canvas(layout.width, layout.height, key, title)
    low, high = limits(data.rows)
    position = {label: index for index, label in enumerate(data.labels)}
    canvas.text(layout.width / 2, 0.08 * 72 + TITLE_SIZE, title, TITLE_SIZE, "middle")
    for number, (left, config) in enumerate(zip(layout.lefts, data.configs)):

        def x(value, left=left):
            return left + (math.log(value) - math.log(low)) / (math.log(high) - math.log(low)) * layout.panel

        colour = chartstyle.panel_colour(measured_config(config), number, colours)
        _frame(canvas, layout, left, x, low, high, len(data.labels))
        _heading(canvas, layout, left, [*_split(config, layout.panel), data.layers.get(config, "")])
        mine = data.rows[data.rows["config"] == config]
        _rows(canvas, mine, position, layout, x, colour, chartstyle.series_id(measured_config(config)), (low, high))
    label_room = layout.label_width - 8
    for index, label in enumerate(data.labels):
        canvas.text(
            layout.label_width - 6, layout.y(index) + 2.5, fit(label, LABEL_SIZE, label_room), LABEL_SIZE, "end"
        )
        if label in layout.one_value_labels:
            right = layout.lefts[-1] + layout.panel + 4
            canvas.text(right, layout.y(index) + 2, "one value: no interval", MARK_SIZE, colour=GREY,
                        gid=f"forest:one-value:{index}")  # fmt: skip
    return canvas


def _split(name: str, width: float) -> list[str]:
    """A configuration's name on one line, or on two (at the " / " nearest its middle) where one
    line would need a font under 6 pt."""
    parts = name.split(" / ")
    if text_width(name, 6.0) <= width or len(parts) < 2:
        return [name]
    cut = min(range(1, len(parts)), key=lambda n: abs(len(" / ".join(parts[:n])) - len(name) / 2))
    return [" / ".join(parts[:cut]) + " /", " / ".join(parts[cut:])]


def _heading(canvas: Canvas, layout: Layout, left: float, lines: list[str]) -> None:
    """A panel's heading, its last line just above the panel: each line in a smaller font where
    it would not fit (down to 5 pt), cut only beyond that."""
    baseline = layout.top - 4
    for text in reversed(lines):
        size = HEADING_SIZE
        while size > 5 and text_width(text, size) > layout.panel:
            size -= 0.5
        canvas.text(left + layout.panel / 2, baseline, fit(text, size, layout.panel), size, "middle")
        baseline -= size + 1.5


def _frame(canvas: Canvas, layout: Layout, left: float, x, low: float, high: float, rows: int) -> None:
    """A panel's stripes, grid, 1x line, frame and axis (its ticks, and the direction under them)."""
    right = left + layout.panel
    for row in range(1, rows, 2):
        canvas.rect(left, layout.y(row) - layout.row / 2, layout.panel, layout.row, "#ececec")
    chosen = ticks(low, high)
    labelled = _labelled(chosen, x)
    for tick in chosen:
        canvas.line([(x(tick), layout.top), (x(tick), layout.bottom)], "#b0b0b0", 0.8, 0.3)
        canvas.line([(x(tick), layout.bottom), (x(tick), layout.bottom + 3.5)], "#000000", 0.8)
        if tick in labelled:
            canvas.text(x(tick), layout.bottom + 3.5 + 2 + TICK_SIZE, chartstyle.ratio_tick(tick), TICK_SIZE, "middle")
    canvas.line([(x(1.0), layout.top), (x(1.0), layout.bottom)], "#333333", 0.9)
    canvas.rect(left, layout.top, layout.panel, layout.bottom - layout.top, None, "#000000", 0.8)
    below = layout.bottom + 20 + HEADING_SIZE
    canvas.text(left, below, "<- faster", HEADING_SIZE, "start")
    # on a narrow panel the two would meet: the direction to the right is the one kept whole
    if text_width("<- faster slower ->", HEADING_SIZE) > layout.panel:
        canvas.ops.pop()
    canvas.text(right, below, "slower ->", HEADING_SIZE, "end")


def _rows(
    canvas: Canvas, mine: pd.DataFrame, position: dict, layout: Layout, x, colour: str, series: str, bounds
) -> None:
    """One configuration's rows: the pooled rows' ranges, the intervals, then the markers. An
    implausible row beyond the axis (``bounds``, which it does not set) is clipped to its edge, its
    ratio written beside the cross."""
    records = mine.to_dict(orient="records")
    low, high = bounds
    for record in records:
        record["y"] = layout.y(position[record["label"]])
        implausible = record["kind"] == "implausible"
        if implausible and _finite(record["te"]) and not low <= record["te"] <= high:
            at = low if record["te"] < low else high
            text = f"{record['te']:,.0f}x" if record["te"] >= 10 else f"{record['te']:.3g}x"
            side = (4, "start") if at == low else (-4, "end")
            canvas.text(x(at) + side[0], record["y"] + 2, text, MARK_SIZE, side[1], colour=GREY)
            record["te"] = at
        if implausible:
            for end in ("te_low", "te_high"):
                if _finite(record[end]):
                    record[end] = min(max(record[end], low), high)
        record["colour"] = GREY if implausible else colour
        record["opacity"] = 0.7 if implausible else 1.0 if record["significant"] else 0.4
    ranges = [r for r in records if r["kind"] == "pooled" and _finite(r["range_low"], r["range_high"])]
    if ranges:
        with canvas.group(f"{series}:forest-ranges"):
            for r in ranges:
                canvas.line([(x(r["range_low"]), r["y"]), (x(r["range_high"]), r["y"])], GREY, 1.0, dash="1, 1.65")
    intervals = [r for r in records if r["kind"] != "one value" and _finite(r["te_low"], r["te_high"])]
    if intervals:
        with canvas.group(f"{series}:forest-intervals"):
            for r in intervals:
                width = 1.8 if r["significant"] else 1.0
                canvas.line([(x(r["te_low"]), r["y"]), (x(r["te_high"]), r["y"])], r["colour"], width, r["opacity"])
    for what, kind, marker, size in (
        ("points", "row", "o", 1.6),
        ("pooled", "pooled", "D", 2.4),
        ("one-value", "one value", "o", 1.6),
        ("implausible", "implausible", "x", 1.6),
    ):
        chosen = [r for r in records if r["kind"] == kind]
        if not chosen:
            continue
        with canvas.group(f"{series}:forest-{what}"):
            for r in chosen:
                fill = "#ffffff" if kind == "one value" else r["colour"]
                opacity = 1.0 if kind == "one value" else r["opacity"]
                canvas.marker(marker, x(r["te"]), r["y"], size, fill, r["colour"], 0.8, opacity)


def _finite(*values) -> bool:
    return all(isinstance(v, int | float) and math.isfinite(v) and v > 0 for v in values)
