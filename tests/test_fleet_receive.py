"""Gathering as a stream: the host's tar stream unpacked and checked on the controller as it arrives
(ccbench.fleet.receive), a host's run without pyarrow, and the Parquet the controller writes for it
(no SSH needed: the streams come from GNU tar and from the agent's own send, through pipes)."""

import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from bundles import write_bundle
from conftest import run_ccbench

from ccbench.attestation import digests
from ccbench.attestation.verify import verify_bundle
from ccbench.fleet import receive, remote
from ccbench.fleet.gather import columnar_on_gathering
from ccbench.fleet.receive import GatherError, receive_bundle

SRC = str(Path(__file__).resolve().parents[1] / "src")


def _bundle(run_dir: Path, name: str = "bundle-1") -> Path:
    bundle = run_dir / "out" / name
    (bundle / "raw" / "fio").mkdir(parents=True)
    (bundle / "manifest.json").write_text(json.dumps({"format_version": 2, "status": "complete"}))
    (bundle / "samples.jsonl").write_text('{"metric": "x", "value": 1}\n')
    (bundle / "raw" / "fio" / "out.json").write_bytes(os.urandom(300_000))
    # a name longer than ustar's 100 characters: a pax header carries it
    (bundle / "raw" / ("n" * 150 + ".log")).write_text("long name\n")
    (bundle / "attestation.json").write_text(json.dumps({"files": digests.digest_list(bundle)}))
    return bundle


def _stream(run_dir: Path) -> tuple[dict, subprocess.Popen]:
    """The agent's listing and its send command's stdout, a pipe (read once, never seekable)."""
    listing = remote.pack(run_dir, stream=True)
    return listing, subprocess.Popen(listing["send"], stdout=subprocess.PIPE)


def _tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_a_streamed_bundle_arrives_whole_with_the_digests_computed_on_the_way(tmp_path):
    run_dir = tmp_path / "run"
    bundle = _bundle(run_dir)
    listing, sender = _stream(run_dir)
    assert listing["stream"] and listing["packed"] == str(bundle) and listing["bytes"] is None
    assert not (run_dir / "bundle.tar").exists()  # nothing is packed on the host
    target = tmp_path / "fleet" / "plain"
    got, checks = receive_bundle(sender.stdout, target, listing)
    assert sender.wait() == 0
    assert got == target / "bundle-1" and _tree(got) == _tree(bundle)
    assert checks == {"files": 5, "bytes": listing["file_bytes"], "attestation": "match", "attestation_files": 4}
    assert [p.name for p in target.iterdir()] == ["bundle-1"]  # no staging directory left
    # the host's bundle stays: it is removed by no one
    assert _tree(bundle) == _tree(got)


class _Trickle(io.RawIOBase):
    """A pipe that hands over a few bytes per read, however many are asked for (a slow link)."""

    def __init__(self, data: bytes, step: int):
        self.data, self.step, self.at = data, step, 0

    def readable(self) -> bool:
        return True

    def readinto(self, view) -> int:
        part = self.data[self.at : self.at + min(self.step, len(view))]
        view[: len(part)] = part
        self.at += len(part)
        return len(part)


@pytest.mark.parametrize("step", [1, 4093, 70_000])
def test_a_stream_arriving_in_pieces_of_any_size_arrives_whole(tmp_path, step):
    run_dir = tmp_path / "run"
    bundle = _bundle(run_dir)
    listing = remote.pack(run_dir, stream=True)
    data = subprocess.run(listing["send"], capture_output=True, check=True).stdout
    # each read of the pipe returns what is there: pieces smaller than a tar block, not aligned to one
    got, checks = receive_bundle(io.BufferedReader(_Trickle(data, step)), tmp_path / "fleet", listing)
    assert _tree(got) == _tree(bundle)
    assert checks == {"files": 5, "bytes": listing["file_bytes"], "attestation": "match", "attestation_files": 4}


def test_a_stream_whose_file_was_changed_on_the_way_is_reported_as_not_matching_its_digest_list(tmp_path):
    run_dir = tmp_path / "run"
    bundle = _bundle(run_dir)
    data = bytearray(subprocess.run(remote.pack(run_dir, stream=True)["send"], capture_output=True).stdout)
    # one byte of raw/fio/out.json's data changed in transit (its header, and so its size, unchanged)
    data[data.index((bundle / "raw" / "fio" / "out.json").read_bytes()[:64]) + 1000] ^= 0xFF
    _, checks = receive_bundle(io.BytesIO(bytes(data)), tmp_path / "fleet")
    assert checks["attestation"] == "mismatch" and "changed: raw/fio/out.json" in checks["attestation_detail"]


@pytest.mark.parametrize(
    "cut,message",
    [
        (lambda d: d[: len(d) // 2], "header says|damaged"),  # in the middle of the large file
        (lambda d: d[:1024], "packed 5 files|header says|damaged"),
    ],
)
def test_a_stream_cut_short_replaces_nothing(tmp_path, cut, message):
    run_dir = tmp_path / "run"
    _bundle(run_dir)
    listing = remote.pack(run_dir, stream=True)
    data = subprocess.run(listing["send"], capture_output=True).stdout
    target = tmp_path / "fleet"
    first, _ = receive_bundle(io.BytesIO(data), target, listing)
    before = _tree(first)
    with pytest.raises(GatherError, match=message):
        receive_bundle(io.BytesIO(cut(data)), target, listing)
    # the earlier copy is untouched and no staging directory is left
    assert _tree(first) == before and [p.name for p in target.iterdir()] == ["bundle-1"]


def _member(name: str, kind=tarfile.REGTYPE, linkname: str = "", data: bytes = b"x") -> tuple:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, linkname
    info.size = len(data) if kind == tarfile.REGTYPE else 0
    return info, data


@pytest.mark.parametrize(
    "members,message",
    [
        ([_member("b/ok"), _member("/etc/evil")], "absolute"),
        ([_member("b/ok"), _member("b/../../evil")], "leaving the bundle"),
        ([_member("b/ok"), _member("b/raw", tarfile.SYMTYPE, "/etc"), _member("b/raw/evil")], "a link"),
        ([_member("b/ok"), _member("b/hard", tarfile.LNKTYPE, "/etc/passwd")], "a link"),
        ([_member("b/fifo", tarfile.FIFOTYPE)], "special file"),
        ([_member("b/ok"), _member("c/evil")], "one bundle directory"),
        ([_member("b/ok", data=b"first"), _member("b/ok", data=b"second")], "given twice"),
        ([_member("../evil")], "leaving the bundle"),
    ],
)
def test_an_escaping_or_linking_stream_is_refused_from_a_pipe_and_nothing_is_left(tmp_path, members, message):
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if info.isfile() else None)
    read_end, write_end = os.pipe()
    writer = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdout.buffer.write(sys.stdin.buffer.read())"],
        stdin=subprocess.PIPE,
        stdout=write_end,
    )
    os.close(write_end)
    writer.stdin.write(buffer.getvalue())
    writer.stdin.close()
    target = tmp_path / "fleet" / "plain"
    with open(read_end, "rb") as stream, pytest.raises(GatherError, match=message):
        receive_bundle(stream, target)
    writer.wait()
    assert not (tmp_path / "evil").exists() and not Path("/etc/evil").exists()
    assert not target.exists() or list(target.iterdir()) == []


def test_the_receiver_process_says_why_with_exit_3_and_its_names_are_the_digest_lists(tmp_path):
    env = {**os.environ, "PYTHONPATH": SRC}
    bad = subprocess.run(
        [sys.executable, "-m", "ccbench.fleet.receive", "--target", str(tmp_path / "t"), "--where", "host h1"],
        input=b"not a tar" * 100,
        capture_output=True,
        env=env,
    )
    assert bad.returncode == 3 and b"host h1" in bad.stderr and not bad.stdout
    run_dir = tmp_path / "run"
    _bundle(run_dir)
    listing = remote.pack(run_dir, stream=True)
    good = subprocess.run(
        [
            sys.executable,
            "-m",
            "ccbench.fleet.receive",
            "--target",
            str(tmp_path / "t"),
            "--files",
            str(listing["files"]),
            "--file-bytes",
            str(listing["file_bytes"]),
        ],
        input=subprocess.run(listing["send"], capture_output=True).stdout,
        capture_output=True,
        env=env,
    )
    assert good.returncode == 0, good.stderr
    assert json.loads(good.stdout)["checks"]["attestation"] == "match"
    # the receiver imports no ccbench module that would pull in the bundle and attestation code
    assert (receive.ATTESTATION_FILE, receive.EVIDENCE_DIR) == (digests.ATTESTATION_FILE, digests.EVIDENCE_DIR)
    loaded = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, ccbench.fleet.receive; print(sorted(m for m in sys.modules if m.startswith('ccbench')))",
        ],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    ).stdout
    assert "ccbench.attestation" not in loaded and "ccbench.bundle" not in loaded


def test_the_python_send_writes_the_same_bundle_as_gnu_tar(tmp_path):
    run_dir = tmp_path / "run"
    bundle = _bundle(run_dir)
    done = subprocess.run(
        [sys.executable, "-m", "ccbench.fleet.remote", "send", "--run-dir", str(run_dir)],
        capture_output=True,
        env={**os.environ, "PYTHONPATH": SRC},
        check=True,
    )
    got, checks = receive_bundle(io.BytesIO(done.stdout), tmp_path / "fleet", remote.pack(run_dir, stream=True))
    assert _tree(got) == _tree(bundle) and checks["attestation"] == "match"


BLOCK_PYARROW = """
import sys
class _Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("pyarrow", "duckdb", "pandas", "scipy"):
            raise ImportError("not in a fleet host's wheelhouse: " + name)
sys.meta_path.insert(0, _Block())
"""


def test_a_host_run_without_pyarrow_keeps_the_journal_and_the_controller_converts_it(tmp_path, monkeypatch):
    """The host's wheelhouse has no pyarrow: its run writes no samples.parquet and a digest list over
    the journal; gathered, the bundle verifies, and the controller's Parquet is made from exactly
    the journal the host's digest list names."""
    (tmp_path / "block").mkdir()
    (tmp_path / "block" / "sitecustomize.py").write_text(BLOCK_PYARROW)
    plan = tmp_path / "plan.toml"
    plan.write_text(
        'name = "p"\n[defaults]\nrepetitions = 2\nwarmup = 0\ncooldown = 0.0\ntimeout = 60\n'
        '[[workloads]]\nkind = "command"\ncommand = "true"\n'
    )
    run_dir = tmp_path / "run"
    done = run_ccbench(
        "run",
        plan,
        "--out",
        run_dir / "out",
        "--workdir",
        tmp_path / "work",
        env={"PYTHONPATH": f"{tmp_path / 'block'}:{SRC}"},
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "no pyarrow here" in done.stdout + done.stderr
    [host_bundle] = (run_dir / "out").iterdir()
    assert not (host_bundle / "samples.parquet").exists()
    listed = {e["path"] for e in json.loads((host_bundle / "attestation.json").read_text())["files"]}
    assert "samples.jsonl" in listed
    listing, sender = _stream(run_dir)
    bundle, checks = receive_bundle(sender.stdout, tmp_path / "fleet", listing)
    assert sender.wait() == 0 and checks["attestation"] == "match"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    columnar = columnar_on_gathering(bundle)
    journal_sha = hashlib.sha256((bundle / "samples.jsonl").read_bytes()).hexdigest()
    assert columnar["parquet"] == "controller" and columnar["journal"] == "match"
    assert columnar["journal_sha256"] == journal_sha
    assert Path(columnar["parquet_file"]).is_relative_to(tmp_path / "cache")
    # the bundle is as the host wrote it: its digest list holds, nothing was added to it
    assert verify_bundle(bundle).integrity == "intact"
    assert not (bundle / "samples.parquet").exists()


def test_the_controllers_parquet_of_a_journal_other_than_the_listed_one_is_named_a_mismatch(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    bundle = write_bundle(tmp_path / "b", "plain", "none", {(): [1.0, 2.0, 3.0]})
    assert columnar_on_gathering(bundle)["journal"] == "match"
    # a journal other than the one the digest list names (a sample added after the list was written)
    with open(bundle / "samples.jsonl", "a") as journal, open(bundle / "samples.jsonl") as first:
        journal.write(first.readline())
    result = columnar_on_gathering(bundle)
    assert result["parquet"] == "controller" and result["journal"] == "mismatch"
    # a bundle whose host wrote samples.parquet keeps it (older hosts, hosts with pyarrow)
    (bundle / "samples.parquet").write_bytes(b"")
    assert columnar_on_gathering(bundle) == {"parquet": "host"}
