"""The digest list of a bundle: one SHA-256 per file, sorted by path, and the digest over that list.

Every file of the bundle is covered (manifest.json, samples.jsonl, executions.jsonl, everything under
raw/ and anything else a run left there) except what attestation itself writes: attestation.json and
the attestation/ directory holding the evidence. Files are read as bytes, so the bundle's format
version does not matter.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

ATTESTATION_FILE = "attestation.json"
EVIDENCE_DIR = "attestation"
#: domain label of the report data, so a bundle digest cannot be mistaken for any other use of the TEE
REPORT_DATA_LABEL = b"ccbench bundle attestation v1"
CHUNK = 1 << 20


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


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def digest_list(bundle: Path) -> list[dict]:
    """[{"path", "sha256", "size"}] for every covered file, sorted by path (POSIX separators)."""
    entries = []
    for path in _covered(bundle):
        relative = path.relative_to(bundle).as_posix()
        if path.is_symlink():
            entries.append({"path": relative, "sha256": "symlink", "size": -1})
            continue
        entries.append({"path": relative, "sha256": sha256_file(path), "size": path.stat().st_size})
    return entries


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
        "changed": sorted(p for p in before.keys() & now.keys()
                          if (before[p]["sha256"], before[p]["size"]) != (now[p]["sha256"], now[p]["size"])),
        "missing": sorted(before.keys() - now.keys()),
        "extra": sorted(now.keys() - before.keys()),
    }
