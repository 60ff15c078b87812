"""Gathering: the fetched bundle archives unpacked and checked, then compared and reported.

``unpack_bundle`` extracts one host's archive safely and checks it against what the host packed
and against the bundle's own SHA-256 list (``attestation.json``, hashed with
``ccbench.attestation.digests``); ``compare_and_report`` runs ``ccbench compare`` and
``ccbench report`` over every host's bundle with the inventory's baseline first.

The two commands run as processes of their own, on purpose: both take the one road of
``ccbench.analysis.comparison``, so nothing is computed differently, but a fleet's bundles can need
minutes and gigabytes (DuckDB, the helper processes, matplotlib), and the controller must write
fleet.json whatever happens to them; a child process is bounded by a timeout and its memory is
returned when it ends. compare.txt is then exactly what the command prints.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path, PurePosixPath
from typing import BinaryIO

from ccbench.attestation import digests
from ccbench.attestation.onread import split_verified
from ccbench.errors import CCBenchError
from ccbench.fleet.records import FleetRun, one_line
from ccbench.fsutil import write_text_atomic


class GatherError(CCBenchError):
    """A fetched bundle archive that cannot be unpacked safely or does not match what the host packed."""


def unpack_bundle(archive: Path, target: Path, packed: dict | None = None) -> tuple[Path, dict]:
    """Unpack a fetched bundle archive (a file) into ``target/<bundle>/`` and check it, as
    ``receive_bundle`` does for a stream; return that directory and what was checked."""
    with open(archive, "rb") as stream:
        return receive_bundle(stream, target, packed, where=f"the bundle archive {archive}")


#: bytes read from the stream at a time (the tar reader's buffer and each file's chunks)
_CHUNK = 1 << 20


def receive_bundle(
    stream: BinaryIO, target: Path, packed: dict | None = None, where: str = "the bundle stream"
) -> tuple[Path, dict]:
    """Unpack one bundle from a tar stream (read once, front to back: a pipe from ``ssh ... tar -c``
    does) into ``target/<bundle>/`` and check it; return that directory and what was checked.

    Refused (GatherError, nothing replaced, the staging directory removed): members outside one
    top-level directory, absolute paths, ``..``, links, devices, a member given twice; a file whose
    data ends before its header's size (a stream cut short); a file count or byte total other than
    what the host listed (``packed``: ``files``, ``file_bytes``). Each member is checked before
    anything of it is written, and written into a staging directory beside the target (regular
    files and directories only, mode bits limited to rwx for the owner and rx for the others, as
    tarfile's ``data`` filter leaves them), hashed (SHA-256) as it is written. Only a complete
    and checked stream replaces an earlier copy of the same bundle (a resumed host's bundle is a
    superset of what was fetched before), by a rename. When the bundle has ``attestation.json``,
    every listed file's size and SHA-256 is compared with the digests computed while receiving (the
    files are not read again): the result is returned (``attestation``: match, mismatch, absent),
    never raised, so that a stale list (a run killed before it could rewrite it) loses no measurement."""
    staging: Path | None = None
    name: str | None = None
    seen: set[str] = set()
    hashed: dict[str, tuple[str, int]] = {}  # path inside the bundle -> (sha256, size)
    try:
        reader = _ForwardReader(stream)
        with tarfile.open(fileobj=reader, mode="r:") as tar:
            for member in tar:
                parts = PurePosixPath(member.name).parts
                if member.name.startswith("/") or not parts or ".." in parts:
                    raise GatherError(f"{where}: refused member {member.name!r} (absolute or leaving the bundle)")
                if not (member.isfile() or member.isdir()):
                    raise GatherError(f"{where}: refused member {member.name!r} (a link or special file)")
                if name is None:
                    name = parts[0]
                    if name in (".", "") or name.startswith("."):
                        raise GatherError(f"{where}: refused bundle directory name {name!r}")
                    target.mkdir(parents=True, exist_ok=True)
                    staging = Path(tempfile.mkdtemp(prefix=f".{name}.unpacking-", dir=target))
                elif parts[0] != name:
                    raise GatherError(f"{where}: expected one bundle directory, found {sorted({name, parts[0]})}")
                relative = "/".join(parts)
                if relative in seen:
                    raise GatherError(f"{where}: refused member {member.name!r} (given twice)")
                seen.add(relative)
                path = staging.joinpath(*parts)
                if member.isdir():
                    path.mkdir(mode=0o755, parents=True, exist_ok=True)
                    continue
                path.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
                hashed["/".join(parts[1:])] = _receive_file(reader, member, path, where)
    except (tarfile.TarError, EOFError) as exc:
        _discard(staging)
        raise GatherError(f"{where} is damaged ({exc}): fetch again (ccbench fleet run --resume)") from None
    except BaseException:
        _discard(staging)
        raise
    try:
        if name is None or staging is None:
            raise GatherError(f"{where}: expected one bundle directory, found none")
        total = sum(size for _, size in hashed.values())
        if packed and packed.get("files") is not None:
            if (len(hashed), total) != (packed["files"], packed["file_bytes"]):
                raise GatherError(
                    f"{where}: {len(hashed)} files, {total} bytes; the host packed {packed['files']} files, "
                    f"{packed['file_bytes']} bytes: fetch again (ccbench fleet run --resume)"
                )
        checks = {"files": len(hashed), "bytes": total, **_check_attestation(staging / name, hashed)}
        bundle = target / name
        if bundle.exists():
            shutil.rmtree(bundle)
        os.replace(staging / name, bundle)
    finally:
        _discard(staging)
    return bundle, checks


class _ForwardReader:
    """A stream read once, front to back (a pipe), with the ``tell`` and forward-only ``seek``
    tarfile's reader asks for: tarfile parses the headers (pax and GNU extensions included), the
    files' data is read from here directly (``_receive_file``) instead of through tarfile's stream
    mode, which copies every byte several times (measured: 1.6 of 2.4 s for 105 MB)."""

    def __init__(self, stream: BinaryIO):
        self.stream = stream
        self.position = 0

    def read(self, size: int = -1) -> bytes:
        if size is None or size < 0:
            data = self.stream.read()
        else:
            parts, left = [], size
            while left > 0:
                part = self.stream.read(left)
                if not part:
                    break
                parts.append(part)
                left -= len(part)
            data = b"".join(parts)
        self.position += len(data)
        return data

    def readinto(self, view: memoryview) -> int:
        count = self.stream.readinto(view) or 0
        self.position += count
        return count

    def tell(self) -> int:
        return self.position

    def seek(self, offset: int, whence: int = 0) -> int:
        if whence != 0 or offset < self.position:
            raise tarfile.ReadError("the stream is read front to back (a seek backwards was asked for)")
        while self.position < offset:
            if not self.read(min(_CHUNK, offset - self.position)):
                raise tarfile.ReadError("unexpected end of data")
        return self.position


def _receive_file(reader: _ForwardReader, member: tarfile.TarInfo, path: Path, where: str) -> tuple[str, int]:
    """One regular file's data, read from the stream where tarfile left it (at the member's data), to
    ``path``, hashed on the way: (SHA-256, size). tarfile skips the padding after it."""
    if reader.tell() != member.offset_data:
        raise GatherError(f"{where}: {member.name}: its data is not where the stream is ({reader.tell()})")
    digest = hashlib.sha256()
    buffer = memoryview(bytearray(min(_CHUNK, max(member.size, 1))))
    size = 0
    with open(path, "xb", buffering=0) as out:
        while size < member.size:
            count = reader.readinto(buffer[: min(len(buffer), member.size - size)])
            if not count:
                break
            chunk = buffer[:count]
            digest.update(chunk)
            out.write(chunk)
            size += count
    if size != member.size:
        raise GatherError(f"{where}: {member.name} unpacked to {size} bytes, its header says {member.size}")
    os.chmod(path, (member.mode & 0o755) | 0o600)
    os.utime(path, (member.mtime, member.mtime))
    return digest.hexdigest(), size


def _discard(staging: Path | None) -> None:
    if staging is not None:
        shutil.rmtree(staging, ignore_errors=True)


def _check_attestation(bundle: Path, hashed: dict[str, tuple[str, int]]) -> dict:
    """The bundle's files against the SHA-256 list in its attestation.json (files it does not list
    are not checked: a run killed before rewriting the list adds some), with the digests computed
    while receiving (``hashed``: path inside the bundle -> SHA-256 and size), over the files the
    digest list covers (``digests.digest_list``: all but what attestation itself writes)."""
    path = bundle / digests.ATTESTATION_FILE
    if not path.is_file():
        return {"attestation": "absent"}
    try:
        entries = json.loads(path.read_text()).get("files") or []
        recorded = [{"path": str(e["path"]), "sha256": e.get("sha256"), "size": e.get("size")} for e in entries]
    except (OSError, ValueError, AttributeError, KeyError, TypeError):
        return {"attestation": "mismatch", "attestation_detail": "attestation.json is not readable JSON"}
    current = [
        {"path": relative, "sha256": sha, "size": size}
        for relative, (sha, size) in hashed.items()
        if relative.split("/", 1)[0] not in (digests.ATTESTATION_FILE, digests.EVIDENCE_DIR)
    ]
    differences = digests.compare(recorded, current)
    changed, missing = differences["changed"], differences["missing"]
    if changed or missing:
        detail = "; ".join(
            f"{what}: {', '.join(map(str, names[:5]))}{' ...' if len(names) > 5 else ''}"
            for what, names in (("changed", changed), ("missing", missing))
            if names
        )
        return {"attestation": "mismatch", "attestation_detail": detail, "attestation_files": len(entries)}
    return {"attestation": "match", "attestation_files": len(entries)}


def gathering_settings(env: dict[str, str]) -> dict:
    """How bundles travel, as fleet.json records it (the effective values, a user's override included)."""
    return {
        "archive": "one uncompressed tar per bundle, packed on the host (GNU tar), removed after the fetch",
        "fetch": "ccbench_fetch action: the ssh connection's fetch_file, as the login user",
        "transfer_method": env.get("ANSIBLE_SSH_TRANSFER_METHOD") or "smart (sftp, then scp)",
        "ssh_args": env.get("ANSIBLE_SSH_ARGS"),
        "pipelining": env.get("ANSIBLE_PIPELINING"),
        "checks": "archive size, member sizes, file count and bytes as packed, attestation.json SHA-256 list",
    }


def probe_summary(bundle: Path) -> dict | None:
    """The few probe facts fleet.json shows per host (the bundle keeps the whole probe)."""
    try:
        manifest = json.loads((bundle / "manifest.json").read_text())
    except (OSError, ValueError):
        return None
    environment = manifest.get("environment") or {}
    cpu, tee = environment.get("cpu") or {}, environment.get("tee") or {}
    return {
        "hostname": environment.get("hostname"),
        "cpu": cpu.get("model"),
        "threads": cpu.get("threads"),
        "memory_bytes": (environment.get("memory") or {}).get("total_bytes"),
        "kernel": (environment.get("kernel") or {}).get("release"),
        "os": (environment.get("os") or {}).get("pretty_name"),
        "virtualization": environment.get("virtualization"),
        "tee": tee.get("technology"),
        "bundle_status": manifest.get("status"),
    }


def add_to_history(fleet: FleetRun, store_path: str) -> str:
    """Put the gathered bundles into a results store (``ccbench history``), each under its host's
    label; a line saying what was added (or why nothing could be)."""
    from ccbench.errors import CCBenchError
    from ccbench.results.history import Store, add_bundles

    bundles = {
        str((fleet.directory / r.bundle).resolve()): fleet.label_of(key)
        for key, rounds in fleet.runs.items()
        for r in rounds.values()
        if r.bundle and r.outcome in ("ok", "failed")
    }
    if not bundles:
        return f"history {store_path}: no bundle was gathered, nothing added"
    verified, unverified = split_verified(bundles)
    left_out = f"; left out, unverified: {'; '.join(unverified)}" if unverified else ""
    if not verified:
        return f"history {store_path}: nothing added{left_out}"
    try:
        added, known = add_bundles([str(p) for p in verified], Store(store_path), bundles)
    except CCBenchError as exc:
        return f"history {store_path}: not added: {exc}{left_out}"
    return f"history {store_path}: {added} bundle(s) added, {known} already there{left_out}"


def compare_and_report(fleet: FleetRun) -> None:
    """``ccbench compare`` and ``ccbench report`` over the gathered bundles, the baseline's first
    (their outputs and any failure recorded in ``fleet``)."""
    # the baseline's bundles first: compare and report take the first bundle's least-protected
    # configuration as the baseline (per workload, so that prime without a storage variant
    # still finds its baseline; a --baseline label would match several configurations)
    # replicas (hosts sharing a label) are labelled alike, so they form one configuration
    order = sorted(fleet.runs, key=lambda key: fleet.label_of(key) != fleet.baseline)
    bundles = [
        (fleet.label_of(key), fleet.directory / r.bundle)
        for key in order
        for r in fleet.runs[key].values()
        if r.bundle and r.outcome in ("ok", "failed")
    ]
    # analysis reads only what verifies: a bundle whose files differ from its digest list is left out, and said
    verified, unverified = split_verified(path for _, path in bundles)
    if unverified:
        fleet.analysis_error = "left out, unverified: " + "; ".join(unverified)
    bundles = [(label, path) for label, path in bundles if Path(path) in verified]
    labels_present = {label for label, _ in bundles}
    if len(labels_present) < 2:
        fleet.analysis_error = (
            (fleet.analysis_error or "") + " fewer than two labels brought back a bundle: nothing to compare"
        ).strip()
        return
    args = [str(path) for _, path in bundles]
    for label, path in bundles:
        args += ["--label", f"{path}={label}"]
    env = {**os.environ, "COLUMNS": "200"}
    compare = subprocess.run(
        [sys.executable, "-m", "ccbench", "compare", *args], capture_output=True, text=True, env=env, timeout=1800
    )
    write_text_atomic(fleet.directory / "compare.txt", compare.stdout + compare.stderr)
    fleet.compare = "compare.txt"
    if compare.returncode != 0:
        fleet.analysis_error = ((fleet.analysis_error or "") + f" ccbench compare: {one_line(compare.stderr)}").strip()
    report = subprocess.run(
        [
            sys.executable,
            "-m",
            "ccbench",
            "report",
            *args,
            "-o",
            str(fleet.directory / "report.html"),
            "--title",
            f"ccbench fleet {fleet.run_id}",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=1800,
    )
    if report.returncode == 0:
        fleet.report = "report.html"
    else:
        fleet.analysis_error = (fleet.analysis_error or "") + f" ccbench report: {one_line(report.stderr)}"
