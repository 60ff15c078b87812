"""Verify a bundle: recompute every digest, then the evidence (through the Rust verifier `ccverify`,
the same code the secure channel uses) and the policy.

Exit codes of `ccbench verify`: 0 all that is present holds; 2 bad input; 3 tampering (a changed,
missing or extra file, or an edited digest list); 4 evidence that fails or cannot be verified;
5 no evidence although --require-attestation.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ccbench.attestation.ccverify import run_verifier, tee_evidence
from ccbench.attestation.digests import (
    ATTESTATION_FILE,
    compare,
    digest_list,
    list_digest,
    recorded_digests,
    report_data,
)
from ccbench.attestation.evidence import MOCK_TECHNOLOGY, parse_mock
from ccbench.basics.errors import CCBenchError

EXIT_OK, EXIT_TAMPERED, EXIT_EVIDENCE, EXIT_UNATTESTED = 0, 3, 4, 5
#: collateral file names looked for in --collateral DIR (dcap-qvl's JSON for TDX; a VCEK and AMD's CRL
#: for SEV-SNP, under the names `snpguest fetch vcek|crl` writes)
TDX_COLLATERAL_NAMES = ("tdx_collateral.json", "collateral.json")
VCEK_NAMES = ("vcek.der", "vcek.pem")
CRL_NAMES = ("crl.der", "crl.pem")
#: tests only: a directory with ark.pem and ask.pem (and asvk.pem, to issue VLEKs) that replace AMD's
#: pinned roots (a generated test chain); the verdict then names the root "given root" and says TEST ROOT
TEST_ROOTS_VARIABLE = "CCBENCH_TEST_SNP_ROOTS"


@dataclass
class Verdict:
    bundle: str
    integrity: str = "intact"  # intact | tampered | no-digests
    changes: dict[str, list[str]] = field(default_factory=dict)
    attestation: str = "unattested"  # verified | mock | unverified | failed | unattested
    reason: str | None = None
    technology: str | None = None
    measurement: str | None = None
    tcb: Any = None
    root: str | None = None
    #: the kind of key that signed the evidence: VCEK or VLEK (SEV-SNP), PCK (TDX)
    signing_key: str | None = None
    #: whether the vendor's revocation list was checked, and what it said ("checked: ..." /
    #: "not checked: ..."); None when no evidence was verified
    revocation: str | None = None
    files: int = 0
    #: the verified claims' provenance (probe["provenance"]["tee_evidence"] shape, `verified: true`):
    #: SEV-SNP guest policy, VMPL, TCBs, platform info; TDX TEE_TCB_SVN, MRSEAM, TD attributes
    tee_evidence: dict[str, Any] | None = None
    #: the verification time given with --at (Unix seconds); None: now
    checked_at: int | None = None
    exit_code: int = EXIT_OK

    def summary(self) -> str:
        """One line for the machines table: attested and verified / attested-unverified (why) / unattested."""
        if self.integrity == "no-digests":
            return "no digest list (made before ccbench recorded one, or removed): integrity unknown"
        if self.integrity != "intact":
            return f"TAMPERED: {self.reason}"
        if self.attestation == "verified":
            revocation = "" if self.revocation_checked() else "; revocation not checked"
            signed = f", signed by a {self.signing_key}" if self.signing_key else ""
            return f"attested+verified ({self.technology}, root {self.root}{signed}{revocation})"
        if self.attestation == "mock":
            return "attested with MOCK evidence (tests only)"
        if self.attestation in ("unverified", "failed"):
            return f"attested-unverified: {self.reason}"
        return f"unattested: {self.reason}"

    def revocation_checked(self) -> bool:
        return bool(self.revocation) and self.revocation.startswith("checked")


def load_policy(path: str | Path | None) -> dict[str, Any] | None:
    """A policy file: JSON, or TOML (.toml); the keys are ccverify's (see docs/attestation.md)."""
    if path is None:
        return None
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise CCBenchError(f"--policy {path}: cannot read ({exc.strerror})") from None
    try:
        if path.suffix == ".toml":
            import tomllib

            policy = tomllib.loads(text)
        else:
            policy = json.loads(text)
    except ValueError as exc:
        raise CCBenchError(
            f"--policy {path}: not valid {'TOML' if path.suffix == '.toml' else 'JSON'}: {exc}"
        ) from None
    if not isinstance(policy, dict):
        raise CCBenchError(f"--policy {path}: expected a table of settings")
    return policy


def _find(directory: Path | None, names: tuple[str, ...]) -> Path | None:
    if directory is None:
        return None
    for name in names:
        if (directory / name).is_file():
            return directory / name
    return None


def verify_bundle(
    bundle_path: str | Path,
    policy: dict | None = None,
    collateral: str | Path | None = None,
    require_attestation: bool = False,
    at: int | None = None,
    remembered: bool = False,
    files_checked: bool = False,
) -> Verdict:
    """``at``: the verification time (Unix seconds) for certificate validity and the CRL's freshness;
    None is now. ``remembered``: large files' digests as the analysis remembers them by file identity
    (attestation.digests.digest_list), for the report, which has just checked them on reading;
    `ccbench verify` hashes every byte. ``files_checked``: the caller has just found every file as the
    digest list says (ccbench.attestation.onread, the check on reading), so the files are not hashed
    again, nor samples.parquet read against the journal (the columnar reader uses it only when it was
    made from that journal): the digest list's own digest and the evidence are what is checked."""
    bundle = Path(bundle_path)
    if not bundle.is_dir():
        raise CCBenchError(
            f"{bundle}: not a bundle directory (give the directory a run printed after 'bundle:', e.g. results/<name>)"
        )
    collateral_dir = Path(collateral) if collateral else None
    if collateral_dir is not None and not collateral_dir.is_dir():
        raise CCBenchError(
            f"--collateral {collateral}: not a directory (give the directory holding vcek.der, crl.der or "
            "tdx_collateral.json)"
        )
    verdict = Verdict(bundle=str(bundle), checked_at=at)
    document = recorded_digests(bundle)
    if document is None:
        verdict.integrity = "no-digests"
        verdict.reason = (
            f"no {ATTESTATION_FILE}: the bundle was made before ccbench recorded digests, or it "
            "was removed; nothing can be checked (run 'ccbench attest' on a copy you trust)"
        )
        verdict.exit_code = EXIT_TAMPERED
        return verdict
    recorded = document["files"]
    current = recorded if files_checked else digest_list(bundle, remembered=remembered)
    verdict.files = len(current)
    changes = compare(recorded, current)
    verdict.changes = {k: v for k, v in changes.items() if v}
    if verdict.changes:
        verdict.integrity = "tampered"
        verdict.reason = "; ".join(f"{kind}: {', '.join(paths)}" for kind, paths in verdict.changes.items())
        verdict.exit_code = EXIT_TAMPERED
        return verdict
    digest = list_digest(recorded)
    if digest != document.get("digest"):
        verdict.integrity = "tampered"
        verdict.reason = f"the digest list in {ATTESTATION_FILE} does not match its recorded digest (edited)"
        verdict.exit_code = EXIT_TAMPERED
        return verdict
    from ccbench.bundle.columnar import check_bundle  # samples.parquet against the journal, row for row

    if not files_checked and (problem := check_bundle(bundle)):
        verdict.integrity, verdict.reason, verdict.exit_code = "tampered", problem, EXIT_TAMPERED
        return verdict
    if document.get("status") != "attested":
        verdict.attestation = "unattested"
        verdict.reason = document.get("reason") or "no evidence"
        if require_attestation:
            verdict.exit_code = EXIT_UNATTESTED
        return verdict
    _verify_evidence(bundle, document, digest, policy, collateral_dir, verdict, at)
    if verdict.attestation == "mock" and require_attestation:
        verdict.exit_code = EXIT_UNATTESTED
        verdict.reason = "MOCK evidence (tests only) is not attestation"
    return verdict


def _verify_evidence(
    bundle: Path,
    document: dict,
    digest: str,
    policy: dict | None,
    collateral_dir: Path | None,
    verdict: Verdict,
    at: int | None = None,
) -> None:
    info = document.get("evidence") or {}
    technology = info.get("technology")
    verdict.technology = technology
    nonce = bytes.fromhex(info["nonce"]) if info.get("nonce") else None
    expected = report_data(digest, nonce)
    evidence_file = bundle / str(info.get("file", ""))
    if not evidence_file.is_file():
        verdict.attestation, verdict.reason, verdict.exit_code = (
            "failed",
            f"the evidence file {info.get('file')} is missing",
            EXIT_EVIDENCE,
        )
        return
    raw = evidence_file.read_bytes()
    if technology == MOCK_TECHNOLOGY:
        try:
            measurement, bound = parse_mock(raw)
        except ValueError as exc:
            verdict.attestation, verdict.reason, verdict.exit_code = "failed", f"mock evidence: {exc}", EXIT_EVIDENCE
            return
        verdict.measurement = measurement.hex()
        if bound != expected:
            verdict.attestation, verdict.reason, verdict.exit_code = (
                "failed",
                "report-data-mismatch: the evidence binds another digest or nonce",
                EXIT_EVIDENCE,
            )
            return
        verdict.attestation = "mock"
        verdict.reason = "MOCK evidence (tests only; proves nothing about the machine)"
        return
    if technology not in ("sev-snp", "tdx"):
        verdict.attestation, verdict.reason, verdict.exit_code = (
            "failed",
            f"unknown evidence technology {technology!r}",
            EXIT_EVIDENCE,
        )
        return
    aux = bundle / info["aux_file"] if info.get("aux_file") else None
    vcek = _find(collateral_dir, VCEK_NAMES) if technology == "sev-snp" else None
    crl = _find(collateral_dir, CRL_NAMES) if technology == "sev-snp" else None
    tdx_collateral = _find(collateral_dir, TDX_COLLATERAL_NAMES) if technology == "tdx" else None
    test_roots = os.environ.get(TEST_ROOTS_VARIABLE) if technology == "sev-snp" else None
    result = run_verifier(
        technology,
        evidence_file,
        expected,
        aux=aux if aux and aux.is_file() else None,
        vcek=vcek,
        crl=crl,
        collateral=tdx_collateral,
        policy=policy,
        trust_roots=Path(test_roots) if test_roots else None,
        at=at,
    )
    if result.get("verified"):
        claims = result["claims"]
        verdict.attestation = "verified"
        verdict.measurement, verdict.tcb, verdict.root = claims["measurement"], claims["tcb"], claims["root"]
        verdict.signing_key = claims.get("signing_key")
        verdict.tee_evidence = tee_evidence(technology, claims.get("details"), verified=True, tcb=claims.get("tcb"))
        if test_roots:
            verdict.root = f"{claims['root']} (TEST ROOT from {TEST_ROOTS_VARIABLE}, not a vendor's)"
        revocation = claims.get("revocation") or {}
        state = "checked" if revocation.get("checked") else "not checked"
        verdict.revocation = f"{state}: {revocation.get('detail', 'the verifier did not say')}"
        return
    verdict.exit_code = EXIT_EVIDENCE
    if "unverifiable" in result:
        verdict.attestation, verdict.reason = "unverified", result["unverifiable"]
    else:
        reason = result.get("reason", {})
        code = reason.get("code", "rejected")
        missing = ("missing-certificate", "missing-collateral", "revocation-not-checked")
        verdict.attestation = "unverified" if code in missing else "failed"
        verdict.reason = f"{code}: {result.get('message', '')}"
