"""What every chart of a report shares: its widest size, the palette and a configuration's colour, series
ids, ticks, when an axis turns logarithmic, and the heatmap's colour limit. The drawing modules
(ccbench.report.plots, ccbench.report.forestplot) and the charts' facade (ccbench.report.charts) all take
them from here, so none of them reaches back up into another."""

from __future__ import annotations

import numpy as np

from ccbench.analysis import format as fmt

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


def tick(value: float) -> str:
    """A value as an axis label: 1,234 from 1 up, three significant digits below."""
    return f"{value:,.0f}" if value >= 1 else fmt.significant(value, 3)


def wants_log(values) -> bool:
    values = np.asarray(values, dtype=float)
    values = values[np.isfinite(values) & (values > 0)]
    return len(values) > 1 and values.max() / values.min() > LOG_SPAN


#: the heatmap's colour scale ends here (log2 of the time ratio): 1/4x and 4x; beyond is clipped
HEATMAP_LIMIT = 2.0


def ratio_tick(value: float) -> str:
    """A ratio as an axis label: 4x, 1x, 0.25x (never 10^0)."""
    if value >= 1:
        return f"{value:,.0f}x" if value >= 10 else f"{value:g}x"
    return f"{fmt.significant(value, 3)}x"


def panel_colour(config: str, index: int, colours: dict[str, str] | None) -> str:
    """A configuration's colour: the report's, else the palette's by position."""
    return _colour(config, index, colours)
