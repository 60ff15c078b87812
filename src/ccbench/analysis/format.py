"""One number format, shared by the terminal and the report (the comparison table's cells: ccbench.analysis.table).

Numbers: thousands separators from 1,000 up, three significant figures below, never an exponent
(no ``6.657e+04`` beside ``66,573``, no ``4e-05`` for 0.00004). Ratios keep three decimals, overheads one.
"""

from __future__ import annotations

import math


def missing(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def finite(value) -> float | None:
    """``value`` as a float, or None where it is none, no number, or not finite (a cell to show or
    to compute with: JSON's null for a store's NaN, a metric a row lacks)."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def significant(value, digits: int = 3) -> str:
    """``value`` to ``digits`` significant figures in plain decimals, never an exponent: 0.00004,
    0.000123, 0.5, 42.7; from 10**digits up every digit, with thousands separators (57,199)."""
    if missing(value):
        return "-"
    value = float(value)
    if not math.isfinite(value):
        return str(value)
    magnitude = abs(value)
    if magnitude == 0:
        return "0"
    if magnitude >= 10**digits:
        return f"{value:,.0f}"
    decimals = max(0, digits - 1 - math.floor(math.log10(magnitude)))
    text = f"{value:.{decimals}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def number(value, unit: str | None = None) -> str:
    """A measured value for a reader: 66,573 / 512 / 42.7 / 3.14 / 0.0123 / 0.0004; "-" when
    missing; never an exponent. A time under a thousandth of its unit is said in a smaller unit
    (0.0004 s: "0.4 ms"), as ``quantity`` says it."""
    if missing(value):
        return "-"
    value = float(value)
    magnitude = abs(value)
    if unit and 0 < magnitude < 1e-3 and str(unit).strip() in _TIME_ALIASES:
        return quantity(value, unit)
    if magnitude == 0:
        text = "0"
    elif not math.isfinite(value):
        text = str(value)
    elif magnitude >= 1e9:
        text = f"{value:,.0f}"
    elif magnitude < 1e-3:
        text = significant(value, 3)
    elif magnitude >= 1000:
        text = f"{value:,.0f}"
    elif magnitude >= 100:
        text = f"{value:.0f}"
    elif magnitude >= 10:
        text = f"{value:.1f}"
    elif magnitude >= 1:
        text = f"{value:.2f}"
    else:
        text = f"{value:.3g}"
    return f"{text} {unit}" if unit else text


#: time units, each with its size in seconds, largest first: a time is shown in the largest that
#: leaves it at least 1 (0.0000123 s is "12.3 µs", never "1.23e-05 s")
TIME_UNITS = (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9))
_TIME_ALIASES = {"s": 1.0, "sec": 1.0, "seconds": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}


def quantity(value, unit: str | None = None) -> str:
    """A measured value with its unit for a reader, never in scientific notation: a time in the
    largest unit that leaves it at least 1 ("12.3 µs", "2.14 s"), any other value as ``number``
    gives it, with fixed decimals where that would be scientific (0.000012, 12,300,000,000)."""
    if missing(value):
        return "-"
    value = float(value)
    scale = _TIME_ALIASES.get(str(unit or "").strip())
    if scale is not None and value != 0:
        seconds = value * scale
        name, size = next(((n, z) for n, z in TIME_UNITS if abs(seconds) >= z), TIME_UNITS[-1])
        return f"{_plain_number(seconds / size)} {name}"
    text = _plain_number(value)
    return f"{text} {unit}" if unit else text


def cell(value, unit: str | None) -> str:
    """A measured value in a table whose header names the unit: as ``number`` gives it, except a time
    under a thousandth of its unit, said in a smaller one with that unit ("12.7 µs" in a column of
    seconds, never "0.0000127")."""
    if missing(value):
        return "-"
    if unit and 0 < abs(float(value)) < 1e-3 and str(unit).strip() in _TIME_ALIASES:
        return quantity(value, unit)
    return number(value)


def _plain_number(value: float) -> str:
    magnitude = abs(value)
    if 0 < magnitude < 1e-3:
        digits = 2 - math.floor(math.log10(magnitude))  # three significant digits, fixed
        return f"{value:.{digits}f}"
    return number(value)


def ratio(value) -> str:
    return "-" if missing(value) else f"{float(value):.3f}"


def ratio_interval(value, low, high) -> str:
    """ "1.234 [1.200, 1.270]", or "1.234 [-]" where no interval could be computed."""
    if missing(low) or missing(high):
        return f"{ratio(value)} [-]"
    return f"{ratio(value)} [{ratio(low)}, {ratio(high)}]"


def percent(value, signed: bool = True) -> str:
    if missing(value):
        return "-"
    if math.isinf(float(value)):
        return "+inf%" if value > 0 else "-inf%"
    return f"{float(value):+.1f}%" if signed else f"{float(value):.1f}%"


#: a bound on a cost (an MDE, what an interval excludes) from this factor up is said as "over" it
BOUND_CEILING = 1000.0


def mde(value) -> str:
    """A minimum detectable effect or another bound on a cost (a fraction) as every output says
    it, in the convention of costs (``effect``): "2.1%" below FACTOR_FROM; from it a factor ("3.2x",
    "57x"); from 1,000x up "over 1,000x" (a comparison that could not see a thousandfold cost saw
    nothing, whatever the digits); "-" when missing."""
    if missing(value):
        return "-"
    factor = 1 + float(value)
    if not factor < BOUND_CEILING - 0.5:  # what would print as 1,000x or more, and infinity
        return f"over {BOUND_CEILING:,.0f}x"
    return _bare(max(factor, 1.0))


def cv_pair(baseline_cv, cv) -> str:
    """The two sides' coefficients of variation in percent: "1.2/3.4"."""
    return "/".join("-" if missing(v) else f"{float(v) * 100:.1f}" for v in (baseline_cv, cv))


#: below this factor an effect that costs time is said in percent ("4.2% slower"); from it on as a
#: factor ("2.9x slower"); an effect that saves time always as a factor ("1.31x faster")
FACTOR_FROM = 2.0


def _factor(value: float) -> str:
    """A factor of at least 1: "1.31", "2.9", "34", "340"."""
    if value < 2:
        return f"{value:.2f}"
    if value < 10:
        return f"{value:.1f}"
    if value < 1000:
        return f"{value:.0f}"
    return f"{value:,.0f}"


def _bare(te: float) -> str:
    """One side of an effect without its direction word: "4.2%" / "2.9x" (slower) or "1.31x" (faster)."""
    if te >= 1:
        return f"{(te - 1) * 100:.1f}%" if te < FACTOR_FROM else f"{_factor(te)}x"
    return f"{_factor(1 / te)}x"


def _kind(te: float) -> tuple[bool, bool]:
    """(slower, said as a percentage) of a time-equivalent ratio."""
    return te >= 1, 1 <= te < FACTOR_FROM


def effect(te, low=None, high=None) -> str:
    """A time-equivalent ratio (> 1: takes more time) in the project's one convention, with its
    interval where given: "2.9x slower [2.6x, 3.3x]", "1.31x faster [1.27x, 1.35x]", "4.2% slower
    [2.1%, 6.3%]"; an interval that reaches the other direction names the direction of both ends:
    "1.0% slower [1.02x faster, 3.1% slower]". A throughput's ratio must be inverted first (time_equivalent). "-" when missing."""
    if missing(te) or not math.isfinite(float(te)) or float(te) <= 0:
        return "-"
    te = float(te)
    text = f"{_bare(te)} {'slower' if te >= 1 else 'faster'}"
    if missing(low) or missing(high) or not (math.isfinite(float(low)) and math.isfinite(float(high))):
        return text
    low, high = float(low), float(high)
    if low <= 0:
        return text
    ends = (low, high) if te >= 1 else (high, low)  # faster: the smaller factor first
    # an interval that reaches the other direction names the direction of both ends, so that
    # neither reads as the point's: "22x slower [14x faster, 6,694x slower]"
    same = all(_kind(end) == _kind(te) for end in ends)
    words = [_bare(end) if same else effect(end) for end in ends]
    return f"{text} [{words[0]}, {words[1]}]"


def time_equivalent(ratio, better) -> float:
    """The ratio as time (> 1: slower): a throughput's (higher is better) inverted."""
    if missing(ratio):
        return math.nan
    ratio = float(ratio)
    if better == "higher":
        return 1 / ratio if ratio > 0 else math.inf
    return ratio


def row_effect(row) -> str:
    """A comparison row's effect in words with its interval (the same words everywhere)."""
    better = row.get("better")
    te = time_equivalent(row.get("ratio"), better)
    low, high = time_equivalent(row.get("ci_low"), better), time_equivalent(row.get("ci_high"), better)
    if better == "higher":
        low, high = high, low
    return effect(te, low, high)
