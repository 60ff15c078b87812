"""A file's SHA-256, and the journal's: the one home of that hash in ccbench.

The columnar cache and the history name a journal by it (``journal_sha256``), and the attestation's
digest list (ccbench.attestation.digests) hashes every file of a bundle with it. ``remembered_sha256``
keeps a large file's digest in a small note under the columnar cache, keyed by the file's identity
(device, inode) and stamped with its size, modification and change times, so that the analysis
checks a bundle of ten million samples against its digest list without reading it again each time
(``ccbench verify`` never uses the notes).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from ccbench.basics.fsutil import atomic_target
from ccbench.bundle.layout import SAMPLES

#: bytes read at a time
CHUNK = 1 << 20
#: files from this size on have their digest remembered (a smaller one is read faster than a note)
REMEMBER_FROM = 1 << 20


def sized_sha256(path: Path) -> tuple[int, str]:
    """The file's size in bytes (as read) and SHA-256 (hex)."""
    digest = hashlib.sha256()
    size = 0
    with open(path, "rb") as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
            size += len(chunk)
    return size, digest.hexdigest()


def sha256_file(path: Path) -> str:
    return sized_sha256(path)[1]


def digest_notes_dir() -> Path:
    """Where remembered digests are kept: beside the columnar cache (ccbench.bundle.columnar)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "ccbench" / "columnar" / "digests"


def _stamp(status: os.stat_result) -> str:
    # the change time too: a writer can set a file's modification time back, not its change time
    return f"{status.st_size} {status.st_mtime_ns} {status.st_ctime_ns}"


def remembered_sha256(path: Path) -> str:
    """sha256_file, remembered by the file's identity: read again only when the file is another
    one (device, inode) or was written since (size, modification or change time)."""
    before = os.stat(path)
    if before.st_size < REMEMBER_FROM:
        return sha256_file(path)
    note = digest_notes_dir() / f"{before.st_dev}-{before.st_ino}"
    stamp = _stamp(before) + " "
    try:
        text = note.read_text()
        if text.startswith(stamp) and len(text) == len(stamp) + 64:
            return text[len(stamp) :]
    except (OSError, UnicodeDecodeError):
        pass  # no note, or a damaged one: hashed again and the note written anew
    sha = sha256_file(path)
    if _stamp(os.stat(path)) == stamp[:-1]:  # unchanged while it was read: the digest is the file's
        try:
            with atomic_target(note, durable=False) as temporary:
                temporary.write_text(stamp + sha)
        except OSError:
            pass  # a cache that cannot be written: hashed again next time
    return sha


def journal_sha256(bundle: Path, remembered: bool = True) -> str:
    """The SHA-256 of the bundle's journal (samples.jsonl), an empty file's where it has none;
    ``remembered``: through remembered_sha256 (the analysis, the history's run identity), else read
    in full."""
    journal = Path(bundle) / SAMPLES
    if not journal.exists():
        return hashlib.sha256().hexdigest()
    return remembered_sha256(journal) if remembered else sha256_file(journal)
