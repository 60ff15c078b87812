"""Attested bundles: digest lists, evidence (mock provider for tests, configfs-tsm against a fake
configfs tree), `ccbench attest` and `ccbench verify` with their exit codes, and real SEV-SNP / TDX
vectors through the Rust verifier (`ccverify`, the code the secure channel uses)."""

import json
import os
import shutil
from datetime import datetime
from pathlib import Path

import pytest

from ccbench.attestation import MockProvider, TsmProvider, finish_bundle
from ccbench.attestation.ccverify import run_verifier, verifier_path
from ccbench.attestation.digests import report_data
from ccbench.attestation.evidence import AttestationError, parse_mock
from ccbench.attestation.verify import (
    EXIT_EVIDENCE,
    EXIT_TAMPERED,
    EXIT_UNATTESTED,
    verify_bundle,
)

DATA = Path(__file__).parent / "data" / "attestation"
needs_verifier = pytest.mark.skipif(
    not verifier_path().exists(), reason="ccverify is not built: run 'bash scripts/setup.sh --with transport'"
)


def make_bundle(root: Path) -> Path:
    bundle = root / "host-20260101T000000Z"
    (bundle / "raw" / "fio" / "storage-disk" / "rep-0").mkdir(parents=True)
    (bundle / "manifest.json").write_text(json.dumps({"format_version": 2, "plan": {"name": "t"}}))
    (bundle / "samples.jsonl").write_text('{"metric": "read_iops", "value": 1234.5}\n{"metric": "x", "value": 1}\n')
    (bundle / "executions.jsonl").write_text('{"execution": "fio|disk|rep|0", "status": "ok"}\n')
    (bundle / "raw" / "fio" / "storage-disk" / "rep-0" / "fio.json").write_text('{"jobs": []}')
    (bundle / "raw" / "fio" / "storage-disk" / "rep-0" / "stderr.log").write_bytes(b"\x00\x01 binary bits")
    return bundle


def test_an_unattested_bundle_gets_its_digest_list_and_verifies(tmp_path):
    bundle = make_bundle(tmp_path)
    document = finish_bundle(bundle, provider=None)
    assert document["status"] == "unattested" and document["reason"]
    paths = [entry["path"] for entry in document["files"]]
    assert paths == sorted(paths)
    assert "raw/fio/storage-disk/rep-0/fio.json" in paths and "manifest.json" in paths
    verdict = verify_bundle(bundle)
    assert (verdict.integrity, verdict.attestation, verdict.exit_code) == ("intact", "unattested", 0)
    assert verify_bundle(bundle, require_attestation=True).exit_code == EXIT_UNATTESTED


def test_auto_detection_on_this_machine_says_why_there_is_no_evidence(tmp_path, monkeypatch):
    monkeypatch.delenv("CCBENCH_TEST_ATTESTATION_PROVIDER", raising=False)
    bundle = make_bundle(tmp_path)
    document = finish_bundle(bundle)
    if document["status"] == "unattested":
        assert "configfs-tsm" in document["reason"] or "tsm" in document["reason"]
    else:  # a real confidential VM
        assert document["evidence"]["technology"] in ("sev-snp", "tdx")


def test_one_changed_byte_in_any_file_is_caught_and_named(tmp_path):
    bundle = make_bundle(tmp_path)
    finish_bundle(bundle, provider=MockProvider())
    assert verify_bundle(bundle).attestation == "mock"
    files = [
        p for p in bundle.rglob("*") if p.is_file() and p.name != "attestation.json" and "attestation" not in p.parts
    ]
    assert len(files) == 5
    for path in files:
        original = path.read_bytes()
        changed = bytearray(original)
        changed[len(changed) // 2] ^= 0x01
        path.write_bytes(bytes(changed))
        verdict = verify_bundle(bundle)
        relative = path.relative_to(bundle).as_posix()
        assert verdict.exit_code == EXIT_TAMPERED, relative
        assert verdict.changes == {"changed": [relative]}
        assert relative in verdict.summary()
        path.write_bytes(original)
    assert verify_bundle(bundle).exit_code == 0


def test_missing_extra_and_relisted_files_are_caught(tmp_path):
    bundle = make_bundle(tmp_path)
    finish_bundle(bundle, provider=MockProvider())
    log = bundle / "raw" / "fio" / "storage-disk" / "rep-0" / "stderr.log"
    saved = log.read_bytes()
    log.unlink()
    assert verify_bundle(bundle).changes == {"missing": ["raw/fio/storage-disk/rep-0/stderr.log"]}
    log.write_bytes(saved)
    (bundle / "raw" / "planted.txt").write_text("x")
    assert verify_bundle(bundle).changes == {"extra": ["raw/planted.txt"]}
    (bundle / "raw" / "planted.txt").unlink()
    # someone edits a sample and the digest list to match: the list's own digest no longer holds
    document = json.loads((bundle / "attestation.json").read_text())
    (bundle / "samples.jsonl").write_text('{"metric": "read_iops", "value": 9999.9}\n')
    import hashlib

    for entry in document["files"]:
        if entry["path"] == "samples.jsonl":
            entry["sha256"] = hashlib.sha256((bundle / "samples.jsonl").read_bytes()).hexdigest()
            entry["size"] = (bundle / "samples.jsonl").stat().st_size
    (bundle / "attestation.json").write_text(json.dumps(document))
    verdict = verify_bundle(bundle)
    assert verdict.exit_code == EXIT_TAMPERED and "edited" in verdict.reason
    # and if the recorded digest is recomputed too, the evidence binds the old one
    from ccbench.attestation.digests import list_digest

    document["digest"] = list_digest(document["files"])
    (bundle / "attestation.json").write_text(json.dumps(document))
    verdict = verify_bundle(bundle)
    assert verdict.exit_code == EXIT_EVIDENCE and "report-data-mismatch" in verdict.reason


def test_mock_evidence_says_it_is_mock_everywhere(tmp_path):
    bundle = make_bundle(tmp_path)
    document = finish_bundle(bundle, provider=MockProvider(), nonce=b"\x01\x02")
    assert document["evidence"]["mock"] is True and "MOCK" in document["warning"]
    raw = (bundle / "attestation" / "evidence.bin").read_bytes()
    assert b"mock-tests-only" in raw
    _, bound = parse_mock(raw)
    assert bound == report_data(document["digest"], b"\x01\x02")
    verdict = verify_bundle(bundle)
    assert verdict.attestation == "mock" and "MOCK" in verdict.summary() and verdict.exit_code == 0
    # mock evidence is never attestation
    assert verify_bundle(bundle, require_attestation=True).exit_code == EXIT_UNATTESTED


def test_no_digest_list_is_not_a_pass(tmp_path):
    bundle = make_bundle(tmp_path)
    verdict = verify_bundle(bundle)
    assert verdict.exit_code == EXIT_TAMPERED and "attestation.json" in verdict.reason


def test_attest_and_verify_commands(tmp_path, ccbench):
    bundle = make_bundle(tmp_path)
    env = {"CCBENCH_TEST_ATTESTATION_PROVIDER": "mock"}
    done = ccbench("attest", bundle, "--nonce", "00ff10", env=env)
    assert done.returncode == 0, done.stderr
    assert "MOCK" in done.stdout
    assert json.loads((bundle / "attestation.json").read_text())["evidence"]["nonce"] == "00ff10"
    done = ccbench("verify", bundle)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "integrity: intact" in done.stdout and "mock" in done.stdout
    (bundle / "executions.jsonl").write_text('{"execution": "fio|disk|rep|0", "status": "failed"}\n')
    done = ccbench("verify", bundle)
    assert done.returncode == EXIT_TAMPERED and "executions.jsonl" in done.stdout
    # bad input: one line, exit 2
    for args in (
        ["attest", bundle, "--nonce", "zz"],
        ["verify", tmp_path / "nope"],
        ["verify", bundle, "--policy", tmp_path / "missing.json"],
    ):
        done = ccbench(*args, env=env)
        assert done.returncode == 2, (args, done.stdout, done.stderr)
        assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_attest_without_a_tee_marks_the_bundle_unattested(tmp_path, ccbench):
    if TsmProvider().available() is None:
        pytest.skip("this machine has configfs-tsm")
    bundle = make_bundle(tmp_path)
    done = ccbench("attest", bundle, env={"CCBENCH_TEST_ATTESTATION_PROVIDER": ""})
    assert done.returncode == 4 and "unattested" in done.stderr
    assert json.loads((bundle / "attestation.json").read_text())["status"] == "unattested"
    assert ccbench("verify", bundle).returncode == 0
    assert ccbench("verify", bundle, "--require-attestation").returncode == EXIT_UNATTESTED


class FakeTsm(TsmProvider):
    """configfs-tsm as files: the kernel's entry is a directory whose files a test fills in."""

    def __init__(self, root, races=0, provider="sev_guest"):
        super().__init__(root)
        self.races, self.provider, self.reads = races, provider, 0

    def _make_entry(self):
        entry = super()._make_entry()
        for name, value in (
            ("generation", b"0"),
            ("provider", self.provider.encode() + b"\n"),
            ("outblob", b"R" * 1184),
            ("auxblob", b"certificate table"),
        ):
            (entry / name).write_bytes(value)
        return entry

    def _generation(self, entry):
        self.reads += 1
        # the first `races` attempts see another writer bump the generation between our reads
        return self.reads if self.reads <= 2 * self.races else 100

    def attest(self, report_data):
        try:
            return super().attest(report_data)
        finally:
            for entry in self.root.iterdir():  # what a real configfs removes with rmdir
                shutil.rmtree(entry)


def test_configfs_tsm_reads_outblob_and_auxblob_and_retries_a_race(tmp_path):
    evidence = FakeTsm(tmp_path, races=1).attest(b"\x07" * 64)
    assert (evidence.technology, evidence.provider, evidence.aux) == ("sev-snp", "sev_guest", b"certificate table")
    assert len(evidence.raw) == 1184
    assert (tmp_path / "x").exists() is False and list(tmp_path.iterdir()) == []
    with pytest.raises(AttestationError, match="kept changing"):
        FakeTsm(tmp_path, races=5).attest(b"\x07" * 64)
    with pytest.raises(AttestationError, match="not supported"):
        FakeTsm(tmp_path, provider="arm_cca_guest").attest(b"\x07" * 64)
    assert "no configfs-tsm" in TsmProvider(tmp_path / "absent").available()


@needs_verifier
def test_real_vectors_verify_through_ccverify(tmp_path):
    report = tmp_path / "report.bin"
    report.write_bytes(bytes.fromhex((DATA / "report_milan.hex").read_text().strip()))
    result = run_verifier("sev-snp", report, None, vcek=DATA / "vcek_milan.der")
    assert result["verified"], result
    assert result["claims"]["root"] == "AMD Milan"
    from datetime import datetime

    collateral = json.loads((DATA / "tdx_quote_collateral.json").read_text())
    # inside the collateral's validity window: after both the TCB info and the QE identity were issued
    issued = max(
        int(datetime.fromisoformat(json.loads(collateral[part])["issueDate"].replace("Z", "+00:00")).timestamp())
        for part in ("tcb_info", "qe_identity")
    )
    result = run_verifier(
        "tdx", DATA / "tdx_quote.bin", None, collateral=DATA / "tdx_quote_collateral.json", at=issued + 1
    )
    assert result["verified"], result
    # today the sample collateral is past its next update
    result = run_verifier("tdx", DATA / "tdx_quote.bin", None, collateral=DATA / "tdx_quote_collateral.json")
    assert result["reason"]["code"] == "stale", result


@needs_verifier
def test_real_evidence_binding_another_digest_is_rejected(tmp_path, ccbench):
    """A real SEV-SNP report (signed by AMD's chain) placed into a bundle: it verifies as a report,
    but its report data does not bind this bundle's digest, so the bundle fails with exit 4."""
    bundle = make_bundle(tmp_path)
    document = finish_bundle(bundle, provider=None)
    (bundle / "attestation").mkdir()
    (bundle / "attestation" / "evidence.bin").write_bytes(
        bytes.fromhex((DATA / "report_milan.hex").read_text().strip())
    )
    document.update(
        status="attested",
        evidence={
            "technology": "sev-snp",
            "provider": "sev_guest",
            "mock": False,
            "file": "attestation/evidence.bin",
            "aux_file": None,
            "nonce": None,
        },
    )
    (bundle / "attestation.json").write_text(json.dumps(document))
    collateral = tmp_path / "collateral"
    collateral.mkdir()
    shutil.copy(DATA / "vcek_milan.der", collateral / "vcek.der")
    done = ccbench("verify", bundle, "--collateral", collateral)
    assert done.returncode == EXIT_EVIDENCE, done.stdout + done.stderr
    assert "report-data-mismatch" in done.stdout
    # without the VCEK the evidence cannot be checked: attested but unverified, also exit 4
    verdict = verify_bundle(bundle)
    assert verdict.exit_code == EXIT_EVIDENCE and verdict.attestation == "unverified"
    assert "missing-certificate" in verdict.reason and "attested-unverified" in verdict.summary()
    # a policy file with a misspelt key is bad input, not a pass
    policy = tmp_path / "policy.json"
    policy.write_text('{"measurment": []}')
    done = ccbench("verify", bundle, "--collateral", collateral, "--policy", policy)
    assert done.returncode == 2 and "measurment" in done.stderr


def test_every_run_ends_with_its_digest_list(tmp_path, ccbench, write_plan):
    """A real `ccbench run`: the bundle ends with attestation.json (the mock provider, chosen by the
    test-only environment variable, stands in for a TEE), and `ccbench verify` passes, then catches a
    changed sample."""
    write_plan('[[workloads]]\nkind = "prime"\nn = 200\nwarmup = 0\nrepetitions = 2\n')
    done = ccbench(
        "run",
        "plan.toml",
        "--out",
        "out",
        "--workdir",
        "work",
        cwd=tmp_path,
        env={"CCBENCH_TEST_ATTESTATION_PROVIDER": "mock"},
    )
    assert done.returncode == 0, done.stderr
    bundle = next(p for p in (tmp_path / "out").iterdir() if p.is_dir())
    document = json.loads((bundle / "attestation.json").read_text())
    assert document["status"] == "attested" and document["evidence"]["mock"] is True
    paths = {entry["path"] for entry in document["files"]}
    assert {"manifest.json", "samples.jsonl", "executions.jsonl"} <= paths
    assert any(path.startswith("raw/") for path in paths)
    assert ccbench("verify", bundle).returncode == 0
    samples = bundle / "samples.jsonl"
    samples.write_text(samples.read_text().replace('"value":', '"value": ', 1))
    done = ccbench("verify", bundle)
    assert done.returncode == EXIT_TAMPERED and "samples.jsonl" in done.stdout


def test_the_report_machines_table_shows_each_bundles_attestation(tmp_path):
    from ccbench.report.sections.machines import _attestation

    bundle = make_bundle(tmp_path)
    assert _attestation(bundle).startswith("no digest list")
    finish_bundle(bundle, provider=None)
    assert _attestation(bundle).startswith("unattested: attestation was not requested")
    finish_bundle(bundle, provider=MockProvider())
    assert "MOCK" in _attestation(bundle)
    (bundle / "samples.jsonl").write_text("{}\n")
    assert _attestation(bundle).startswith("TAMPERED") and "samples.jsonl" in _attestation(bundle)


def _openssl(directory: Path, *args: str) -> None:
    import subprocess

    done = subprocess.run(["openssl", *args], cwd=directory, capture_output=True, text=True)
    assert done.returncode == 0, f"openssl {args}: {done.stderr}"


PSS = ("-sigopt", "rsa_padding_mode:pss", "-sigopt", "rsa_pss_saltlen:48")


def make_test_chain(directory: Path, vlek: bool = False) -> Path:
    """ARK (RSA-PSS, self-signed) -> ASK -> VCEK (P-384), as AMD's, made with the openssl command line;
    with ``vlek``, also ARK -> ASVK -> VLEK (the key is still vcek.key/vcek.pem, issued by the ASVK)."""
    directory.mkdir(parents=True)
    for name in ("ark", "ask", "asvk") if vlek else ("ark", "ask"):
        _openssl(directory, "genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", f"{name}.key")
    _openssl(directory, "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-384", "-out", "vcek.key")
    _openssl(
        directory, "req", "-x509", "-new", "-key", "ark.key", "-subj", "/CN=ARK-Test", "-days", "30",
        "-out", "ark.pem", "-sha384", *PSS,
    )  # fmt: skip
    issued = [("ask", "ark", "/CN=SEV-Test"), ("vcek", "ask", "/CN=SEV-VCEK-Test")]
    if vlek:
        issued = [
            ("ask", "ark", "/CN=SEV-Test"),
            ("asvk", "ark", "/CN=SEV-VLEK-Test"),
            ("vcek", "asvk", "/CN=SEV-VLEK"),
        ]
    for name, issuer, subject in issued:
        _openssl(directory, "req", "-new", "-key", f"{name}.key", "-subj", subject, "-out", f"{name}.csr")
        _openssl(
            directory, "x509", "-req", "-in", f"{name}.csr", "-CA", f"{issuer}.pem", "-CAkey", f"{issuer}.key",
            "-CAcreateserial", "-days", "30", "-out", f"{name}.pem", "-sha384", *PSS,
        )  # fmt: skip
    return directory


def make_test_crl(chain: Path, name: str, revoke: tuple[str, ...] = ()) -> Path:
    """A CRL of the test ARK (RSA-PSS/SHA-384, valid a day) listing the named certificates, DER as the KDS serves."""
    ca = chain / f"ca-{name}"
    ca.mkdir()
    (ca / "index.txt").write_text("")
    (ca / "crlnumber").write_text("01\n")
    (ca / "ca.cnf").write_text(
        "[ ca ]\ndefault_ca = c\n[ c ]\ndatabase = index.txt\ncrlnumber = crlnumber\ndefault_md = sha384\n"
    )
    signer = ("-keyfile", str(chain / "ark.key"), "-cert", str(chain / "ark.pem"))
    for cert in revoke:
        _openssl(ca, "ca", "-config", "ca.cnf", *signer, "-revoke", str(chain / cert))
    _openssl(ca, "ca", "-config", "ca.cnf", *signer, "-gencrl", "-crlhours", "24", *PSS, "-out", "crl.pem")
    _openssl(ca, "crl", "-in", "crl.pem", "-outform", "DER", "-out", "crl.der")
    return ca / "crl.der"


def sign_test_report(chain: Path, bound: bytes, vlek: bool = False) -> bytes:
    """The real Milan report's layout with `bound` as its report data, signed by the test VCEK (or,
    with ``vlek``, saying in KEY_INFO that a VLEK signed it)."""
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

    report = bytearray(bytes.fromhex((DATA / "report_milan.hex").read_text().strip()))
    report[0x50:0x90] = bound
    if vlek:
        report[0x48] = report[0x48] & ~0b11100 | 0b00100  # KEY_INFO.SIGNING_KEY = 1: VLEK
    key = serialization.load_pem_private_key((chain / "vcek.key").read_bytes(), password=None)
    r, s = decode_dss_signature(key.sign(bytes(report[:0x2A0]), ec.ECDSA(hashes.SHA384())))
    # r and s little-endian in 72-byte fields
    report[0x2A0:0x2E8] = r.to_bytes(72, "little")
    report[0x2E8:0x330] = s.to_bytes(72, "little")
    return bytes(report)


def attested_by_test_chain(tmp_path: Path, chain: Path, vlek: bool = False) -> tuple[Path, Path, dict[str, str]]:
    """A bundle whose SEV-SNP evidence the test VCEK signed over its digest, a collateral directory
    with that VCEK, and the environment that makes `ccbench verify` trust the test roots."""
    bundle = make_bundle(tmp_path)
    document = finish_bundle(bundle, provider=None)
    (bundle / "attestation").mkdir()
    (bundle / "attestation" / "evidence.bin").write_bytes(
        sign_test_report(chain, report_data(document["digest"]), vlek)
    )
    document.update(
        status="attested",
        evidence={"technology": "sev-snp", "provider": "sev_guest", "mock": False, "file": "attestation/evidence.bin"},
    )
    (bundle / "attestation.json").write_text(json.dumps(document))
    collateral = tmp_path / "collateral"
    collateral.mkdir()
    shutil.copy(chain / "vcek.pem", collateral / "vcek.pem")
    return bundle, collateral, {"CCBENCH_TEST_SNP_ROOTS": str(chain)}


@needs_verifier
def test_verify_checks_amds_crl_from_the_collateral_directory(tmp_path, ccbench, monkeypatch):
    """A bundle attested by a generated SEV-SNP chain (trusted through the test-only roots variable):
    without a CRL it verifies and says "revocation not checked"; a policy can require the check;
    crl.der in --collateral is checked, and one listing the VCEK fails the evidence (exit 4)."""
    pytest.importorskip("cryptography")
    chain = make_test_chain(tmp_path / "chain")
    bundle, collateral, env = attested_by_test_chain(tmp_path, chain)

    done = ccbench("verify", bundle, "--collateral", collateral, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "attestation: verified" in done.stdout and "TEST ROOT" in done.stdout
    assert "revocation: not checked" in done.stdout
    # never trusted without the test roots: AMD's pinned roots do not know this chain
    done = ccbench("verify", bundle, "--collateral", collateral)
    assert done.returncode == EXIT_EVIDENCE and "unknown-root" in done.stdout, done.stdout
    # the machines table's line says it too
    with monkeypatch.context() as patch:
        patch.setenv("CCBENCH_TEST_SNP_ROOTS", str(chain))
        verdict = verify_bundle(bundle, collateral=collateral)
    assert verdict.attestation == "verified" and "revocation not checked" in verdict.summary()
    # a policy that requires the revocation check
    policy = tmp_path / "policy.toml"
    policy.write_text("require_revocation_check = true\n")
    done = ccbench("verify", bundle, "--collateral", collateral, "--policy", policy, env=env)
    assert done.returncode == EXIT_EVIDENCE and "revocation-not-checked" in done.stdout, done.stdout

    # a current CRL that lists nothing of this chain: checked, passes, also under that policy
    shutil.copy(make_test_crl(chain, "clean"), collateral / "crl.der")
    done = ccbench("verify", bundle, "--collateral", collateral, "--policy", policy, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "revocation: checked" in done.stdout

    # the VCEK listed: failed evidence, exit 4, reason revoked
    shutil.copy(make_test_crl(chain, "revoked", ("vcek.pem",)), collateral / "crl.der")
    done = ccbench("verify", bundle, "--collateral", collateral, env=env)
    assert done.returncode == EXIT_EVIDENCE, done.stdout + done.stderr
    assert "attestation: failed" in done.stdout and "revoked" in done.stdout
    verdict = json.loads(ccbench("verify", bundle, "--collateral", collateral, "--json", env=env).stdout)
    assert verdict["attestation"] == "failed" and verdict["reason"].startswith("revoked:")

    # a CRL that is not one: failed evidence with the verifier's reason, not a traceback
    (collateral / "crl.der").write_bytes(b"not a CRL")
    done = ccbench("verify", bundle, "--collateral", collateral, env=env)
    assert done.returncode == EXIT_EVIDENCE and "malformed" in done.stdout and "Traceback" not in done.stderr


@needs_verifier
def test_verify_at_a_given_time_checks_certificate_validity_then(tmp_path, ccbench):
    """--at moves the verification time: the generated chain (valid 30 days) verifies now and on its
    first day, and fails as certificate-expired a year later; a bad --at is a one-line error."""
    pytest.importorskip("cryptography")
    import datetime as dt

    chain = make_test_chain(tmp_path / "chain")
    bundle, collateral, env = attested_by_test_chain(tmp_path, chain)
    tomorrow = (dt.datetime.now(dt.UTC) + dt.timedelta(days=1)).isoformat(timespec="seconds")
    done = ccbench("verify", bundle, "--collateral", collateral, "--at", tomorrow, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "checked as of:" in done.stdout
    next_year = str(int(dt.datetime.now(dt.UTC).timestamp()) + 365 * 86400)
    done = ccbench("verify", bundle, "--collateral", collateral, "--at", next_year, "--json", env=env)
    verdict = json.loads(done.stdout)
    assert done.returncode == EXIT_EVIDENCE and verdict["reason"].startswith("certificate-expired:"), done.stdout
    assert verdict["checked_at"] == int(next_year)
    done = ccbench("verify", bundle, "--at", "next tuesday", env=env)
    assert done.returncode == 2 and "--at" in done.stderr and "Traceback" not in done.stderr


@needs_verifier
def test_verify_names_a_vlek_and_anchors_it_in_the_asvk(tmp_path, ccbench):
    """A bundle signed by a VLEK (as AWS's SEV-SNP instances sign) under a generated ARK -> ASVK chain:
    `ccbench verify` verifies it and says which key signed; without the ASVK it is an unknown root."""
    pytest.importorskip("cryptography")
    chain = make_test_chain(tmp_path / "chain", vlek=True)
    bundle, collateral, env = attested_by_test_chain(tmp_path, chain, vlek=True)
    done = ccbench("verify", bundle, "--collateral", collateral, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "attestation: verified" in done.stdout and "signed by VLEK" in done.stdout, done.stdout
    verdict = json.loads(ccbench("verify", bundle, "--collateral", collateral, "--json", env=env).stdout)
    assert verdict["signing_key"] == "VLEK"
    # the same VLEK's signature over a report that says a VCEK signed it: the wrong kind of key
    digest = json.loads((bundle / "attestation.json").read_text())["digest"]
    (bundle / "attestation" / "evidence.bin").write_bytes(sign_test_report(chain, report_data(digest), vlek=False))
    done = ccbench("verify", bundle, "--collateral", collateral, env=env)
    assert done.returncode == EXIT_EVIDENCE and "bad-signature" in done.stdout and "says a VCEK" in done.stdout
    (chain / "asvk.pem").unlink()
    done = ccbench("verify", bundle, "--collateral", collateral, env=env)
    assert done.returncode == EXIT_EVIDENCE and "unknown-root" in done.stdout, done.stdout


# Real evidence from other projects' test data, kept outside the project in
# ../shared/fixtures/real-world/evidence (CCBENCH_SHARED names another place): read in place, never copied.
REAL_WORLD_EVIDENCE = (
    Path(os.environ.get("CCBENCH_SHARED", Path(__file__).resolve().parents[2] / "shared"))
    / "fixtures"
    / "real-world"
    / "evidence"
)
#: cases whose expected answer the verifier does not give yet, with the reason
EVIDENCE_DISAGREES: dict[str, str] = {}


def _real_world_evidence_checks():
    if not REAL_WORLD_EVIDENCE.is_dir():
        reason = f"{REAL_WORLD_EVIDENCE} is absent (set CCBENCH_SHARED to the folder holding fixtures/real-world)"
        return [pytest.param(None, None, marks=pytest.mark.skip(reason=reason), id="real-world-evidence-absent")]
    params = []
    for case in sorted(p for p in REAL_WORLD_EVIDENCE.iterdir() if (p / "expected.json").is_file()):
        checks = json.loads((case / "expected.json").read_text())["checks"]
        for index, check in enumerate(checks):
            case_id = f"{case.name}-{index}-{check['verdict']}"
            marks = (
                [pytest.mark.xfail(strict=True, reason=EVIDENCE_DISAGREES[case_id])]
                if case_id in EVIDENCE_DISAGREES
                else []
            )
            params.append(pytest.param(case, index, marks=marks, id=case_id))
    return params


def _case_policy(expected: dict, check: dict) -> dict | None:
    """expected.json's policy: an object is a ccverify policy; a sentence describes one (the only
    non-default one the cases describe is "accepts a TD bound to a service TD")."""
    policy = check.get("policy")
    if isinstance(policy, dict):
        return policy
    if isinstance(policy, str) and policy.startswith("accepts a TD bound to a service TD"):
        return {"tdx_service_tds": [expected["mr_service_td"]]}
    return None


@needs_verifier
@pytest.mark.parametrize("case, index", _real_world_evidence_checks())
def test_real_world_evidence_gets_its_expected_verdict(case, index):
    """ccverify on each case's files, at the check's time, under its policy, with the report data the
    genuine evidence carries: the verdict and the rejection code are the ones expected.json names."""
    expected = json.loads((case / "expected.json").read_text())
    check = expected["checks"][index]
    at = int(datetime.fromisoformat(check["at"]).timestamp()) if "at" in check else None
    result = run_verifier(
        expected["technology"],
        case / "evidence.bin",
        bytes.fromhex(expected["report_data"]) if "report_data" in expected else None,
        vcek=case / "vcek.der" if (case / "vcek.der").is_file() else None,
        collateral=case / "collateral.json" if (case / "collateral.json").is_file() else None,
        policy=_case_policy(expected, check),
        at=at,
    )
    if check["verdict"] == "valid":
        assert result.get("verified"), result
        if "signing_key" in expected:
            assert result["claims"]["signing_key"] == expected["signing_key"]
        claims = result["claims"]
        if "tcb_status" in check:
            assert claims["tcb"]["status"] == check["tcb_status"]
        if "root" in check:  # e.g. "AMD Milan (ARK-Milan)": the anchor's name, then what it holds
            assert check["root"].startswith(claims["root"]), claims["root"]
        for field, value in check.get("tcb", {}).items():
            assert claims["tcb"][field] == value, field
        if "debug" in check:
            assert claims["debug"] == check["debug"]
        if "vmpl" in check:
            assert claims["details"]["vmpl"] == check["vmpl"]
    else:
        assert not result.get("verified"), result
        assert result["reason"]["code"] in check["codes"], result


@needs_verifier
def test_a_bundle_carrying_an_azure_hcl_report_is_malformed_evidence_named(tmp_path, ccbench):
    """A TDX bundle whose evidence is an Azure HCL report (what an Azure TDX VM's vTPM hands out), with
    no collateral: `ccbench verify` says malformed and what it is, not "missing collateral"."""
    hcl = REAL_WORLD_EVIDENCE / "tdx-azure-hclreport-constellation" / "evidence.bin"
    if not hcl.is_file():
        pytest.skip(f"{hcl} is absent (set CCBENCH_SHARED to the folder holding fixtures/real-world)")
    bundle = make_bundle(tmp_path)
    document = finish_bundle(bundle, provider=None)
    (bundle / "attestation").mkdir()
    shutil.copy(hcl, bundle / "attestation" / "evidence.bin")
    document.update(
        status="attested",
        evidence={"technology": "tdx", "provider": "tdx_guest", "mock": False, "file": "attestation/evidence.bin"},
    )
    (bundle / "attestation.json").write_text(json.dumps(document))
    done = ccbench("verify", bundle)
    assert done.returncode == EXIT_EVIDENCE, done.stdout + done.stderr
    assert "attestation: failed" in done.stdout and "malformed" in done.stdout, done.stdout
    assert "Azure HCL report" in done.stdout and "missing-collateral" not in done.stdout


# ---- CC provenance: tee_evidence is the verifier's reading of the bundle's evidence -------------------


def with_evidence(bundle: Path, technology: str, evidence: Path) -> Path:
    """The bundle's attestation.json says `attested` with this (real) evidence file."""
    document = finish_bundle(bundle, provider=None)
    (bundle / "attestation").mkdir(exist_ok=True)
    shutil.copy(evidence, bundle / "attestation" / "evidence.bin")
    document.update(
        status="attested",
        evidence={"technology": technology, "provider": "tsm", "mock": False, "file": "attestation/evidence.bin"},
    )
    (bundle / "attestation.json").write_text(json.dumps(document))
    return bundle


def _real_world_case(name: str) -> Path:
    case = REAL_WORLD_EVIDENCE / name
    if not case.is_dir():
        pytest.skip(f"{case} is absent (set CCBENCH_SHARED to the folder holding fixtures/real-world)")
    return case


@needs_verifier
def test_a_bundles_snp_report_gives_its_guest_policy_vmpl_and_tcbs(tmp_path, ccbench):
    """go-sev-guest's real Milan report with DEBUG in its guest policy (0xb0000: bits 16, 17, 19)."""
    from ccbench.attestation.provenance import bundle_provenance

    case = _real_world_case("snp-milan-debug-go-sev-guest")
    bundle = with_evidence(make_bundle(tmp_path), "sev-snp", case / "evidence.bin")
    evidence = bundle_provenance(bundle, {})["tee_evidence"]
    assert evidence["technology"] == "sev-snp" and evidence["source"] == "ccverify"
    assert evidence["verified"] is False  # read from the report; its signature is not this reading's business
    assert evidence["policy"]["raw"] == "0xb0000"
    assert (evidence["policy"]["debug"], evidence["policy"]["smt"], evidence["policy"]["migrate_ma"]) == (
        True,
        True,
        False,
    )
    assert evidence["vmpl"] == 0
    # expected.json of the case: reported TCB bootloader 2, TEE 0, SNP 5, microcode 68
    assert {k: evidence["reported_tcb"][k] for k in ("bootloader", "tee", "snp", "microcode")} == {
        "bootloader": 2,
        "tee": 0,
        "snp": 5,
        "microcode": 68,
    }
    assert evidence["platform_info"] == {"raw": "0x1", "smt_enabled": True, "tsme_enabled": False}
    # `ccbench show` on a real bundle (format 1, made before the probe recorded provenance) carrying it
    shown = shutil.copytree(Path(__file__).parent / "data" / "bundle-v1", tmp_path / "shown")
    with_evidence(shown, "sev-snp", case / "evidence.bin")
    done = ccbench("show", shown, "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["provenance"]["tee_evidence"] == evidence
    done = ccbench("show", shown)
    assert done.returncode == 0, done.stderr
    text = " ".join(done.stdout.split())
    assert "not recorded by this bundle's probe" in text
    assert "SEV-SNP policy 0xb0000 (debug on, smt on, migrate_ma off), VMPL 0" in text
    assert "reported TCB bl 2 tee 0 snp 5 ucode 68" in text and "signature not checked" in text


@needs_verifier
def test_a_bundles_tdx_quote_gives_the_module_and_the_td_attributes(tmp_path):
    from ccbench.attestation.provenance import bundle_provenance

    case = _real_world_case("tdx-v4-spr-outofdate-automata")
    bundle = with_evidence(make_bundle(tmp_path), "tdx", case / "evidence.bin")
    recorded = {"provenance": {"tdx_idle": "process: using TDX aware idle routine", "vcpus": 8}}
    provenance = bundle_provenance(bundle, recorded)
    assert provenance["tdx_idle"] == "process: using TDX aware idle routine" and provenance["vcpus"] == 8
    evidence = provenance["tee_evidence"]
    assert evidence["technology"] == "tdx" and evidence["verified"] is False
    assert evidence["tee_tcb_svn"] == "04010700000000000000000000000000"
    assert evidence["mrseam"].startswith("ffc97a88587660fb")
    assert evidence["td_attributes"] == {"raw": "0000001000000000", "debug": False, "sept_ve_disable": True}


def test_no_evidence_mock_evidence_or_an_old_bundle_leave_tee_evidence_null(tmp_path):
    from ccbench.attestation.provenance import PROVENANCE_KEYS, bundle_provenance

    bundle = make_bundle(tmp_path)
    provenance = bundle_provenance(bundle, {})  # an older bundle: no attestation.json, no provenance
    assert set(provenance) == set(PROVENANCE_KEYS) and provenance["tee_evidence"] is None
    assert provenance["swiotlb"] == {"bytes": None, "source": None, "cmdline": None, "dynamic": None}
    finish_bundle(bundle, provider=MockProvider())
    assert bundle_provenance(bundle, {})["tee_evidence"] is None


@needs_verifier
def test_verified_claims_give_tee_evidence_marked_verified(tmp_path, monkeypatch):
    """A bundle signed by a generated chain (the real Milan report's fields, re-signed over the digest):
    the verdict carries the claims' reading with verified true."""
    pytest.importorskip("cryptography")
    chain = make_test_chain(tmp_path / "chain")
    bundle, collateral, env = attested_by_test_chain(tmp_path, chain)
    monkeypatch.setenv("CCBENCH_TEST_SNP_ROOTS", env["CCBENCH_TEST_SNP_ROOTS"])
    verdict = verify_bundle(bundle, collateral=collateral)
    assert verdict.attestation == "verified", verdict.reason
    evidence = verdict.tee_evidence
    assert evidence["verified"] is True and evidence["technology"] == "sev-snp"
    report = (bundle / "attestation" / "evidence.bin").read_bytes()
    assert evidence["policy"]["raw"] == hex(int.from_bytes(report[0x08:0x10], "little"))  # POLICY at 0x08
    assert evidence["vmpl"] == int.from_bytes(report[0x30:0x34], "little")  # VMPL at 0x30


@needs_verifier
def test_the_report_machines_table_has_a_row_per_provenance_key(tmp_path):
    from ccbench.bundle import read_bundle
    from ccbench.report.sections.machines import _provenance_rows

    case = _real_world_case("tdx-v4-spr-outofdate-automata")
    bundle = shutil.copytree(Path(__file__).parent / "data" / "bundle-v1", tmp_path / "b")
    rows = _provenance_rows(read_bundle(bundle))
    assert rows["machine id"] == "unknown" and rows["provenance: TDX idle"] == "unknown"
    # a probe before version 2 still said the CPU and its microcode: the block takes them from there
    assert rows["provenance: CPU / microcode"] == "Intel(R) Xeon(R) Processor / 0x1"
    assert rows["provenance: TEE evidence"].startswith("none")
    with_evidence(bundle, "tdx", case / "evidence.bin")
    rows = _provenance_rows(read_bundle(bundle))
    assert rows["provenance: TEE evidence"].startswith(
        "TDX TEE_TCB_SVN 04010700000000000000000000000000, MRSEAM ffc97a"
    )
    assert "TD attributes 0000001000000000 (debug off, SEPT_VE_DISABLE on)" in rows["provenance: TEE evidence"]


def test_the_reports_verdict_from_remembered_digests_is_verifys_and_still_sees_a_change(tmp_path, monkeypatch):
    # the report's machines section reads the large files' digests the check on reading remembered
    # (verify_bundle(remembered=True)); `ccbench verify` hashes every byte: the two say the same,
    # before and after a large file changes
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    bundle = make_bundle(tmp_path)
    journal = bundle / "samples.jsonl"
    journal.write_text('{"metric": "x", "value": 1}\n' * 80_000)  # past the 1 MiB from which digests are remembered
    finish_bundle(bundle, provider=MockProvider())
    for _ in range(2):  # the second reads the note the first wrote
        assert verify_bundle(bundle, remembered=True).summary() == verify_bundle(bundle).summary()
        assert verify_bundle(bundle, remembered=True).exit_code == 0
    assert list((tmp_path / "cache").rglob("*-*")), "no digest remembered"
    changed = bytearray(journal.read_bytes())
    changed[len(changed) // 2] ^= 0x01
    journal.write_bytes(bytes(changed))
    verdict = verify_bundle(bundle, remembered=True)
    assert (verdict.exit_code, verdict.changes) == (EXIT_TAMPERED, {"changed": ["samples.jsonl"]})
    assert verdict.summary() == verify_bundle(bundle).summary()
