"""How the verdict's lines are laid out and worded wherever they are printed (issue "One answer
everywhere", items 3, 6 and 7): wrapped, never cut, never inside a figure; counts of the rows judged,
the left-out ones named apart; a weak bound said as inconclusive; the page's verdict one point per layer;
the heatmap's left-out cells marked and in no count."""

from __future__ import annotations

import re

import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from ccbench.analysis.judgement import combined, semantics
from ccbench.analysis.judgement.headline import fit, headline, layer_lines, page_points, terminal_width
from ccbench.analysis.judgement.verdict import verdicts
from ccbench.analysis.judgement.verdict_table import counts_cell
from ccbench.report.plots import LEFT_OUT_FILL, heatmap

FIGURE = re.compile(r"\[[^\]]*\]")


def test_a_long_line_is_wrapped_at_a_space_and_never_inside_an_interval():
    text = (
        "  fio faster, 1.62x to 7.1x (sizes differ: I2 89%); fio-cold 0.99x [0.95x, 1.03x] and 4k randwrite "
        "1.35x faster [1.21x, 1.52x]; 1m randread 2.4x faster [2.1x, 2.8x]"
    )
    wrapped = fit(text, 60).split("\n")
    assert len(wrapped) > 1 and all(len(line) <= 60 for line in wrapped), wrapped
    assert " ".join(part.strip() for part in wrapped) == text.strip()  # nothing cut, nothing lost
    for interval in FIGURE.findall(text):
        assert any(interval in line for line in wrapped), interval  # each interval whole on one line
    assert all(line.startswith("      ") for line in wrapped[1:])  # under its first line, indented
    assert "..." not in "".join(wrapped)
    assert fit(text, None) == text


@settings(max_examples=200, deadline=None)
@given(
    words=st.lists(
        st.one_of(
            st.from_regex(r"[a-z0-9.%x]{1,12}", fullmatch=True),
            st.builds(lambda a, b: f"[{a}x, {b}x]", st.integers(1, 999), st.integers(1, 999)),
        ),
        min_size=1,
        max_size=40,
    ),
    width=st.integers(40, 120),
)
def test_wrapping_keeps_every_word_and_each_interval_whole(words, width):
    text = " ".join(words)
    lines = fit(text, width).split("\n")
    assert " ".join(line.strip() for line in lines) == text
    for interval in FIGURE.findall(text):
        assert any(interval in line for line in lines)
    assert all(len(line) <= width for line in lines), lines


def test_the_width_follows_columns(monkeypatch):
    monkeypatch.setenv("COLUMNS", "250")
    assert terminal_width() == 250
    monkeypatch.delenv("COLUMNS")
    assert terminal_width() == 100  # a pipe (pytest's output is no terminal)


def _rows(layer: str, ratios: list[tuple[float, float, float, bool, str]]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {"layer": layer, "workload": "fio", "case": f"case {i}", "params": "{}", "metric": "time", "unit": "s",
             "better": "lower", "baseline": "vm / disk", "config": "vm / fscrypt", "ratio": r, "ci_low": lo,
             "ci_high": hi, "p_value": 0.01 if sig else 0.5, "significant": sig, "mde": 0.3, "flags": [],
             "implausible": why, "overhead_percent": (r - 1) * 100, "n": 3, "n_baseline": 3, "cv": 0.01,
             "cv_baseline": 0.01, "interval": "welch"}
            for i, (r, lo, hi, sig, why) in enumerate(ratios)
        ]
    )  # fmt: skip


def test_counts_are_of_the_rows_judged_and_the_left_out_ones_are_named_apart():
    """On main's code the layer counted 3 of 4 significant though two of the three were left out."""
    table = _rows(
        "storage encryption: fscrypt",
        [
            (3.0, 2.5, 3.6, True, ""),
            (27.0, 20.0, 36.0, True, "direct I/O served buffered on fscrypt"),
            (451.0, 300.0, 600.0, True, "direct I/O served buffered on fscrypt"),
            (1.01, 0.9, 1.1, False, ""),
        ],
    )
    (item,) = verdicts(table)
    assert (item.comparisons, item.significant, item.left_out_rows) == (2, 1, 2)
    lines = headline([item], width=None)
    assert "1 of 2 significant" in lines[0] and "2 left out" in lines[0], lines
    assert "27x" not in lines[0] and "451x" not in lines[0]
    # the page: one point per layer, the note on the left-out rows inside it, never a point of its own
    (point,) = page_points([item])
    assert point.startswith("storage encryption: fscrypt") and "left out" in point


def test_a_layer_whose_rows_are_all_left_out_counts_no_contended_row_of_none():
    """On the old code: "4 of 0 comparisons include contended executions", "0 of 0 significant, 4 contended"
    (fscrypt on the quick plan: every direct-I/O row left out, each contended)."""
    why = "direct I/O served buffered on fscrypt"
    table = _rows("storage encryption: fscrypt", [(27.0, 20.0, 36.0, True, why)] * 4)
    table["flags"] = [["contended"]] * 4
    (item,) = verdicts(table)
    assert (item.comparisons, item.contended, item.left_out_rows, item.left_out_contended) == (0, 0, 4, 4)
    words = " ".join([item.sentence(), *headline([item], width=None), *layer_lines(item, full=True, width=None)])
    assert "of 0 comparisons include contended" not in words and "4 of the 4 left-out comparisons" in words, words
    assert counts_cell(item) == "0 of 0 significant, 0 contended, 0 noisy; 4 of 4 left out contended"
    # a layer partly left out: the contended count is of the rows counted, the left-out ones said apart
    table["implausible"] = ["", "", why, why]
    table["significant"] = True
    (item,) = verdicts(table)
    assert (item.comparisons, item.contended, item.left_out_rows, item.left_out_contended) == (2, 2, 2, 2)
    assert "2 of 2 comparisons include contended" in item.sentence(), item.sentence()


def test_a_bound_too_wide_to_matter_is_inconclusive_not_a_clean_bill():
    """On main's code: "no cost above 7.1x (the smallest it could see)", read as no cost."""
    wide = _rows("loop file, no cipher: ext4-loop", [(1.2, 0.4, 3.0, False, ""), (0.9, 0.3, 2.5, False, "")])
    wide["mde"] = 6.1
    (item,) = verdicts(wide)
    (line,) = headline([item], width=None)
    assert "inconclusive" in line and "no cost above 7.1x" in line and "would not have shown" in line
    narrow = wide.assign(mde=0.04, ci_low=[1.0, 0.85], ci_high=[1.4, 0.95])
    narrow["significant"] = False
    (item,) = verdicts(narrow)
    assert "inconclusive" not in headline([item], width=None)[0]
    assert semantics.WEAK_BOUND == 0.25


def test_the_heatmap_draws_left_out_cells_grey_with_no_colour_of_a_cost():
    matrix = pd.DataFrame({"a / fscrypt": [2600.0, 50.0]}, index=["fio 4k randread", "fio-cold read"])
    left = pd.DataFrame({"a / fscrypt": [True, False]}, index=matrix.index)
    text = heatmap(matrix, "t", left).svg()
    assert LEFT_OUT_FILL in text and "left out" in text
    assert "27x" not in text  # the left-out cell's ratio is not drawn as a cost
    plain = heatmap(matrix, "t").svg()
    assert LEFT_OUT_FILL not in plain and "27x" in plain


def test_the_table_says_where_medians_move_the_other_way_from_the_effect():
    """compare's table sets medians beside an effect of geometric means; on main's code rows where the two
    pointed opposite ways stood unexplained."""
    from ccbench.commands.compare_text import _medians_against

    table = pd.DataFrame({"baseline_median": [10.0, 10.0, 10.0], "median": [9.9, 11.0, 10.0], "ratio": [1.2, 1.1, 0.9]})
    assert _medians_against(table) == 1


def test_show_names_each_kind_of_contention_once_and_never_cuts_it():
    """The user trial: show repeated one sentence per execution and stopped at 300 characters mid-word."""
    from ccbench.commands.show import _contention_line

    executions = [
        {"contended": True, "contended_reasons": [f"other processes used {cpus:.2f} CPUs on average (3 CPU-s in 3 s)"]}
        for cpus in (1.01, 1.85, 1.13)
    ] + [{"contended": True, "contended_reasons": ["steal 4.0% of one CPU"]}]
    line = _contention_line(executions, 31)
    assert line.startswith("4 of 31 executions ran while other work used the machine (contended): ")
    # each kind once, with the range its figure took (on the old code the figure was cut out: "used CPUs")
    assert "contended): other processes used 1.01-1.85 CPUs on average; steal 4.0% of one CPU;" in line, line
    assert line.endswith("the busiest: other processes used 1.85 CPUs on average (3 CPU-s in 3 s)")
    one = _contention_line(executions[:1], 31)
    assert "contended): other processes used 1.01 CPUs on average; the busiest" in one, one


def test_a_layer_of_workloads_pooled_without_a_finding_never_says_no_interval():
    """The user trial: the layer's line said "no interval: too few values" while the workload's line under
    it printed one (pooled across its benchmarks, too few for a finding)."""
    unclear = semantics.Judgement(kind=semantics.UNCLEAR, comparisons=2, typical=0.76, low=0.7, high=0.83)
    lone = semantics.Judgement(kind=semantics.NONE_SEEN, comparisons=1)
    layer = combined.combine([("SimplePrime", lone), ("pyperformance-default", unclear)])
    assert layer.phrase() == (
        "not distinguishable across benchmarks in pyperformance-default (each workload's line says why)"
    )


def test_the_range_between_workloads_is_each_workloads_own_judgement():
    """The user trial: the table's "range between workloads" said "2.6x faster to 2.5x faster" (each
    workload's geometric mean over all its rows, the non-significant ones too) under a headline of
    "4.3x to 5.5x" (the significant rows): the cell now gives each workload's own words."""
    from ccbench.analysis.judgement.verdict_table import verdict_table

    fio = _rows("in-memory storage: tmpfs", [(0.2, 0.18, 0.22, True, ""), (0.95, 0.6, 1.4, False, "")])
    cold = _rows("in-memory storage: tmpfs", [(0.5, 0.45, 0.55, True, ""), (1.0, 0.7, 1.4, False, "")])
    cold["workload"] = "fio-cold"
    (item,) = verdicts(pd.concat([fio, cold], ignore_index=True))
    cell = verdict_table([item])["range between workloads"].iloc[0]
    for name, judgement in item.workload_judgements:
        assert f"{name}: {judgement.phrase(where=False)}" in cell, cell
    assert "5.0x faster" in cell and "2.0x faster" in cell, cell


def test_a_pooled_interval_too_wide_for_a_figure_gives_the_range_in_every_output():
    """Two significant rows of one direction whose standard errors had barely two degrees of freedom
    pooled to "13x slower [38x faster, 6,421x slower]" beside "2 of 2 significant" (the user trial:
    "13x slower [13x faster, 2,159x slower]"): a figure its interval cannot support. The cases' range
    is said instead, and why, in the headline, the page, the JSON and the sentence."""
    import json

    from ccbench.commands.compare import verdict_record

    table = _rows("storage encryption: fscrypt", [(10.0, 8.0, 12.5, True, ""), (17.0, 13.6, 21.0, True, "")])
    table["se"], table["dof"] = 0.1, 2.001
    (item,) = verdicts(table)
    assert item.judgement.kind == "sizes differ" and item.judgement.too_wide
    record = json.loads(json.dumps(verdict_record(item), default=str))
    (point,) = page_points([item])
    for text in (" ".join(headline([item], width=None)), point, record["words"], item.sentence()):
        assert "slower, 10x to 17x (the range; pooled, the interval is too wide for one figure)" in text, text
        assert "[" not in text.split("significant")[0], text
    assert record["judgement"]["too_wide"] and record["judgement"]["low"] is None
    # an interval that supports its figure is still stated
    table["dof"] = 30.0
    table["ratio"], table["ci_low"], table["ci_high"] = [10.0, 11.0], [8.0, 8.8], [12.5, 13.8]
    (item,) = verdicts(table)
    assert item.judgement.kind == "pooled" and "[" in item.words()
