"""The figures an execution could not give (mechanisms' missing_figures): the trial's `show` listed
"missing_figures 4.00 figures" as a metric row and the reasons were only in the raw samples. Now
one "not measured: <figure> (<reason>)" line per figure, in `show` (text and JSON) and in the run's
summary, and no metric row."""

import json

from bundles import sample, write
from conftest import run_ccbench

from ccbench.run.summary import not_measured, summarize

MISSING = [
    {"figure": "exit out 0x80", "why": "this kernel has no ioperm"},
    {"figure": "evidence latency", "why": "no configfs-tsm report interface"},
]


def _samples():
    measured = [
        sample(
            workload="mechanisms",
            kind="mechanisms",
            variant={},
            metric="exit_ns",
            unit="ns",
            value=15000.0 + r,
            repetition=r,
        )
        for r in range(3)
    ]
    missing = [
        sample(
            workload="mechanisms",
            kind="mechanisms",
            variant={},
            metric="missing_figures",
            unit="figures",
            better=None,
            value=2.0,
            repetition=r,
            warmup=r == 0,
            metadata={"missing": MISSING},
        )  # fmt: skip
        for r in range(3)
    ]
    return measured + missing


def test_missing_figures_are_lines_not_a_metric_row():
    samples = _samples()
    assert [row["metric"] for row in summarize(samples)] == ["exit_ns"]
    assert not_measured(samples) == [
        "not measured: exit out 0x80 (this kernel has no ioperm)",
        "not measured: evidence latency (no configfs-tsm report interface)",
    ]


def test_show_names_each_figure_not_measured(tmp_path):
    bundle = write(tmp_path, "vm", "none", _samples())
    shown = run_ccbench("show", bundle)
    assert shown.returncode == 0, shown.stderr
    assert "missing_figures" not in shown.stdout
    assert "not measured: exit out 0x80 (this kernel has no ioperm)" in shown.stdout
    as_json = json.loads(run_ccbench("show", bundle, "--json").stdout)
    assert len(as_json["not_measured"]) == 2
    assert all(row["metric"] != "missing_figures" for row in as_json["summary"])
