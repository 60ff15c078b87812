"""Gathering on the controller: a fetched bundle archive is unpacked safely and checked (no SSH
needed: the archives are made here with tarfile and GNU tar, as a host's pack makes them)."""

import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from ccbench.attestation.digests import digest_list
from ccbench.fleet import remote
from ccbench.fleet.gather import GatherError, unpack_bundle


def _bundle(root: Path, name: str = "bundle-1") -> Path:
    bundle = root / "out" / name
    (bundle / "raw" / "fio").mkdir(parents=True)
    (bundle / "manifest.json").write_text(json.dumps({"format_version": 2, "status": "complete"}))
    (bundle / "samples.jsonl").write_text('{"metric": "x", "value": 1}\n')
    (bundle / "raw" / "fio" / "out.json").write_bytes(b"{}" * 5000)
    entries = digest_list(bundle)
    (bundle / "attestation.json").write_text(json.dumps({"files": entries, "status": "unattested"}))
    return bundle


def _pack(run_dir: Path) -> dict:
    done = subprocess.run(
        [sys.executable, "-m", "ccbench.fleet.remote", "pack", "--run-dir", str(run_dir)],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout)


def test_a_packed_bundle_unpacks_with_every_check_passing(tmp_path):
    run_dir = tmp_path / "run"
    _bundle(run_dir)
    packed = _pack(run_dir)
    assert packed["packed"] == str(run_dir / "bundle.tar") and packed["files"] == 4
    assert packed["bytes"] == (run_dir / "bundle.tar").stat().st_size
    target = tmp_path / "fleet" / "plain"
    bundle, checks = unpack_bundle(run_dir / "bundle.tar", target, packed)
    assert bundle == target / "bundle-1"
    assert checks == {"files": 4, "bytes": packed["file_bytes"], "attestation": "match", "attestation_files": 3}
    assert (bundle / "raw" / "fio" / "out.json").read_bytes() == b"{}" * 5000
    # no staging directory left beside it
    assert [p.name for p in target.iterdir()] == ["bundle-1"]


def test_a_resumed_bundle_replaces_the_earlier_copy_and_a_stale_digest_list_is_reported(tmp_path):
    run_dir = tmp_path / "run"
    bundle = _bundle(run_dir)
    target = tmp_path / "fleet" / "plain"
    unpack_bundle(Path(_pack(run_dir)["packed"]), target)
    # the run went on after its digest list was written (e.g. killed before it could rewrite it)
    with open(bundle / "samples.jsonl", "a") as handle:
        handle.write('{"metric": "x", "value": 2}\n')
    packed = _pack(run_dir)
    unpacked, checks = unpack_bundle(Path(packed["packed"]), target, packed)
    assert len((unpacked / "samples.jsonl").read_text().splitlines()) == 2
    assert checks["attestation"] == "mismatch" and "samples.jsonl" in checks["attestation_detail"]


def _archive(path: Path, members: list[tarfile.TarInfo], data: bytes = b"x") -> Path:
    with tarfile.open(path, "w") as tar:
        for member in members:
            tar.addfile(member, io.BytesIO(data) if member.isfile() else None)
    return path


def _member(name: str, kind=tarfile.REGTYPE, linkname: str = "", size: int = 1) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, linkname
    info.size = size if kind == tarfile.REGTYPE else 0
    return info


@pytest.mark.parametrize(
    "members,message",
    [
        ([_member("/etc/evil")], "absolute"),
        ([_member("bundle/../../evil")], "leaving the bundle"),
        ([_member("bundle/link", tarfile.SYMTYPE, "/etc/passwd")], "a link"),
        ([_member("bundle/hard", tarfile.LNKTYPE, "bundle/a")], "a link"),
        ([_member("bundle/dev", tarfile.CHRTYPE)], "special file"),
        ([_member("a/x"), _member("b/y")], "one bundle directory"),
        ([_member(".hidden/x")], "bundle directory name"),
    ],
)
def test_unsafe_archives_are_refused_and_nothing_is_written(tmp_path, members, message):
    archive = _archive(tmp_path / "bundle.tar", members)
    target = tmp_path / "fleet" / "plain"
    with pytest.raises(GatherError, match=message):
        unpack_bundle(archive, target)
    assert not (tmp_path / "evil").exists()
    assert not target.exists() or list(target.iterdir()) == []


def test_an_archive_that_differs_from_what_the_host_packed_is_refused(tmp_path):
    run_dir = tmp_path / "run"
    _bundle(run_dir)
    packed = _pack(run_dir)
    target = tmp_path / "fleet" / "plain"
    with pytest.raises(GatherError, match="the host packed 6 files"):
        unpack_bundle(Path(packed["packed"]), target, {**packed, "files": 6})
    # a truncated archive (a fetch cut short) is named as damaged
    data = Path(packed["packed"]).read_bytes()
    cut = tmp_path / "cut.tar"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(GatherError, match="damaged|header says"):
        unpack_bundle(cut, target, packed)
    assert not target.exists() or list(target.iterdir()) == []


def test_pack_for_another_login_user_writes_a_recorded_directory_of_its_own(tmp_path):
    """Under become the archive is handed to the login user in a directory recorded first; here
    'nobody' stands in for that user (root only: chown)."""
    import os

    if os.geteuid() != 0:
        pytest.skip("needs root (chown to another user)")
    run_dir = tmp_path / "runs" / "fleet-x" / "run"
    _bundle(run_dir)
    result = remote.pack(run_dir, "nobody")
    where = Path((run_dir / "fetch-dir").read_text().strip())
    try:
        assert Path(result["packed"]).parent == where and result["remove"] == str(where)
        assert where.stat().st_uid == Path(result["packed"]).stat().st_uid != 0
        assert oct(where.stat().st_mode & 0o777) == "0o700"
        assert not (run_dir / "bundle.tar").exists()
    finally:
        shutil.rmtree(where)


def test_a_run_whose_supervisor_has_not_written_the_exit_status_yet_is_not_lost(tmp_path):
    """ccbench has ended (a zombie until reaped) but its supervisor is still writing the exit status:
    the run is still running, not "ended without an exit status"; once the supervisor is gone too
    without writing it, the run is lost."""
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    while Path(f"/proc/{ended.pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z":
        pass  # the child has exited and is not reaped: what the supervisor's wait() sees first
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "ccbench.pid").write_text(str(ended.pid))
    (run_dir / "supervisor.pid").write_text(str(os.getpid()))
    assert remote.status(run_dir)["state"] == "running"
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    (run_dir / "supervisor.pid").write_text(str(gone.pid))
    ended.wait()
    assert remote.status(run_dir)["state"] == "lost" and remote.status(run_dir)["exit_code"] is None
    (run_dir / "exit").write_text("0")
    assert remote.status(run_dir)["state"] == "done"
