"""compare --json at many series: each row's raw directories (worked out on the engine's codes, one
list per distinct set), the rows as dicts without pandas' per-value reading, the lint without
every throughput sample when no cipher speed was measured."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
from bundles import write_samples

from ccbench.analysis.comparison import comparison
from ccbench.analysis.judgement.lint import lint_comparison
from ccbench.analysis.judgement.lint_cipher import THROUGHPUT, TRANSPORT_CEILING
from ccbench.analysis.rows.compare import records
from ccbench.analysis.samples.series import raw_sources
from ccbench.analysis.statistics.stats import minimum_detectable_effect


def _series_bundles(tmp_path):
    """Three bundles (two of one machine, one configuration each machine) with many series: cases x
    metrics, each measured by its own subset of executions; two cases differ only in their case
    text (the same params: one list of directories for both); warmups and samples without a raw
    directory. Returns the paths and {(params text, metric, host): the directories expected}."""
    rng = np.random.default_rng(3)
    expected: dict[tuple, set] = {}
    paths = []
    for number, (host, tee, runs) in enumerate([("plain", "none", range(0, 4)), ("snp", "sev-snp", range(0, 5))]):
        samples = []
        for case in range(12):
            params = {"host": f"h{case % 4}", "job": case // 4}
            for metric, better in (("throughput", "higher"), ("clat_p99", "lower"), ("iops", "higher")):
                # each series measured by some of the executions (every third case skips one)
                reps = [r for r in runs if not (case % 3 == 0 and r == 1)]
                for rep in reps:
                    for case_text in ("a", "b") if case == 5 else ("a",):
                        raw = None if (case == 7 and rep == 2) else f"raw/w/rep-{rep}"
                        samples.append(
                            {
                                "workload": "w",
                                "params": params,
                                "variant": {},
                                "metric": metric,
                                "better": better,
                                "value": float(100 + rng.normal(0, 1) + (5 if tee != "none" else 0)),
                                "repetition": rep,
                                "metadata": {"case": {"text": case_text}},
                                "execution": f"w||rep|{rep}",
                                "raw": raw,
                            }
                        )
                        if raw:
                            key = (json.dumps(params, sort_keys=True), metric, host)
                            expected.setdefault(key, set()).add(raw)
                # a warmup's directory is not a source of the measured numbers
                samples.append(
                    {
                        "workload": "w",
                        "params": params,
                        "variant": {},
                        "metric": metric,
                        "better": better,
                        "value": 1.0,
                        "repetition": 0,
                        "warmup": True,
                        "execution": "w||warmup|0",
                        "raw": "raw/w/warmup-0",
                    }
                )
        paths.append(write_samples(tmp_path / str(number), host, tee, samples))
    # a second run of the first machine: its directories join the first's (the same configuration)
    extra = [
        {
            "workload": "w",
            "params": {"host": "h0", "job": 0},
            "variant": {},
            "metric": "throughput",
            "better": "higher",
            "value": 99.0,
            "repetition": 9,
            "execution": "w||rep|9",
            "raw": "raw/w/rep-9",
        }
    ]
    paths.append(write_samples(tmp_path / "again", "plain", "none", extra))
    expected[(json.dumps({"host": "h0", "job": 0}, sort_keys=True), "throughput", "plain")].add("raw/w/rep-9")
    return paths, expected


def _host(config: str) -> str:
    return config.split(" / ")[0]


def test_each_rows_raw_directories_with_many_series(tmp_path, ccbench):
    paths, expected = _series_bundles(tmp_path)
    done = ccbench("compare", *paths, "--json")
    assert done.returncode == 0, done.stderr
    rows = [r for r in map(json.loads, done.stdout.splitlines()) if "finding" not in r]
    assert len(rows) == (12 + 1) * 3  # case 5 twice (two case texts); one configuration against the baseline
    for row in rows:
        params = json.dumps(row["params"], sort_keys=True)
        assert row["raw_baseline"] == sorted(expected[(params, row["metric"], _host(row["baseline"]))])
        assert row["raw"] == sorted(expected[(params, row["metric"], _host(row["config"]))])
    # every third case skipped rep-1 on both machines, case 7 lost rep-2's directory on both
    skipped = next(r for r in rows if r["params"] == {"host": "h3", "job": 0} and r["metric"] == "iops")
    assert skipped["raw"] == ["raw/w/rep-0", "raw/w/rep-2", "raw/w/rep-3", "raw/w/rep-4"]
    lost = next(r for r in rows if r["params"] == {"host": "h3", "job": 1} and r["metric"] == "iops")
    assert lost["raw_baseline"] == ["raw/w/rep-0", "raw/w/rep-1", "raw/w/rep-3"]


def test_raw_sources_against_a_per_sample_grouping(tmp_path):
    paths, _ = _series_bundles(tmp_path)
    result = comparison(paths, frame=True)
    sample = result.engine.sample
    measured = sample[~sample["warmup"] & (sample["raw"].fillna("") != "")]
    reference = {
        key: sorted(set(values))
        for key, values in measured.groupby(["workload", "params", "metric", "config"], sort=False)["raw"]
    }
    assert raw_sources(result.engine) == reference


def test_records_are_to_dicts_rows():
    table = pd.DataFrame(
        {
            "text": pd.array(["a", None, "c"], dtype=pd.StringDtype(na_value=np.nan)),
            "objects": [None, [1, 2], np.float64(1.5)],
            "floats": [1.0, np.nan, 3.5],
            "ints": np.array([1, 2, 3], dtype=np.int64),
            "flags": [True, False, True],
        }
    )

    def same(a, b):
        return type(a) is type(b) and (a == b or (isinstance(a, float) and math.isnan(a) and math.isnan(b)))

    for fast, slow in zip(records(table), table.to_dict(orient="records"), strict=True):
        assert list(fast) == list(slow) and all(same(fast[k], slow[k]) for k in slow)
    assert records(table.iloc[:0]) == []


def test_the_lint_reads_one_throughput_per_machine_without_a_cipher_speed(tmp_path):
    paths, _ = _series_bundles(tmp_path)
    result = comparison(paths, frame=False)
    every = result.engine.measured_frame(lambda group: group[3] in (THROUGHPUT, TRANSPORT_CEILING))
    facts = result.engine.facts.drop(columns=["first", "first_quiet"]).assign(metric=None, value=np.nan, warmup=False)
    full = lint_comparison(pd.concat([every, facts], ignore_index=True), result.table, result.machines)
    assert [f.to_dict() for f in result.findings(per_sample=False)] == [f.to_dict() for f in full]


def test_the_mde_where_only_some_rows_have_one():
    se = np.array([0.01, np.nan, 0.02, 0.01])
    dof = np.array([10.0, 5.0, 0.5, np.inf])
    out = minimum_detectable_effect(se, dof)
    assert out[0] == minimum_detectable_effect(0.01, 10.0) and np.isnan(out[1:]).all()
    assert np.isnan(minimum_detectable_effect(np.nan, 3.0))
