import json

import pytest

from ccbench.bundle import BundleWriter, find_bundles, read_bundle
from ccbench.errors import BundleError
from ccbench.model import Sample


def sample(**overrides):
    base = dict(workload="w", kind="command", params={}, variant={"storage": "disk"}, metric="wall_time", unit="s",
                value=1.0, repetition=0, warmup=False, timestamp="2026-01-01T00:00:00Z")
    base.update(overrides)
    return Sample(**base)


def test_write_and_read_round_trip(tmp_path):
    writer = BundleWriter.create(tmp_path, {"plan": {"name": "p"}, "environment": {"hostname": "h"}})
    writer.append_samples([sample(value=1.5), sample(repetition=1, value=2.5)])
    writer.close()
    bundle = read_bundle(writer.path)
    assert [s["value"] for s in bundle.samples] == [1.5, 2.5]
    assert bundle.manifest["format_version"] == 1 and bundle.manifest["tool"]["name"] == "ccbench"
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
