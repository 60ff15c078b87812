//! Real vectors (a Milan SEV-SNP report with its VCEK; TDX quotes with their DCAP collateral, from
//! the `sev` and `dcap-qvl` crates: see tests/data/attestation/README.md) verify; mutated vectors and
//! a chain generated here with the openssl command line (RSA-PSS ARK -> ASK, ECDSA P-384 VCEK, as
//! AMD's, and CRLs made with `openssl ca`) reach every rejection reason.

use std::path::{Path, PathBuf};
use std::process::Command;

use ccverify::{snp, tdx, Policy, Rejection, SnpCollateral, SnpRoots, SnpTcb};

/// A moment inside the real Milan VCEK's validity period (2023-04-03 .. 2030-04-03): 2026-01-01.
const MILAN_AT: u64 = 1_767_225_600;

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

fn with_vcek(vcek: &[u8]) -> SnpCollateral<'_> {
    SnpCollateral {
        vcek: Some(vcek),
        ..Default::default()
    }
}

fn data(name: &str) -> PathBuf {
    manifest_dir().join("../../tests/data/attestation").join(name)
}

fn milan_report() -> Vec<u8> {
    hex::decode(std::fs::read_to_string(data("report_milan.hex")).unwrap().trim()).unwrap()
}

fn milan_vcek() -> Vec<u8> {
    std::fs::read(data("vcek_milan.der")).unwrap()
}

fn verify_milan(report: &[u8], policy: &Policy, expected: Option<&[u8; 64]>) -> Result<ccverify::Claims, Rejection> {
    snp::verify(
        report,
        &with_vcek(&milan_vcek()),
        &SnpRoots::amd(),
        policy,
        expected,
        MILAN_AT,
    )
}

#[test]
fn the_real_milan_report_verifies_against_amds_pinned_roots() {
    let report = milan_report();
    let claims = verify_milan(&report, &Policy::default(), None).unwrap();
    assert_eq!(claims.technology, "sev-snp");
    assert_eq!(claims.root, "AMD Milan");
    assert!(!claims.debug);
    // and with the policy pinned to what it claims
    let tcb = &claims.tcb;
    let policy = Policy {
        measurements: vec![claims.measurement.clone()],
        max_vmpl: Some(3),
        min_tcb: Some(SnpTcb {
            bootloader: tcb["bootloader"].as_u64().unwrap() as u8,
            tee: tcb["tee"].as_u64().unwrap() as u8,
            snp: tcb["snp"].as_u64().unwrap() as u8,
            microcode: tcb["microcode"].as_u64().unwrap() as u8,
        }),
        ..Policy::default()
    };
    let expected: [u8; 64] = hex::decode(&claims.report_data).unwrap().try_into().unwrap();
    assert!(verify_milan(&report, &policy, Some(&expected)).is_ok());
}

#[test]
fn mutated_milan_reports_are_rejected() {
    let report = milan_report();
    let claims = verify_milan(&report, &Policy::default(), None).unwrap();
    // any flipped bit in the signed part, or in the signature, breaks the signature
    for at in [0x08, 0x50, 0x90, 0x1A0, 0x29F, 0x2A0, 0x2F0] {
        let mut tampered = report.clone();
        tampered[at] ^= 0x01;
        let result = verify_milan(&tampered, &Policy::default(), None);
        assert!(
            matches!(
                result,
                Err(Rejection::BadSignature { .. }) | Err(Rejection::Malformed { .. })
            ),
            "byte {at:#x}: {result:?}"
        );
    }
    // report data binding something else
    let other = [0x11u8; 64];
    assert!(matches!(
        verify_milan(&report, &Policy::default(), Some(&other)),
        Err(Rejection::ReportDataMismatch { .. })
    ));
    // another measurement expected
    let policy = Policy {
        measurements: vec!["00".repeat(48)],
        ..Policy::default()
    };
    assert_eq!(
        verify_milan(&report, &policy, None),
        Err(Rejection::MeasurementMismatch {
            got: claims.measurement
        })
    );
    // a TCB newer than the platform's
    let policy = Policy {
        min_tcb: Some(SnpTcb {
            bootloader: 0,
            tee: 0,
            snp: 255,
            microcode: 0,
        }),
        ..Policy::default()
    };
    assert!(matches!(
        verify_milan(&report, &policy, None),
        Err(Rejection::TcbTooOld { .. })
    ));
    // no VCEK at all; a truncated report
    let none = snp::verify(
        &report,
        &SnpCollateral::default(),
        &SnpRoots::amd(),
        &Policy::default(),
        None,
        MILAN_AT,
    );
    assert_eq!(none, Err(Rejection::MissingCertificate));
    assert!(matches!(
        verify_milan(&report[..100], &Policy::default(), None),
        Err(Rejection::Malformed { .. })
    ));
}

/// A certificate table as configfs-tsm's auxblob carries it: entries, terminator, then the data.
fn cert_table(entries: &[(&str, &[u8])]) -> Vec<u8> {
    let header = 24 * (entries.len() + 1);
    let mut table = Vec::new();
    let mut body = Vec::new();
    for (guid, data) in entries {
        table.extend_from_slice(uuid_bytes(guid).as_slice());
        table.extend_from_slice(&((header + body.len()) as u32).to_le_bytes());
        table.extend_from_slice(&(data.len() as u32).to_le_bytes());
        body.extend_from_slice(data);
    }
    table.extend_from_slice(&[0u8; 24]);
    table.extend_from_slice(&body);
    table
}

fn uuid_bytes(guid: &str) -> Vec<u8> {
    hex::decode(guid.replace('-', "")).unwrap()
}

const VCEK_GUID: &str = "63da758d-e664-4564-adc5-f4b93be8accd";
const ASK_GUID: &str = "4ab7b379-bbac-4fe4-a02f-05aef327c782";
const CRL_GUID: &str = "92f81bc3-5811-4d3d-97ff-d19f88dc67ea";

#[test]
fn the_vcek_is_found_in_a_certificate_table() {
    let vcek = milan_vcek();
    let table = cert_table(&[(ASK_GUID, b"not used"), (VCEK_GUID, &vcek)]);
    assert_eq!(snp::vcek_from_cert_table(&table).unwrap(), Some(vcek.clone()));
    let in_table = SnpCollateral {
        cert_table: Some(&table),
        ..Default::default()
    };
    let claims = snp::verify(
        &milan_report(),
        &in_table,
        &SnpRoots::amd(),
        &Policy::default(),
        None,
        MILAN_AT,
    )
    .unwrap();
    assert_eq!(claims.root, "AMD Milan");
    // a table without a VCEK, one pointing outside itself, one without a terminator
    let no_vcek = cert_table(&[(ASK_GUID, b"x")]);
    let no_vcek = SnpCollateral {
        cert_table: Some(&no_vcek),
        ..Default::default()
    };
    let result = snp::verify(
        &milan_report(),
        &no_vcek,
        &SnpRoots::amd(),
        &Policy::default(),
        None,
        MILAN_AT,
    );
    assert_eq!(result, Err(Rejection::MissingCertificate));
    let mut outside = cert_table(&[(VCEK_GUID, &vcek)]);
    outside[20..24].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(matches!(
        snp::vcek_from_cert_table(&outside),
        Err(Rejection::Malformed { .. })
    ));
    assert!(matches!(
        snp::vcek_from_cert_table(&[1u8; 30]),
        Err(Rejection::Malformed { .. })
    ));
}

// ---- a chain generated here: ARK (RSA-PSS, self-signed) -> ASK (RSA-PSS) -> VCEK (P-384) ----------

struct TestChain {
    dir: PathBuf,
}

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("the openssl command line");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// RSA-PSS / SHA-384 with a 48-byte salt: how AMD signs its certificates and CRLs
const PSS: [&str; 5] = [
    "-sigopt",
    "rsa_padding_mode:pss",
    "-sigopt",
    "rsa_pss_saltlen:48",
    "-sha384",
];

/// openssl with `args` followed by `extra`
fn openssl_with(dir: &Path, args: &[&str], extra: &[&str]) {
    openssl(dir, &[args, extra].concat());
}

/// A new private key: `pkeyopt` is `rsa_keygen_bits:N` for RSA, `ec_paramgen_curve:NAME` for EC.
fn new_key(dir: &Path, out: &str, pkeyopt: &str) {
    let algorithm = if pkeyopt.starts_with("rsa") { "RSA" } else { "EC" };
    openssl(
        dir,
        &["genpkey", "-algorithm", algorithm, "-pkeyopt", pkeyopt, "-out", out],
    );
}

/// A certificate request for `key` with `subject`.
fn new_csr(dir: &Path, key: &str, subject: &str, out: &str) {
    openssl(dir, &["req", "-new", "-key", key, "-subj", subject, "-out", out]);
}

/// `csr` certified by `ca` (`ca.pem` and `ca.key`) for `days`, signed with RSA-PSS as AMD signs.
fn issue_pss(dir: &Path, csr: &str, ca: &str, days: &str, out: &str) {
    let (cert, key) = (format!("{ca}.pem"), format!("{ca}.key"));
    let args = [
        "x509",
        "-req",
        "-in",
        csr,
        "-CA",
        &cert,
        "-CAkey",
        &key,
        "-CAcreateserial",
    ];
    openssl_with(dir, &args, &[&["-days", days, "-out", out][..], &PSS[..]].concat());
}

/// A self-signed RSA-PSS root for `key` with `subject`, valid ten years.
fn self_signed_pss(dir: &Path, key: &str, subject: &str, out: &str) {
    let args = [
        "req", "-x509", "-new", "-key", key, "-subj", subject, "-days", "3650", "-out", out,
    ];
    openssl_with(dir, &args, &PSS);
}

impl TestChain {
    fn generate(name: &str) -> TestChain {
        let dir = std::env::temp_dir().join(format!("ccverify-chain-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        new_key(&dir, "ark.key", "rsa_keygen_bits:2048");
        self_signed_pss(&dir, "ark.key", "/CN=ARK-Test", "ark.pem");
        new_key(&dir, "ask.key", "rsa_keygen_bits:2048");
        new_csr(&dir, "ask.key", "/CN=SEV-Test", "ask.csr");
        issue_pss(&dir, "ask.csr", "ark", "3650", "ask.pem");
        new_key(&dir, "vcek.key", "ec_paramgen_curve:P-384");
        new_csr(&dir, "vcek.key", "/CN=SEV-VCEK-Test", "vcek.csr");
        issue_pss(&dir, "vcek.csr", "ask", "3650", "vcek.pem");
        // the same VCEK key certified for one day only: expired the day after tomorrow
        issue_pss(&dir, "vcek.csr", "ask", "1", "vcek_short.pem");
        TestChain { dir }
    }

    /// An impostor root: its own key, self-signed under the test ARK's very name (`/CN=ARK-Test`),
    /// or under another name.
    fn impostor(&self, name: &str, subject: &str) {
        let key = format!("{name}.key");
        new_key(&self.dir, &key, "rsa_keygen_bits:2048");
        self_signed_pss(&self.dir, &key, subject, &format!("{name}.pem"));
    }

    /// A CRL made by `openssl ca` with `signer` (its key and certificate, e.g. "ark"), listing the
    /// certificates named in `revoke`, valid for `hours` from now; RSA-PSS/SHA-384 as AMD signs
    /// unless `pss` is false (PKCS#1 v1.5). DER, as the KDS serves it.
    fn crl(&self, name: &str, signer: &str, revoke: &[&str], hours: u32, pss: bool) -> Vec<u8> {
        let db = self.dir.join(format!("ca-{name}"));
        std::fs::create_dir_all(&db).unwrap();
        std::fs::write(db.join("index.txt"), "").unwrap();
        std::fs::write(db.join("crlnumber"), "01\n").unwrap();
        std::fs::write(
            db.join("ca.cnf"),
            "[ ca ]\ndefault_ca = test_ca\n[ test_ca ]\ndatabase = index.txt\ncrlnumber = crlnumber\n\
             default_md = sha384\ndefault_crl_days = 30\n",
        )
        .unwrap();
        let key = self.dir.join(format!("{signer}.key"));
        let cert = self.dir.join(format!("{signer}.pem"));
        let (key, cert) = (key.to_str().unwrap(), cert.to_str().unwrap());
        let signer = ["ca", "-config", "ca.cnf", "-keyfile", key, "-cert", cert];
        for revoked in revoke {
            let path = self.dir.join(revoked);
            openssl_with(&db, &signer, &["-revoke", path.to_str().unwrap()]);
        }
        let hours = hours.to_string();
        let gencrl = ["-gencrl", "-crlhours", &hours, "-out", "crl.pem"];
        openssl_with(&db, &signer, &[&gencrl[..], if pss { &PSS[..4] } else { &[] }].concat());
        openssl(&db, &["crl", "-in", "crl.pem", "-outform", "DER", "-out", "crl.der"]);
        std::fs::read(db.join("crl.der")).unwrap()
    }

    fn file(&self, name: &str) -> Vec<u8> {
        std::fs::read(self.dir.join(name)).unwrap()
    }

    fn roots(&self) -> SnpRoots {
        SnpRoots::only("test ARK", &self.file("ark.pem"), &self.file("ask.pem")).unwrap()
    }

    /// The real report's layout with the given guest policy bits, VMPL and report data, signed by the test VCEK.
    fn sign(&self, debug: bool, vmpl: u32, report_data: [u8; 64]) -> Vec<u8> {
        use p384::ecdsa::signature::DigestSigner;
        use p384::pkcs8::DecodePrivateKey;
        use sha2::Digest;
        let mut report = milan_report();
        let mut policy = u64::from_le_bytes(report[0x08..0x10].try_into().unwrap());
        policy = if debug { policy | 1 << 19 } else { policy & !(1 << 19) };
        report[0x08..0x10].copy_from_slice(&policy.to_le_bytes());
        report[0x30..0x34].copy_from_slice(&vmpl.to_le_bytes());
        report[0x50..0x90].copy_from_slice(&report_data);
        let key = p384::ecdsa::SigningKey::from_pkcs8_pem(&String::from_utf8(self.file("vcek.key")).unwrap()).unwrap();
        let signature: p384::ecdsa::Signature = key.sign_digest(sha2::Sha384::new_with_prefix(&report[..0x2A0]));
        // r and s little-endian in 72-byte fields (the report's layout)
        let (r, s) = (signature.r().to_bytes(), signature.s().to_bytes());
        let mut r_le: Vec<u8> = r.iter().rev().copied().collect();
        let mut s_le: Vec<u8> = s.iter().rev().copied().collect();
        r_le.resize(72, 0);
        s_le.resize(72, 0);
        report[0x2A0..0x2E8].copy_from_slice(&r_le);
        report[0x2E8..0x330].copy_from_slice(&s_le);
        report
    }
}

impl Drop for TestChain {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[test]
fn a_generated_chain_reaches_every_snp_rejection() {
    let chain = TestChain::generate("snp");
    let vcek = chain.file("vcek.pem");
    let roots = chain.roots();
    let data = [0x42u8; 64];
    let verify =
        |report: &[u8], policy: &Policy| snp::verify(report, &with_vcek(&vcek), &roots, policy, Some(&data), now());
    // a clean report verifies with the test root it names...
    let clean = chain.sign(false, 0, data);
    let claims = verify(&clean, &Policy::default()).unwrap();
    assert_eq!(claims.root, "test ARK");
    // ...and never with AMD's roots
    let amd = snp::verify(
        &clean,
        &with_vcek(&vcek),
        &SnpRoots::amd(),
        &Policy::default(),
        Some(&data),
        now(),
    );
    assert!(matches!(amd, Err(Rejection::UnknownRoot { .. })), "{amd:?}");
    // nor does AMD's real VCEK chain to the test root
    let real = snp::verify(
        &milan_report(),
        &with_vcek(&milan_vcek()),
        &roots,
        &Policy::default(),
        None,
        MILAN_AT,
    );
    assert!(matches!(real, Err(Rejection::UnknownRoot { .. })), "{real:?}");
    // debug enabled
    assert_eq!(
        verify(&chain.sign(true, 0, data), &Policy::default()),
        Err(Rejection::DebugEnabled)
    );
    let allowing = Policy {
        allow_debug: true,
        ..Policy::default()
    };
    assert!(verify(&chain.sign(true, 0, data), &allowing).unwrap().debug);
    // a report requested from VMPL 2 where the policy accepts only 0
    let strict = Policy {
        max_vmpl: Some(0),
        ..Policy::default()
    };
    assert_eq!(
        verify(&chain.sign(false, 2, data), &strict),
        Err(Rejection::VmplNotAllowed { got: 2 })
    );
    // report data for another bundle or handshake
    assert!(matches!(
        verify(&chain.sign(false, 0, [0x43; 64]), &Policy::default()),
        Err(Rejection::ReportDataMismatch { .. })
    ));
    // a VCEK that did not sign the report: the report is re-signed, then altered
    let mut altered = clean.clone();
    altered[0x90] ^= 0xFF;
    assert!(matches!(
        verify(&altered, &Policy::default()),
        Err(Rejection::BadSignature { .. })
    ));
}

// ---- certificate validity and AMD's CRL ------------------------------------------------------------

#[test]
fn certificates_are_checked_against_their_validity_period() {
    // the real Milan VCEK is valid 2023-04-03 .. 2030-04-03 (AMD's ARK and ASK until 2045)
    let report = milan_report();
    let at = |time: u64| {
        snp::verify(
            &report,
            &with_vcek(&milan_vcek()),
            &SnpRoots::amd(),
            &Policy::default(),
            None,
            time,
        )
    };
    assert!(at(MILAN_AT).is_ok());
    let Err(Rejection::CertificateExpired { detail }) = at(1_930_000_000) else {
        panic!("2031-02-28: {:?}", at(1_930_000_000))
    };
    assert!(detail.contains("VCEK") && detail.contains("expired"), "{detail}");
    let Err(Rejection::CertificateExpired { detail }) = at(1_600_000_000) else {
        panic!("2020-09-13: {:?}", at(1_600_000_000))
    };
    assert!(detail.contains("not valid before"), "{detail}");
    // a generated VCEK certified for one day: fine today, expired in three days; the ARK and ASK
    // (ten years) are still valid then, so it is the VCEK that is named
    let chain = TestChain::generate("validity");
    let short = chain.file("vcek_short.pem");
    let report = chain.sign(false, 0, [0x42; 64]);
    let verify = |time: u64| {
        snp::verify(
            &report,
            &with_vcek(&short),
            &chain.roots(),
            &Policy::default(),
            None,
            time,
        )
    };
    assert!(verify(now()).is_ok(), "{:?}", verify(now()));
    let Err(Rejection::CertificateExpired { detail }) = verify(now() + 3 * 86_400) else {
        panic!("{:?}", verify(now() + 3 * 86_400))
    };
    assert!(detail.contains("the VCEK"), "{detail}");
    // eleven years on, the test ARK itself has expired
    let Err(Rejection::CertificateExpired { detail }) = verify(now() + 11 * 365 * 86_400) else {
        panic!("the ARK outlived its ten years")
    };
    assert!(detail.contains("the ARK"), "{detail}");
}

#[test]
fn amds_crl_reaches_revoked_stale_and_bad_signature() {
    let chain = TestChain::generate("crl");
    // every certificate of the chain is valid from this moment on (they were made before it)
    let generated = now();
    let vcek = chain.file("vcek.pem");
    let roots = chain.roots();
    let report = chain.sign(false, 0, [0x42; 64]);
    let verify_at = |crl: Option<&[u8]>, policy: &Policy, time: u64| {
        let collateral = SnpCollateral {
            vcek: Some(&vcek),
            crl,
            ..Default::default()
        };
        snp::verify(&report, &collateral, &roots, policy, None, time)
    };
    let verify = |crl: Option<&[u8]>| verify_at(crl, &Policy::default(), now());

    // no CRL: verified, and the verdict says out loud that revocation was not checked...
    let claims = verify(None).unwrap();
    assert!(!claims.revocation.checked);
    assert!(
        claims.revocation.detail.contains("not checked"),
        "{:?}",
        claims.revocation
    );
    // ...which a policy can refuse
    let strict = Policy {
        require_revocation_check: true,
        ..Policy::default()
    };
    assert_eq!(verify_at(None, &strict, now()), Err(Rejection::RevocationNotChecked));

    // a current CRL of the ARK listing nothing of this chain: checked and verified, also under the strict policy
    let clean = chain.crl("clean", "ark", &[], 24, true);
    let claims = verify(Some(&clean)).unwrap();
    assert!(claims.revocation.checked, "{:?}", claims.revocation);
    assert!(verify_at(Some(&clean), &strict, now()).is_ok());
    // and as PEM
    let pem = std::fs::read(chain.dir.join("ca-clean/crl.pem")).unwrap();
    assert!(verify(Some(&pem)).unwrap().revocation.checked);

    // the VCEK listed; the ASK listed
    let vcek_revoked = chain.crl("vcek-revoked", "ark", &["vcek.pem"], 24, true);
    let Err(Rejection::Revoked { detail }) = verify(Some(&vcek_revoked)) else {
        panic!("{:?}", verify(Some(&vcek_revoked)))
    };
    assert!(detail.contains("VCEK"), "{detail}");
    let ask_revoked = chain.crl("ask-revoked", "ark", &["ask.pem"], 24, true);
    let Err(Rejection::Revoked { detail }) = verify(Some(&ask_revoked)) else {
        panic!("{:?}", verify(Some(&ask_revoked)))
    };
    assert!(detail.contains("ASK"), "{detail}");
    // the revoked CRL carried in the certificate table instead of a file
    let table = cert_table(&[(VCEK_GUID, &vcek), (CRL_GUID, &ask_revoked)]);
    assert_eq!(snp::crl_from_cert_table(&table).unwrap(), Some(ask_revoked.clone()));
    let in_table = SnpCollateral {
        cert_table: Some(&table),
        ..Default::default()
    };
    assert!(matches!(
        snp::verify(&report, &in_table, &roots, &Policy::default(), None, now()),
        Err(Rejection::Revoked { .. })
    ));

    // stale: verified after its nextUpdate (one hour), or before its thisUpdate
    // (a second later than the chain, so that a moment exists where the chain is valid and the CRL not yet)
    while now() <= generated + 1 {
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    let hourly = chain.crl("hourly", "ark", &[], 1, true);
    assert!(verify(Some(&hourly)).is_ok());
    let Err(Rejection::Stale { detail }) = verify_at(Some(&hourly), &Policy::default(), now() + 2 * 3600) else {
        panic!("a CRL past its nextUpdate was accepted")
    };
    assert!(detail.contains("nextUpdate"), "{detail}");
    assert!(matches!(
        verify_at(Some(&hourly), &Policy::default(), generated),
        Err(Rejection::Stale { .. })
    ));

    // signed by another key under the ARK's very name: bad signature, whatever it lists
    chain.impostor("impostor", "/CN=ARK-Test");
    let forged = chain.crl("forged", "impostor", &[], 24, true);
    let Err(Rejection::BadSignature { detail }) = verify(Some(&forged)) else {
        panic!("{:?}", verify(Some(&forged)))
    };
    assert!(detail.contains("not signed by the pinned ARK"), "{detail}");
    // issued by some other authority altogether
    chain.impostor("other", "/CN=Some-Other-CA");
    let other = chain.crl("other", "other", &[], 24, true);
    assert!(matches!(verify(Some(&other)), Err(Rejection::UnknownRoot { .. })));
    // the ARK's own key, but PKCS#1 v1.5 instead of AMD's RSA-PSS
    let pkcs1 = chain.crl("pkcs1", "ark", &[], 24, false);
    assert!(matches!(verify(Some(&pkcs1)), Err(Rejection::BadSignature { .. })));
    // a flipped bit in the signed part (the revocation list itself) breaks the signature
    let mut tampered = vcek_revoked.clone();
    let at = tampered.len() / 3;
    tampered[at] ^= 0x01;
    assert!(
        matches!(
            verify(Some(&tampered)),
            Err(Rejection::BadSignature { .. }) | Err(Rejection::Malformed { .. })
        ),
        "{:?}",
        verify(Some(&tampered))
    );
    // not a CRL at all
    assert!(matches!(verify(Some(b"not a CRL")), Err(Rejection::Malformed { .. })));
    // AMD's real chain with the test ARK's CRL: the CRL is not AMD's
    let milan_vcek = milan_vcek();
    let real = SnpCollateral {
        vcek: Some(&milan_vcek),
        crl: Some(&clean),
        ..Default::default()
    };
    assert!(matches!(
        snp::verify(
            &milan_report(),
            &real,
            &SnpRoots::amd(),
            &Policy::default(),
            None,
            MILAN_AT
        ),
        Err(Rejection::UnknownRoot { .. })
    ));
}

// ---- TDX ------------------------------------------------------------------------------------------

fn tdx_vector(name: &str) -> (Vec<u8>, tdx::Collateral, u64) {
    let quote = std::fs::read(data(&format!("{name}.bin"))).unwrap();
    let collateral =
        tdx::collateral_from_json(&std::fs::read(data(&format!("{name}_collateral.json"))).unwrap()).unwrap();
    // a moment inside the collateral's validity window: one second after the later of the TCB info's
    // and the QE identity's issue dates
    let issued = |json: &str| {
        let value: serde_json::Value = serde_json::from_str(json).unwrap();
        unix_from_rfc3339(value["issueDate"].as_str().unwrap())
    };
    let at = issued(&collateral.tcb_info).max(issued(&collateral.qe_identity)) + 1;
    (quote, collateral, at)
}

/// "2024-01-02T03:04:05Z" -> seconds since the epoch (days from the civil calendar, UTC).
fn unix_from_rfc3339(text: &str) -> u64 {
    let (date, time) = text.trim_end_matches('Z').split_once('T').unwrap();
    let d: Vec<i64> = date.split('-').map(|p| p.parse().unwrap()).collect();
    let t: Vec<i64> = time
        .split(':')
        .map(|p| p.split('.').next().unwrap().parse().unwrap())
        .collect();
    let (y, m) = if d[1] <= 2 {
        (d[0] - 1, d[1] + 9)
    } else {
        (d[0], d[1] - 3)
    };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * m + 2) / 5 + d[2] - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146097 + doe - 719468;
    (days * 86400 + t[0] * 3600 + t[1] * 60 + t[2]) as u64
}

#[test]
fn the_real_tdx_quote_verifies_with_its_collateral() {
    let (quote, collateral, at) = tdx_vector("tdx_quote");
    let claims = tdx::verify(&quote, Some(&collateral), at, &Policy::default(), None).unwrap();
    assert_eq!(claims.technology, "tdx");
    assert_eq!(claims.tcb["status"], "UpToDate");
    let expected: [u8; 64] = hex::decode(&claims.report_data).unwrap().try_into().unwrap();
    let policy = Policy {
        measurements: vec![claims.measurement.clone()],
        ..Policy::default()
    };
    assert!(tdx::verify(&quote, Some(&collateral), at, &policy, Some(&expected)).is_ok());
}

#[test]
fn mutated_tdx_quotes_and_policies_are_rejected() {
    let (quote, collateral, at) = tdx_vector("tdx_quote");
    let ok = Policy::default();
    assert_eq!(
        tdx::verify(&quote, None, at, &ok, None),
        Err(Rejection::MissingCollateral)
    );
    // today the sample collateral has expired
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let stale = tdx::verify(&quote, Some(&collateral), now, &ok, None);
    assert!(matches!(stale, Err(Rejection::Stale { .. })), "{stale:?}");
    // a flipped bit in the TD report body (MRTD) breaks the quote's signature
    let mut tampered = quote.clone();
    tampered[48 + 136] ^= 0x01;
    let result = tdx::verify(&tampered, Some(&collateral), at, &ok, None);
    assert!(matches!(result, Err(Rejection::BadSignature { .. })), "{result:?}");
    // report data for something else; another MRTD; another RTMR0
    let result = tdx::verify(&quote, Some(&collateral), at, &ok, Some(&[0x11; 64]));
    assert!(
        matches!(result, Err(Rejection::ReportDataMismatch { .. })),
        "{result:?}"
    );
    let other = Policy {
        measurements: vec!["00".repeat(48)],
        ..Policy::default()
    };
    assert!(matches!(
        tdx::verify(&quote, Some(&collateral), at, &other, None),
        Err(Rejection::MeasurementMismatch { .. })
    ));
    let rtmr = Policy {
        rtmrs: vec![Some("00".repeat(48))],
        ..Policy::default()
    };
    assert!(matches!(
        tdx::verify(&quote, Some(&collateral), at, &rtmr, None),
        Err(Rejection::MeasurementMismatch { .. })
    ));
    // garbage
    assert!(matches!(
        tdx::verify(&quote[..100], Some(&collateral), at, &ok, None),
        Err(Rejection::Malformed { .. })
    ));
}

#[test]
fn an_out_of_date_tdx_platform_or_an_unlisted_status_is_rejected() {
    // this platform's TCB is below every level in Intel's TCB info
    let (quote, collateral, at) = tdx_vector("tdx_quote_outdated");
    let result = tdx::verify(&quote, Some(&collateral), at, &Policy::default(), None);
    assert!(matches!(result, Err(Rejection::TcbTooOld { .. })), "{result:?}");
    // an up-to-date platform whose status the policy does not list
    let (quote, collateral, at) = tdx_vector("tdx_quote");
    let only_out_of_date = Policy {
        tdx_tcb_statuses: vec!["OutOfDate".into()],
        ..Policy::default()
    };
    let result = tdx::verify(&quote, Some(&collateral), at, &only_out_of_date, None);
    let Err(Rejection::TcbTooOld { detail }) = result else {
        panic!("{result:?}")
    };
    assert!(detail.contains("UpToDate"), "{detail}");
}

/// A root CA of our own (P-256, as Intel's) with a TCB-info signing certificate under it, both valid
/// 2020..2040 (`openssl ca -startdate`, so they cover the real collateral's window), and the root's
/// CRL listing that signing certificate (or nothing). DER root, PEM chain (signer, root), DER CRL.
fn tdx_test_pki(name: &str, revoke_signer: bool) -> (Vec<u8>, String, Vec<u8>) {
    let dir = std::env::temp_dir().join(format!("ccverify-tdx-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("ca.cnf"),
        "[ ca ]\ndefault_ca = c\n[ c ]\ndatabase = index.txt\ncrlnumber = crlnumber\nserial = serial\n\
         new_certs_dir = .\ndefault_md = sha256\npolicy = any\nunique_subject = no\n[ any ]\ncommonName = supplied\n\
         [ root ]\nbasicConstraints = critical,CA:TRUE\nkeyUsage = critical,keyCertSign,cRLSign\n\
         subjectKeyIdentifier = hash\n[ leaf ]\nbasicConstraints = critical,CA:FALSE\n\
         keyUsage = critical,digitalSignature,nonRepudiation\nsubjectKeyIdentifier = hash\n\
         authorityKeyIdentifier = keyid\n",
    )
    .unwrap();
    std::fs::write(dir.join("index.txt"), "").unwrap();
    std::fs::write(dir.join("crlnumber"), "01\n").unwrap();
    std::fs::write(dir.join("serial"), "1000\n").unwrap();
    let dates = ["-startdate", "20200101000000Z", "-enddate", "20400101000000Z"];
    let ca = ["ca", "-batch", "-notext", "-config", "ca.cnf"];
    new_key(&dir, "root.key", "ec_paramgen_curve:P-256");
    new_key(&dir, "tcb.key", "ec_paramgen_curve:P-256");
    new_csr(&dir, "root.key", "/CN=Test SGX Root CA", "root.csr");
    let root = [
        "-selfsign",
        "-keyfile",
        "root.key",
        "-in",
        "root.csr",
        "-extensions",
        "root",
        "-out",
        "root.pem",
    ];
    openssl_with(&dir, &ca, &[&root[..], &dates[..]].concat());
    new_csr(&dir, "tcb.key", "/CN=Test TCB Signing", "tcb.csr");
    let signer = ["-cert", "root.pem", "-keyfile", "root.key"];
    let leaf = ["-in", "tcb.csr", "-extensions", "leaf", "-out", "tcb.pem"];
    openssl_with(&dir, &ca, &[&signer[..], &leaf[..], &dates[..]].concat());
    if revoke_signer {
        openssl_with(&dir, &ca, &[&signer[..], &["-revoke", "tcb.pem"][..]].concat());
    }
    let gencrl = ["-gencrl", "-crldays", "3650", "-out", "crl.pem"];
    openssl_with(&dir, &ca, &[&signer[..], &gencrl[..]].concat());
    openssl(&dir, &["crl", "-in", "crl.pem", "-outform", "DER", "-out", "crl.der"]);
    openssl(
        &dir,
        &["x509", "-in", "root.pem", "-outform", "DER", "-out", "root.der"],
    );
    let read = |name: &str| std::fs::read(dir.join(name)).unwrap();
    let chain = String::from_utf8(read("tcb.pem")).unwrap() + &String::from_utf8(read("root.pem")).unwrap();
    let pki = (read("root.der"), chain, read("crl.der"));
    let _ = std::fs::remove_dir_all(&dir);
    pki
}

#[test]
fn a_revoked_tdx_signing_certificate_is_rejected_as_revoked() {
    // dcap-qvl with a root of our own: the real quote and collateral, whose TCB info is now claimed
    // by a signing certificate under that root, and the root CA CRL lists that certificate. dcap-qvl
    // checks the TCB info's chain (with the CRLs) before its signature, so the revocation is what it
    // finds, and ccverify reports it as `revoked`.
    let (quote, real, at) = tdx_vector("tdx_quote");
    let with_pki = |revoke: bool| {
        let (root, chain, crl) = tdx_test_pki(if revoke { "revoked" } else { "clean" }, revoke);
        let mut collateral = real.clone();
        collateral.tcb_info_issuer_chain = chain;
        collateral.root_ca_crl = crl;
        tdx::verify_with_root(&quote, Some(&collateral), Some(&root), at, &Policy::default(), None)
    };
    let revoked = with_pki(true);
    let Err(Rejection::Revoked { detail }) = &revoked else {
        panic!("{revoked:?}")
    };
    assert!(detail.contains("CertRevoked"), "{detail}");
    // the same PKI without the revocation gets past the chain and fails on the TCB info's signature
    // (Intel signed it, not our certificate): the revocation alone made the difference
    let clean = with_pki(false);
    assert!(matches!(clean, Err(Rejection::BadSignature { .. })), "{clean:?}");
    // and Intel's pinned root never accepts our PKI
    let (_, chain, crl) = tdx_test_pki("intel", true);
    let mut collateral = real.clone();
    collateral.tcb_info_issuer_chain = chain;
    collateral.root_ca_crl = crl;
    let intel = tdx::verify(&quote, Some(&collateral), at, &Policy::default(), None);
    // (its root CA CRL is not signed by Intel's root)
    assert!(matches!(intel, Err(Rejection::BadSignature { .. })), "{intel:?}");
}

/// A deterministic fuzz smoke test on stable Rust: mutated real reports, quotes and certificate
/// tables give errors, never panics, and a mutated SNP report never verifies with a different
/// signed body. (`scripts/fuzz-transport.sh` runs the libFuzzer target `evidence`.)
#[test]
fn mutated_and_random_evidence_never_panics() {
    let mut state = 0x2545F4914F6CDD1Du64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let report = milan_report();
    let vcek = milan_vcek();
    let quote = std::fs::read(data("tdx_quote.bin")).unwrap();
    let table = cert_table(&[(VCEK_GUID, &vcek)]);
    let roots = SnpRoots::amd();
    for round in 0..1500 {
        let base: &[u8] = match round % 3 {
            0 => &report,
            1 => &quote,
            _ => &table,
        };
        let mut input = base.to_vec();
        for _ in 0..1 + next() % 6 {
            let at = (next() as usize) % input.len();
            input[at] = next() as u8;
        }
        if next() % 7 == 0 {
            input.truncate((next() as usize) % input.len());
        }
        match round % 3 {
            0 => {
                let result = snp::verify(&input, &with_vcek(&vcek), &roots, &Policy::default(), None, MILAN_AT);
                if result.is_ok() {
                    // only bytes outside the signed part and the signature may have changed
                    assert_eq!(input[..0x2A0], report[..0x2A0]);
                }
            }
            1 => {
                let _ = tdx::parse(&input);
            }
            _ => {
                let _ = snp::vcek_from_cert_table(&input);
            }
        }
    }
}

// ---- input that is not evidence of the named technology ------------------------------------------------

/// An Azure HCL report's shape: the paravisor's header ("HCLA"), a TDREPORT (type 0x81) at 0x20, the
/// runtime data naming report type 4 (TDX) at 0x4C8.
fn hcl_report_shape() -> Vec<u8> {
    let mut bytes = vec![0u8; 2600];
    bytes[..4].copy_from_slice(b"HCLA");
    bytes[0x20] = 0x81;
    bytes[0x4C8] = 4;
    bytes
}

#[test]
fn input_that_is_not_a_quote_or_report_is_malformed_and_named() {
    let (quote, collateral, at) = tdx_vector("tdx_quote");
    let policy = Policy::default();
    let malformed = |result: Result<ccverify::Claims, Rejection>| match result {
        Err(Rejection::Malformed { detail }) => detail,
        other => panic!("expected malformed, got {other:?}"),
    };
    // before the collateral is looked at: with none, it is still malformed, not missing-collateral
    let hcl = hcl_report_shape();
    for collateral in [None, Some(&collateral)] {
        let detail = malformed(tdx::verify(&hcl, collateral, at, &policy, None));
        assert!(
            detail.contains("Azure HCL report") && detail.contains("TDREPORT"),
            "{detail}"
        );
        assert!(detail.contains("needs a TDX quote"), "{detail}");
    }
    // each technology's evidence handed to the other's verifier says what it is
    let detail = malformed(snp::verify(
        &quote,
        &with_vcek(&milan_vcek()),
        &SnpRoots::amd(),
        &policy,
        None,
        at,
    ));
    assert!(detail.contains("a TDX quote (version 4"), "{detail}");
    let detail = malformed(tdx::verify(&milan_report(), Some(&collateral), at, &policy, None));
    assert!(detail.contains("an SEV-SNP attestation report"), "{detail}");
    let detail = malformed(tdx::verify(
        b"-----BEGIN CERTIFICATE-----\nMIIB\n",
        None,
        at,
        &policy,
        None,
    ));
    assert!(detail.contains("a PEM file (CERTIFICATE)"), "{detail}");
    let mut tdreport = vec![0u8; 1024];
    tdreport[0] = 0x81;
    let detail = malformed(tdx::verify(&tdreport, None, at, &policy, None));
    assert!(detail.contains("a raw TDREPORT"), "{detail}");
}

#[test]
fn claims_name_the_kind_of_key_that_signed() {
    let claims = verify_milan(&milan_report(), &Policy::default(), None).unwrap();
    assert_eq!(claims.signing_key, "VCEK");
    let (quote, collateral, at) = tdx_vector("tdx_quote");
    let claims = tdx::verify(&quote, Some(&collateral), at, &Policy::default(), None).unwrap();
    assert_eq!(claims.signing_key, "PCK");
    assert_eq!(claims.details["mr_service_td"], serde_json::Value::Null);
}

/// The crate's directory as cargo gives it when it runs this test: the build directory is shared by
/// every checkout (scripts/cargo.sh), so the path compiled in may be another checkout's, since removed.
fn manifest_dir() -> std::path::PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")))
}
