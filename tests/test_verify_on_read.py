"""Analysis reads only what verifies (ccbench.attestation.onread), and the holes in the data path that
gave a traceback or a wrong number: each attack of issue 29 on the read side, run against the real
commands (in this process where a subprocess would only add start-up time)."""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from bundles import sample, seal, write

from ccbench.bundle import read_bundle
from ccbench.bundle.columnar import PARQUET, write_bundle_parquet


@pytest.fixture
def cache(tmp_path, monkeypatch):
    path = tmp_path / "xdg-cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(path))
    return path


@pytest.fixture
def cli(capsys):
    """cli(*args) -> (exit code, stdout, stderr) of the real command line, run in this process."""
    from ccbench.cli import main

    def run(*args):
        capsys.readouterr()
        try:
            main([str(a) for a in args])
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        out, err = capsys.readouterr()
        return code, out, err

    return run


def two_bundles(root: Path, parquet: bool = True) -> list[Path]:
    """Two machines, one workload: a plain one (1.0 s) and a TEE one (1.1 s), sealed as a run seals them."""
    paths = []
    for host, tee, base in (("plain", "none", 1.0), ("snp", "sev-snp", 1.1)):
        samples = [
            sample(workload="w", variant={}, metric="time", value=base + 0.01 * i, repetition=i) for i in range(6)
        ]
        path = write(root, host, tee, samples)
        if parquet:
            write_bundle_parquet(path)
            seal(path)
        paths.append(path)
    return paths


def medians(cli, *args) -> dict[str, float]:
    code, out, err = cli("compare", "--json", *args)
    assert code == 0, err
    rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    return {row["config"]: row["median"] for row in rows if "config" in row} | {
        row["baseline"]: row["baseline_median"] for row in rows if "baseline" in row
    }


def tamper_parquet(bundle: Path, factor: float = 2.0) -> None:
    """One value of samples.parquet changed, its metadata (the journal's digest) kept."""
    table = pq.read_table(bundle / PARQUET)
    values = table.column("value").to_pylist()
    values[0] *= factor
    import pyarrow as pa

    table = table.set_column(table.schema.get_field_index("value"), "value", pa.array(values, pa.float64()))
    pq.write_table(table, bundle / PARQUET)


def test_a_changed_parquet_is_refused_by_every_analysis_command_and_named(tmp_path, cli, cache):
    plain, snp = two_bundles(tmp_path / "b")
    truth = medians(cli, plain, snp)
    tamper_parquet(snp)
    store = tmp_path / "h.duckdb"
    for args in (
        ("compare", plain, snp),
        ("report", plain, snp, "-o", tmp_path / "r.html"),
        ("export", plain, snp, "-o", tmp_path / "e.parquet"),
        ("history", "add", plain, snp, "--store", store),
    ):
        code, _, err = cli(*args)
        assert code == 3, (args, err)
        assert str(snp) in err and "samples.parquet" in err and err.count("\n") == 1 and "Traceback" not in err
    assert not (tmp_path / "r.html").exists() and not (tmp_path / "e.parquet").exists()
    # --allow-unverified reads it and says which bundle was unverified, in the output and the report
    code, out, err = cli("compare", "--json", plain, snp, "--allow-unverified")
    assert code == 0 and "UNVERIFIED" in err and str(snp) in err
    code, _, err = cli("report", plain, snp, "-o", tmp_path / "r.html", "--allow-unverified")
    assert code == 0, err
    page = (tmp_path / "r.html").read_text()
    assert "UNVERIFIED" in page and "Unverified bundles" in page and str(snp) in page
    # the refusal mattered: what the tampered file says is not what was measured
    assert medians(cli, plain, snp, "--allow-unverified") != truth


def test_a_bundle_without_digests_is_refused_unless_allowed(tmp_path, cli, cache):
    plain, snp = two_bundles(tmp_path / "b", parquet=False)
    (snp / "attestation.json").unlink()
    code, _, err = cli("compare", plain, snp)
    assert code == 3 and "no attestation.json" in err and str(snp) in err
    code, _, err = cli("compare", plain, snp, "--allow-unverified")
    assert code == 0 and "UNVERIFIED" in err


@pytest.mark.parametrize("digest", [5, None, ["a"], {"x": 1}])
def test_an_attestation_whose_digest_is_not_text_is_one_line(tmp_path, cli, cache, digest):
    plain, snp = two_bundles(tmp_path / "b", parquet=False)
    document = json.loads((snp / "attestation.json").read_text())
    document["digest"] = digest
    (snp / "attestation.json").write_text(json.dumps(document))
    for args in (("verify", snp), ("compare", plain, snp), ("history", "add", snp, "--store", tmp_path / "h.duckdb")):
        code, _, err = cli(*args)
        assert code == 2 and "attestation.json" in err and err.count("\n") == 1, (args, err)
    document["digest"], document["files"][0]["sha256"] = "0" * 64, 7
    (snp / "attestation.json").write_text(json.dumps(document))
    code, _, err = cli("verify", snp)
    assert code == 2 and "entry 1" in err and err.count("\n") == 1


def test_a_parquet_of_another_journal_of_the_same_size_is_not_used(tmp_path, cli, cache):
    """Freshness by content: the stored SHA-256 of the journal, never its size."""
    root = tmp_path / "b"
    one = write(root, "one", "none", [sample(workload="w", variant={}, metric="time", value=1.0, repetition=0)])
    two = write(root, "two", "none", [sample(workload="w", variant={}, metric="time", value=9.0, repetition=0)])
    assert (one / "samples.jsonl").stat().st_size == (two / "samples.jsonl").stat().st_size
    write_bundle_parquet(two)
    shutil.copy(two / PARQUET, one / PARQUET)
    seal(one)  # even with a digest list that covers it, the file is not this journal's
    from ccbench.analysis.samples.load import load

    assert load(one)["value"].tolist() == [1.0]


def test_a_bundle_named_with_glob_characters_reads_only_its_own_journal(tmp_path, cli, cache):
    root = tmp_path / "b"
    samples = [sample(workload="w", variant={}, metric="time", value=1.0 + i, repetition=i) for i in range(4)]
    sibling = write(root, "a1", "none", samples)
    for name in ("a[1]", "a*", "a?"):
        odd = write(root, name, "none", samples[:2])
        from ccbench.analysis.samples.load import load

        assert len(load(odd)) == 2, name
        assert (sibling / "samples.jsonl").exists()


@pytest.mark.parametrize("value", ["inf", "nan", "1e400", "-1", "-inf"])
def test_a_bad_cache_size_is_refused_before_the_cache_is_written(tmp_path, cli, cache, monkeypatch, value):
    plain, snp = two_bundles(tmp_path / "b", parquet=False)
    monkeypatch.setenv("CCBENCH_COLUMNAR_CACHE_MB", value)
    code, _, err = cli("compare", plain, snp)
    assert code == 2 and "CCBENCH_COLUMNAR_CACHE_MB" in err and err.count("\n") == 1
    assert not list(cache.rglob("*.parquet"))


def test_a_damaged_cache_file_is_converted_again(tmp_path, cli, cache):
    plain, snp = two_bundles(tmp_path / "b", parquet=False)
    truth = medians(cli, plain, snp)
    files = list(cache.glob("ccbench/columnar/*.parquet"))
    assert len(files) == 2
    files[0].write_bytes(b"PAR1 not a parquet file")
    data = files[1].read_bytes()
    files[1].write_bytes(data[:100] + bytes(len(data) - 200) + data[-100:])  # its middle zeroed
    assert medians(cli, plain, snp) == truth


def test_a_parquet_without_its_value_column_is_not_a_traceback(tmp_path, cli, cache):
    plain, snp = two_bundles(tmp_path / "b")
    truth = medians(cli, plain, snp)
    table = pq.read_table(snp / PARQUET)
    pq.write_table(table.drop_columns(["value"]), snp / PARQUET)
    code, _, err = cli("compare", plain, snp)
    assert code == 3 and "samples.parquet" in err and err.count("\n") == 1
    seal(snp)  # the file is in the digest list now: the reader still does not take it
    assert medians(cli, plain, snp) == truth


def test_samples_parquet_has_the_mode_of_the_bundles_other_files(tmp_path):
    (bundle,) = two_bundles(tmp_path / "b")[:1]
    mode = stat.S_IMODE((bundle / "samples.jsonl").stat().st_mode)
    assert stat.S_IMODE((bundle / PARQUET).stat().st_mode) == stat.S_IMODE((bundle / "manifest.json").stat().st_mode)
    assert stat.S_IMODE((bundle / PARQUET).stat().st_mode) == mode


def test_labels_and_cases_with_dollar_signs_are_drawn_as_written(tmp_path, cli, cache):
    root = tmp_path / "b"
    paths = []
    for host, tee, base in (("plain", "none", 1.0), ("snp", "sev-snp", 1.1)):
        samples = [
            sample(
                workload="w$x$",
                variant={},
                metric="t$\\frac$",
                params={"case": "$\\alpha$"},
                metadata={"case": {"case": "$\\alpha$"}},
                value=base + 0.01 * i,
                repetition=i,
            )
            for i in range(6)
        ]
        paths.append(write(root, host, tee, samples))
    code, _, err = cli(
        "report", *paths, "-o", tmp_path / "r.html", "--label", f"{paths[0]}=$m$", "--label", f"{paths[1]}=$\\x$"
    )
    assert code == 0, err
    page = (tmp_path / "r.html").read_text()
    assert "<svg" in page and "$\\alpha$" in page


def test_the_digest_of_a_large_file_is_remembered_by_identity(tmp_path, cache):
    from ccbench.bundle import digests

    big = tmp_path / "big"
    big.write_bytes(os.urandom(digests.REMEMBER_FROM + 10))
    first = digests.remembered_sha256(big)
    assert first == digests.sha256_file(big)
    assert len(list(digests.digest_notes_dir().iterdir())) == 1
    # the same size and modification time, other bytes: the change time tells
    status = big.stat()
    with open(big, "r+b") as handle:
        handle.write(b"x")
    os.utime(big, ns=(status.st_atime_ns, status.st_mtime_ns))
    assert digests.remembered_sha256(big) == digests.sha256_file(big) != first


def test_the_journal_digest_is_one_helper_remembered_or_read_in_full(tmp_path, cache):
    """bundle.digests.journal_sha256: remembered (the columnar cache's key, the history's run
    identity) and read in full, the same SHA-256 of samples.jsonl; a bundle without one has the
    empty file's."""
    import hashlib

    from ccbench.bundle import digests

    assert digests.journal_sha256(tmp_path) == hashlib.sha256(b"").hexdigest()
    journal = tmp_path / "samples.jsonl"
    journal.write_bytes(os.urandom(digests.REMEMBER_FROM + 10))
    expected = hashlib.sha256(journal.read_bytes()).hexdigest()
    assert digests.journal_sha256(tmp_path) == digests.journal_sha256(tmp_path, remembered=False) == expected
    assert len(list(digests.digest_notes_dir().iterdir())) == 1  # remembered once, by the first


def test_resume_after_a_cut_journal_analyses_like_an_uninterrupted_run(tmp_path, ccbench, workdir, write_plan, cache):
    from conftest import only_bundle

    path = write_plan('[[workloads]]\nkind = "command"\nname = "c"\nrepetitions = 4\ncommand = "true"\n')
    done = ccbench("run", path, "--out", tmp_path / "cut", "--workdir", workdir)
    assert done.returncode == 0, done.stderr
    bundle = only_bundle(tmp_path / "cut")
    whole = read_bundle(bundle).samples
    # killed while writing the last execution's samples: half a line, no record of the execution
    journal = bundle / "samples.jsonl"
    data = journal.read_bytes()
    last = data.rstrip(b"\n").rfind(b"\n") + 1
    journal.write_bytes(data[: last + (len(data) - last) // 2])
    kept = data[:last].count(b"\n")
    executions = (bundle / "executions.jsonl").read_text().splitlines()
    (bundle / "executions.jsonl").write_text("\n".join(executions[:-1]) + "\n")
    manifest = json.loads((bundle / "manifest.json").read_text())
    manifest.update(status="interrupted", outcomes={}, ended_at=None)
    (bundle / "manifest.json").write_text(json.dumps(manifest))
    done = ccbench("run", "--resume", bundle, "--workdir", workdir)
    assert done.returncode == 0 and "could not be written" not in done.stdout + done.stderr, done.stderr
    assert ccbench("verify", bundle).returncode == 0
    resumed = read_bundle(bundle).samples  # no corrupt line: the torn one was cut away
    per_execution = len(whole) // 4
    assert len(resumed) == kept + per_execution
    assert {(s["metric"], s["repetition"]) for s in resumed} == {(s["metric"], s["repetition"]) for s in whole}
    # the Parquet file the run wrote holds the journal's samples (verify checked it row for row)
    assert pq.read_table(bundle / PARQUET).num_rows == len(resumed)
    assert ccbench("show", bundle).returncode == 0
    assert ccbench("export", bundle, "-o", tmp_path / "e.csv").returncode == 0
    copy = tmp_path / "copy"
    shutil.copytree(bundle, copy)
    compared = ccbench("compare", "--json", bundle, copy, "--label", f"{bundle}=A", "--label", f"{copy}=B")
    assert compared.returncode == 0, compared.stderr
    rows = [json.loads(line) for line in compared.stdout.splitlines() if '"ratio"' in line]
    assert rows and all(row["ratio"] == pytest.approx(1.0) for row in rows if row["ratio"] is not None), rows


def test_the_fleets_summary_leaves_an_unverified_bundle_out_and_says_so(tmp_path, cache):
    from test_replicas import REPLICAS, write_replicas

    from ccbench.fleet.gather import add_to_history, compare_and_report
    from ccbench.fleet.records import FleetRun, HostRun

    paths = write_replicas(tmp_path)
    keys = {host: f"{label}/{host}" for host, label, _, _ in REPLICAS}
    tampered = paths[REPLICAS[-1][0]]
    first = (tampered / "samples.jsonl").read_text().splitlines()[0]
    with open(tampered / "samples.jsonl", "a") as journal:
        journal.write(first + "\n")  # one sample counted twice
    fleet = FleetRun(
        directory=tmp_path,
        plan="quick",
        plan_file=None,
        inventory=tmp_path / "hosts.ini",
        mode="parallel",
        forks=4,
        limit=None,
        accept_new_host_keys=False,
        run_id="fleet-unverified",
        rounds=["run"],
        hosts={keys[host]: {"inventory_hostname": host, "label": label} for host, label, _, _ in REPLICAS},
        runs={
            keys[host]: {"run": HostRun(round="run", outcome="ok", bundle=str(paths[host].relative_to(tmp_path)))}
            for host, _, _, _ in REPLICAS
        },
        baseline="plain",
        started_at="2026-01-01T00:00:00+00:00",
    )
    compare_and_report(fleet)
    assert fleet.analysis_error.startswith("left out, unverified: ") and str(tampered) in fleet.analysis_error
    assert "changed: samples.jsonl" in fleet.analysis_error
    assert (tmp_path / "compare.txt").exists() and fleet.report == "report.html"  # the others were compared
    line = add_to_history(fleet, str(tmp_path / "h.duckdb"))
    assert f"{len(REPLICAS) - 1} bundle(s) added" in line and "left out, unverified" in line and str(tampered) in line


def test_a_running_bundle_is_shown_but_not_compared_until_it_ends(tmp_path, cli, cache):
    plain, snp = two_bundles(tmp_path / "b", parquet=False)
    (snp / "attestation.json").unlink()
    manifest = json.loads((snp / "manifest.json").read_text())
    (snp / "manifest.json").write_text(json.dumps({**manifest, "status": "running"}))
    code, _, err = cli("compare", plain, snp)
    assert code == 3 and "still going" in err and str(snp) in err and err.count("\n") == 1
    code, out, err = cli("show", snp, "--json")
    assert code == 0 and json.loads(out)["status"] == "running"
    # shown, since one watches a run through its bundle, and said to be unchecked, in one line
    assert "its run has not ended" in err and "unchecked" in err and err.startswith("warning: "), err
    assert "no attestation.json" in json.loads(out)["unverified"]
