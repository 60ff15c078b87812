"""samples.parquet: written by every run before the digest list, checked by verify, converted into a
cache for bundles without it, and read by the analysis into the same frame as the journal gives."""

import hashlib
import json
import os
import shutil
import signal
import sys
import time
from pathlib import Path

import duckdb
import pandas as pd
import pyarrow.parquet as pq
import pytest
from conftest import DATA, only_bundle, start_run, wait_for_samples

from ccbench.analysis.samples.load import load
from ccbench.attestation import finish_bundle
from ccbench.attestation.verify import EXIT_TAMPERED, verify_bundle
from ccbench.basics.errors import BundleError, CCBenchError
from ccbench.bundle import BundleWriter, columnar, columnar_layout, journal_stream, read_bundle
from ccbench.model import Sample

PLAN = '[[workloads]]\nkind = "prime"\nn = 200\nwarmup = 1\nrepetitions = 3\n'
SLOW_PLAN = '[[workloads]]\nkind = "command"\nname = "tick"\nrepetitions = 30\ncommand = "sleep 0.2"\n'


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A cache directory of the test's own, for this process and the CLI it starts."""
    path = tmp_path / "xdg-cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(path))
    return path / "ccbench" / "columnar"


def files_of(directory: Path) -> dict[str, bytes]:
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


def journal_records(bundle: Path) -> list[dict]:
    return [columnar._normalised(r) for r in read_bundle(bundle).samples]


def write_bundle(root: Path, samples: list[Sample]) -> Path:
    writer = BundleWriter.create(root, {"plan": {"name": "p"}, "environment": {"hostname": "h"}})
    writer.append_samples(samples)
    writer.close()
    return writer.path


def sample(**overrides) -> Sample:
    base = dict(
        workload="fio",
        kind="fio",
        params={"bs": "4k", "rw": "randread"},
        variant={"storage": "encrypted", "storage_mechanism": "fscrypt"},
        metric="iops",
        unit="IOPS",
        value=1000.0,
        repetition=0,
        warmup=False,
        timestamp="2026-01-01T00:00:00Z",
        metadata={"case": {"bs": "4k", "rw": "randread"}},
    )
    return Sample(**(base | overrides))


def test_a_run_writes_parquet_covered_by_the_digest_list(tmp_path, ccbench, write_plan, cache):
    done = ccbench("run", write_plan(PLAN), "--out", tmp_path / "out", "--workdir", tmp_path / "work")
    assert done.returncode == 0, done.stderr
    bundle = only_bundle(tmp_path / "out")
    parquet = bundle / "samples.parquet"
    digests = {e["path"]: e["sha256"] for e in json.loads((bundle / "attestation.json").read_text())["files"]}
    assert digests["samples.parquet"] == hashlib.sha256(parquet.read_bytes()).hexdigest()
    table = pq.read_table(parquet)
    assert table.num_rows == len(read_bundle(bundle).samples) > 0
    assert table.schema.field("value").type == "double" and table.schema.field("warmup").type == "bool"
    assert [columnar._normalised(r) for r in columnar.records_from_table(table)] == journal_records(bundle)
    assert verify_bundle(bundle).exit_code == 0
    # the analysis read the bundle's own file: nothing was converted into the cache
    assert ccbench("show", bundle).returncode == 0 and not cache.exists()


def test_verify_catches_a_parquet_file_that_disagrees_with_the_journal(tmp_path):
    bundle = write_bundle(tmp_path, [sample(value=v, repetition=i) for i, v in enumerate((1.0, 2.0, 3.0))])
    columnar.write_bundle_parquet(bundle)
    finish_bundle(bundle, provider=None)
    assert verify_bundle(bundle).exit_code == 0
    # one value changed, and the digest list made again over it: only the row check can tell
    table = pq.read_table(bundle / "samples.parquet")
    values = table.column("value").to_pylist()
    values[1] = 2.5
    table = table.set_column(table.schema.get_field_index("value"), "value", [values])
    pq.write_table(table, bundle / "samples.parquet")
    finish_bundle(bundle, provider=None)
    verdict = verify_bundle(bundle)
    assert verdict.exit_code == EXIT_TAMPERED and verdict.integrity == "tampered"
    assert "row 2 differs" in verdict.reason
    # a row missing
    columnar.convert(bundle, bundle / "samples.parquet")
    pq.write_table(pq.read_table(bundle / "samples.parquet").slice(0, 2), bundle / "samples.parquet")
    finish_bundle(bundle, provider=None)
    assert "has 2 samples, samples.jsonl 3" in verify_bundle(bundle).reason


def test_an_interrupted_run_and_its_resumption_get_parquet(tmp_path, ccbench, workdir, write_plan):
    out = tmp_path / "out"
    path = write_plan(SLOW_PLAN.replace("repetitions = 30", "repetitions = 10"))
    process = start_run(path, out, workdir)
    bundle = wait_for_samples(out, 4)
    process.send_signal(signal.SIGINT)
    process.communicate(timeout=60)
    assert process.returncode == 130
    assert json.loads((bundle / "manifest.json").read_text())["status"] == "interrupted"
    assert pq.read_table(bundle / "samples.parquet").num_rows == len(read_bundle(bundle).samples)
    assert verify_bundle(bundle).exit_code == 0
    done = ccbench("run", "--resume", bundle, "--workdir", workdir)
    assert done.returncode == 0, done.stderr
    rows = pq.read_table(bundle / "samples.parquet").num_rows
    assert rows == len(read_bundle(bundle).samples) and verify_bundle(bundle).exit_code == 0
    assert [
        columnar._normalised(r) for r in columnar.records_from_table(pq.read_table(bundle / "samples.parquet"))
    ] == (journal_records(bundle))


def test_a_format_1_bundle_loads_through_the_cache_and_nothing_is_written_into_it(tmp_path, cache):
    bundle = tmp_path / "bundle-v1"
    shutil.copytree(DATA / "bundle-v1", bundle)
    before = files_of(bundle)
    first = load(bundle)
    key = hashlib.sha256((bundle / "samples.jsonl").read_bytes()).hexdigest()
    cached = list(cache.glob("*.parquet"))
    assert [p.name for p in cached] == [f"{key}-layout{columnar.LAYOUT}.parquet"]
    assert files_of(bundle) == before
    # the upgraded format-2 shape is what was cached: each sample knows its execution
    assert first["execution"].str.len().gt(0).any()
    modified = cached[0].stat().st_mtime_ns
    again = load(bundle)
    pd.testing.assert_frame_equal(first, again)
    assert cached[0].stat().st_mtime_ns == modified and len(list(cache.glob("*.parquet"))) == 1


def test_a_changed_journal_is_converted_again(tmp_path, cache):
    bundle = write_bundle(tmp_path, [sample(value=1.0)])
    assert load(bundle)["value"].tolist() == [1.0]
    with open(bundle / "samples.jsonl", "a") as handle:
        handle.write(sample(value=2.0, repetition=1).model_dump_json() + "\n")
    assert load(bundle)["value"].tolist() == [1.0, 2.0]
    assert len(list(cache.glob("*.parquet"))) == 2


def test_a_stale_parquet_in_the_bundle_is_not_used(tmp_path, cache):
    """A resumed run killed before it ended leaves a longer journal beside the older file."""
    bundle = write_bundle(tmp_path, [sample(value=1.0)])
    columnar.write_bundle_parquet(bundle)
    with open(bundle / "samples.jsonl", "a") as handle:
        handle.write(sample(value=2.0, repetition=1).model_dump_json() + "\n")
    assert load(bundle)["value"].tolist() == [1.0, 2.0]


def test_the_frame_is_the_same_as_from_the_journal(tmp_path, cache):
    """The Parquet path against the records in memory (the journal parsed as before)."""
    samples = [
        sample(),
        sample(metric="clat_p99", unit="us", value=3.5, better="lower", contended=True, execution="e|1", raw="raw/x"),
        sample(
            workload="ycsb",
            kind="ycsb",
            params={"records": 10, "threads": 2},
            variant={"transport": "tls", "transport_cipher": "AES"},
            metadata={"transport_cipher": "TLS_AES_256_GCM_SHA384", "statistic": "mean"},
            metric="throughput",
            better="higher",
        ),
        sample(params={}, variant={}, metadata={}, warmup=True, better=None),
    ]
    bundle = write_bundle(tmp_path, samples)
    from_parquet = load(bundle)
    in_memory = read_bundle(bundle)
    from ccbench.analysis.samples.load import frame_from_bundles

    pd.testing.assert_frame_equal(from_parquet, frame_from_bundles([in_memory]))
    first = from_parquet.iloc[0]
    assert (first["params"], first["case"], first["storage"], first["config"]) == (
        '{"bs":"4k","rw":"randread"}',
        "4k randread",
        "fscrypt",
        "h / TEE unknown / fscrypt",
    )
    assert from_parquet["execution"].tolist() == ["", "e|1", "", ""]
    assert from_parquet["contended"].tolist() == [False, True, False, False]
    assert from_parquet["better"][2] == "higher" and pd.isna(from_parquet["better"][3])
    assert from_parquet["transport_cipher"].tolist()[2] == "TLS_AES_256_GCM_SHA384"
    assert from_parquet["summary_statistic"].tolist() == [False, False, True, False]


def test_duckdb_reads_many_bundles_files_together(tmp_path):
    """Different workloads, different keys and types: one query over both files by column name."""
    fio = write_bundle(tmp_path / "a", [sample()])
    ycsb = write_bundle(
        tmp_path / "b",
        [sample(workload="ycsb", kind="ycsb", params={"threads": 4}, variant={"transport": "tls"}, value=7.0)],
    )
    files = [str(columnar.write_bundle_parquet(b)) for b in (fio, ycsb)]
    rows = duckdb.sql(
        f'select workload, "params.bs", "params.threads", "variant.transport", value '
        f"from read_parquet({files!r}, union_by_name = true) order by workload"
    ).fetchall()
    assert rows == [("fio", "4k", None, None, 1000.0), ("ycsb", None, 4, "tls", 7.0)]
    assert pq.read_schema(files[1]).field("params.threads").type == "int64"


def test_a_cut_last_line_is_warned_about_on_every_load(tmp_path, cache):
    bundle = write_bundle(tmp_path, [sample(value=1.0), sample(value=2.0, repetition=1)])
    with open(bundle / "samples.jsonl", "a") as handle:
        handle.write('{"workload": "fio", "metr')
    for _ in range(2):  # converted, then read from the cache
        with pytest.warns(UserWarning, match="the last line .* is cut off") as caught:
            assert load(bundle)["value"].tolist() == [1.0, 2.0]
        assert len([w for w in caught if "cut off" in str(w.message)]) == 1


def test_duckdbs_reading_of_a_journal_is_the_record_readers_table(tmp_path):
    """The journal parsed by DuckDB (columnar.table_from_journal) gives the table the record reader
    gives, byte for byte: JSON texts, nulls, non-ASCII text, key order of metadata, floats; a sample
    with a field beyond the layout's (kept in ``extra``) and a line without a required field are
    left to the record reader (which keeps the one or names the line of the other)."""
    samples = [
        sample(),
        sample(metadata={"z": 1, "a": {"y": 2.5e-07, "b": "ü"}}, params={"b": 1, "a": [1, 2]}, value=3),
        sample(variant={}, metadata={}, better=None, contended=True, execution="e|1", raw="raw/x", warmup=True),
    ]
    bundle = write_bundle(tmp_path / "plain", samples)
    journal = bundle / "samples.jsonl"
    fast = columnar.table_from_journal(journal)
    assert fast is not None
    assert fast.equals(columnar.table_from_records(read_bundle(bundle, samples=False).sample_chunks()))

    extra = write_bundle(tmp_path / "extra", [sample(), sample(note="kept")])
    assert columnar.table_from_journal(extra / "samples.jsonl") is None
    columnar.convert(extra, tmp_path / "extra.parquet")
    assert pq.read_table(tmp_path / "extra.parquet").column("extra").to_pylist() == [None, '{"note":"kept"}']

    lines = journal.read_text().splitlines()
    record = json.loads(lines[1])
    del record["repetition"]
    journal.write_text("\n".join([lines[0], json.dumps(record), lines[2]]) + "\n")
    assert columnar.table_from_journal(journal) is None
    with pytest.raises(BundleError, match=r"samples.jsonl:2: corrupt line \(missing field\(s\) repetition\)"):
        columnar.convert(bundle, tmp_path / "broken.parquet")


def test_without_duckdb_the_record_reader_converts(tmp_path, monkeypatch):
    """A fleet host's environment may lack DuckDB: the run's end still writes samples.parquet, by the
    record reader, the same table."""
    bundle = write_bundle(tmp_path / "plain", [sample(), sample(value=3)])
    expected = columnar.table_from_records(read_bundle(bundle, samples=False).sample_chunks())
    monkeypatch.setitem(sys.modules, "duckdb", None)  # import duckdb raises ImportError
    assert columnar.table_from_journal(bundle / "samples.jsonl") is None
    columnar.convert(bundle, tmp_path / "plain.parquet")
    written = pq.read_table(tmp_path / "plain.parquet")
    assert written.replace_schema_metadata(None).equals(expected.replace_schema_metadata(None))


def test_the_cache_removes_its_least_recently_used_files_beyond_its_limit(tmp_path, cache, monkeypatch):
    """Beyond CCBENCH_COLUMNAR_CACHE_MB the oldest-used files go, never one used within
    columnar.IN_USE_S (another process may be reading it) nor the one just written."""
    monkeypatch.setenv("CCBENCH_COLUMNAR_CACHE_MB", "0.001")  # about 1 KB: below any file
    bundles = [write_bundle(tmp_path / name, [sample(value=v)]) for name, v in (("a", 1), ("b", 2), ("c", 3))]
    first = columnar.columnar_file(read_bundle(bundles[0], samples=False))
    assert first.parent == cache
    old = time.time() - 2 * columnar.IN_USE_S
    os.utime(first, (old, old))  # last used long ago
    second = columnar.columnar_file(read_bundle(bundles[1], samples=False))
    assert not first.exists() and second.exists()  # the old one went; the one just written stays
    third = columnar.columnar_file(read_bundle(bundles[2], samples=False))
    assert second.exists() and third.exists()  # used minutes ago: kept although the cache is over
    monkeypatch.setenv("CCBENCH_COLUMNAR_CACHE_MB", "lots")
    with pytest.raises(CCBenchError, match="CCBENCH_COLUMNAR_CACHE_MB='lots' is not a size in MB"):
        columnar.prune_cache(third)


def test_a_journal_streamed_in_small_batches_and_row_groups_gives_the_same_values(tmp_path, monkeypatch):
    """The streamed conversion (journal_stream.stream_journal) in batches and row groups of a few rows and
    byte blocks that cut lines: each row group's dictionaries renumbered, nulls kept, a key that
    appears only in a later batch flattened, the same values as the record reader's table; a field
    beyond the layout's in the last line is still seen."""
    monkeypatch.setattr(journal_stream, "_BATCH_ROWS", 2)
    monkeypatch.setattr(columnar_layout, "ROW_GROUP_ROWS", 3)
    monkeypatch.setattr(journal_stream, "_BLOCK", 100)
    samples = [sample(value=float(n), repetition=n, execution=None if n % 3 else f"e|{n}") for n in range(7)]
    samples += [sample(params={"bs": "1m", "depth": 4}, variant={}, better=None, raw="raw/y", value=8.5)]
    bundle = write_bundle(tmp_path / "plain", samples)
    columnar.convert(bundle, tmp_path / "small.parquet")
    written = pq.ParquetFile(tmp_path / "small.parquet")
    assert written.num_row_groups == 3
    expected = columnar.table_from_records(read_bundle(bundle, samples=False).sample_chunks())
    table = written.read()
    assert table.schema.remove_metadata() == expected.schema.remove_metadata()
    assert table.to_pylist() == expected.to_pylist()
    assert table.column("params.depth").to_pylist() == [None] * 7 + [4]

    extra = write_bundle(tmp_path / "extra", [*samples, sample(note="kept")])
    assert columnar.table_from_journal(extra / "samples.jsonl") is None
