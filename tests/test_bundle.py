import json
import shutil
from pathlib import Path

import pytest

from ccbench import BUNDLE_FORMAT_VERSION
from ccbench.basics.errors import BundleError
from ccbench.bundle import BundleWriter, find_bundles, read_bundle
from ccbench.model import Sample


def sample(**overrides):
    base = dict(
        workload="w",
        kind="command",
        params={},
        variant={"storage": "disk"},
        metric="wall_time",
        unit="s",
        value=1.0,
        repetition=0,
        warmup=False,
        timestamp="2026-01-01T00:00:00Z",
    )
    base.update(overrides)
    return Sample(**base)


def test_write_and_read_round_trip(tmp_path):
    writer = BundleWriter.create(tmp_path, {"plan": {"name": "p"}, "environment": {"hostname": "h"}})
    writer.append_samples([sample(value=1.5), sample(repetition=1, value=2.5)])
    writer.close()
    bundle = read_bundle(writer.path)
    assert [s["value"] for s in bundle.samples] == [1.5, 2.5]
    assert (
        bundle.manifest["format_version"] == BUNDLE_FORMAT_VERSION == 2 and bundle.manifest["tool"]["name"] == "ccbench"
    )
    assert find_bundles([tmp_path]) == [writer.path]


def test_corrupt_middle_line_is_an_error_with_file_and_line(tmp_path):
    writer = BundleWriter.create(tmp_path, {})
    writer.append_samples([sample()])
    writer.close()
    with open(writer.path / "samples.jsonl", "a") as handle:
        handle.write("not json\n" + sample().model_dump_json() + "\n")
    with pytest.raises(BundleError, match=r"samples.jsonl:2: corrupt line"):
        read_bundle(writer.path)


def test_line_missing_fields_is_corrupt(tmp_path):
    writer = BundleWriter.create(tmp_path, {})
    writer.close()
    (writer.path / "samples.jsonl").write_text(json.dumps({"workload": "w"}) + "\n")
    with pytest.raises(BundleError, match="missing field"):
        read_bundle(writer.path)


def test_unknown_format_version_and_missing_manifest(tmp_path):
    writer = BundleWriter.create(tmp_path, {})
    writer.close()
    manifest = json.loads((writer.path / "manifest.json").read_text())
    manifest["format_version"] = 99
    (writer.path / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(BundleError, match="unknown bundle format version 99"):
        read_bundle(writer.path)
    (writer.path / "manifest.json").unlink()
    with pytest.raises(BundleError, match="missing manifest"):
        read_bundle(writer.path)


V1 = Path(__file__).parent / "data" / "bundle-v1"


def test_every_sample_names_its_execution_and_raw_directory(tmp_path, ccbench):
    plan = tmp_path / "plan.toml"
    plan.write_text(
        'name = "v2"\n[defaults]\nrepetitions = 2\nwarmup = 1\ncooldown = 0\n'
        '[[workloads]]\nkind = "command"\ncommand = "echo hi"\n'
    )
    done = ccbench("run", plan, "--out", tmp_path / "out", "--workdir", tmp_path / "work")
    assert done.returncode == 0, done.stderr
    bundle = read_bundle(next((tmp_path / "out").iterdir()))
    assert bundle.manifest["format_version"] == 2
    keys = {r["key"]: r for r in bundle.executions}
    for sample in bundle.samples:
        record = keys[sample["execution"]]
        assert (record["repetition"], record["warmup"]) == (sample["repetition"], sample["warmup"])
        assert sample["raw"] == f"raw/{record['raw']}" and (bundle.path / sample["raw"] / "command.stdout").exists()
        assert sample["contended"] in (True, False)


def test_a_format_1_bundle_is_upgraded_on_load():
    """tests/data/bundle-v1 was written by ccbench 0.1.0 (format 1): two storage variants with a
    warmup and two repetitions, and a workload without variants."""
    assert json.loads((V1 / "manifest.json").read_text())["format_version"] == 1
    bundle = read_bundle(V1)
    assert bundle.manifest["format_version"] == 2 and bundle.format_version == 1
    chunked = [s for chunk in read_bundle(V1, samples=False).sample_chunks(7) for s in chunk]
    assert chunked == bundle.samples
    assert len(bundle.samples) == 30
    keys = {r["key"]: r for r in bundle.executions}
    for sample in bundle.samples:
        record = keys[sample["execution"]]
        assert record["workload"] == sample["workload"] and record["repetition"] == sample["repetition"]
        assert record["warmup"] == sample["warmup"] and record["variant"].get("storage") == sample["variant"].get(
            "storage"
        )
        assert sample["raw"] == f"raw/{record['raw']}" and sample["contended"] is False
    assert (V1 / bundle.samples[0]["raw"] / "result.json").exists()
    # every execution's samples point at it, and only at it
    for key, record in keys.items():
        assert sum(1 for s in bundle.samples if s["execution"] == key) == record["samples"]


def test_format_1_samples_left_by_a_killed_execution_get_the_key_of_its_rerun(tmp_path):
    """A kill between an execution's samples and its record, then --resume: the execution's samples
    appear twice, once without a record. Both copies name the rerun (same key, same raw directory)."""
    copy = tmp_path / "v1"
    shutil.copytree(V1, copy)
    lines = (copy / "samples.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in (copy / "executions.jsonl").read_text().splitlines()]
    first = records[0]["samples"]
    orphan = lines[:first]  # as if the first execution was killed after appending its samples
    (copy / "samples.jsonl").write_text("\n".join(orphan + lines) + "\n")
    bundle = read_bundle(copy)
    assert [s["execution"] for s in bundle.samples[: 2 * first]] == [records[0]["key"]] * (2 * first)
    assert bundle.samples[2 * first]["execution"] == records[1]["key"]
    # a sample no record matches keeps null fields instead of a wrong key
    stray = dict(json.loads(lines[0]), workload="gone")
    (copy / "samples.jsonl").write_text(json.dumps(stray) + "\n" + "\n".join(lines) + "\n")
    bundle = read_bundle(copy)
    assert bundle.samples[0]["execution"] is None and bundle.samples[0]["raw"] is None
    assert bundle.samples[1]["execution"] == records[0]["key"]


def test_reopening_to_resume_removes_the_older_parquet_copy(tmp_path):
    """It no longer holds every sample once the resumed run appends; the run writes it again at its end."""
    writer = BundleWriter.create(tmp_path, {})
    writer.append_samples([sample()])
    writer.close()
    (writer.path / "samples.parquet").write_bytes(b"an older copy")
    BundleWriter.reopen(writer.path).close()
    assert not (writer.path / "samples.parquet").exists()
    assert len(read_bundle(writer.path).samples) == 1


def test_a_torn_last_line_is_cut_away_never_completed(tmp_path):
    from ccbench.bundle import cut_torn_line

    journal = tmp_path / "samples.jsonl"
    journal.write_bytes(b'{"a": 1}\n{"a": 2}\n{"a": 3, "b"')
    assert cut_torn_line(journal) == len(b'{"a": 3, "b"')
    assert journal.read_bytes() == b'{"a": 1}\n{"a": 2}\n'
    assert cut_torn_line(journal) == 0 and journal.read_bytes() == b'{"a": 1}\n{"a": 2}\n'
    journal.write_bytes(b'{"only": "half')  # the first line cut: nothing whole is left
    assert cut_torn_line(journal) == len(b'{"only": "half') and journal.read_bytes() == b""
    assert cut_torn_line(tmp_path / "absent.jsonl") == 0
