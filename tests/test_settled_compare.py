"""compare on a bundle whose run settled its cases (ccbench.analysis.settled): the rows of those
cases use the run's anytime-valid interval on the paired rounds, so the table, the verdict per
layer, --summary and the JSON say what the run said. The bundles are written with known values
(tests/bundles.py); the real run is in tests/test_settle.py."""

import json
import math

import numpy as np
import pytest
from bundles import sample as make_sample
from bundles import write, write_settled

from ccbench.analysis.comparison import comparison
from ccbench.analysis.labels import ANYTIME, COST, NO_COST_ABOVE
from ccbench.analysis.replicas import WELCH
from ccbench.analysis.sequential import p_value, settle

DISK, TMPFS = "storage=disk", "storage=tmpfs"


def drifting(rng, rounds=10, settled_after=4, cost=1.0, sd=0.002):
    """A baseline that slows 10% a round (the machine warms up, say) and a variant that costs
    ``cost`` with little noise within each round, settled after ``settled_after`` rounds: the
    variant's executions are the early, fast rounds only."""
    base = [1 + 0.1 * r for r in range(rounds)]
    variant = [b * cost * math.exp(rng.normal(0, sd)) for b in base[:settled_after]]
    return base, variant


def paired(base, variant):
    return [math.log(v / b) for b, v in zip(base, variant)]


def test_a_case_settled_as_no_cost_is_not_called_a_gain_by_welch_on_unequal_counts(tmp_path):
    """Welch on the variant's 4 early rounds against the baseline's 10 calls the variant faster; the
    run settled "no cost above 5%" on the paired rounds, and compare now says that everywhere."""
    base, variant = drifting(np.random.default_rng(1))
    bundle = write_settled(tmp_path, "m", {DISK: base, TMPFS: variant})
    result = comparison([bundle])
    row = result.table.iloc[0]
    expected = settle(paired(base, variant), 0.05)
    assert expected.state == NO_COST_ABOVE
    assert (row["interval"], row["settled"]) == (ANYTIME, NO_COST_ABOVE)
    assert row["ratio"] == pytest.approx(1 + expected.estimate)
    assert (row["ci_low"], row["ci_high"]) == (pytest.approx(1 + expected.low), pytest.approx(1 + expected.high))
    assert not row["significant"] and row["verdict"] == "not significant" and "not significant" in row["flags"]
    assert row["p_value"] == pytest.approx(p_value(paired(base, variant))) and row["p_value"] > 0.05
    assert row["mde"] == pytest.approx(0.05)
    (layer,) = result.verdicts()
    assert layer.words().startswith("no cost above 5.0% (settled: the run's anytime-valid interval")
    assert not layer.distinguishable


def test_a_settled_cost_is_a_cost_with_the_runs_interval_for_a_throughput_too(tmp_path):
    rng = np.random.default_rng(2)
    base, variant = drifting(rng, cost=3.0, settled_after=3, sd=0.01)
    # a throughput: the variant's rate is a third; its time-equivalent cost is 3x
    rates = {DISK: [1 / b for b in base], TMPFS: [1 / v for v in variant]}
    bundle = write_settled(tmp_path, "m", rates, metric="rate", better="higher", unit="ops/s")
    row = comparison([bundle]).table.iloc[0]
    expected = settle(paired(base, variant), 0.05)
    assert expected.state == COST
    assert (row["interval"], row["settled"], row["verdict"]) == (ANYTIME, COST, "slower")
    assert row["ratio"] == pytest.approx(1 / (1 + expected.estimate))
    assert row["ci_low"] == pytest.approx(1 / (1 + expected.high))
    assert row["ci_high"] == pytest.approx(1 / (1 + expected.low))
    assert row["significant"] and "not significant" not in row["flags"] and row["p_value"] < 0.05


def test_an_unsettled_case_says_so_and_bounds_only_what_its_interval_excludes(tmp_path):
    rng = np.random.default_rng(3)
    base = list(np.exp(rng.normal(0, 0.1, 6)))
    variant = [b * math.exp(rng.normal(0.02, 0.1)) for b in base]
    bundle = write_settled(tmp_path, "m", {DISK: base, TMPFS: variant}, stopped_by={TMPFS: "max repetitions"})
    result = comparison([bundle])
    row = result.table.iloc[0]
    expected = settle(paired(base, variant), 0.05)
    assert expected.state is None and expected.high is not None
    assert row["settled"] == "unsettled: max repetitions" and not row["significant"]
    assert row["mde"] == pytest.approx(expected.high)  # the cost it excludes, above the target
    (layer,) = result.verdicts()
    assert f"no cost above {expected.high * 100:.1f}% (what the anytime-valid interval excludes" in layer.words()


def test_other_rows_keep_their_interval_and_say_which(tmp_path):
    """A bundle without a settled run, and a metric that is not one of the settled cases: Welch."""
    rng = np.random.default_rng(4)
    base, variant = drifting(rng)
    plain = write(
        tmp_path / "plain",
        "p",
        "none",
        [
            make_sample(workload="w", variant={"storage": s}, metric="time", value=v, repetition=r)
            for s, values in (("disk", base), ("tmpfs", variant))
            for r, v in enumerate(values)
        ],
    )
    table = comparison([plain]).table
    assert list(table["interval"]) == [WELCH] and table["settled"].isna().all()
    assert table.iloc[0]["verdict"] == "faster"  # Welch on unequal, drifting rounds: what settling avoids


def test_compare_cli_json_summary_and_table_say_the_settled_answer(tmp_path, ccbench):
    base, variant = drifting(np.random.default_rng(1))
    bundle = write_settled(tmp_path, "m", {DISK: base, TMPFS: variant})
    rows = [json.loads(line) for line in ccbench("compare", bundle, "--json").stdout.splitlines()]
    row = next(r for r in rows if "workload" in r)
    assert (row["interval"], row["settled"], row["significant"]) == (ANYTIME, NO_COST_ABOVE, False)
    summary = ccbench("compare", bundle, "--summary")
    assert summary.returncode == 0, summary.stderr
    assert "in-memory storage: tmpfs: no cost above 5.0%" in summary.stdout
    assert "faster" not in summary.stdout.split("lint:")[0]
    layers = [json.loads(line) for line in ccbench("compare", bundle, "--summary", "--json").stdout.splitlines()]
    assert layers[0]["words"].startswith("no cost above 5.0% (settled") and not layers[0]["distinguishable"]
    table = ccbench("compare", bundle).stdout
    assert "anytime-valid (no cost above 5.0%)" in table
    assert "time: no cost above 5.0% (estimate" in table  # the run's own line, recomputed


def test_a_record_of_the_repeated_interval_is_read_on_it_everywhere_and_the_header_names_it(tmp_path, ccbench):
    """A run that settled on the interval built for its round limit records it; compare's rows, its
    "settled in" header, the table's interval column and the layer's words all take it from there."""
    from ccbench.analysis.sequential import case_p_value

    base, variant = drifting(np.random.default_rng(1))
    bundle = write_settled(tmp_path, "m", {DISK: base, TMPFS: variant}, limit=10)
    values = paired(base, variant)
    expected, anytime = settle(values, 0.05, limit=10), settle(values, 0.05)
    assert expected.interval == "repeated interval, limit 10" and anytime.interval == ANYTIME
    assert expected.high - expected.low < anytime.high - anytime.low  # built for the limit: narrower
    result = comparison([bundle])
    row = result.table.iloc[0]
    assert (row["interval"], row["settled"]) == ("repeated interval, limit 10", NO_COST_ABOVE)
    assert (row["ci_low"], row["ci_high"]) == (pytest.approx(1 + expected.low), pytest.approx(1 + expected.high))
    assert row["p_value"] == pytest.approx(case_p_value(values, 10))
    (layer,) = result.verdicts()
    assert layer.words().startswith("no cost above 5.0% (settled: the run's repeated interval, limit 10 excludes")
    out = ccbench("compare", bundle).stdout
    header = next(line for line in out.splitlines() if line.startswith("settled in "))
    assert "(repeated interval, limit 10, target 5.0%)" in header
    assert "repeated interval, limit 10 (no cost above 5.0%)" in out
    json_row = next(
        r for r in map(json.loads, ccbench("compare", bundle, "--json").stdout.splitlines()) if "workload" in r
    )
    # the record, the header and every row name one interval
    assert json_row["interval"] in header


def test_a_record_from_before_the_limit_reads_as_anytime_valid_in_the_header_too(tmp_path, ccbench):
    base, variant = drifting(np.random.default_rng(1))
    bundle = write_settled(tmp_path, "m", {DISK: base, TMPFS: variant})
    out = ccbench("compare", bundle).stdout
    assert "(anytime-valid interval, target 5.0%)" in out and "repeated interval" not in out
