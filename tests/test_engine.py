"""The analysis engine (ccbench.analysis.samples.engine): the SampleSet that compare and report read gives the
same comparison and summary as the per-sample frame, the machine level of the statistics, and the
bounded per-sample frame of a report."""

import json

import numpy as np
import pandas as pd
import pytest
from bundles import write_bundles, write_samples

import ccbench
from ccbench.analysis.rows.compare import compare
from ccbench.analysis.rows.reduce import frame_statistics, set_statistics, summary_by_config
from ccbench.analysis.samples import codes, engine
from ccbench.analysis.samples.load import load_bundles


def both(paths, **kwargs):
    """(the frame's comparison, the SampleSet's) of the same bundles."""
    frame = ccbench.load(paths)
    samples = engine.sample_set(load_bundles(paths, samples=False))
    return compare(frame, **kwargs), compare(samples, **kwargs)


def test_the_sample_set_compares_as_the_frame_does(tmp_path):
    paths = write_bundles(tmp_path)
    from_frame, from_set = both(paths)
    assert len(from_frame) > 10
    pd.testing.assert_frame_equal(from_set, from_frame)
    from_frame, from_set = both(paths, baseline="snp")
    pd.testing.assert_frame_equal(from_set, from_frame)


def test_contended_samples_are_left_out_alike(tmp_path):
    values = [10.0, 10.5, 9.8, 10.1, 30.0]
    rows = [
        {
            "workload": "w",
            "variant": {"storage": "disk"},
            "metric": "t",
            "value": v,
            "repetition": i,
            "contended": i == 4,
        }
        for i, v in enumerate(values)
    ]
    slow = [dict(r, value=r["value"] * 1.2) for r in rows]
    paths = [write_samples(tmp_path, "a", "none", rows), write_samples(tmp_path, "b", "sev-snp", slow)]
    for exclude in (False, True):
        from_frame, from_set = both(paths, exclude_contended=exclude)
        pd.testing.assert_frame_equal(from_set, from_frame)
    assert from_set["n"].tolist() == [4] and from_set["contended"].tolist() == [0]


def test_the_summary_is_the_frames(tmp_path):
    paths = write_bundles(tmp_path)
    frame = ccbench.load(paths)
    samples = engine.sample_set(load_bundles(paths, samples=False))
    ours, theirs = summary_by_config(samples), summary_by_config(frame)
    assert len(ours) == len(theirs) > 10
    for column in ("workload", "params", "case", "metric", "config", "unit", "better", "n"):
        assert ours[column].tolist() == theirs[column].tolist(), column
    for column in ("median", "mean", "std", "q1", "q3", "cv"):
        np.testing.assert_allclose(ours[column].to_numpy(float), theirs[column].to_numpy(float), rtol=1e-12)


def test_machine_level_statistics(tmp_path):
    """Two replicas sharing a label (one configuration, two machine_ids) and a third machine alone:
    machines, the mean of the machines' mean logs and their variance, computed here by hand."""
    rng = np.random.default_rng(3)
    first, second = 10 * np.exp(rng.normal(0, 0.02, 6)), 11 * np.exp(rng.normal(0, 0.02, 4))
    rows = lambda values: [  # noqa: E731
        {"workload": "w", "variant": {}, "metric": "t", "value": float(v), "repetition": i}
        for i, v in enumerate(values)
    ]
    paths = [
        write_samples(tmp_path / "1", "replica-1", "none", rows(first)),
        write_samples(tmp_path / "2", "replica-2", "none", rows(second)),
    ]
    labels = {str(p.resolve()): "fleet" for p in paths}
    frame = ccbench.load(paths, labels=labels)
    assert frame["machine_id"].nunique() == 2 and frame["config"].nunique() == 1
    stats = frame_statistics(frame)
    row = stats.iloc[0]
    means = [np.log(first).mean(), np.log(second).mean()]
    assert row["machines"] == 2 and row["n"] == 10
    assert row["m_log_mean"] == pytest.approx(np.mean(means))
    assert row["m_log_var"] == pytest.approx(np.var(means, ddof=1))
    assert row["log_mean"] == pytest.approx(np.log(np.concatenate([first, second])).mean())
    # the engine's reading of the bundles gives the same
    samples = engine.sample_set(load_bundles(paths, samples=False), labels)
    from_set = set_statistics(samples, False)
    assert from_set[["machines", "m_log_mean", "m_log_var"]].iloc[0].tolist() == pytest.approx(
        [2, row["m_log_mean"], row["m_log_var"]]
    )
    # one machine: no variance over machines
    alone = frame_statistics(ccbench.load(paths[:1])).iloc[0]
    assert alone["machines"] == 1 and np.isnan(alone["m_log_var"])


def test_machine_id_is_the_probes_when_recorded(tmp_path):
    path = write_samples(
        tmp_path, "h", "none", [{"workload": "w", "variant": {}, "metric": "t", "value": 1.0, "repetition": 0}]
    )
    manifest = json.loads((path / "manifest.json").read_text())
    manifest["environment"]["machine_id"] = "0123abcd"
    (path / "manifest.json").write_text(json.dumps(manifest))
    assert ccbench.load(path)["machine_id"].tolist() == ["0123abcd"]
    other = write_samples(
        tmp_path / "x", "h2", "none", [{"workload": "w", "variant": {}, "metric": "t", "value": 1.0, "repetition": 0}]
    )
    assert ccbench.load(other)["machine_id"].tolist() == ["h2"]


def test_a_bundle_names_its_machine_by_label_else_hostname_else_directory(tmp_path):
    """probe.facts.machine_of, what the engine, the per-sample view and the history name a bundle's
    machine by: the label given for the bundle's resolved path wins; a probe without a hostname
    leaves the directory's name, without a machine_id the hostname, else the bundle's path."""
    from ccbench.probe.facts import machine_of

    bundle = tmp_path / "run-1"
    bundle.mkdir()
    probe = {"hostname": "h", "machine_id": "0123abcd", "tee": {"technology": "sev-snp"}}
    assert machine_of(probe, bundle, {}) == ("h", "0123abcd", "sev-snp")
    assert machine_of(probe, tmp_path / "." / "run-1", {str(bundle.resolve()): "nightly"})[0] == "nightly"
    assert machine_of({"hostname": "h"}, bundle, {"/elsewhere": "other"}) == ("h", "h", "unknown")
    assert machine_of(None, bundle, {}) == ("run-1", str(bundle), "unknown")


def test_a_large_set_gives_the_report_a_systematic_sample(tmp_path, monkeypatch):
    """Beyond SAMPLE_BUDGET samples the per-sample frame keeps every k-th of each group and
    configuration; the counts and the comparison still come from every sample."""
    paths = write_bundles(tmp_path)
    everything = ccbench.load(paths)
    monkeypatch.setattr(engine, "SAMPLE_BUDGET", len(everything) // 4 + 1)
    samples = engine.sample_set(load_bundles(paths, samples=False))
    assert samples.stride == 4 and samples.total == len(everything)
    keys = ["bundle", "workload", "params", "case", "metric", "config"]
    kept = samples.sample.groupby(keys, sort=False).size()
    whole = everything.groupby(keys, sort=False).size()
    assert (kept == np.ceil(whole / 4).astype(int)).all()
    assert samples.config_counts["samples"].sum() == len(everything)
    pd.testing.assert_frame_equal(compare(samples), compare(everything))


def test_a_first_load_converts_in_the_helper_too(tmp_path, monkeypatch):
    """Bundles without samples.parquet are converted into the cache, some by the helper process;
    the comparison is the same as one process gives."""
    from ccbench.basics.helper import Helper
    from ccbench.bundle.columnar import cache_dir

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    paths = write_bundles(tmp_path / "bundles")
    assert not any((p / "samples.parquet").exists() for p in paths)
    with Helper(2) as helper:
        shared = engine.sample_set(load_bundles(paths, samples=False), helper=helper)
    assert len(list(cache_dir().glob("*.parquet"))) == len(paths)
    pd.testing.assert_frame_equal(compare(shared), compare(ccbench.load(paths)))


def test_the_engines_duckdb_draws_no_progress_bar(tmp_path):
    # DuckDB's progress bar is on by default and drawn on stdout past two seconds: into a compare's JSON
    samples = engine.sample_set(load_bundles(write_bundles(tmp_path), samples=False))
    for connection in (samples.connection(), engine.connect()):
        assert connection.sql("SELECT current_setting('enable_progress_bar')").fetchall() == [(False,)]
        connection.close()


def test_the_facts_and_executions_are_the_frames_first_rows(tmp_path):
    """Each configuration's facts with its first measured row (and first uncontended one), and the
    distinct executions, as the per-sample frame gives them: warmups, contended executions, rows
    without a direction and a workload's own cipher mixed in, in two bundles (row numbers run on)."""
    from ccbench.analysis.samples.load import CAUSE_KEYS

    def rows(shift):
        out = []
        for rep in range(4):
            for storage in ("disk", "encrypted"):
                common = {"workload": "w", "variant": {"storage": storage}, "repetition": rep}
                common["execution"] = f"w|storage={storage}|rep|{rep}"
                out.append({**common, "metric": "t", "value": 1.0 + rep, "warmup": rep == 0})
                out.append({**common, "metric": "n", "value": 2.0, "better": None})  # no direction
                out.append({**common, "metric": "t", "value": 3.0, "contended": rep < 2 + shift})
                cipher = "TLS_AES_256_GCM_SHA384" if rep % 2 else None
                out.append({**common, "metric": "tls", "value": 4.0, "metadata": {"transport_cipher": cipher}})
        return out

    paths = [write_samples(tmp_path, "a", "none", rows(0)), write_samples(tmp_path, "b", "sev-snp", rows(1))]
    frame = ccbench.load(paths)
    samples = engine.sample_set(load_bundles(paths, samples=False), frame=False)
    keys = ["bundle", "machine", "machine_id", "tee", "storage", "transport", "config", *CAUSE_KEYS]
    keyed = frame[keys].astype(object).where(frame[keys].notna(), None).apply(tuple, axis=1)
    comparable = frame["better"].isin(codes.DIRECTED) & ~frame["warmup"].astype(bool)
    quiet = comparable & ~frame["contended"].astype(bool)
    expected = [
        (*key, float(frame.index[(keyed == key) & comparable].min()), float(frame.index[(keyed == key) & quiet].min()))
        for key in pd.unique(keyed)
    ]
    facts = samples.facts[[*keys, "first", "first_quiet"]].astype(object)
    assert [tuple(None if pd.isna(v) else v for v in row) for row in facts.itertuples(index=False)] == expected
    assert len(expected) == 2 * 2 * 2 and any(key[7 + CAUSE_KEYS.index("transport_cipher")] for key in expected)
    columns = ["bundle", "execution", "workload", "config", "repetition", "warmup", "contended"]
    theirs = frame[columns].drop_duplicates().astype(object).reset_index(drop=True)
    pd.testing.assert_frame_equal(samples.executions[columns].astype(object), theirs)
    # 16 (bundle, storage, rep), 4 more for the first rep's warmups, 4 + 6 for the contended rows
    assert len(theirs) == 16 + 4 + 10


@pytest.mark.parametrize("high", [1, 7, 5_000, 2**40])
def test_first_rows_and_sorted_unique_are_pandas_and_numpys(high):
    """Both ways of each (a table of first positions for a few small keys, else hashing or sorting)
    give drop_duplicates' rows and np.unique's three arrays."""
    rng = np.random.default_rng(high)
    values = rng.integers(0, high, 3_000)
    flags = rng.integers(0, 2, 3_000).astype(bool)
    expected = np.flatnonzero(~pd.DataFrame({"v": values, "f": flags}).duplicated())
    np.testing.assert_array_equal(codes.first_rows(values, flags), expected)
    firsts = np.sort(np.unique(values, return_index=True)[1])  # in row order
    np.testing.assert_array_equal(codes.first_rows(values.astype(np.int32) if high < 2**31 else values), firsts)
    for ours, numpys in zip(codes.sorted_unique(values), np.unique(values, return_index=True, return_inverse=True)):
        np.testing.assert_array_equal(ours, numpys.reshape(-1))
    assert codes.first_rows(values[:0]).tolist() == [] and len(codes.sorted_unique(values[:0])[0]) == 0
