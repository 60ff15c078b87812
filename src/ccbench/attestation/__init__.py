"""Attested result bundles: a digest over every file of a bundle, bound into TEE evidence.

At the end of every run (and with `ccbench attest BUNDLE`), `finish_bundle` writes attestation.json:
the sorted SHA-256 list of the bundle's files, the digest over that list, and either the evidence
(SEV-SNP report or TDX quote whose report data is SHA-512 of a label, that digest and an optional
verifier nonce, stored under attestation/) or `unattested` with the reason. `ccbench verify`
recomputes everything (see verify.py). Nothing is ever faked: without a TEE a bundle says so.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ccbench.attestation.digests import ATTESTATION_FILE, EVIDENCE_DIR, digest_list, list_digest, report_data
from ccbench.attestation.evidence import AttestationError, Evidence, MockProvider, TsmProvider, detect_provider

FORMAT = "ccbench-attestation/1"
EVIDENCE_FILE = f"{EVIDENCE_DIR}/evidence.bin"
AUX_FILE = f"{EVIDENCE_DIR}/auxblob.bin"

__all__ = [
    "finish_bundle",
    "AttestationError",
    "Evidence",
    "MockProvider",
    "TsmProvider",
    "detect_provider",
    "ATTESTATION_FILE",
    "FORMAT",
]


def finish_bundle(
    bundle_path: str | Path, provider: Any = "auto", nonce: bytes | None = None, require: bool = False
) -> dict[str, Any]:
    """Write attestation.json for the bundle as it is now; return the document.

    provider: "auto" (configfs-tsm where the machine has it), a provider object, or None (digests
    only). Without evidence the bundle is `unattested` with the reason; with `require`, that is an
    AttestationError instead.
    """
    from ccbench.basics.fsutil import write_json_atomic

    bundle = Path(bundle_path)
    # evidence from an earlier attestation is replaced, never mixed with the new digest
    evidence_dir = bundle / EVIDENCE_DIR
    for name in ("evidence.bin", "auxblob.bin"):
        (evidence_dir / name).unlink(missing_ok=True)
    entries = digest_list(bundle)
    digest = list_digest(entries)
    document: dict[str, Any] = {
        "format": FORMAT,
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "algorithm": "sha256",
        "digest": digest,
        "files": entries,
    }
    reason = None
    if provider == "auto":
        provider, reason = detect_provider(_probed_tee(bundle))
    elif provider is None:
        reason = "attestation was not requested"
    evidence = None
    if provider is not None:
        data = report_data(digest, nonce)
        try:
            evidence = provider.attest(data)
        except AttestationError as exc:
            reason = str(exc)
    if evidence is None:
        if require:
            raise AttestationError(f"{bundle}: cannot attest: {reason}")
        document.update(status="unattested", reason=reason)
    else:
        evidence_dir.mkdir(exist_ok=True)
        (bundle / EVIDENCE_FILE).write_bytes(evidence.raw)
        if evidence.aux:
            (bundle / AUX_FILE).write_bytes(evidence.aux)
        document.update(
            status="attested",
            evidence={
                "technology": evidence.technology,
                "provider": evidence.provider,
                "mock": evidence.mock,
                "file": EVIDENCE_FILE,
                "aux_file": AUX_FILE if evidence.aux else None,
                "nonce": nonce.hex() if nonce else None,
                "report_data": report_data(digest, nonce).hex(),
                "tsm_generation": evidence.generation,
            },
        )
        if evidence.mock:
            document["warning"] = "MOCK evidence, for tests only: it proves nothing about the machine"
    write_json_atomic(bundle / ATTESTATION_FILE, document)
    return document


def _probed_tee(bundle: Path) -> dict[str, Any] | None:
    """The TEE section of the probe in the bundle's manifest, or None."""
    import json

    try:
        manifest = json.loads((bundle / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    tee = (manifest.get("environment") or {}).get("tee") if isinstance(manifest, dict) else None
    return tee if isinstance(tee, dict) else None
