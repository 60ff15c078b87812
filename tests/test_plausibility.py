"""Implausible rows (ccbench.analysis.rows.plausibility; docs/analysis.md, "Implausible rows"): each check
triggered by a study of known values and not by its consistent twin, the ``implausible`` column on
the comparison table the verdict is built from, and the lint finding that names the rows."""

import json
import re

import numpy as np
import pytest
from bundles import sample, write

from ccbench.analysis.comparison import comparison
from ccbench.analysis.rows.plausibility import block_bytes, job_depth

#: a consistent fio case per storage variant: (IOPS, mean completion latency in us) with 16 in flight
CONSISTENT = {"disk": (40000, 400), "tmpfs": (400000, 40), "ext4-loop": (30000, 530)}
JOB = {"iodepth": 16, "numjobs": 1, "ioengine": "libaio", "direct": True, "size": "128M"}


def fio_samples(variant: dict, bs: str, rw: str, iops: float, clat: float, *, throughput=None, job=None, seed=0):
    """Three executions of one fio case: throughput (IOPS x block size unless given), IOPS, clat_mean."""
    rng = np.random.default_rng(seed)
    case = {"bs": bs, "rw": rw, "direction": "write" if "write" in rw else "read"}
    params = {**(job or JOB), **case}
    mb_s = throughput if throughput is not None else iops * block_bytes(bs) / 1e6
    samples = []
    for rep, noise in enumerate(rng.normal(0, 0.01, 3)):
        factor = float(np.exp(noise))
        for metric, unit, better, value in (
            ("throughput", "MB/s", "higher", mb_s * factor),
            ("iops", "IOPS", "higher", iops * factor),
            ("clat_mean", "us", "lower", clat / factor),
        ):
            samples.append(
                sample(
                    workload="fio",
                    kind="fio",
                    params=params,
                    variant=variant,
                    metric=metric,
                    unit=unit,
                    better=better,
                    value=value,
                    repetition=rep,
                    metadata={"case": case, "direct_effective": True},
                )
            )
    return samples


def study(tmp_path, cases: dict, host="vm"):
    """A bundle of fio cases: {(variant dict as tuple of pairs, bs, rw): (iops, clat[, throughput])}."""
    samples = []
    for i, ((variant, bs, rw), numbers) in enumerate(cases.items()):
        iops, clat, *rest = numbers
        samples += fio_samples(dict(variant), bs, rw, iops, clat, throughput=rest[0] if rest else None, seed=i)
    return write(tmp_path, host, "none", samples)


DISK = (("storage", "disk"),)
TMPFS = (("storage", "tmpfs"),)
FSCRYPT = (("storage", "encrypted"), ("storage_mechanism", "fscrypt"))
GOCRYPTFS = (("storage", "encrypted"), ("storage_mechanism", "gocryptfs"))
LOOP = (("storage", "ext4-loop"), ("storage_mechanism", "none"))


def reasons(table, config_part: str, case: str) -> set[str]:
    rows = table[table["config"].str.contains(config_part, regex=False) & (table["case"] == case)]
    assert len(rows), (config_part, case, table[["config", "case"]].drop_duplicates().to_string())
    return set(rows["implausible"])


def test_a_consistent_study_has_nothing_implausible(tmp_path):
    bundle = study(
        tmp_path,
        {
            (DISK, "4k", "randread"): CONSISTENT["disk"],
            (TMPFS, "4k", "randread"): CONSISTENT["tmpfs"],
            (LOOP, "4k", "randread"): CONSISTENT["ext4-loop"],
        },
    )
    result = comparison([bundle])
    assert list(result.table["implausible"]) == [""] * len(result.table)
    assert not [f for f in result.findings() if f.code == "implausible"]


@pytest.mark.parametrize("mechanism", [FSCRYPT, GOCRYPTFS])
def test_direct_io_on_fscrypt_or_gocryptfs_is_served_buffered(tmp_path, mechanism):
    # the case: 4k randwrite 3x faster than the plain disk with direct I/O asked for; the
    # numbers agree with each other (16 in flight), only the mechanism gives it away
    bundle = study(
        tmp_path,
        {
            (DISK, "4k", "randwrite"): (36000, 444),
            (mechanism, "4k", "randwrite"): (108000, 148),
            (TMPFS, "4k", "randwrite"): (400000, 40),
        },
    )
    result = comparison([bundle])
    name = dict(mechanism)["storage_mechanism"]
    assert reasons(result.table, name, "4k randwrite") == {f"direct I/O served buffered on {name}"}
    assert reasons(result.table, "tmpfs", "4k randwrite") == {""}
    assert "implausible" in result.table.loc[result.table["config"].str.contains(name), "flags"].iloc[0]
    (finding,) = [f for f in result.findings() if f.code == "implausible"]
    assert finding.severity == "high"
    assert f"vm / no TEE / {name}: direct I/O served buffered in 3 rows (fio 4k randwrite (3 metrics" in finding.what
    assert finding.evidence[f"vm / no TEE / {name}"]["rows"] == {
        "fio": {"4k randwrite": ["throughput", "iops", "clat_mean"]}
    }


def test_direct_false_on_fscrypt_is_not_flagged(tmp_path):
    samples = []
    job = {**JOB, "direct": False}
    for i, (variant, (iops, clat)) in enumerate(((DISK, (36000, 444)), (FSCRYPT, (30000, 530)))):
        samples += fio_samples(dict(variant), "4k", "randread", iops, clat, job=job, seed=i)
    result = comparison([write(tmp_path, "vm", "none", samples)])
    assert set(result.table["implausible"]) == {""}


def test_throughput_and_latency_that_disagree_by_littles_law(tmp_path):
    # the 1m randread at 0.001x with a lower mean completion latency: 1.2 IOPS x 9 ms is
    # 0.011 I/Os in flight where the job keeps 16; and a case claiming more in flight than allowed
    bundle = study(
        tmp_path,
        {
            (DISK, "1m", "randread"): (1175, 13600),
            (LOOP, "1m", "randread"): (1.2, 9000),
            (DISK, "4k", "randread"): (40000, 400),
            (LOOP, "4k", "randread"): (40000, 4000),
            (TMPFS, "1m", "randread"): (8000, 1990),
            (TMPFS, "4k", "randread"): (400000, 40),
        },
    )
    table = comparison([bundle]).table
    (low,) = reasons(table, "ext4-loop", "1m randread")
    assert re.fullmatch(
        r"IOPS and latency disagree: 1\.2 IOPS at \d{4} us each is 0\.011 I/Os at a time, the job keeps 16", low
    ), low
    (high,) = reasons(table, "ext4-loop", "4k randread")
    assert re.fullmatch(
        r"IOPS and latency disagree: \d{5} IOPS at \d{4} us each is 160\.0 I/Os at a time, more than the job's 16", high
    ), high
    assert reasons(table, "tmpfs", "1m randread") == {""}


def test_a_mixed_pattern_shares_its_depth_between_the_directions():
    from ccbench.analysis.rows.plausibility import side_reasons

    # rwmixread = 95: the writes keep 0.8 of 16 in flight, the reads 15.2
    job = {**JOB, "bs": "4k", "rw": "randrw", "rwmixread": 95}
    writes = {"iops": 2000, "clat_mean": 400, "throughput": 2000 * 4096 / 1e6}
    assert side_reasons(writes, job) == []
    assert side_reasons(writes, {**job, "rw": "randwrite"}) != []
    assert side_reasons({**writes, "clat_mean": 40000}, job) != []  # 80 in flight: above, mixed or not


def test_medians_of_executions_of_very_different_speed_are_no_broken_law():
    """A user trial: an A/A run on a busy machine (IOPS CV 86%, latency CV 220% over 6 executions) was
    left out as "23222 IOPS at 967 us each is 22.5 I/Os at a time, more than the job's 16", though
    every execution obeyed Little's law: the two medians come from different executions, and an even
    count's median is the mean of two. The executions' spread widens the bounds; a steady job keeps them."""
    import numpy as np

    from ccbench.analysis.rows.plausibility import side_reasons

    job = {**JOB, "bs": "4k", "rw": "randread"}
    # six executions, each exactly at depth 16: IOPS x latency = 16 in every one
    iops = np.array([40000.0, 38000.0, 36000.0, 6000.0, 3000.0, 2000.0])
    clat = 16 / iops * 1e6
    medians = {"iops": float(np.median(iops)), "clat_mean": float(np.median(clat)), "throughput": 0.0}
    medians["throughput"] = medians["iops"] * 4096 / 1e6
    assert medians["iops"] * medians["clat_mean"] / 1e6 > 16 * 1.25  # the medians alone break the law
    spread = {m: float(np.std(v, ddof=1) / np.mean(v)) for m, v in (("iops", iops), ("clat_mean", clat))}
    assert side_reasons(medians, job, spread) == []
    assert side_reasons(medians, job) != []  # without the spread (nothing known of it): flagged as before
    # a steady job whose latency truly disagrees with its IOPS is still flagged
    steady = {"iops": 0.02, "clat_mean": 0.02}
    assert side_reasons({**medians, "clat_mean": medians["clat_mean"] * 4}, job, steady) != []


def test_a_synchronous_engine_keeps_one_io_in_flight_per_job():
    assert job_depth({"iodepth": 16, "ioengine": "psync", "numjobs": 4}) == 4
    assert job_depth({"iodepth": 16, "ioengine": "io_uring", "numjobs": 2}) == 32
    assert job_depth({"ioengine": "libaio"}) is None  # not stated: not checked


def test_throughput_that_is_not_iops_times_block_size(tmp_path):
    bundle = study(
        tmp_path,
        {
            (DISK, "64k", "read"): (10000, 1600),  # 655 MB/s
            (LOOP, "64k", "read"): (10000, 1600, 65.5),  # ten times too little for its IOPS
        },
    )
    (reason,) = reasons(comparison([bundle]).table, "ext4-loop", "64k read")
    assert re.fullmatch(r"throughput 6\d\.\d MB/s, IOPS x block size 6\d\d\.\d MB/s", reason), reason


def test_a_variant_faster_than_tmpfs_and_a_baseline_faster_than_tmpfs(tmp_path):
    bundle = study(
        tmp_path,
        {
            (DISK, "1m", "read"): (12000, 1333),  # 12.6 GB/s: faster than memory on this machine
            (TMPFS, "1m", "read"): (8000, 2000),
            (LOOP, "1m", "read"): (1000, 16000),
        },
    )
    table = comparison([bundle]).table
    assert reasons(table, "ext4-loop", "1m read") == {"baseline: 1.5x faster than tmpfs on this machine"}
    assert reasons(table, "tmpfs", "1m read") == {"baseline: 1.5x faster than tmpfs on this machine"}


def test_the_column_reaches_compare_json(tmp_path, ccbench):
    bundle = study(tmp_path, {(DISK, "4k", "randwrite"): (36000, 444), (FSCRYPT, "4k", "randwrite"): (108000, 148)})
    done = ccbench("compare", bundle, "--json")
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    rows = [line for line in lines if "config" in line]
    assert rows and {row["implausible"] for row in rows} == {"direct I/O served buffered on fscrypt"}
    assert [line["finding"] for line in lines if "finding" in line] == ["implausible"]
    # the table's verdict cell says so too, never "faster" for a row the verdict left out
    table = ccbench("compare", bundle, env={"COLUMNS": "200"})
    assert table.returncode == 0, table.stderr
    fscrypt_rows = [line for line in table.stdout.splitlines() if "fscrypt" in line and "│" in line]
    assert fscrypt_rows and all("implausible" in line and "faster │" not in line for line in fscrypt_rows), table.stdout


def test_block_sizes_as_fio_writes_them():
    assert [block_bytes(v) for v in ("4k", "1m", "4096", "64KiB", "4k-64k", "4k,64k")] == [
        4096,
        2**20,
        4096,
        65536,
        None,
        None,
    ]


def test_the_reports_forest_draws_an_implausible_row_as_left_out(tmp_path):
    """The report's first chart agrees with the verdict: an implausible row is a grey cross, never a
    significant row of its layer's colour, and its caption counts it apart (before, the fscrypt rows
    the verdict left out were drawn solid and counted '1 slower, 4 faster')."""
    from ccbench.report import forest

    bundle = study(tmp_path, {(DISK, "4k", "randwrite"): (36000, 444), (FSCRYPT, "4k", "randwrite"): (108000, 148)})
    result = comparison([bundle])
    data = forest.build(result.table, None)
    fscrypt = data.rows[data.rows["config"].str.contains("fscrypt")]
    assert not fscrypt.empty and set(fscrypt["kind"]) == {"implausible"} and not fscrypt["significant"].any()
    text = forest.caption(data, result.baseline)
    assert f"Grey crosses ({len(fscrypt)})" in text and "0 of " in text, text


def test_the_loop_file_control_is_never_called_storage_encryption(tmp_path, ccbench):
    """ext4-loop is the encrypted variants' loop file without the cipher: its cost is the loop
    file's, so its rows and its headline line name it as the control, never as storage encryption
    (the storage plan's verdict called it "storage encryption: ext4-loop: 51.6% slower")."""
    bundle = study(
        tmp_path,
        {
            (DISK, "4k", "randread"): CONSISTENT["disk"],
            (LOOP, "4k", "randread"): CONSISTENT["ext4-loop"],
            (TMPFS, "4k", "randread"): CONSISTENT["tmpfs"],
        },
    )
    layers = dict(zip(comparison([bundle]).table["config"], comparison([bundle]).table["layer"], strict=True))
    assert layers["vm / no TEE / ext4-loop"] == "loop file, no cipher: ext4-loop", layers
    assert layers["vm / no TEE / tmpfs"] == "in-memory storage: tmpfs", layers
    done = ccbench("compare", bundle, "--summary")
    assert done.returncode == 0, done.stderr
    assert "storage encryption" not in done.stdout, done.stdout
    assert "loop file, no cipher: ext4-loop:" in done.stdout, done.stdout


def test_a_settled_case_whose_row_is_implausible_says_so_beside_its_answer(tmp_path, ccbench):
    """A run that settled fio on fscrypt with direct I/O (served buffered: implausible, left out of
    the verdict): compare's settle summary gives the case's answer and says it is left out, so the
    answer is not read as the cipher's cost; tmpfs's plausible case says nothing of the kind."""
    from bundles import probe, seal

    from ccbench.bundle import BundleWriter
    from ccbench.workloads import declarations

    samples = []
    for variant, iops, clat in ((DISK, 1000, 16000), (FSCRYPT, 9000, 1777), (TMPFS, 20000, 800)):
        key = f"storage={dict(variant)['storage']}"
        for s in fio_samples(dict(variant), "4k", "randread", iops, clat):
            samples.append(s.model_copy(update={"execution": f"fio|{key}|rep|{s.repetition}"}))
    variants = {key: {"stopped_by": "settled", "cases": {}} for key in ("storage=encrypted", "storage=tmpfs")}
    manifest = {
        "plan": {"name": "t"},
        "environment": probe("vm", "none"),
        "declarations": declarations([("fio", "fio")]),
        "outcomes": {
            "fio": {"status": "ok", "settled": {"target": 0.05, "baseline": "storage=disk", "variants": variants}}
        },
    }
    writer = BundleWriter.create(tmp_path / "vm", manifest)
    writer.append_samples(samples)
    writer.close()
    # the case lines of the settled section are in the full compare (--summary gives each variant's line)
    done = ccbench("compare", str(seal(writer.path)))
    assert done.returncode == 0, done.stderr
    lines: list[str] = []
    for line in done.stdout.splitlines():  # a wrapped line's continuation (deeper indent) read whole
        depth = len(line) - len(line.lstrip(" "))
        if lines and line.strip() and depth >= len(lines[-1]) - len(lines[-1].lstrip(" ")) + 4:
            lines[-1] += " " + line.strip()
        else:
            lines.append(line)
    start = {
        name: i for i, line in enumerate(lines) for name in ("[storage=encrypted]", "[storage=tmpfs]") if name in line
    }
    encrypted = lines[start["[storage=encrypted]"] + 1]
    tmpfs = lines[start["[storage=tmpfs]"] + 1]
    assert "throughput" in encrypted and "implausible, left out of the verdict" in encrypted
    assert "throughput" in tmpfs and "implausible" not in tmpfs


def test_the_verdict_and_the_reports_chart_count_the_same_rows(tmp_path):
    """A quick run's report said "9 of 14 rows significant" under a verdict of "10 of 10", "28 of 30"
    and "5 of 30 significant": the verdict counted every metric of every case (throughput, IOPS and
    latencies of one job), the chart the rows the figure rests on. Both count those rows now: the
    layers' counts add up to the chart's, its grey crosses to the layers' left-out rows."""
    import re

    from ccbench.report import forest

    cases = {
        (DISK, "4k", "randread"): CONSISTENT["disk"],
        (DISK, "4k", "randwrite"): (36000, 444),
        (TMPFS, "4k", "randread"): CONSISTENT["tmpfs"],
        (TMPFS, "4k", "randwrite"): (400000, 40),
        (LOOP, "4k", "randread"): CONSISTENT["ext4-loop"],
        (LOOP, "4k", "randwrite"): (30000, 530),
        (FSCRYPT, "4k", "randwrite"): (108000, 148),  # direct I/O served buffered: left out
    }
    samples = [
        s
        for i, ((v, bs, rw), (iops, clat)) in enumerate(cases.items())
        for s in fio_samples(dict(v), bs, rw, iops, clat, seed=i)
    ]
    # a buffered case on the loop file and on fscrypt (the cipher's cost, against the loop file)
    buffered = {**JOB, "direct": False}
    for variant, iops in ((DISK, 2000), (LOOP, 3000), (FSCRYPT, 300)):
        samples += fio_samples(dict(variant), "1m", "read", iops, 16e6 / iops, job=buffered, seed=iops)
    result = comparison([write(tmp_path, "vm", "none", samples)])
    items = result.verdicts()
    data = forest.build(result.table, result.engine.sample)
    text = forest.caption(data, result.baseline)
    significant, drawn = map(int, re.search(r"(\d+) of (\d+) rows significant", text).groups())
    assert (significant, drawn) == (sum(i.significant for i in items), sum(i.comparisons for i in items)), text
    crosses = re.search(r"Grey crosses \((\d+)\)", text)
    assert crosses and int(crosses.group(1)) == sum(i.left_out_rows for i in items) > 0, text
    # each layer counts its rows once (its supporting metrics apart), whatever the number of metrics
    fscrypt = next(i for i in items if i.layer.startswith("storage encryption"))
    assert (fscrypt.comparisons, fscrypt.left_out_rows, fscrypt.not_counted) == (1, 1, 2)


def test_the_summary_says_each_reason_once_and_in_plain_words(tmp_path, ccbench):
    """A quick run's summary named the fscrypt rows and their reason in the verdict's line, then again
    in the lint's ("direct I/O served buffered in 20 rows (fio 4k randread, ...)"); a row left out by
    the IOPS-latency check read "left out (Little's law: 0.246 IOPS x 13.7 us = 0.0000034 in flight)"."""
    bundle = study(
        tmp_path,
        {
            (DISK, "4k", "randwrite"): (36000, 444),
            (TMPFS, "4k", "randwrite"): (400000, 40),
            (LOOP, "4k", "randwrite"): (30000, 530),
            (FSCRYPT, "4k", "randwrite"): (108000, 148),
            (DISK, "1m", "randread"): (1175, 13600),
            (LOOP, "1m", "randread"): (1.2, 9000),
        },
    )
    done = ccbench("compare", bundle, "--summary")
    assert done.returncode == 0, done.stderr
    text = " ".join(done.stdout.split())
    assert text.count("direct I/O served buffered") == 1, done.stdout
    assert "vm / no TEE / fscrypt: 3 rows of 1 case left out of the verdict (its lines above say which" in text
    assert text.count("IOPS and latency disagree") == 1 and "Little's law" not in text, done.stdout
    assert "IOPS at 9" in text and "us each is 0.011 I/Os at a time, the job keeps 16" in text, done.stdout
    assert "no figure: its one comparison left out" in text, done.stdout


def test_two_executions_far_apart_in_speed_break_no_law_on_their_means():
    """A user trial (a settled run cut on a busy machine): the disk baseline's 4k randwrite ran twice,
    714.8 IOPS at 22,366 us and 35,777 IOPS at 440 us, each 16 I/Os at a time; an even count's medians
    are the means, 18,246 IOPS at 11,403 us, "208.1 I/Os at a time", and the rows of two layers were
    left out on it (the CVs' bound widened 5.4x). Two values' ratio is fixed by their CV: the bound
    widens by it, 50x, and the law holds; a side with the same CVs over many executions, whose
    values cannot lie that far apart, is still flagged."""
    import numpy as np

    from ccbench.analysis.rows.plausibility import side_reasons, spread_factor

    job = {**JOB, "bs": "4k", "rw": "randwrite"}
    iops, clat = np.array([714.8, 35776.7]), np.array([22366.0, 440.0])
    medians = {"iops": float(iops.mean()), "clat_mean": float(clat.mean())}
    medians["throughput"] = medians["iops"] * 4096 / 1e6
    spread = {m: float(np.std(v, ddof=1) / np.mean(v)) for m, v in (("iops", iops), ("clat_mean", clat))}
    assert side_reasons(medians, job, spread) != []  # the CVs' bound alone: flagged (as before)
    counted = {**spread, "n:iops": 2, "n:clat_mean": 2}
    assert spread_factor(counted) == pytest.approx(35776.7 / 714.8, rel=1e-3)  # exact at two
    assert side_reasons(medians, job, counted) == []
    # the same medians and a modest spread over 10 executions: the law is broken, and said
    steady = {"iops": 0.1, "clat_mean": 0.1, "n:iops": 10, "n:clat_mean": 10}
    assert side_reasons(medians, job, steady) != []


def test_a_baseline_of_two_far_apart_executions_leaves_no_row_out(tmp_path):
    """The same through compare: the disk baseline's two executions (each 16 in flight) and a steady
    tmpfs; no row is left out, neither on the baseline nor on the variant (each row's counts reach
    the bound)."""
    case = {"bs": "4k", "rw": "randwrite", "direction": "write"}
    params = {**JOB, **case}
    runs = {"disk": [(714.8, 22366.0), (35776.7, 440.0)], "tmpfs": [(400000.0, 40.0)] * 3}
    samples = [
        sample(
            workload="fio", kind="fio", params=params, variant={"storage": storage}, metric=metric, unit=unit,
            better=better, value=value, repetition=rep, metadata={"case": case, "direct_effective": True},
        )
        for storage, executions in runs.items()
        for rep, (iops, clat) in enumerate(executions)
        for metric, unit, better, value in (
            ("throughput", "MB/s", "higher", iops * 4096 / 1e6),
            ("iops", "IOPS", "higher", iops),
            ("clat_mean", "us", "lower", clat),
        )
    ]  # fmt: skip
    table = comparison([write(tmp_path, "vm", "none", samples)]).table
    assert len(table) == 3 and (table["implausible"] == "").all(), table[["metric", "implausible"]]
