"""ccbench export: a real run's bundle and an imported one as one table, read back without ccbench
by pyarrow and by DuckDB, every column documented."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import DATA, REPO, only_bundle, run_ccbench

pa = pytest.importorskip("pyarrow", reason="pyarrow is a core dependency: bash scripts/setup.sh")
duckdb = pytest.importorskip("duckdb", reason="DuckDB is in the test extra: bash scripts/setup.sh --with test")
import pyarrow.csv as pcsv  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402


@pytest.fixture(scope="module")
def bundles(tmp_path_factory) -> list[Path]:
    """One bundle measured here (prime, two repetitions after a warmup) and one imported fio result."""
    root = tmp_path_factory.mktemp("export")
    plan = root / "plan.toml"
    plan.write_text(
        'name = "t"\n[defaults]\nrepetitions = 2\nwarmup = 1\ncooldown = 0\ntimeout = 60\n'
        '[[workloads]]\nkind = "prime"\nn = 2000\n'
    )
    done = run_ccbench("run", plan, "--out", root / "measured", "--workdir", root / "work")
    assert done.returncode == 0, done.stderr
    imported = run_ccbench(
        "import", "fio", DATA / "fio" / "randrw-4k.json", "--out", root / "imported", "--label", "cvm"
    )
    assert imported.returncode == 0, imported.stderr
    return [only_bundle(root / "measured"), only_bundle(root / "imported")]


def test_parquet_and_csv_hold_every_sample_with_its_machine(bundles, tmp_path):
    measured, imported = bundles
    parquet, csv = tmp_path / "samples.parquet", tmp_path / "samples.csv"
    for out in (parquet, csv):
        done = run_ccbench("export", *bundles, "-o", out, "--label", f"{measured}=plain")
        assert done.returncode == 0, done.stderr
    journal_lines = sum(len((b / "samples.jsonl").read_text().splitlines()) for b in bundles)
    by_arrow = pq.read_table(parquet).to_pylist()
    assert len(by_arrow) == journal_lines
    assert {row["label"] for row in by_arrow} == {"plain", "cvm"}
    assert any(row["warmup"] for row in by_arrow) and not all(row["warmup"] for row in by_arrow)
    plain = [row for row in by_arrow if row["label"] == "plain"]
    assert all(row["cpu_model"] and row["kernel_release"] and row["imported"] is False for row in plain)
    assert all(
        row["imported"] is True and row["tee_technology"] == "unknown" for row in by_arrow if row["label"] == "cvm"
    )
    # DuckDB reads the same rows from the Parquet file and from the CSV file, without ccbench
    query = "select label, workload, metric, value, warmup from '{}' order by label, workload, metric, value, warmup"
    from_parquet = duckdb.sql(query.format(parquet)).fetchall()
    from_csv = duckdb.sql(query.format(csv)).fetchall()
    assert from_parquet == from_csv
    assert sorted((r["label"], r["workload"], r["metric"], r["value"], r["warmup"]) for r in by_arrow) == from_parquet
    assert pcsv.read_csv(csv).num_rows == journal_lines
    # ... and they are the journal's own samples, value for value
    samples = [json.loads(line) for b in bundles for line in (b / "samples.jsonl").read_text().splitlines()]
    journal = sorted((s["workload"], s["metric"], s["value"], s["warmup"]) for s in samples)
    assert sorted((r["workload"], r["metric"], r["value"], r["warmup"]) for r in by_arrow) == journal


def test_every_column_is_documented(bundles, tmp_path):
    out = tmp_path / "samples.parquet"
    assert run_ccbench("export", *bundles, "-o", out).returncode == 0
    columns = pq.read_schema(out).names
    docs = (REPO / "docs" / "bundle-format.md").read_text()
    section = docs[docs.index("## Export") :]
    documented = set(re.findall(r"^\| `(\w+)` \|", section, re.MULTILINE))
    assert set(columns) == documented, (set(columns) - documented, documented - set(columns))


@pytest.mark.parametrize(
    "args, expected",
    [
        (["{bundle}", "-o", "{tmp}"], "is a directory"),
        (["{tmp}/missing", "-o", "{tmp}/x.parquet"], "missing"),
        (["{bundle}", "-o", "{tmp}/no/such/dir/x.parquet"], "does not exist"),
    ],
)
def test_bad_output_or_bundle_is_one_line(bundles, tmp_path, args, expected):
    done = run_ccbench("export", *[a.format(bundle=bundles[0], tmp=tmp_path) for a in args])
    assert done.returncode == 2 and expected in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
    assert not list(tmp_path.rglob("*.partial"))


def test_provenance_columns_of_a_measured_bundle_and_of_one_with_real_snp_evidence(bundles, tmp_path):
    """The measured bundle carries this machine's provenance; a copy given a real SEV-SNP report (go-sev-guest's
    Milan report with DEBUG in its guest policy) gets the verifier's reading of it in the snp_ columns."""
    import json
    import os
    import shutil

    from test_attestation import REAL_WORLD_EVIDENCE, needs_verifier, with_evidence  # noqa: F401

    measured = bundles[0]
    out = tmp_path / "plain.parquet"
    assert run_ccbench("export", measured, "-o", out).returncode == 0
    rows = pq.read_table(out).to_pylist()
    assert all(row["page_size"] == os.sysconf("SC_PAGE_SIZE") and row["machine_id"] for row in rows)
    assert all(row["tee_evidence_verified"] is None and row["snp_policy"] is None for row in rows)
    # the machine's own facts, read here apart from the probe
    meminfo = dict(line.split(":", 1) for line in Path("/proc/meminfo").read_text().splitlines())
    memory_bytes = int(meminfo["MemTotal"].split()[0]) * 1024
    assert all(row["vcpus"] == os.cpu_count() and row["kernel_release"] == os.uname().release for row in rows)
    assert all(row["memory_bytes"] == memory_bytes for row in rows)
    case = REAL_WORLD_EVIDENCE / "snp-milan-debug-go-sev-guest"
    if not case.is_dir():
        pytest.skip(f"{case} is absent (set CCBENCH_SHARED to the folder holding fixtures/real-world)")
    from ccbench.attestation.ccverify import verifier_path

    if not verifier_path().exists():
        pytest.skip("ccverify is not built: run 'bash scripts/setup.sh --with transport'")
    copy = with_evidence(shutil.copytree(measured, tmp_path / "with-evidence"), "sev-snp", case / "evidence.bin")
    out = tmp_path / "snp.parquet"
    assert run_ccbench("export", copy, "-o", out).returncode == 0
    table = pq.read_table(out)
    assert table.schema.field("snp_vmpl").type == pa.int64() and table.schema.field("tee_debug").type == pa.bool_()
    row = table.to_pylist()[0]
    assert (row["snp_policy"], row["tee_debug"], row["snp_smt_allowed"], row["snp_vmpl"]) == ("0xb0000", True, True, 0)
    assert json.loads(row["snp_reported_tcb"])["microcode"] == 68
    assert row["tee_evidence_verified"] is False and row["tdx_mrseam"] is None


def test_an_existing_output_is_refused_unless_forced_and_a_bundle_is_never_written(bundles, tmp_path):
    from ccbench.attestation.digests import digest_list

    measured = bundles[0]
    out = tmp_path / "samples.parquet"
    out.write_text("someone else's file")
    refused = run_ccbench("export", measured, "-o", out)
    assert refused.returncode == 2 and "exists" in refused.stderr and "--force" in refused.stderr, refused.stderr
    assert out.read_text() == "someone else's file"
    forced = run_ccbench("export", measured, "-o", out, "--force")
    assert forced.returncode == 0, forced.stderr
    assert pq.read_table(out).num_rows == len((measured / "samples.jsonl").read_text().splitlines())
    before = digest_list(measured)
    for target in (measured / "samples.parquet", measured / "raw" / "x.parquet", measured / "new.csv"):
        done = run_ccbench("export", measured, "-o", target, "--force")
        assert done.returncode == 2 and "inside the bundle" in done.stderr, done.stderr
        assert len(done.stderr.strip().splitlines()) == 1
    assert digest_list(measured) == before


def test_each_bundle_is_taken_once(bundles, tmp_path):
    measured = bundles[0]
    out = tmp_path / "once.parquet"
    done = run_ccbench("export", measured, measured, measured.parent, "-o", out)
    assert done.returncode == 0, done.stderr
    assert "from 1 bundle(s)" in done.stdout
    assert pq.read_table(out).num_rows == len((measured / "samples.jsonl").read_text().splitlines())


def test_staged_and_unfinished_bundles_under_a_directory_are_left_out(bundles, tmp_path):
    measured, imported = bundles
    root = tmp_path / "results"
    shutil.copytree(measured, root / "m" / measured.name)
    shutil.copytree(imported, root / ".importing" / imported.name)  # an import still being staged
    running = shutil.copytree(imported, root / "still-running")
    manifest = json.loads((running / "manifest.json").read_text())
    (running / "manifest.json").write_text(json.dumps({**manifest, "status": "running"}))
    out = tmp_path / "dir.parquet"
    done = run_ccbench("export", root, "-o", out)
    assert done.returncode == 0, done.stderr
    assert {r["bundle"] for r in pq.read_table(out).to_pylist()} == {str(root / "m" / measured.name)}
    assert "from 1 bundle(s)" in done.stdout
    named = run_ccbench("export", running, "-o", tmp_path / "running.parquet")
    assert named.returncode == 2 and "has not ended" in named.stderr, named.stderr
    assert len(named.stderr.strip().splitlines()) == 1


def test_two_exports_to_one_name_never_mix_and_a_dead_exports_leftover_is_removed(bundles, tmp_path):
    measured, imported = bundles
    # a leftover of an export that was killed (a pid that has ended) and one of an export still running
    ended = subprocess.run([sys.executable, "-c", "import os, psutil; p = psutil.Process(); "
                            "print(os.getpid(), int(p.create_time() * 1000))"], capture_output=True, text=True)  # fmt: skip
    pid, start = ended.stdout.split()
    dead = tmp_path / f".both.parquet.ccbench-{pid}-{start}-0123abcd.partial"
    dead.write_bytes(b"x" * 1000)
    import psutil

    me = psutil.Process()
    alive = tmp_path / f".both.parquet.ccbench-{me.pid}-{int(me.create_time() * 1000)}-4567cdef.partial"
    alive.write_bytes(b"y")
    out = tmp_path / "both.parquet"
    env = dict(os.environ)  # the ccbench the other command tests run (run_ccbench)
    racers = [
        subprocess.Popen(
            [sys.executable, "-m", "ccbench", "export", bundle, "-o", out],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        for bundle in (measured, imported)
    ]
    results = [(r.wait(timeout=300), *r.communicate()) for r in racers]
    winners = [r for r in results if r[0] == 0]
    assert len(winners) == 1, results
    (loser,) = [r for r in results if r[0] != 0]
    assert loser[0] == 2 and ("exists" in loser[2] or "meanwhile" in loser[2]), loser
    rows = pq.read_table(out).to_pylist()
    assert len({r["bundle"] for r in rows}) == 1 and winners[0][1].startswith(f"{out}: {len(rows)} samples")
    assert not dead.exists() and alive.exists()
    assert [p.name for p in tmp_path.glob(".*.partial")] == [alive.name]


#: a bundle of every shape a sample may have: the variant's protection layers and what served
#: them, a cipher the workload negotiated itself, a summary statistic, contended and warmup samples,
#: no direction, no execution, times with and without fractions and offsets, and one that is no time
CRAFTED_VARIANTS = [
    {"storage": "encrypted", "storage_mechanism": "dm-crypt", "storage_cipher_driver": "xts-aes-aesni",
     "storage_cipher_accelerated": True, "storage_cipher_MBps": 1234.5, "transport": "tls",
     "transport_aes_accelerated": False, "transport_cipher": "aes-gcm"},
    {"storage": "tmpfs", "storage_mechanism": "user-path"},
    {},
]  # fmt: skip
CRAFTED_TIMES = ["2026-01-01T00:00:00Z", "2026-01-01T00:00:01.123456Z", "2026-01-01T02:00:01+02:00", "not a time"]


@pytest.fixture(scope="module")
def crafted(tmp_path_factory) -> Path:
    from ccbench.attestation import finish_bundle
    from ccbench.bundle import BundleWriter
    from ccbench.model import Sample

    environment = {
        "hostname": "crafted-host",
        "machine_id": "m-1",
        "tee": {"technology": "tdx", "evidence": []},
        "cpu": {"model": "Xeon Crafted", "threads": 8, "microcode": "0x2b"},
        "memory": {"total_bytes": 1 << 34},
        "kernel": {"release": "6.9.0"},
        "storage": {"protection": "plain"},
        "virtualization": "kvm",
        "provenance": {"page_size": 4096, "vcpus": 8, "smt": True, "thp": {"enabled": "always", "defrag": "madvise"},
                       "swiotlb": {"bytes": 67108864, "source": "kernel-log", "dynamic": True},
                       "kernel_cmdline": "ro quiet", "clocksource": "kvm-clock",
                       "hugepages_total": 0, "tdx_idle": "tdx idle line", "hypervisor": "kvm", "microcode": "0x2b"},
    }  # fmt: skip
    writer = BundleWriter.create(
        tmp_path_factory.mktemp("crafted"), {"plan": {"name": "c"}, "environment": environment}
    )
    samples = []
    for i in range(41):
        metadata = {"case": {"rw": "randread", "bs": "4k"}} if i % 2 else {}
        if i % 10 == 0:
            metadata = {"statistic": "mean", "transport_cipher": "TLS_AES_256_GCM_SHA384"}
        samples.append(
            Sample(
                workload=f"w{i % 4}",
                kind="fio" if i % 4 else "prime",
                params={"z": 1, "a": [i % 2, 2]} if i % 3 else {},
                variant=CRAFTED_VARIANTS[i % 3],
                metric="m",
                unit="s" if i % 7 else "MB/s",
                value=i / 3,
                better=None if i % 6 == 0 else "lower",
                repetition=i % 3,
                warmup=i % 9 == 0,
                timestamp=CRAFTED_TIMES[i % 4],
                contended=i % 8 == 0,
                execution=f"e{i % 5}" if i % 2 else None,
                raw=f"raw/e{i % 5}" if i % 2 else None,
                metadata=metadata,
            )
        )
    writer.append_samples(samples)
    writer.close()
    finish_bundle(writer.path, provider=None)
    return writer.path


def _expected_time(text):
    from datetime import UTC, datetime

    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)
    except ValueError:
        return None


def test_every_row_is_its_journal_line_with_its_bundles_facts(crafted, tmp_path):
    """Row n of the export is line n of the journal (read here with json, not by ccbench), every
    column, with the facts of its manifest: the file, not only its agreement with the CSV."""
    from ccbench.cases import case_text

    out = tmp_path / "crafted.parquet"
    done = run_ccbench("export", crafted, "-o", out)
    assert done.returncode == 0, done.stderr
    rows = pq.read_table(out).to_pylist()
    lines = [json.loads(line) for line in (crafted / "samples.jsonl").read_text().splitlines()]
    assert len(rows) == len(lines) == 41
    layers = {
        0: ("dm-crypt", "tls", "crafted-host / TDX / dm-crypt / tls"),
        1: ("tmpfs (own path)", None, "crafted-host / TDX / tmpfs (own path)"),
        2: (None, None, "crafted-host / TDX"),
    }
    for number, (row, sample) in enumerate(zip(rows, lines, strict=True)):
        variant, metadata = sample["variant"], sample["metadata"]
        assert (row["label"], row["bundle"], row["machine_id"]) == ("crafted-host", str(crafted), "m-1")
        assert (row["storage"], row["transport"], row["config"]) == layers[number % 3]
        for name in ("workload", "kind", "metric", "unit", "better", "repetition", "warmup", "contended"):
            assert row[name] == sample[name], (number, name)
        assert row["value"] == sample["value"]
        assert row["params"] == json.dumps(sample["params"], sort_keys=True, separators=(",", ":"))
        assert row["execution"] == (sample["execution"] or "") and row["raw"] == (sample["raw"] or "")
        assert row["timestamp"] == _expected_time(sample["timestamp"]), number
        assert row["case"] == (case_text(metadata.get("case") or {}) or "")
        assert row["summary_statistic"] is (metadata.get("statistic") == "mean")
        # the cipher the workload negotiated wins over the variant's
        assert row["transport_cipher"] == (metadata.get("transport_cipher") or variant.get("transport_cipher"))
        assert row["storage_cipher_driver"] == variant.get("storage_cipher_driver")
        assert row["storage_cipher_accelerated"] is variant.get("storage_cipher_accelerated")
        assert row["transport_aes_accelerated"] is variant.get("transport_aes_accelerated")
        assert row["storage_cipher_MBps"] == variant.get("storage_cipher_MBps")
        assert (row["tee_technology"], row["cpu_model"], row["cpu_threads"]) == ("tdx", "Xeon Crafted", 8)
        assert (row["memory_bytes"], row["kernel_release"], row["virtualization"]) == (1 << 34, "6.9.0", "kvm")
        assert (row["storage_protection"], row["hostname"], row["imported"]) == ("plain", "crafted-host", False)
        assert (row["page_size"], row["vcpus"], row["smt"], row["swiotlb_bytes"]) == (4096, 8, True, 67108864)
        assert (row["thp_enabled"], row["microcode"], row["tdx_idle"]) == ("always", "0x2b", "tdx idle line")
        assert (row["clocksource"], row["swiotlb_dynamic"]) == ("kvm-clock", True)
        assert row["snp_policy"] is None and row["tee_evidence_verified"] is None


def test_the_file_has_the_documented_types_whatever_its_values(bundles, tmp_path):
    """The Parquet file's schema is the documented one (docs/bundle-format.md, Export), also where a
    column's values are all missing (the prime bundle has no storage cipher, no evidence): a flag
    stays a flag, a speed a number, the text plain text (not dictionary-encoded)."""
    docs = (REPO / "docs" / "bundle-format.md").read_text()
    section = docs[docs.index("## Export") :]
    kinds = {"string": pa.string(), "double": pa.float64(), "int64": pa.int64(), "bool": pa.bool_()}
    kinds["timestamp (UTC)"] = pa.timestamp("us", tz="UTC")
    documented = {name: kinds[kind] for name, kind in re.findall(r"^\| `(\w+)` \| ([^|]+?) \|", section, re.MULTILINE)}
    out = tmp_path / "measured.parquet"
    assert run_ccbench("export", bundles[0], "-o", out).returncode == 0
    schema = pq.read_schema(out)
    assert {field.name: field.type for field in schema} == documented
    assert list(schema.names) == list(documented)  # in the documented order


def test_a_bundle_split_over_batches_is_the_same_table(crafted, bundles):
    """A bundle larger than one batch is written in several, each of the same schema, together the
    same rows as in one."""
    from ccbench.bundle import read_bundle
    from ccbench.results.export import SCHEMA, WRITTEN, bundle_batches

    for path in (crafted, *bundles):
        bundle = read_bundle(path, samples=False)
        whole = pa.Table.from_batches(list(bundle_batches(bundle, {}, rows=1 << 20)), schema=WRITTEN)
        parts = list(bundle_batches(bundle, {}, rows=4))
        assert len(parts) == -(-whole.num_rows // 4) and all(p.schema == WRITTEN for p in parts)
        assert pa.Table.from_batches(parts).cast(SCHEMA).equals(whole.cast(SCHEMA))


def test_a_bundle_that_cannot_be_read_midway_leaves_no_output(crafted, bundles, tmp_path):
    """The export is written as it reads: a bundle that fails after others were written (here a
    journal line cut, read with --allow-unverified) is the one-line error, with no output file and
    no staged file left, the reading thread's error raised by the command."""
    broken = shutil.copytree(crafted, tmp_path / "broken" / crafted.name)
    lines = (broken / "samples.jsonl").read_text().splitlines()
    (broken / "samples.jsonl").write_text("\n".join([*lines[:5], lines[5][:20], *lines[6:]]) + "\n")
    out = tmp_path / "never.parquet"
    done = run_ccbench("export", bundles[0], crafted, broken, "-o", out, "--allow-unverified")
    assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr
    assert len([line for line in done.stderr.splitlines() if not line.startswith("warning:")]) == 1, done.stderr
    assert not out.exists() and not list(tmp_path.glob(".*.partial"))
