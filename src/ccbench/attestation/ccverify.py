"""The one adapter for the Rust verifier ``ccverify`` (crates/ccverify): where the binary is, its
command line, and its JSON read back. ``verify`` (a bundle's evidence against a policy) and
``provenance`` (what evidence says of itself, ``--parse-only``) both run it through here.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from ccbench.basics.errors import CCBenchError

VERIFIER = Path(__file__).resolve().parents[3] / "crates" / "target" / "release" / "ccverify"


def verifier_path() -> Path:
    return Path(os.environ.get("CCBENCH_VERIFIER", VERIFIER))


def run_verifier(
    technology: str,
    evidence: Path,
    expected: bytes | None,
    *,
    aux: Path | None = None,
    vcek: Path | None = None,
    crl: Path | None = None,
    collateral: Path | None = None,
    policy: dict | None = None,
    at: int | None = None,
    trust_roots: Path | None = None,
) -> dict[str, Any]:
    """Run ccverify; its JSON verdict, or {"verified": False, "unverifiable": why} when it cannot run."""
    binary = verifier_path()
    if not binary.exists():
        return {
            "verified": False,
            "unverifiable": f"the verifier is not built ({binary}): run 'bash scripts/setup.sh --with transport'",
        }
    argv = [str(binary), "--technology", technology, "--evidence", str(evidence)]
    if expected is not None:
        argv += ["--report-data", expected.hex()]
    for flag, value in (("--cert-table", aux), ("--vcek", vcek), ("--crl", crl), ("--collateral", collateral)):
        if value is not None:
            argv += [flag, str(value)]
    if trust_roots is not None:
        argv += ["--trust-ark", str(trust_roots / "ark.pem"), "--trust-ask", str(trust_roots / "ask.pem")]
        if (trust_roots / "asvk.pem").is_file():
            argv += ["--trust-asvk", str(trust_roots / "asvk.pem")]
    if at is not None:
        argv += ["--at", str(at)]
    with tempfile.TemporaryDirectory() as tmp:
        if policy is not None:
            policy_file = Path(tmp) / "policy.json"
            policy_file.write_text(json.dumps(policy))
            argv += ["--policy", str(policy_file)]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    if done.returncode == 2:
        raise CCBenchError(done.stderr.strip() or "ccverify: bad input")
    try:
        return json.loads(done.stdout)
    except ValueError:
        return {
            "verified": False,
            "unverifiable": f"ccverify gave no verdict (exit {done.returncode}): {done.stderr.strip()[-300:]}",
        }


def parse_only(technology: str, evidence: Path) -> dict[str, Any] | None:
    """ccverify --parse-only: its JSON, or None when the binary is not built or gives no JSON."""
    binary = verifier_path()
    if not binary.exists():
        return None
    argv = [str(binary), "--technology", technology, "--evidence", str(evidence), "--parse-only"]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        return json.loads(done.stdout)
    except (OSError, subprocess.TimeoutExpired, ValueError):
        return None


def tee_evidence(technology: str, details: dict[str, Any], verified: bool, tcb: Any = None) -> dict[str, Any] | None:
    """ccverify's details of SEV-SNP or TDX evidence in the shape of probe["provenance"]["tee_evidence"]."""
    if not isinstance(details, dict):
        return None
    base: dict[str, Any] = {"technology": technology, "source": "ccverify", "verified": verified}
    if technology == "sev-snp":
        return base | {
            key: details.get(key) for key in ("policy", "vmpl", "reported_tcb", "current_tcb", "platform_info")
        }
    if technology == "tdx":
        base |= {
            "tee_tcb_svn": details.get("tee_tcb_svn"),
            "mrseam": details.get("mr_seam"),
            "td_attributes": details.get("td_attributes"),
        }
        if isinstance(tcb, dict) and tcb.get("status"):
            base["tcb_status"] = tcb["status"]  # Intel's judgement of the TCB, only known after verification
        return base
    return None
