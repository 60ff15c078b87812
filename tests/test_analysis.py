"""Loading, the comparison statistics (validated by simulation) and the overhead model."""

import json

import numpy as np
import pandas as pd
import pytest
from bundles import write_bundle, write_samples

import ccbench
from ccbench.analysis.judgement.verdict import verdicts
from ccbench.analysis.rows.compare import compare
from ccbench.analysis.rows.overhead import overhead_model
from ccbench.analysis.statistics.stats import SKEWED, ratio_interval


def test_load_labels_configurations(tmp_path):
    plain = write_bundle(tmp_path, "d2as", "none", {(("storage", "disk"),): [1.0, 1.1, 1.0]}, warmups=[5.0])
    cvm = write_bundle(
        tmp_path,
        "dc2as",
        "sev-snp",
        {
            (("storage", "disk"),): [1.2, 1.3, 1.2],
            (("storage", "encrypted"), ("storage_mechanism", "fscrypt")): [2.0, 2.1, 2.2],
        },
    )
    frame = ccbench.load([plain, cvm], labels={str(cvm): "azure-dc2as"})
    assert set(frame["config"]) == {
        "d2as / no TEE / disk",
        "azure-dc2as / SEV-SNP / disk",
        "azure-dc2as / SEV-SNP / fscrypt",
    }
    assert frame["warmup"].sum() == 1
    for column in (
        "bundle",
        "machine",
        "tee",
        "storage",
        "transport",
        "config",
        "workload",
        "metric",
        "value",
        "warmup",
    ):
        assert column in frame.columns
    # a directory of bundles loads too
    assert len(ccbench.load(tmp_path)) == len(frame)


def test_compare_directions_and_flags(tmp_path):
    base = write_bundle(tmp_path, "a", "none", {(): [100.0, 101.0, 99.0, 100.5]}, metric="throughput", better="higher")
    slow = write_bundle(tmp_path, "b", "tdx", {(): [80.0, 81.0, 79.0, 80.5]}, metric="throughput", better="higher")
    table = compare(ccbench.load([base, slow]))
    row = table.iloc[0]
    assert row["baseline"] == "a / no TEE" and row["config"] == "b / TDX"
    assert row["ratio"] == pytest.approx(0.8, rel=0.01)
    assert row["verdict"] == "slower" and row["significant"]
    assert row["overhead_percent"] == pytest.approx(25.0, rel=0.02)
    assert row["ci_low"] < row["ratio"] < row["ci_high"] < 1
    few = write_bundle(tmp_path, "c", "none", {(): [1.0, 1.5]})
    noisy = write_bundle(tmp_path, "d", "none", {(): [1.0, 1.3, 0.8, 1.2]})
    row = compare(ccbench.load([few, noisy])).iloc[0]
    assert "not enough samples" in row["flags"] and "noisy" in row["flags"] and not row["significant"]


def test_a_significant_row_whose_medians_move_the_other_way_is_flagged_skewed(tmp_path):
    # most of the variant's executions are 1% faster, eight of twenty are 3x slower: the ratio of
    # geometric means calls a cost the medians (10.0 -> 9.9) do not show
    rng = np.random.default_rng(1)
    plain = list(10.0 * np.exp(rng.normal(0, 0.005, 20)))
    tail = [9.9 * float(v) for v in np.exp(rng.normal(0, 0.005, 12))] + [
        30.0 * float(v) for v in np.exp(rng.normal(0, 0.005, 8))
    ]
    table = compare(
        ccbench.load([write_bundle(tmp_path, "a", "none", {(): plain}), write_bundle(tmp_path, "b", "tdx", {(): tail})])
    )
    row = table.iloc[0]
    assert row["median"] < row["baseline_median"] and row["ratio"] > 1.3 and row["significant"]
    assert SKEWED in row["flags"]
    # and the layer's sentence says so
    (layer,) = verdicts(table)
    assert layer.skewed == 1 and "1 significant comparison skewed: the medians move the other way" in layer.sentence()
    # a row whose medians and ratio agree is not
    steady = [11.0 * float(v) for v in np.exp(rng.normal(0, 0.005, 20))]
    row = compare(ccbench.load([tmp_path / "a", write_bundle(tmp_path, "c", "tdx", {(): steady})])).iloc[0]
    assert row["significant"] and SKEWED not in row["flags"]


def test_aa_false_positive_rate_at_the_default_sample_size():
    """1000 A/A comparisons at n = 3 (the plans' default repetitions): at most about 5% significant."""
    rng = np.random.default_rng(7)
    trials, n = 2000, 3
    positives = 0
    for _ in range(trials):
        a = 10 * np.exp(rng.normal(0, 0.02, n))
        b = 10 * np.exp(rng.normal(0, 0.02, n))
        positives += ratio_interval(a, b).significant
    rate = positives / trials
    assert rate <= 0.06, rate  # nominal 5%; 0.06 leaves room for simulation error (SE ~0.5%)


def test_aa_false_positive_rate_with_skewed_noise():
    """Run times are skewed (a slow tail), not log-normal: the rate must still stay near 5%."""
    rng = np.random.default_rng(11)
    trials, n = 1000, 5
    positives = sum(
        ratio_interval(10 + rng.gamma(2.0, 0.1, n), 10 + rng.gamma(2.0, 0.1, n)).significant for _ in range(trials)
    )
    assert positives / trials <= 0.06


def test_power_for_a_five_percent_slowdown_at_one_percent_cv():
    rng = np.random.default_rng(3)
    trials, n = 1000, 10
    detected = 0
    for _ in range(trials):
        a = 10 * (1 + rng.normal(0, 0.01, n))
        b = 10.5 * (1 + rng.normal(0, 0.01, n))
        interval = ratio_interval(a, b)
        detected += interval.significant and interval.ratio > 1
    assert detected / trials >= 0.9


def test_overhead_model_recovers_known_coefficients():
    rng = np.random.default_rng(5)
    rows = []
    t_base, c_tee, c_tls = 20.0, 0.15, 0.07
    for tee in ("none", "tdx"):
        for transport in ("plain", "tls"):
            x_tee, x_tls = tee != "none", transport == "tls"
            for rep in range(10):
                value = t_base * (1 + c_tee * x_tee + c_tls * x_tls) * (1 + rng.normal(0, 0.01))
                rows.append(
                    {
                        "bundle": tee,
                        "machine": "m-" + tee,
                        "tee": tee,
                        "storage": None,
                        "transport": transport,
                        "config": f"{tee}/{transport}",
                        "workload": "fl",
                        "kind": "command",
                        "params": "{}",
                        "case": "",
                        "metric": "time",
                        "unit": "s",
                        "value": value,
                        "better": "lower",
                        "repetition": rep,
                        "warmup": False,
                        "timestamp": "",
                    }
                )
    frame = pd.DataFrame(rows)
    model = overhead_model(frame, bootstrap=100)
    row = model[model["workload"] == "fl"].iloc[0]
    assert row["t_base"] == pytest.approx(t_base, rel=0.02)
    assert row["C[tee]"] == pytest.approx(c_tee, abs=0.02)
    assert row["C[transport:tls]"] == pytest.approx(c_tls, abs=0.02)
    assert row["C[tee] low"] <= row["C[tee]"] <= row["C[tee] high"]
    assert "machine" in row["confounded"]


def test_compare_rows_match_ratio_interval():
    """compare() computes all rows at once; each must equal the validated scalar method on its pair
    (groups missing a configuration, n = 1 and 2, a non-positive value and a baseline stand-in included)."""
    from ccbench.analysis.statistics.stats import MIN_SAMPLES, NOISY_CV, coefficient_of_variation

    rng = np.random.default_rng(3)
    rows = []
    configs = [
        ("vm", "none", "disk"),
        ("vm", "none", "fscrypt"),
        ("cvm", "sev-snp", "disk"),
        ("cvm", "sev-snp", "tmpfs"),
    ]
    for group in range(40):
        workload, metric = f"w{group % 7}", ("time", "throughput")[group % 2]
        better = "lower" if metric == "time" else "higher"
        for machine, tee, storage in configs:
            n = int(rng.choice([0, 1, 2, 3, 5, 10])) if group % 5 else 6
            if group == 3:
                storage = None  # a workload without storage variants: "vm / no TEE" stands in for the baseline
            values = rng.lognormal(np.log(10 + group), rng.choice([0.001, 0.02, 0.2]), n)
            if group == 7 and n:
                values[0] = 0.0
            tee_name = {"none": "no TEE", "sev-snp": "SEV-SNP"}[tee]
            config = " / ".join(p for p in (machine, tee_name, storage) if p)
            for rep, value in enumerate(values):
                rows.append(
                    {
                        "bundle": machine,
                        "machine": machine,
                        "tee": tee,
                        "storage": storage,
                        "transport": None,
                        "config": config,
                        "workload": workload,
                        "kind": "command",
                        "params": f'{{"g": {group}}}',
                        "case": f"c{group}",
                        "metric": metric,
                        "unit": "s",
                        "value": float(value),
                        "better": better,
                        "repetition": rep,
                        "warmup": False,
                        "timestamp": "",
                    }
                )
    frame = pd.DataFrame(rows)
    table = compare(frame, "vm / no TEE / disk")
    assert len(table) > 60
    checked = 0
    for row in table.itertuples(index=False):
        group = frame[(frame["params"] == row.params) & (frame["metric"] == row.metric)]
        base = group[group["config"] == row.baseline]["value"].to_numpy()
        other = group[group["config"] == row.config]["value"].to_numpy()
        assert (row.n_baseline, row.n) == (len(base), len(other))
        assert row.median == pytest.approx(np.median(other)) and row.baseline_median == pytest.approx(np.median(base))
        for got, want in ((row.cv_baseline, coefficient_of_variation(base)), (row.cv, coefficient_of_variation(other))):
            assert got == pytest.approx(want) if want is not None else (got is None or np.isnan(got))
        interval = ratio_interval(base, other)
        few = len(base) < MIN_SAMPLES or len(other) < MIN_SAMPLES
        if interval is None:
            assert np.isnan(row.ci_low) and not row.significant
        else:
            checked += 1
            assert (row.ratio, row.ci_low, row.ci_high) == pytest.approx((interval.ratio, interval.low, interval.high))
            assert row.p_value == pytest.approx(interval.p_value, abs=1e-12)
            assert row.significant == (interval.significant and not few)
        noisy = any(
            cv is not None and cv > NOISY_CV for cv in (coefficient_of_variation(base), coefficient_of_variation(other))
        )
        assert ("noisy" in row.flags) == noisy and ("not enough samples" in row.flags) == few
    assert checked > 30
    assert set(table[table["case"] == "c3"]["baseline"]) == {"vm / no TEE"}


def test_bootstrap_refits_agree_with_scipy_nnls():
    """The enumerated-support NNLS used for bootstrap draws gives scipy's solution, including
    designs with a confounded (duplicated) column and targets that pull a coefficient below zero."""
    from scipy.optimize import nnls

    from ccbench.analysis.rows.overhead import _fit_many

    rng = np.random.default_rng(11)
    for unknowns in (2, 3, 4):
        for configs in (unknowns, unknowns + 2):
            design = np.column_stack([np.ones(configs), rng.integers(0, 2, size=(configs, unknowns - 1))]).astype(float)
            design *= rng.uniform(1, 3, size=(configs, 1))  # sqrt(n) weights
            targets = rng.normal(10, 4, size=(50, configs))
            fitted = _fit_many(design, targets)
            for row, solution in zip(targets, fitted):
                reference, reference_residual = nnls(design, row)
                assert (solution >= 0).all()
                assert np.linalg.norm(design @ solution - row) == pytest.approx(reference_residual, rel=1e-6, abs=1e-9)
                if np.linalg.matrix_rank(design) == unknowns:
                    np.testing.assert_allclose(solution, reference, rtol=1e-6, atol=1e-8)
    # the pooled bootstrap: every draw its own design (resampled rows), solved at once
    design = np.column_stack([np.ones(8), rng.integers(0, 2, size=(8, 2))]).astype(float)
    y = rng.normal(10, 4, size=8)
    index = rng.integers(0, 8, size=(60, 8))
    for solution, rows in zip(_fit_many(design[index], y[index]), index):
        reference, reference_residual = nnls(design[rows], y[rows])
        assert (solution >= 0).all()
        assert np.linalg.norm(design[rows] @ solution - y[rows]) == pytest.approx(
            reference_residual, rel=1e-6, abs=1e-9
        )
        if np.linalg.matrix_rank(design[rows]) == 3:
            np.testing.assert_allclose(solution, reference, rtol=1e-6, atol=1e-8)
    confounded = np.array([[1, 0, 0], [1, 1, 1], [1, 0, 0], [1, 1, 1]], dtype=float)
    targets = np.array([[10, 12, 10, 12], [10, 8, 10, 8]], dtype=float)
    fitted = _fit_many(confounded, targets)
    np.testing.assert_allclose(fitted[0] @ confounded.T, targets[0])
    assert fitted[0][1:].sum() == pytest.approx(2.0) and 0.0 in fitted[0][1:]  # one column carries it
    np.testing.assert_allclose(fitted[1], [9.0, 0.0, 0.0])  # slower is impossible: C = 0, mean fit


def test_compare_cli_json_and_errors(tmp_path, ccbench):
    base = write_bundle(tmp_path, "a", "none", {(): [1.0, 1.01, 0.99]})
    other = write_bundle(tmp_path, "b", "sev-snp", {(): [1.2, 1.21, 1.19]})
    done = ccbench("compare", base, other, "--json")
    assert done.returncode == 0, done.stderr
    rows = [r for r in map(json.loads, done.stdout.splitlines()) if "finding" not in r]  # findings follow the rows
    for key in ("workload", "metric", "baseline", "config", "ratio", "ci_low", "ci_high", "significant"):
        assert key in rows[0]
    assert rows[0]["significant"] is True and rows[0]["verdict"] == "slower"
    done = ccbench("compare", base, other, "--baseline", "SEV-SNP")
    assert done.returncode == 0 and "faster" in done.stdout
    done = ccbench("compare", base, other, "--baseline", "nothing-like-this")
    assert done.returncode == 2 and "no such configuration" in done.stderr
    with open(other / "samples.jsonl", "r+") as handle:
        lines = handle.read().splitlines()
        handle.seek(0)
        handle.write("\n".join([lines[0], "garbage", *lines[1:]]) + "\n")
    done = ccbench("compare", base, other)
    assert done.returncode == 3 and "changed: samples.jsonl" in done.stderr  # it no longer verifies
    done = ccbench("compare", base, other, "--allow-unverified")
    assert done.returncode == 2 and "samples.jsonl:2" in done.stderr and "Traceback" not in done.stderr


def test_a_machine_label_selects_that_machines_configurations_per_workload(tmp_path, ccbench):
    """--baseline first: "first / no TEE / disk" for fio and "first / no TEE" for prime (no storage variant)."""
    bundles = []
    for host, tee, factor in (("first", "none", 1.0), ("second", "sev-snp", 1.2)):
        samples = [
            {"workload": "prime", "variant": {}, "metric": "time", "value": factor * v, "repetition": i}
            for i, v in enumerate([1.0, 1.01, 0.99])
        ]
        samples += [
            {"workload": "fio", "variant": {"storage": "disk"}, "metric": "time", "value": factor * v, "repetition": i}
            for i, v in enumerate([2.0, 2.02, 1.98])
        ]
        bundles.append(write_samples(tmp_path, host, tee, samples))
    done = ccbench("compare", *bundles, "--baseline", "first", "--json")
    assert done.returncode == 0, done.stderr
    rows = {r["workload"]: r for r in map(json.loads, done.stdout.splitlines()) if "finding" not in r}
    assert rows["prime"]["baseline"] == "first / no TEE" and rows["prime"]["config"] == "second / SEV-SNP"
    assert rows["fio"]["baseline"] == "first / no TEE / disk" and rows["fio"]["config"] == "second / SEV-SNP / disk"
    assert rows["fio"]["layer"] == "TEE: SEV-SNP"
    # a part of a label that still names several different configurations stays an error
    done = ccbench("compare", *bundles, "--baseline", "disk")
    assert done.returncode == 2 and "matches several configurations" in done.stderr


def test_contended_executions_flagged_counted_and_excluded(tmp_path, ccbench):
    base = write_samples(
        tmp_path,
        "a",
        "none",
        [
            {"workload": "w", "variant": {}, "metric": "time", "value": v, "repetition": i}
            for i, v in enumerate([1.0, 1.01, 0.99, 1.0])
        ],
    )
    # the fourth execution of b ran beside other work: slower and flagged
    other = write_samples(
        tmp_path,
        "b",
        "none",
        [
            {
                "workload": "w",
                "variant": {},
                "metric": "time",
                "value": v,
                "repetition": i,
                "contended": i == 3,
                "execution": f"w||rep|{i}",
                "raw": f"raw/w/rep-{i}",
            }
            for i, v in enumerate([1.0, 1.02, 0.98, 1.6])
        ],
    )
    frame = ccbench_load([base, other])
    assert frame["contended"].sum() == 1 and set(frame[frame["bundle"] == str(base)]["execution"]) == {""}
    row = compare(frame).iloc[0]
    assert (row["contended_baseline"], row["contended"]) == (0, 1) and "contended" in row["flags"]
    excluded = compare(frame, exclude_contended=True).iloc[0]
    assert excluded["n"] == 3 and excluded["contended"] == 0 and "contended" not in excluded["flags"]
    done = ccbench("compare", base, other, "--json")
    record = json.loads(done.stdout.splitlines()[0])
    assert (
        record["contended"] == 1
        and record["raw"] == [f"raw/w/rep-{i}" for i in range(4)]
        and record["raw_baseline"] == []
    )
    done = ccbench("compare", base, other, "--exclude-contended", "--json")
    assert json.loads(done.stdout.splitlines()[0])["n"] == 3
    summary = ccbench("compare", base, other, "--summary")
    assert summary.returncode == 0 and "1 of 8 executions contended" in summary.stdout


def ccbench_load(paths):
    return ccbench.load(paths)


def test_a_software_cipher_is_named_as_the_likely_cause(tmp_path):
    from ccbench.analysis.judgement.causes import driver_accelerated, storage_cause
    from ccbench.analysis.judgement.verdict import verdicts

    assert driver_accelerated("xts(ecb(aes-fixed-time))", None) is False
    assert driver_accelerated("xts-aes-aesni", None) is True
    assert driver_accelerated("xts-aes-vaes-avx2", None) is True
    assert "in software" in storage_cause("xts(ecb(aes-generic))", False)
    samples = [
        {"workload": "fio", "variant": {"storage": "disk"}, "metric": "time", "value": v, "repetition": i}
        for i, v in enumerate([1.0, 1.01, 0.99])
    ]
    samples += [
        {
            "workload": "fio",
            "variant": {
                "storage": "encrypted",
                "storage_mechanism": "fscrypt",
                "storage_cipher_driver": "xts(ecb(aes-fixed-time))",
                "storage_cipher_accelerated": False,
            },
            "metric": "time",
            "value": v,
            "repetition": i,
        }
        for i, v in enumerate([3.0, 3.1, 2.9])
    ]
    samples += [
        {
            "workload": "echo",
            "variant": {
                "transport": t,
                "transport_cipher": "TLS13_AES_256_GCM_SHA384",
                "transport_aes_accelerated": True,
            }
            if t == "tls"
            else {"transport": t},
            "metric": "time",
            "value": v * (1.1 if t == "tls" else 1),
            "repetition": i,
        }
        for t in ("plain", "tls")
        for i, v in enumerate([1.0, 1.01, 0.99])
    ]
    frame = ccbench.load(write_samples(tmp_path, "vm", "none", samples))
    assert set(frame["storage_cipher_driver"].dropna()) == {"xts(ecb(aes-fixed-time))"}
    items = {v.layer: v for v in verdicts(compare(frame), frame)}
    storage = items["storage encryption: fscrypt"]
    assert any(
        "the kernel served AES-XTS in software" in c and "not intrinsic to encryption at rest" in c
        for c in storage.causes
    )
    assert storage.overhead == pytest.approx(200, rel=0.02) and storage.distinguishable
    assert "the kernel served AES-XTS in software" in storage.sentence()  # the verdict's own words name the cause
    assert any("TLS13_AES_256_GCM_SHA384 with the CPU's AES instructions" in c for c in items["TLS"].causes)


def test_one_coefficient_of_variation_everywhere():
    from ccbench.analysis.rows.reduce import summary_by_config
    from ccbench.analysis.statistics.stats import coefficient_of_variation, coefficients_of_variation

    values = np.array([1.0, 1.2, 0.9, 1.1])
    assert coefficients_of_variation([values.std(ddof=1)], [values.mean()], [4])[0] == pytest.approx(
        coefficient_of_variation(values)
    )
    assert np.isnan(coefficients_of_variation([0.0], [1.0], [1])[0]) and coefficient_of_variation([1.0]) is None
    frame = pd.DataFrame(
        {
            "workload": "w",
            "params": "{}",
            "case": "",
            "metric": "t",
            "config": "c",
            "unit": "s",
            "better": "lower",
            "value": values,
            "warmup": False,
        }
    )
    assert summary_by_config(frame)["cv"].iloc[0] == pytest.approx(coefficient_of_variation(values))


def test_seed_001_table_ii_pools_per_workload_and_gives_the_papers_coefficients(tmp_path):
    from seed001_table2 import PAPER, write_table2_bundles

    frame = ccbench.load(write_table2_bundles(tmp_path))
    model = overhead_model(frame)
    pooled = model[model["scope"] == "pooled"].set_index("workload")
    assert set(pooled.index) == {"resnet18", "mobilenetv3-small"}  # one pooled row per workload, none across them
    for workload, want in PAPER.items():
        # within the table's rounding (its times are whole minutes)
        assert pooled.loc[workload, "C[tee]"] == pytest.approx(
            want["tee"], abs=0.03 if workload != "resnet18" else 0.005
        )
        assert pooled.loc[workload, "C[transport:tls]"] == pytest.approx(
            want["tls"], abs=0.015 if workload != "resnet18" else 0.005
        )
        assert "machine" in pooled.loc[workload, "confounded"]
    cases = model[model["scope"] == "case"]
    assert len(cases) == 6 and set(cases["t_base_unit"]) == {"s"}
    everything = overhead_model(frame, pool_by="all")
    assert list(everything[everything["scope"] == "pooled"]["workload"]) == ["all workloads"]


def test_the_suite_a_workload_negotiated_names_the_transport_cause(tmp_path):
    """The variant's cipher is fixed before the run; a TLS sample records the suite it negotiated,
    and that is what the verdict names."""
    from ccbench.analysis.judgement.verdict import verdicts

    samples = [
        {
            "workload": "echo",
            "variant": {"transport": t, "transport_cipher": "AES-256-GCM", "transport_aes_accelerated": False}
            if t == "tls"
            else {"transport": t},
            "metric": "time",
            "value": v * (1.5 if t == "tls" else 1),
            "repetition": i,
            "metadata": {"transport_cipher": "TLS13_CHACHA20_POLY1305_SHA256", "tls_version": "TLSv1_3"}
            if t == "tls"
            else {},
        }
        for t in ("plain", "tls")
        for i, v in enumerate([1.0, 1.01, 0.99])
    ]
    frame = ccbench.load(write_samples(tmp_path, "vm", "none", samples))
    assert set(frame["transport_cipher"].dropna()) == {"TLS13_CHACHA20_POLY1305_SHA256"}
    causes = {v.layer: v for v in verdicts(compare(frame), frame)}["TLS"].causes
    assert any("TLS13_CHACHA20_POLY1305_SHA256" in c for c in causes) and not any("AES-256-GCM" in c for c in causes)


def test_each_machine_with_variants_of_its_own_is_also_compared_with_itself(tmp_path, ccbench):
    """A plain machine and two TEE machines, each measured on disk and fscrypt: besides the TEE
    rows and the combined ones against the plain machine's disk, each TEE machine's fscrypt stands
    against its own disk ("storage encryption: fscrypt on SEV-SNP"), so the cost of encrypting the
    disk inside the guest is measured, not only mixed into "combined"."""
    from bundles import write_bundles

    from ccbench.report import forest

    paths = [str(p) for p in write_bundles(tmp_path)]
    done = ccbench("compare", *paths, "--json")
    assert done.returncode == 0, done.stderr
    rows = [r for r in map(json.loads, done.stdout.splitlines()) if "config" in r]
    layers = {(r["baseline"], r["config"]): r["layer"] for r in rows if r["workload"] == "fio"}
    assert layers[("snp / SEV-SNP / disk", "snp / SEV-SNP / fscrypt")] == "storage encryption: fscrypt on SEV-SNP"
    assert layers[("tdx / TDX / disk", "tdx / TDX / fscrypt")] == "storage encryption: fscrypt on TDX"
    assert layers[("plain / no TEE / disk", "snp / SEV-SNP / fscrypt")].startswith("combined: TEE: SEV-SNP + ")
    assert layers[("plain / no TEE / disk", "plain / no TEE / fscrypt")] == "storage encryption: fscrypt"
    # the fscrypt rows inside the SNP guest are its own 1.3x, not the 1.3 x 1.05 of the combined row
    own = [r for r in rows if r["layer"] == "storage encryption: fscrypt on SEV-SNP" and r["metric"] == "clat_p50"]
    assert own and all(abs(r["ratio"] - 1.3) < 0.04 for r in own)
    combined = [r for r in rows if r["layer"].startswith("combined: TEE: SEV-SNP") and r["metric"] == "clat_p50"]
    assert combined and all(abs(r["ratio"] - 1.3 * 1.05) < 0.04 for r in combined)
    summary = ccbench("compare", *paths, "--summary").stdout.splitlines()
    assert summary[0].startswith(
        "verdict per protection layer against plain / no TEE / disk; snp, tdx also against their own;"
    )
    assert any(line.startswith("storage encryption: fscrypt on SEV-SNP: ") for line in summary)
    # the report's forest plot and heatmap draw those rows in a column of their own
    table = pd.DataFrame(rows)
    columns = set(forest.own_columns(table)["config"])
    assert "snp / SEV-SNP / fscrypt (vs disk)" in columns and "snp / SEV-SNP / fscrypt" in columns
    # one machine alone: nothing is added, nothing renamed
    alone = ccbench("compare", paths[1], "--json")
    alone_rows = [r for r in map(json.loads, alone.stdout.splitlines()) if "config" in r]
    assert {r["layer"] for r in alone_rows} == {"storage encryption: fscrypt"}
    assert set(forest.own_columns(pd.DataFrame(alone_rows))["config"]) == {"snp / SEV-SNP / fscrypt"}
