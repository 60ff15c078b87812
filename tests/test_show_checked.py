"""``ccbench show`` checks a bundle as ``compare`` does (ccbench.attestation.onread.check_before_showing),
and a journal whose last line is cut off is said as one plain line from ccbench, once, naming the
bundle read (never Python's warning format with a source line, never another bundle's path)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from bundles import sample, seal, write
from conftest import ccbench_in_process

from ccbench.bundle.columnar import cache_path
from ccbench.bundle.digests import journal_sha256


@pytest.fixture
def cache(tmp_path, monkeypatch):
    path = tmp_path / "xdg-cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(path))
    return path


def bundle(root: Path, host: str = "snp", tee: str = "sev-snp", base: float = 1.1) -> Path:
    samples = [sample(workload="w", variant={}, metric="time", value=base + 0.01 * i, repetition=i) for i in range(6)]
    return write(root, host, tee, samples)


def cut(path: Path) -> int:
    """The journal cut inside its last line, as a copy cut short leaves it; the size it is cut at."""
    journal = path / "samples.jsonl"
    data = journal.read_bytes()
    journal.write_bytes(data[:-20])
    return len(data) - 20


def cut_said(size: int) -> str:
    return rf"samples\.jsonl:\s+the\s+last\s+line\s+\(line\s+6\)\s+is\s+cut\s+off\s+at\s+byte\s+{size:,}"


def test_show_refuses_a_cut_copy_and_shows_it_once_warned_with_allow_unverified(tmp_path, ccbench, cache):
    snp = bundle(tmp_path)
    size = cut(snp)
    refused = ccbench("show", snp)
    assert refused.returncode == 3 and refused.stdout == "", refused
    [line] = refused.stderr.splitlines()
    assert line.startswith(f"ccbench: error: {snp}: not read: ") and "changed: samples.jsonl" in line
    assert "--allow-unverified" in line
    shown = ccbench("show", snp, "--allow-unverified")
    assert shown.returncode == 0, shown.stderr
    assert "UserWarning" not in shown.stderr and "reader.py" not in shown.stderr, shown.stderr
    assert len(re.findall(cut_said(size), shown.stderr)) == 1, shown.stderr
    assert "skipping a truncated" not in shown.stderr and "the run was interrupted" not in shown.stderr
    assert shown.stderr.count("UNVERIFIED") == 1 and "changed: samples.jsonl" in shown.stderr
    assert shown.stdout.splitlines()[0].endswith(", UNVERIFIED: see the warning)"), shown.stdout
    as_json = ccbench("show", snp, "--allow-unverified", "--json")
    assert as_json.returncode == 0 and "changed: samples.jsonl" in json.loads(as_json.stdout)["unverified"]
    # compare and report say the cut line once too, in the same words
    plain = bundle(tmp_path, "plain", "none", 1.0)
    for args in (("compare", plain, snp), ("report", plain, snp, "-o", tmp_path / "r.md")):
        done = ccbench(*args, "--allow-unverified")
        assert done.returncode == 0, done.stderr
        assert len(re.findall(cut_said(size), done.stderr)) == 1 and "UserWarning" not in done.stderr, done.stderr


def test_show_of_a_bundle_that_verifies_says_nothing_of_digests(tmp_path, capsys, cache):
    code, out, err = ccbench_in_process(capsys, "show", bundle(tmp_path))
    assert code == 0 and err == "", err
    assert "UNVERIFIED" not in out
    code, out, _ = ccbench_in_process(capsys, "show", bundle(tmp_path / "2"), "--json")
    assert code == 0 and json.loads(out)["unverified"] is None


def test_a_cut_journal_read_from_the_cache_is_said_of_the_bundle_read(tmp_path, capsys, cache):
    """Two copies of one cut journal share the cache's Parquet file: each warning names its own bundle;
    a file an earlier ccbench converted (its words, another bundle's path) is said in today's words."""
    first = bundle(tmp_path / "a")
    size = cut(first)
    seal(first)  # as a run killed and then attested leaves it
    second = tmp_path / "b" / "snp"
    shutil.copytree(first, second)
    plain = bundle(tmp_path / "p", "plain", "none", 1.0)
    for path in (first, second):
        code, _, err = ccbench_in_process(capsys, "compare", plain, path, "--json")
        assert code == 0, err
        said = " ".join(err.split())
        assert len(re.findall(cut_said(size), said)) == 1 and f"{path}/samples.jsonl" in said, err
        assert str(tmp_path / "a") not in said or path == first, err
    cached = cache_path(journal_sha256(second))
    assert cached.exists()
    table = pq.read_table(cached)
    metadata = dict(table.schema.metadata)
    metadata[b"ccbench.warnings"] = json.dumps(
        ["elsewhere/snp/samples.jsonl:6: skipping a truncated last line (the run was interrupted)"]
    ).encode()
    pq.write_table(table.replace_schema_metadata(metadata), cached)
    code, _, err = ccbench_in_process(capsys, "compare", plain, second, "--json")
    said = " ".join(err.split())
    assert code == 0 and len(re.findall(cut_said(size), said)) == 1 and "elsewhere" not in said, err
