"""The pyperformance workload: a real (fast, one-benchmark) pyperformance run."""

from __future__ import annotations

import importlib.util
import json

import pytest

from ccbench.workloads import workload_class
from ccbench.workloads.base import ExecutionContext, PrepareContext
from ccbench.workloads.pyperformance import Pyperformance, PyperformanceParams, parse_results


def test_registered_and_params():
    assert workload_class("pyperformance") is Pyperformance
    assert PyperformanceParams().selection() == "default"
    assert PyperformanceParams(suite="math").selection() == "math"
    assert PyperformanceParams(benchmarks=["nbody", "richards"]).selection() == "nbody,richards"
    with pytest.raises(ValueError, match="either suite or benchmarks"):
        PyperformanceParams(suite="default", benchmarks=["nbody"])
    with pytest.raises(ValueError, match="one name per list item"):
        PyperformanceParams(benchmarks=["nbody,richards"])
    with pytest.raises(ValueError):
        PyperformanceParams(fast=True, rigorous=True)


def test_parse_results_skips_calibration_runs():
    document = {
        "metadata": {"unit": "second", "hostname": "h"},
        "benchmarks": [
            {
                "metadata": {"name": "nbody", "loops": 4},
                "runs": [{"metadata": {"calibrate_loops": 4}}, {"values": [0.1, 0.3]}, {"values": [0.2]}],
            },
            {"metadata": {"name": "empty"}, "runs": [{"metadata": {}}]},
        ],
    }
    measurements = parse_results(document)
    # every value one sample (ccbench.formats.pyperf), numbered by the pyperf run it came from
    assert [m.value for m in measurements] == [0.1, 0.3, 0.2]
    assert {(m.metric, m.unit) for m in measurements} == {("time_s", "s")}
    assert {m.case["benchmark"] for m in measurements} == {"nbody"}
    assert [m.metadata["run"] for m in measurements] == [0, 0, 1]
    assert {m.metadata["loops"] for m in measurements} == {4}


@pytest.mark.slow
def test_real_pyperformance_run_of_one_benchmark(tmp_path):
    # the benchmark environment lives in the user's cache (~/.cache/ccbench/pyperformance) as in real
    # runs: created once (pip-installing it takes ~15 s), reused afterwards
    if importlib.util.find_spec("pyperformance") is None:
        pytest.skip("pyperformance is not installed: run 'bash scripts/setup.sh --with datascience'")
    workload = Pyperformance("pyperformance-nbody", PyperformanceParams(benchmarks=["nbody"], fast=True))
    assert workload.requirements() is None
    workload.prepare(PrepareContext("pyperformance-nbody", tmp_path, tmp_path / "raw-prepare", {}))
    ctx = ExecutionContext("pyperformance-nbody", tmp_path, tmp_path / "raw", 0, False, {}, timeout=300)
    measurements = workload.run(ctx)
    times = [m for m in measurements if m.metric == "time_s"]
    assert {m.case["benchmark"] for m in times} == {"nbody"}
    document = json.loads((ctx.raw_dir / "pyperformance.json").read_text())
    # every value pyperf measured is one sample (seconds), however fast the machine ran them
    values = [v for run in document["benchmarks"][0]["runs"] for v in run.get("values", [])]
    assert [m.value for m in times] == values and len(values) >= 3 and all(v > 0 for v in values)
    assert {m.unit for m in times} == {"s"}
    # pyperf hoists metadata shared by all benchmarks (with one benchmark: its name) to the top
    assert {**document["metadata"], **document["benchmarks"][0].get("metadata", {})}["name"] == "nbody"
    assert any(m.metric == "wall_s" for m in measurements)


def test_parse_results_on_captured_pyperf_output():
    """tests/data/pyperf/timeit-sum-range.json: written by pyperf 2.10 (``pyperf timeit --fast -p 2``),
    a calibration run and two worker runs with warmups; the benchmark's name is in the suite's
    metadata, as pyperf writes a file with one benchmark."""
    from pathlib import Path

    document = json.loads((Path(__file__).parent / "data" / "pyperf" / "timeit-sum-range.json").read_text())
    measurements = parse_results(document)
    runs = document["benchmarks"][0]["runs"]
    values = [v for run in runs for v in run.get("values", [])]
    assert len(values) == 2 * (len(runs) - 1)  # the calibration run has warmups only
    assert [m.value for m in measurements] == values
    assert {(m.case["benchmark"], m.unit, m.metadata["loops"]) for m in measurements} == {("sum_range", "s", 4096)}
