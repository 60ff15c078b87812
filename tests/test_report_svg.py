"""The report's charts as SVG written directly (ccbench.report.svg, .forestplot, .plots): what each
says is in the markup a browser reads (rows, intervals, marks and labels as real text), the user's
labels stay text, and the PNG files of --figures are drawn from the same chart."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import numpy as np
import pandas as pd
import pytest

from ccbench.report import charts, chartstyle
from ccbench.report.forest import Forest
from ccbench.report.svg import text_width

SVG = "{http://www.w3.org/2000/svg}"


def parsed(document: str) -> ET.Element:
    return ET.fromstring(document.split("?>", 1)[1])


def texts(root: ET.Element) -> list[str]:
    return [element.text or "" for element in root.iter(f"{SVG}text")]


def group(root: ET.Element, gid: str) -> ET.Element | None:
    return next((g for g in root.iter(f"{SVG}g") if g.get("id") == gid), None)


def forest_of(rows: list[dict], configs: list[str]) -> Forest:
    frame = pd.DataFrame(rows)
    labels = list(dict.fromkeys(frame["label"]))
    return Forest(frame, labels, configs, {c: "TEE: TDX" for c in configs})


def row(label, config, te, low, high, kind="row", significant=True):
    return {"label": label, "config": config, "layer": "TEE", "te": te, "te_low": low, "te_high": high,
            "range_low": np.nan, "range_high": np.nan, "cases": 1, "significant": significant, "kind": kind}  # fmt: skip


def test_forest_rows_intervals_and_one_value_marks_are_in_the_markup():
    weird = "<b>$x$ & y</b>"
    configs = ["tdx / TDX", "snp / SEV-SNP"]
    rows = [
        row("prime time", "tdx / TDX", 1.3, 1.2, 1.4),
        row("prime time", "snp / SEV-SNP", 1.02, 0.97, 1.08, significant=False),
        row(weird, "tdx / TDX", 0.8, np.nan, np.nan, kind="one value", significant=False),
        row(weird, "snp / SEV-SNP", 1.1, 1.05, 1.2),
    ]
    document = charts.forest(forest_of(rows, configs), "time against plain").svg()
    root = parsed(document)  # well-formed XML: the user's label is escaped, not markup
    words = texts(root)
    assert weird in words and "prime time" in words  # labels are text, not paths
    assert "slower ->" in words and "<- faster" in words and "1x" in words
    assert words.count("one value: no interval") == 1
    assert group(root, "forest:one-value:1") is None  # the mark is a text element with its row's id
    mark = next(e for e in root.iter(f"{SVG}text") if e.get("id") == "forest:one-value:1")
    assert mark.text == "one value: no interval"
    tdx, snp = chartstyle.series_id("tdx / TDX"), chartstyle.series_id("snp / SEV-SNP")
    # every row with an interval has one path; the row of one value has an open circle and no interval
    assert len(group(root, f"{tdx}:forest-intervals").findall(f"{SVG}path")) == 1
    assert len(group(root, f"{snp}:forest-intervals").findall(f"{SVG}path")) == 2
    assert len(group(root, f"{tdx}:forest-one-value").findall(f"{SVG}use")) == 1
    assert len(group(root, f"{tdx}:forest-points").findall(f"{SVG}use")) == 1
    # solid where significant, faint where not
    styles = [p.get("style") for p in group(root, f"{snp}:forest-intervals").findall(f"{SVG}path")]
    assert sum("stroke-opacity: 0.4" in s for s in styles) == 1


def test_forest_axis_is_logarithmic_with_1x_between_its_ends():
    """An interval twice as far from 1x in ratio is twice as long on the chart (log scale)."""
    rows = [row("a", "c", 2.0, 1.0, 2.0), row("b", "c", 4.0, 1.0, 4.0)]
    root = parsed(charts.forest(forest_of(rows, ["c"]), "t").svg())
    paths = group(root, f"{chartstyle.series_id('c')}:forest-intervals").findall(f"{SVG}path")
    lengths = []
    for path in paths:
        x0, x1 = (float(v) for v in re.findall(r"[ML] ([-0-9.]+) ", path.get("d")))
        lengths.append(x1 - x0)
    assert lengths[1] == pytest.approx(2 * lengths[0], rel=0.01)


def test_forest_tick_labels_never_print_over_each_other_on_a_wide_span():
    """Three panels and an interval from 1e-6x to 1e6x (as wide as an implausible row of the storage plan):
    twelve decades on a narrow panel. The labels written clear each other and 1x is among them; the
    grid keeps every decade (failed before: "0.0010.1x1x 10x100x1,000x" printed over each other)."""
    configs = ["a / disk", "b / fscrypt", "c / tmpfs"]
    long = "ycsb-durable f run read-modify-write latency_p99"  # labels this long leave narrow panels
    rows = [row(long, c, 2.0, 1e-6, 1e6) for c in configs] + [row("narrow", c, 1.1, 1.0, 1.2) for c in configs]
    root = parsed(charts.forest(forest_of(rows, configs), "t").svg())
    labels = [e for e in root.iter(f"{SVG}text") if re.fullmatch(r"[0-9.,]+x", e.text or "")]
    by_panel: dict[float, list[tuple[float, float]]] = {}
    for element in labels:
        middle, width = float(element.get("x")), text_width(element.text, float(element.get("font-size", 6.5)))
        by_panel.setdefault(round(float(element.get("y")), 1), [])  # one axis row for all panels
        by_panel[round(float(element.get("y")), 1)].append((middle - width / 2, middle + width / 2))
    for spans in by_panel.values():
        spans.sort()
        assert all(left >= previous[1] for previous, (left, _) in zip(spans, spans[1:], strict=False)), spans
    assert [e.text for e in labels].count("1x") == len(configs)


def test_heatmap_colours_log2_ratio_clipped_and_labels_every_cell():
    matrix = pd.DataFrame(
        {"slow": [77_500.0, 300.0, 0.0], "fast": [-50.0, -90.0, np.nan]},
        index=["huge", "four", "same"],
    )  # percent: 776x, 4x, 1x; 0.5x, 0.1x, no value
    root = parsed(charts.heatmap(matrix, "overhead").svg())
    cells = [p.get("style") for p in group(root, "heatmap:cells").findall(f"{SVG}path")]
    colour = [re.search(r"fill: (#[0-9a-f]{6})", s).group(1) for s in cells]
    assert len(colour) == 5  # the cell with no value stays blank
    huge, half, four, tenth, same = colour  # row by row
    assert huge == four == "#67001f"  # clipped at 4x: 776x is no redder than 4x
    assert same == "#f7f7f7" and tenth == "#053061"
    assert half not in (same, tenth) and int(half[5:7], 16) > int(half[1:3], 16)  # bluish, not clipped
    words = texts(root)
    # each cell in the one convention (a trial read "~0.7x" as "about 0.7x", not 1.43x faster)
    assert {"776x slower", "4.0x slower", "0.0% slower", "2.0x faster", "10x faster"} <= set(words), words
    assert "<=0.25x" in words and ">=4x" in words


def test_percentile_lines_one_path_per_configuration_and_panel():
    summary = pd.DataFrame(
        [
            {"case": case, "config": config, "percentile": p, "median": base * p * (2 if config == "b" else 1)}
            for case, base in (("4k", 10.0), ("1m", 1000.0))
            for config in ("a", "b")
            for p in (50.0, 99.0)
        ]
    )
    root = parsed(charts.percentile_lines(summary, "latency", "us", colours={"a": "#4477AA", "b": "#EE6677"}).svg())
    for config, colour in (("a", "#4477aa"), ("b", "#ee6677")):
        for panel in (0, 1):
            paths = group(root, f"{chartstyle.series_id(config)}:panel{panel}").findall(f"{SVG}path")
            assert len(paths) == 1 and f"stroke: {colour}" in paths[0].get("style")
    words = texts(root)
    assert {"p50", "p99", "4k", "1m", "latency"} <= set(words)


def test_png_of_a_chart_has_its_colours(tmp_path):
    from PIL import Image

    rows = [row("a", "c", 2.0, 1.5, 2.5), row("b", "c", 3.0, 2.0, 4.0)]
    canvas = charts.forest(forest_of(rows, ["c"]), "t", {"c": "#4477AA"})
    canvas.png(tmp_path / "f.png", dpi=150)
    image = np.asarray(Image.open(tmp_path / "f.png").convert("RGB")).reshape(-1, 3).astype(int)
    assert Image.open(tmp_path / "f.png").size == (round(canvas.width * 150 / 72), round(canvas.height * 150 / 72))
    assert ((np.abs(image - [0x44, 0x77, 0xAA]) < 8).all(axis=1)).sum() > 20  # the rows are drawn
    assert ((image < 60).all(axis=1)).sum() > 100  # and the text and frame


def test_percentile_legend_wraps_inside_the_chart():
    """Six configurations with long names: every legend entry starts and (about) ends on the chart."""
    configs = [f"machine-{n} / SEV-SNP / encrypted storage {n}" for n in range(6)]
    summary = pd.DataFrame(
        [
            {"case": "4k", "config": c, "percentile": p, "median": 10.0 + n}
            for n, c in enumerate(configs)
            for p in (50.0, 99.0)
        ]
    )
    canvas = charts.percentile_lines(summary, "latency", "us")
    root = parsed(canvas.svg())
    entries = [e for e in root.iter(f"{SVG}text") if (e.text or "").startswith("machine-")]
    assert len(entries) == 6
    for entry in entries:
        assert 0 <= float(entry.get("x")) and float(entry.get("x")) + text_width(entry.text, 7) <= canvas.width
    assert len({entry.get("y") for entry in entries}) > 1  # on more than one line


def test_grouped_bars_one_bar_per_case_and_configuration_with_its_quartiles():
    summary = pd.DataFrame(
        [
            {"case": case, "config": config, "median": m, "q1": m * 0.9, "q3": m * 1.1}
            for case, base in (("64 B", 60.0), ("1 MiB", 1e6))
            for config, m in (("plain", base), ("tls", 2 * base))
        ]
    )
    root = parsed(
        charts.grouped_bars(summary, "round trip", "us", "lower", {"plain": "#4477AA", "tls": "#EE6677"}).svg()
    )
    for config, colour in (("plain", "#4477aa"), ("tls", "#ee6677")):
        for number in (0, 1):
            (bar,) = group(root, f"{chartstyle.series_id(config)}:{number}").findall(f"{SVG}path")
            assert f"fill: {colour}" in bar.get("style")
    words = texts(root)
    assert "us (lower is better), log scale" in words  # 60 beside 1,000,000: a log axis, said
    assert {"64 B", "1 MiB", "plain", "tls", "round trip"} <= set(words)
    # the bars' heights follow the medians on the log axis: 2x is the same step for both cases
    tops = {}
    for config in ("plain", "tls"):
        for number in (0, 1):
            (bar,) = group(root, f"{chartstyle.series_id(config)}:{number}").findall(f"{SVG}path")
            tops[(config, number)] = float(re.findall(r"[ML] [-0-9.]+ ([-0-9.]+)", bar.get("d"))[0])
    step = [tops[("plain", n)] - tops[("tls", n)] for n in (0, 1)]
    assert step[0] > 0 and step[0] == pytest.approx(step[1], abs=0.05)


def test_long_configuration_names_wrap_in_their_panel_headings_clear_of_the_title():
    """Five panels of long names: each name is whole on the chart (on two lines where one would need
    a font under 6 pt), and every heading's line lies below the chart's title."""
    configs = [f"SEV-Non-Encrypted-{n} / SEV-SNP / azure-confidential-disk" for n in range(5)]
    rows = [row("bench", config, 1.1, 1.0, 1.2) for config in configs]
    root = parsed(charts.forest(forest_of(rows, configs), "time against AMD-Non-SEV / no TEE").svg())
    elements = list(root.iter(f"{SVG}text"))
    words = [e.text for e in elements]
    for n in range(5):
        assert f"SEV-Non-Encrypted-{n} / SEV-SNP /" in words and "..." not in "".join(words)
    box = {}
    for e in elements:
        size = float(re.search(r"font-size: ([0-9.]+)px", e.get("style")).group(1))
        box.setdefault(e.text, []).append((float(e.get("y")) - size, float(e.get("y")) + 0.25 * size))
    (title,) = box["time against AMD-Non-SEV / no TEE"]
    assert all(top > title[1] for text, boxes in box.items() if "SEV-Non" in text for top, _ in boxes)


def test_an_implausible_row_does_not_stretch_the_forest_axis():
    """An implausible row (left out of the verdict) 1,000x off does not set the axis the real rows
    are read on: their axis stays within a decade of them, the grey cross sits at its edge and its
    ratio is written beside it."""
    configs = ["a / fscrypt"]
    rows = [
        row("fio 4k", "a / fscrypt", 1.3, 1.2, 1.4),
        row("fio 1m", "a / fscrypt", 0.8, 0.7, 0.9),
        row("fio direct", "a / fscrypt", 1200.0, 900.0, 1600.0, kind="implausible", significant=False),
    ]
    root = parsed(charts.forest(forest_of(rows, configs), "t").svg())
    ticks = [e.text for e in root.iter(f"{SVG}text") if re.fullmatch(r"[0-9.,]+x", e.text or "")]
    assert "1,000x" not in ticks and "100x" not in ticks and "1x" in ticks
    assert "1,200x" in texts(root)
    (cross,) = [g for g in root.iter(f"{SVG}g") if (g.get("id") or "").endswith(":forest-implausible")]
    (mark,) = list(cross)
    tick_x = [float(e.get("x")) for e in root.iter(f"{SVG}text") if re.fullmatch(r"[0-9.,]+x", e.text or "")]
    assert float(mark.get("x")) > max(tick_x)  # at the right edge, past the last labelled ratio


def test_the_forest_caption_counts_only_the_rows_the_verdict_judged():
    """A significant implausible row (a grey cross) is in no count of the caption, which says so; on main's
    code it was counted among the significant rows and in the total."""
    from ccbench.report.forest import caption

    rows = [
        row("fio 4k", "a / fscrypt", 1.3, 1.2, 1.4),
        row("fio 1m", "a / fscrypt", 1.01, 0.9, 1.1, significant=False),
        row("fio direct", "a / fscrypt", 27.0, 20.0, 36.0, kind="implausible", significant=True),
    ]
    data = forest_of(rows, ["a / fscrypt"])
    data.left_out, data.pooled, data.hidden = 0, [], []
    said = caption(data, "a / disk")
    assert "1 of 2 rows significant" in said and "1 slower, 0 faster" in said and "Grey crosses (1)" in said
