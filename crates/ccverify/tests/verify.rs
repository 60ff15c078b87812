//! Real vectors (a Milan SEV-SNP report with its VCEK; TDX quotes with their DCAP collateral, from
//! the `sev` and `dcap-qvl` crates: see tests/data/attestation/README.md) verify; mutated vectors and
//! a chain generated here with the openssl command line (RSA-PSS ARK -> ASK, ECDSA P-384 VCEK, as
//! AMD's) reach every rejection reason.

use std::path::{Path, PathBuf};
use std::process::Command;

use ccverify::{snp, tdx, Policy, Rejection, SnpRoots, SnpTcb};

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/data/attestation")
        .join(name)
}

fn milan_report() -> Vec<u8> {
    hex::decode(std::fs::read_to_string(data("report_milan.hex")).unwrap().trim()).unwrap()
}

fn milan_vcek() -> Vec<u8> {
    std::fs::read(data("vcek_milan.der")).unwrap()
}

fn verify_milan(report: &[u8], policy: &Policy, expected: Option<&[u8; 64]>) -> Result<ccverify::Claims, Rejection> {
    snp::verify(report, Some(&milan_vcek()), None, &SnpRoots::amd(), policy, expected)
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
    let none = snp::verify(&report, None, None, &SnpRoots::amd(), &Policy::default(), None);
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

#[test]
fn the_vcek_is_found_in_a_certificate_table() {
    let vcek = milan_vcek();
    let table = cert_table(&[(ASK_GUID, b"not used"), (VCEK_GUID, &vcek)]);
    assert_eq!(snp::vcek_from_cert_table(&table).unwrap(), Some(vcek.clone()));
    let claims = snp::verify(
        &milan_report(),
        None,
        Some(&table),
        &SnpRoots::amd(),
        &Policy::default(),
        None,
    )
    .unwrap();
    assert_eq!(claims.root, "AMD Milan");
    // a table without a VCEK, one pointing outside itself, one without a terminator
    let no_vcek = cert_table(&[(ASK_GUID, b"x")]);
    let result = snp::verify(
        &milan_report(),
        None,
        Some(&no_vcek),
        &SnpRoots::amd(),
        &Policy::default(),
        None,
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

impl TestChain {
    fn generate(name: &str) -> TestChain {
        let dir = std::env::temp_dir().join(format!("ccverify-chain-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let pss = [
            "-sigopt",
            "rsa_padding_mode:pss",
            "-sigopt",
            "rsa_pss_saltlen:48",
            "-sha384",
        ];
        openssl(
            &dir,
            &[
                "genpkey",
                "-algorithm",
                "RSA",
                "-pkeyopt",
                "rsa_keygen_bits:2048",
                "-out",
                "ark.key",
            ],
        );
        let mut args = vec![
            "req",
            "-x509",
            "-new",
            "-key",
            "ark.key",
            "-subj",
            "/CN=ARK-Test",
            "-days",
            "3650",
            "-out",
            "ark.pem",
        ];
        args.extend_from_slice(&pss);
        openssl(&dir, &args);
        openssl(
            &dir,
            &[
                "genpkey",
                "-algorithm",
                "RSA",
                "-pkeyopt",
                "rsa_keygen_bits:2048",
                "-out",
                "ask.key",
            ],
        );
        openssl(
            &dir,
            &[
                "req",
                "-new",
                "-key",
                "ask.key",
                "-subj",
                "/CN=SEV-Test",
                "-out",
                "ask.csr",
            ],
        );
        let mut args = vec![
            "x509",
            "-req",
            "-in",
            "ask.csr",
            "-CA",
            "ark.pem",
            "-CAkey",
            "ark.key",
            "-CAcreateserial",
            "-days",
            "3650",
            "-out",
            "ask.pem",
        ];
        args.extend_from_slice(&pss);
        openssl(&dir, &args);
        openssl(
            &dir,
            &[
                "genpkey",
                "-algorithm",
                "EC",
                "-pkeyopt",
                "ec_paramgen_curve:P-384",
                "-out",
                "vcek.key",
            ],
        );
        openssl(
            &dir,
            &[
                "req",
                "-new",
                "-key",
                "vcek.key",
                "-subj",
                "/CN=SEV-VCEK-Test",
                "-out",
                "vcek.csr",
            ],
        );
        let mut args = vec![
            "x509",
            "-req",
            "-in",
            "vcek.csr",
            "-CA",
            "ask.pem",
            "-CAkey",
            "ask.key",
            "-CAcreateserial",
            "-days",
            "3650",
            "-out",
            "vcek.pem",
        ];
        args.extend_from_slice(&pss);
        openssl(&dir, &args);
        TestChain { dir }
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
    let verify = |report: &[u8], policy: &Policy| snp::verify(report, Some(&vcek), None, &roots, policy, Some(&data));
    // a clean report verifies with the test root it names...
    let clean = chain.sign(false, 0, data);
    let claims = verify(&clean, &Policy::default()).unwrap();
    assert_eq!(claims.root, "test ARK");
    // ...and never with AMD's roots
    let amd = snp::verify(
        &clean,
        Some(&vcek),
        None,
        &SnpRoots::amd(),
        &Policy::default(),
        Some(&data),
    );
    assert!(matches!(amd, Err(Rejection::UnknownRoot { .. })), "{amd:?}");
    // nor does AMD's real VCEK chain to the test root
    let real = snp::verify(
        &milan_report(),
        Some(&milan_vcek()),
        None,
        &roots,
        &Policy::default(),
        None,
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
                let result = snp::verify(&input, Some(&vcek), None, &roots, &Policy::default(), None);
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
