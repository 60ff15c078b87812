"""Analysis reads only what verifies: the one check ``compare``, ``report``, ``export``, ``history add``,
``show`` and the fleet's summary make of each bundle before they read it.

A bundle is read when its files are what its digest list (attestation.json) says: no file changed,
missing or added, and the list's own digest holds. The large files' digests are remembered by file
identity (ccbench.bundle.digests.remembered_sha256), so a cached compare of ten million
samples does not read the journal again. A bundle without attestation.json (a run still going, a
run killed before it could end, an import or bundle made before ccbench recorded digests) is
unverified too. The TEE evidence is not checked here (``ccbench verify`` does, with the verifier
and the vendor's collateral), nor samples.parquet against the journal row for row: the columnar
reader uses a bundle's Parquet file only when the journal's SHA-256 it was made from is the
journal's (ccbench.bundle.columnar).

An unverified bundle is refused with one line naming it and what failed, exit 3 (``ccbench
verify``'s code for a tampered bundle or one without digests); an attestation.json that is not a
digest list is exit 2, as in ``verify``. ``--allow-unverified`` reads such bundles and says which.
``show`` shows a bundle whose run has not ended (its manifest says 'running') and says it is unchecked.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from ccbench.attestation.digests import ATTESTATION_FILE, compare, digest_list, list_digest, recorded_digests
from ccbench.basics.errors import CCBenchError
from ccbench.bundle import MANIFEST, find_bundles

#: shown with every refusal
ADVICE = "check it with 'ccbench verify'; --allow-unverified reads it anyway and says so"


class UnverifiedBundle(CCBenchError):
    """A bundle whose files are not what its digest list says, or that has none."""

    exit_code = 3


def problem_on_read(bundle: Path) -> str | None:
    """Why the bundle cannot be read as measured, in one sentence naming the files; None when every
    file is as its digest list says. An attestation.json that is no digest list: CCBenchError."""
    bundle = Path(bundle)
    document = recorded_digests(bundle)
    if document is None:
        return (
            f"no {ATTESTATION_FILE} (a run still going or killed, or a bundle made before ccbench recorded "
            "digests): its files cannot be checked"
        )
    recorded = document["files"]
    changes = {kind: paths for kind, paths in compare(recorded, digest_list(bundle, remembered=True)).items() if paths}
    if changes:
        listed = "; ".join(
            f"{kind}: {', '.join(map(_shown, paths[:5]))}{' ...' if len(paths) > 5 else ''}"
            for kind, paths in changes.items()
        )
        return f"its files differ from its digest list ({listed})"
    if list_digest(recorded) != document["digest"]:
        return f"the digest list in {ATTESTATION_FILE} does not match its recorded digest (edited)"
    return None


def _shown(path: str) -> str:
    """A file's name for the one-line refusal: as it is, or quoted where it holds a line break or
    another character that would not print."""
    return path if path.isprintable() else repr(path)


def check_before_reading(
    paths: Iterable[str | Path],
    allow_unverified: bool = False,
    *,
    finished_only: bool = False,
    verified: list[Path] | None = None,
) -> list[str]:
    """Check every bundle under ``paths``; the first that fails is an UnverifiedBundle (or the
    CCBenchError of a damaged attestation.json) unless ``allow_unverified``. Returns one note per
    unverified bundle let through ("<bundle>: <why>"), for the output to spell out. With
    ``finished_only`` (a reader that takes only finished runs: export, history add), the bundles are
    found as that reader finds them: a named one still running is its one-line error, one under a
    directory is left out, not refused. ``verified``, when given, gets every bundle whose files held
    (the report then does not hash them again to say whether they are attested)."""
    notes = []
    for bundle in find_bundles(paths, finished_only=finished_only):
        try:
            problem = problem_on_read(bundle)
        except CCBenchError as exc:
            if not allow_unverified:
                raise
            problem = str(exc)
        if problem is None:
            if verified is not None:
                verified.append(Path(bundle))
            continue
        if _still_running(bundle):
            problem = f"the run is still going or was killed (manifest status 'running'): {problem}"
        if not allow_unverified:
            raise UnverifiedBundle(f"{bundle}: not read: {problem}; {ADVICE}")
        notes.append(f"{bundle}: {problem}")
    return notes


def check_before_showing(bundle: str | Path, allow_unverified: bool = False) -> str | None:
    """``ccbench show``'s check of one bundle: as check_before_reading (an UnverifiedBundle, exit 3,
    unless ``allow_unverified``), except that a bundle whose run has not ended (manifest status
    'running': a run going on, or killed) is shown, since one watches a run through it: then its
    files cannot hold to a digest list yet, and that is said. Returns the warning to print (None when
    every file is as its digest list says)."""
    if not _still_running(Path(bundle)):
        notes = check_before_reading([bundle], allow_unverified)
        return unverified_warning(notes) if notes else None
    try:
        problem = problem_on_read(Path(bundle))
    except CCBenchError as exc:
        problem = str(exc)
    if problem is None:
        return None
    return (
        f"{bundle}: its run has not ended (manifest status 'running': still going, or killed), so its "
        f"files are shown unchecked: {problem}"
    )


def _still_running(bundle: Path) -> bool:
    """Whether the manifest says the run has not ended (a resumed run's older digest list then no
    longer matches: that is not tampering, and the refusal says so)."""
    try:
        return json.loads((Path(bundle) / MANIFEST).read_text(encoding="utf-8")).get("status") == "running"
    except (OSError, ValueError, AttributeError):
        return False


def split_verified(paths: Iterable[str | Path]) -> tuple[list[Path], list[str]]:
    """(the bundles that verify, a note per bundle that does not): for a caller that goes on with
    the good ones (the fleet's summary over many hosts)."""
    good, notes = [], []
    for path in paths:
        try:
            problem = problem_on_read(Path(path))
        except CCBenchError as exc:
            problem = str(exc)
        if problem is None:
            good.append(Path(path))
        else:
            notes.append(f"{path}: {problem}")
    return good, notes


def unverified_warning(notes: list[str]) -> str:
    """The line an output gives when --allow-unverified let bundles through."""
    return f"UNVERIFIED (--allow-unverified): {len(notes)} bundle(s) read without their digests holding: " + "; ".join(
        notes
    )
