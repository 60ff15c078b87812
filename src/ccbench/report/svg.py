"""A drawing of lines, boxes, markers and text, written as SVG markup for the page (and as a PNG
through Pillow for --figures): the report's charts are drawn with it, without loading matplotlib.

Lengths are points (72 to the inch), y downwards. Text stays text (<text> elements, searchable and
read by screen readers); every element may sit in a group with an id (tests and scripts find a
configuration's rows by it)."""

from __future__ import annotations

import importlib.util
import math
from dataclasses import dataclass, field
from pathlib import Path
from xml.sax.saxutils import escape, quoteattr

#: the font the charts name, with the generic family after it for browsers without it
FONT = "'DejaVu Sans', 'Bitstream Vera Sans', Arial, sans-serif"
#: the average advance of a character of DejaVu Sans, in ems (layout estimates text by it)
CHAR_WIDTH = 0.62
#: the markers: a circle, a diamond, a cross, a square
MARKERS = "oDxs"


def _marker_path(kind: str, r: float) -> str:
    """A marker's outline about (0, 0), ``r`` points from its centre to its edge (or corner)."""
    n, m = _number(r), _number(-r)
    return {
        "o": f"M 0 {m} A {n} {n} 0 1 1 0 {n} A {n} {n} 0 1 1 0 {m} Z",
        "D": f"M 0 {m} L {n} 0 L 0 {n} L {m} 0 Z",
        "x": f"M {m} {m} L {n} {n} M {m} {n} L {n} {m}",
        "s": f"M {m} {m} L {n} {m} L {n} {n} L {m} {n} Z",
    }[kind]


def text_width(text: str, size: float) -> float:
    """About how wide ``text`` is at ``size`` points (DejaVu Sans)."""
    return CHAR_WIDTH * size * len(text)


def fit(text: str, size: float, width: float) -> str:
    """``text`` cut to about ``width`` points, with "..." where it was cut."""
    if text_width(text, size) <= width:
        return text
    keep = max(1, int(width / (CHAR_WIDTH * size)) - 3)
    return text[:keep] + "..."


def _number(value: float) -> str:
    return f"{value:.2f}".rstrip("0").rstrip(".") if math.isfinite(value) else "0"


def _style(fill: str | None, stroke: str | None, width: float, opacity: float, dash: str | None) -> str:
    fill, stroke = (fill or "").lower(), (stroke or "").lower()  # as SVG writers commonly spell them
    parts = [f"fill: {fill}" if fill else "fill: none"]
    if fill and opacity < 1:
        parts.append(f"fill-opacity: {_number(opacity)}")
    if stroke:
        parts += [f"stroke: {stroke}", f"stroke-width: {_number(width)}"]
        if opacity < 1:
            parts.append(f"stroke-opacity: {_number(opacity)}")
        if dash:
            parts.append(f"stroke-dasharray: {dash}")
    return "; ".join(parts)


@dataclass
class Canvas:
    """A chart of ``width`` x ``height`` points; ``key`` makes its marker ids unique on a page."""

    width: float
    height: float
    key: str = "chart"
    title: str = ""
    #: (operation, arguments...) in drawing order: the SVG and the PNG are both made from these
    ops: list[tuple] = field(default_factory=list)

    def group(self, gid: str | None = None) -> _Group:
        return _Group(self, gid)

    def line(self, points, stroke: str, width: float = 1.0, opacity: float = 1.0, dash: str | None = None) -> None:
        self.ops.append(("path", [tuple(p) for p in points], None, stroke, width, opacity, dash, False))

    def polygon(self, points, fill: str, stroke: str | None = None, width: float = 0.0, opacity: float = 1.0) -> None:
        self.ops.append(("path", [tuple(p) for p in points], fill, stroke, width, opacity, None, True))

    def rect(self, x, y, w, h, fill: str | None, stroke: str | None = None, width: float = 0.8, opacity=1.0):
        self.ops.append(
            ("path", [(x, y), (x + w, y), (x + w, y + h), (x, y + h)], fill, stroke, width, opacity, None, True)
        )

    def marker(self, kind: str, x: float, y: float, size: float, fill: str | None, stroke: str | None,
               width: float = 0.8, opacity: float = 1.0) -> None:  # fmt: skip
        self.ops.append(("marker", kind, x, y, size, fill, stroke, width, opacity))

    def text(self, x: float, y: float, text: str, size: float = 7.0, anchor: str = "start", colour: str = "#000000",
             rotate: float = 0.0, gid: str | None = None, bold: bool = False) -> None:  # fmt: skip
        """``text`` with its baseline at y; anchor start, middle or end; rotated (degrees,
        counter-clockwise) about (x, y)."""
        self.ops.append(("text", x, y, str(text), size, anchor, colour, rotate, gid, bold))

    # SVG ------------------------------------------------------------------------------------------

    def svg(self) -> str:
        """The chart as a standalone SVG document."""
        used = sorted({(op[1], op[4]) for op in self.ops if op[0] == "marker"})
        out = [
            '<?xml version="1.0" encoding="utf-8" standalone="no"?>\n',
            f'<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" '
            f'width="{_number(self.width)}pt" height="{_number(self.height)}pt" '
            f'viewBox="0 0 {_number(self.width)} {_number(self.height)}" role="img" version="1.1">\n',
        ]
        if self.title:
            out.append(f"<title>{escape(self.title)}</title>\n")
        out.append(f"<style>text {{ font-family: {FONT}; white-space: pre; }}</style>\n<defs>\n")
        for kind, size in used:
            out.append(f'<path id="{self._marker_id(kind, size)}" d="{_marker_path(kind, size)}"/>\n')
        out.append("</defs>\n")
        out.append('<rect width="100%" height="100%" style="fill: #ffffff"/>\n')
        for op in self.ops:
            out.append(self._svg_op(op))
        out.append("</svg>\n")
        return "".join(out)

    def _marker_id(self, kind: str, size: float) -> str:
        return f"{self.key}-m{MARKERS.index(kind)}-{_number(size).replace('.', '_')}"

    def _svg_op(self, op: tuple) -> str:
        name = op[0]
        if name == "open":
            return f"<g id={quoteattr(op[1])}>\n" if op[1] else "<g>\n"
        if name == "close":
            return "</g>\n"
        if name == "path":
            _, points, fill, stroke, width, opacity, dash, closed = op
            d = " ".join(f"{'M' if i == 0 else 'L'} {_number(x)} {_number(y)}" for i, (x, y) in enumerate(points))
            if closed:
                d += " Z"
            return f'<path d="{d}" style="{_style(fill, stroke, width, opacity, dash)}"/>\n'
        if name == "marker":
            _, kind, x, y, size, fill, stroke, width, opacity = op
            style = _style(
                fill if kind != "x" else None, stroke or (fill if kind == "x" else None), width, opacity, None
            )
            return f'<use xlink:href="#{self._marker_id(kind, size)}" x="{_number(x)}" y="{_number(y)}" style="{style}"/>\n'
        _, x, y, text, size, anchor, colour, rotate, gid, bold = op
        attributes = f" id={quoteattr(gid)}" if gid else ""
        if rotate:
            attributes += f' transform="rotate({_number(-rotate)} {_number(x)} {_number(y)})"'
        weight = "; font-weight: bold" if bold else ""
        return (
            f'<text x="{_number(x)}" y="{_number(y)}"{attributes} text-anchor="{anchor}" '
            f'style="font-size: {_number(size)}px; fill: {colour}{weight}">{escape(text)}</text>\n'
        )

    # PNG ------------------------------------------------------------------------------------------

    def png(self, path: Path, dpi: float = 150) -> None:
        """The chart as a PNG file, drawn by Pillow from the same operations as the SVG."""
        from PIL import Image, ImageDraw

        scale = dpi / 72
        # an RGB image drawn on in RGBA mode: colours with an opacity are blended into it
        image = Image.new("RGB", (max(1, round(self.width * scale)), max(1, round(self.height * scale))), "white")
        draw = ImageDraw.Draw(image, "RGBA")
        fonts: dict = {}
        for op in self.ops:
            if op[0] == "path":
                _png_path(draw, op, scale)
            elif op[0] == "marker":
                _png_marker(draw, op, scale)
            elif op[0] == "text":
                _png_text(image, draw, op, scale, fonts)
        image.save(path, format="png")


class _Group:
    def __init__(self, canvas: Canvas, gid: str | None):
        self.canvas, self.gid = canvas, gid

    def __enter__(self) -> Canvas:
        self.canvas.ops.append(("open", self.gid))
        return self.canvas

    def __exit__(self, *exc) -> None:
        self.canvas.ops.append(("close",))


def _rgba(colour: str | None, opacity: float) -> tuple[int, int, int, int] | None:
    if not colour:
        return None
    return (int(colour[1:3], 16), int(colour[3:5], 16), int(colour[5:7], 16), round(255 * opacity))


def _png_path(draw, op: tuple, scale: float) -> None:
    _, points, fill, stroke, width, opacity, dash, closed = op
    xy = [(x * scale, y * scale) for x, y in points]
    if closed and fill:
        draw.polygon(xy, fill=_rgba(fill, opacity))
    if stroke and width > 0:
        pixels = max(1, round(width * scale))
        if closed:
            xy = [*xy, xy[0]]
        if dash:
            on = float(dash.replace(",", " ").split()[0]) * scale
            for (x0, y0), (x1, y1) in zip(xy, xy[1:]):
                length = math.hypot(x1 - x0, y1 - y0)
                steps = max(1, int(length / (2.65 * on)))
                for step in range(steps + 1):
                    t = step / steps
                    x, y = x0 + t * (x1 - x0), y0 + t * (y1 - y0)
                    draw.ellipse(
                        [x - pixels / 2, y - pixels / 2, x + pixels / 2, y + pixels / 2], fill=_rgba(stroke, opacity)
                    )
        else:
            draw.line(xy, fill=_rgba(stroke, opacity), width=pixels)


def _png_marker(draw, op: tuple, scale: float) -> None:
    _, kind, x, y, size, fill, stroke, width, opacity = op
    x, y, r = x * scale, y * scale, size * scale
    outline, pixels = _rgba(stroke, opacity), max(1, round(width * scale))
    if kind == "o":
        draw.ellipse([x - r, y - r, x + r, y + r], fill=_rgba(fill, opacity), outline=outline, width=pixels)
    elif kind == "x":
        colour = outline or _rgba(fill, opacity)
        draw.line([(x - r, y - r), (x + r, y + r)], fill=colour, width=pixels)
        draw.line([(x - r, y + r), (x + r, y - r)], fill=colour, width=pixels)
    else:
        shape = [(x, y - r), (x + r, y), (x, y + r), (x - r, y)] if kind == "D" else [
            (x - r, y - r), (x + r, y - r), (x + r, y + r), (x - r, y + r)
        ]  # fmt: skip
        draw.polygon(shape, fill=_rgba(fill, opacity), outline=outline)


def _font_file() -> str | None:
    """DejaVu Sans: the system's, else the copy matplotlib ships (found without importing it)."""
    system = Path("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf")
    if system.exists():
        return str(system)
    spec = importlib.util.find_spec("matplotlib")
    for location in (spec.submodule_search_locations or []) if spec else []:
        shipped = Path(location) / "mpl-data" / "fonts" / "ttf" / "DejaVuSans.ttf"
        if shipped.exists():
            return str(shipped)
    return None


def _png_text(image, draw, op: tuple, scale: float, fonts: dict) -> None:
    from PIL import Image, ImageDraw, ImageFont

    _, x, y, text, size, anchor, colour, rotate, _gid, _bold = op
    pixels = max(4, round(size * scale))
    if pixels not in fonts:
        path = _font_file()
        fonts[pixels] = ImageFont.truetype(path, pixels) if path else ImageFont.load_default(pixels)
    font, where = fonts[pixels], {"start": "ls", "middle": "ms", "end": "rs"}[anchor]
    if not rotate:
        draw.text((x * scale, y * scale), text, fill=_rgba(colour, 1.0), font=font, anchor=where)
        return
    # rotated: drawn on its own transparent tile about its anchor point, then turned and pasted
    side = int(font.getlength(text)) * 2 + pixels * 4
    tile = Image.new("RGBA", (side, side), (255, 255, 255, 0))
    ImageDraw.Draw(tile).text((side / 2, side / 2), text, fill=_rgba(colour, 1.0), font=font, anchor=where)
    tile = tile.rotate(rotate, resample=Image.BICUBIC, center=(side / 2, side / 2))
    image.paste(tile, (round(x * scale - side / 2), round(y * scale - side / 2)), tile)
