"""The digest list of a bundle: one SHA-256 per file, sorted by path, and the digest over that list.

Every file of the bundle is covered (manifest.json, samples.jsonl, executions.jsonl, everything under
raw/ and anything else a run left there) except what attestation itself writes: attestation.json and
the attestation/ directory holding the evidence. Files are read as bytes, so the bundle's format
version does not matter.

Each file is hashed by ccbench.bundle.digests, the one home of a file's SHA-256 in ccbench (the
journal's included; its ``remembered_sha256`` lets the analysis check a bundle of ten million
samples against its digest list without reading it again each time; ``ccbench verify`` never uses
the notes it keeps).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from ccbench.basics.errors import CCBenchError
from ccbench.bundle.digests import remembered_sha256, sha256_file

ATTESTATION_FILE = "attestation.json"
EVIDENCE_DIR = "attestation"
#: domain label of the report data, so a bundle digest cannot be mistaken for any other use of the TEE
REPORT_DATA_LABEL = b"ccbench bundle attestation v1"


def _covered(bundle: Path) -> list[Path]:
    files = []
    for path in bundle.rglob("*"):
        relative = path.relative_to(bundle)
        if relative.parts[0] in (ATTESTATION_FILE, EVIDENCE_DIR):
            continue
        if path.is_symlink():
            files.append(path)  # listed (and refused when hashed): a link could point anywhere
        elif path.is_file():
            files.append(path)
    return sorted(files, key=lambda p: p.relative_to(bundle).as_posix())


def digest_list(bundle: Path, remembered: bool = False) -> list[dict]:
    """[{"path", "sha256", "size"}] for every covered file, sorted by path (POSIX separators).
    ``remembered``: large files' digests from their notes (remembered_sha256), for the analysis."""
    entries = []
    hash_file = remembered_sha256 if remembered else sha256_file
    for path in _covered(bundle):
        relative = path.relative_to(bundle).as_posix()
        if path.is_symlink():
            entries.append({"path": relative, "sha256": "symlink", "size": -1})
            continue
        entries.append({"path": relative, "sha256": hash_file(path), "size": path.stat().st_size})
    return entries


def recorded_digests(bundle: Path) -> dict[str, Any] | None:
    """The bundle's attestation.json, checked to have the shape a digest list has (a ``files`` list
    of path, SHA-256 text and size; the list's digest as text); None when there is none. A
    document of another shape is a one-line CCBenchError naming the file."""
    path = Path(bundle) / ATTESTATION_FILE
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise CCBenchError(f"{path}: not readable JSON ({exc}); the bundle's digest list is damaged") from None
    if not isinstance(document, dict) or not isinstance(document.get("files"), list):
        raise CCBenchError(f"{path}: no digest list (`files`) in it; the bundle's digest list is damaged")
    if not isinstance(document.get("digest"), str):
        raise CCBenchError(f"{path}: its `digest` is {type(document.get('digest')).__name__}, not text; damaged")
    for number, entry in enumerate(document["files"], start=1):
        if not (
            isinstance(entry, dict)
            and isinstance(entry.get("path"), str)
            and isinstance(entry.get("sha256"), str)
            and type(entry.get("size")) is int
        ):
            raise CCBenchError(
                f"{path}: entry {number} of `files` is not a path, SHA-256 text and size; the digest list is damaged"
            )
    return document


def list_digest(entries: list[dict]) -> str:
    """SHA-256 over the list in a fixed text form: `sha256 size path` per line, in path order."""
    digest = hashlib.sha256()
    for entry in sorted(entries, key=lambda e: e["path"]):
        digest.update(f"{entry['sha256']} {entry['size']} {entry['path']}\n".encode())
    return digest.hexdigest()


def report_data(bundle_digest_hex: str, nonce: bytes | None = None) -> bytes:
    """The 64 bytes bound into TEE evidence: SHA-512 of the label, the bundle digest and the verifier's
    nonce (each length-prefixed, so no two inputs share an encoding)."""
    digest = bytes.fromhex(bundle_digest_hex)
    nonce = nonce or b""
    h = hashlib.sha512()
    for part in (REPORT_DATA_LABEL, digest, nonce):
        h.update(len(part).to_bytes(4, "big"))
        h.update(part)
    return h.digest()


def compare(recorded: list[dict], current: list[dict]) -> dict[str, list[str]]:
    """Which files changed, are missing or are extra, by path."""
    before = {e["path"]: e for e in recorded}
    now = {e["path"]: e for e in current}
    return {
        "changed": sorted(
            p
            for p in before.keys() & now.keys()
            if (before[p]["sha256"], before[p]["size"]) != (now[p]["sha256"], now[p]["size"])
        ),
        "missing": sorted(before.keys() - now.keys()),
        "extra": sorted(now.keys() - before.keys()),
    }
