"""Numbers as users read them never carry an exponent: the formatter (ccbench.analysis.format), and
the terminal, the report (HTML and Markdown) and history show over bundles of tiny and huge values."""

from __future__ import annotations

import re

import pytest

from ccbench.analysis import format as fmt

#: an exponent as Python prints one: 4e-05, 1.5e+09
EXPONENT = re.compile(r"\d(?:\.\d+)?e[-+]\d")


@pytest.mark.parametrize(
    ("value", "unit", "expected"),
    [
        (0.0004, None, "0.0004"),
        (0.00004, None, "0.00004"),
        (0.000123, None, "0.000123"),
        (-0.00004, None, "-0.00004"),
        (0.0004, "s", "400 µs"),
        (0.0004, "ms", "400 ns"),
        (0.00004, "MB/s", "0.00004 MB/s"),
        (1.5e9, None, "1,500,000,000"),
        (0.0123, None, "0.0123"),
        (66573.0, None, "66,573"),
        (3.14159, "s", "3.14 s"),
        (0.0, "s", "0 s"),
    ],
)
def test_number_writes_plain_decimals(value, unit, expected):
    assert fmt.number(value, unit) == expected


def test_no_magnitude_gets_an_exponent():
    for exponent in range(-12, 16):
        for mantissa in (1.0, 2.5, 9.99):
            value = mantissa * 10.0**exponent
            for text in (fmt.number(value), fmt.number(value, "s"), fmt.quantity(value, "us"), fmt.significant(value)):
                assert not EXPONENT.search(text), (value, text)


def test_significant_keeps_the_digits_it_is_asked_for():
    assert fmt.significant(0.000123456, 3) == "0.000123"
    assert fmt.significant(0.5, 3) == "0.5"
    assert fmt.significant(57199.0, 4) == "57,199"
    assert fmt.significant(0.00004, 2) == "0.00004"


def test_compare_report_and_history_of_tiny_times_write_no_exponent(tmp_path, ccbench):
    """Two machines timing a 40 us operation (0.00004 s) and a 1.5e9-byte copy: every page and
    table a user reads says them without an exponent."""
    from bundles import write_samples

    paths = []
    for host, tee, factor in (("plain", "none", 1.0), ("tdx", "tdx", 1.2)):
        samples = [
            {"workload": "tiny", "variant": {}, "metric": "time", "unit": "s", "value": factor * 4e-5 * v, "repetition": i}
            for i, v in enumerate([1.0, 1.02, 0.98, 1.01])
        ] + [
            {"workload": "copy", "variant": {}, "metric": "bytes", "unit": "B", "better": "higher",
             "value": 1.5e9 / factor * v, "repetition": i}
            for i, v in enumerate([1.0, 1.01, 0.99, 1.0])
        ]  # fmt: skip
        paths.append(write_samples(tmp_path, host, tee, samples))
    outputs = {}
    for args in (("compare",), ("compare", "--details"), ("compare", "--summary")):
        done = ccbench(*args, *paths)
        assert done.returncode == 0, done.stderr
        outputs[" ".join(args)] = done.stdout
    # the baseline's median: in a smaller unit (the column's header says seconds), no exponent
    assert "40.2 µs" in outputs["compare --details"]
    for name in ("r.html", "r.md"):
        done = ccbench("report", *paths, "-o", tmp_path / name)
        assert done.returncode == 0, done.stderr
        outputs[name] = (tmp_path / name).read_text()
    store = tmp_path / "history.duckdb"
    assert ccbench("history", "add", *paths, "--store", store).returncode == 0
    shown = ccbench("history", "show", "--store", store)
    assert shown.returncode == 0, shown.stderr
    outputs["history show"] = shown.stdout
    for name, text in outputs.items():
        assert not EXPONENT.search(text), (name, EXPONENT.findall(text)[:5])


def test_the_lints_figures_are_plain_decimals():
    """fio's Little's-law check says a tiny number in flight as a decimal (it said 4e-05)."""
    from ccbench.analysis.rows.plausibility import side_reasons

    reasons = side_reasons({"iops": 1.0, "clat_mean": 40.0}, {"iodepth": 16, "ioengine": "libaio", "rw": "randread"})
    assert reasons and "is 0.00004 I/Os at a time, the job keeps 16" in reasons[0], reasons
    assert not EXPONENT.search(" ".join(reasons))


def test_a_bound_on_a_cost_reads_as_costs_do_and_a_huge_one_is_not_spelt_out():
    """An MDE or an excluded cost: a percentage below 2x, a factor from there, and "over 1,000x"
    beyond (the storage plan's fscrypt rows had an MDE printed as 158,242,393.8%)."""
    from ccbench.analysis.format import mde

    assert [mde(v) for v in (0.021, 0.999, 1.0, 2.2, 56.0, 998.0)] == ["2.1%", "99.9%", "2.0x", "3.2x", "57x", "999x"]
    assert mde(1_582_423.938) == mde(float("inf")) == "over 1,000x"
    assert mde(None) == mde(float("nan")) == "-"


def test_a_table_cell_says_a_tiny_time_in_a_smaller_unit_and_leaves_the_rest_alone():
    """compare's table puts the unit in its header ("time_s (s)"): a pyperf time of 12.7 µs was a cell
    of "0.0000127"; a cell now carries its own smaller unit only where the header's would need that."""
    from ccbench.analysis.format import cell

    assert cell(0.0000127, "s") == "12.7 µs" and cell(0.00042, "ms") == "420 ns"
    assert cell(0.0123, "s") == "0.0123" and cell(66573, "s") == "66,573"
    assert cell(0.0000127, "MB/s") == "0.0000127" and cell(float("nan"), "s") == "-"
