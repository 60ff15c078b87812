//! SEV-SNP: the attestation report, its VCEK signature, the VCEK's chain to AMD's roots, the policy.
//!
//! The `sev` crate parses the report and checks ARK (self-signed) -> ASK -> VCEK with AMD's roots
//! for Milan, Genoa and Turin built in; `p384` checks the VCEK's ECDSA P-384 / SHA-384 signature over
//! the report's own first 0x2A0 bytes (not a re-serialisation of the parsed report).

use p384::ecdsa::signature::DigestVerifier;
use serde_json::json;
use sev::certs::snp::{ca, Certificate, Verifiable};
use sev::firmware::guest::AttestationReport;
use sev::firmware::host::{CertTableEntry, CertType};
use sev::parser::ByteParser;
use sha2::{Digest, Sha384};

use crate::{check_measurement, check_report_data, Claims, Policy, Rejection, REPORT_DATA_LEN};

/// Size of an SEV-SNP ATTESTATION_REPORT; the signature covers bytes 0..0x2A0.
pub const REPORT_LEN: usize = 0x4A0;
const SIGNED_LEN: usize = 0x2A0;

/// Trust anchors: named ARK/ASK pairs. [`SnpRoots::amd`] pins AMD's; tests add their own explicitly.
pub struct SnpRoots {
    roots: Vec<(String, ca::Chain)>,
}

impl SnpRoots {
    /// AMD's ARK and ASK for Milan, Genoa and Turin, as the `sev` crate ships them.
    pub fn amd() -> SnpRoots {
        use sev::certs::snp::builtin::{genoa, milan, turin};
        let mut roots = Vec::new();
        for (name, ark, ask) in [
            ("AMD Milan", milan::ark(), milan::ask()),
            ("AMD Genoa", genoa::ark(), genoa::ask()),
            ("AMD Turin", turin::ark(), turin::ask()),
        ] {
            // the built-in PEMs are part of the crate; one that fails to parse is left out, never trusted
            if let (Ok(ark), Ok(ask)) = (ark, ask) {
                roots.push((name.to_string(), ca::Chain { ark, ask }));
            }
        }
        SnpRoots { roots }
    }

    /// Exactly these anchors (PEM or DER ARK and ASK), e.g. a test chain; nothing of AMD's.
    pub fn only(name: &str, ark: &[u8], ask: &[u8]) -> Result<SnpRoots, Rejection> {
        let chain = ca::Chain {
            ark: certificate(ark)?,
            ask: certificate(ask)?,
        };
        Ok(SnpRoots {
            roots: vec![(name.to_string(), chain)],
        })
    }

    pub fn names(&self) -> Vec<&str> {
        self.roots.iter().map(|(name, _)| name.as_str()).collect()
    }
}

/// A certificate in PEM or DER.
pub fn certificate(bytes: &[u8]) -> Result<Certificate, Rejection> {
    let parsed = if bytes.starts_with(b"-----BEGIN") {
        Certificate::from_pem(bytes)
    } else {
        Certificate::from_der(bytes)
    };
    parsed.map_err(|e| Rejection::Malformed {
        detail: format!("certificate: {e}"),
    })
}

/// The VCEK (or VLEK) from a configfs-tsm `auxblob` / SNP extended-report certificate table:
/// entries of GUID (16 bytes), offset and length (u32 little-endian each), ended by an all-zero
/// entry; offsets are from the table's start. Every bound is checked: the table comes from the peer.
pub fn vcek_from_cert_table(table: &[u8]) -> Result<Option<Vec<u8>>, Rejection> {
    const ENTRY: usize = 24;
    let malformed = |detail: &str| Rejection::Malformed {
        detail: format!("certificate table: {detail}"),
    };
    let mut at = 0;
    loop {
        let entry = table
            .get(at..at + ENTRY)
            .ok_or_else(|| malformed("no terminating entry"))?;
        if entry.iter().all(|&b| b == 0) {
            return Ok(None);
        }
        let guid = uuid::Uuid::from_slice(&entry[..16]).map_err(|_| malformed("bad GUID"))?;
        let offset = u32::from_le_bytes(entry[16..20].try_into().expect("4 bytes")) as usize;
        let length = u32::from_le_bytes(entry[20..24].try_into().expect("4 bytes")) as usize;
        let data = offset
            .checked_add(length)
            .and_then(|end| table.get(offset..end))
            .ok_or_else(|| malformed("an entry points outside the table"))?;
        if let Ok(entry) = CertTableEntry::from_guid(&guid, data.to_vec()) {
            if matches!(entry.cert_type, CertType::VCEK | CertType::VLEK) {
                return Ok(Some(entry.data().to_vec()));
            }
        }
        at += ENTRY;
    }
}

/// Verify an SEV-SNP report: parse, chain, signature, report data, policy.
///
/// `vcek`: the VCEK as a file supplies it (PEM or DER); otherwise it is taken from `cert_table`.
pub fn verify(
    report: &[u8],
    vcek: Option<&[u8]>,
    cert_table: Option<&[u8]>,
    roots: &SnpRoots,
    policy: &Policy,
    expected_report_data: Option<&[u8; REPORT_DATA_LEN]>,
) -> Result<Claims, Rejection> {
    let parsed = parse(report)?;
    let vcek_bytes = match (vcek, cert_table) {
        (Some(vcek), _) => vcek.to_vec(),
        (None, Some(table)) => vcek_from_cert_table(table)?.ok_or(Rejection::MissingCertificate)?,
        (None, None) => return Err(Rejection::MissingCertificate),
    };
    let vcek = certificate(&vcek_bytes)?;
    let root = chain_root(&vcek, roots)?;
    check_signature(report, &parsed, &vcek)?;
    check_report_data(&parsed.report_data, expected_report_data)?;
    let debug = parsed.policy.debug_allowed();
    if debug && !policy.allow_debug {
        return Err(Rejection::DebugEnabled);
    }
    if let Some(max) = policy.max_vmpl {
        if parsed.vmpl > max {
            return Err(Rejection::VmplNotAllowed { got: parsed.vmpl });
        }
    }
    check_measurement(&parsed.measurement, &policy.measurements)?;
    let tcb = parsed.reported_tcb;
    if let Some(min) = policy.min_tcb {
        let low: Vec<String> = [
            ("bootloader", tcb.bootloader, min.bootloader),
            ("tee", tcb.tee, min.tee),
            ("snp", tcb.snp, min.snp),
            ("microcode", tcb.microcode, min.microcode),
        ]
        .iter()
        .filter(|(_, got, min)| got < min)
        .map(|(name, got, min)| format!("{name} {got} < {min}"))
        .collect();
        if !low.is_empty() {
            return Err(Rejection::TcbTooOld { detail: low.join(", ") });
        }
    }
    Ok(Claims {
        technology: "sev-snp".into(),
        measurement: hex::encode(parsed.measurement),
        report_data: hex::encode(parsed.report_data),
        debug,
        tcb: json!({"bootloader": tcb.bootloader, "tee": tcb.tee, "snp": tcb.snp, "microcode": tcb.microcode,
                    "fmc": tcb.fmc}),
        root,
        details: json!({"version": parsed.version, "vmpl": parsed.vmpl, "guest_svn": parsed.guest_svn,
                        "policy": format!("{:#x}", u64::from(parsed.policy)), "chip_id": hex::encode(parsed.chip_id)}),
    })
}

/// Parse a report (no verification): for the fuzz target and for reading claims.
pub fn parse(report: &[u8]) -> Result<AttestationReport, Rejection> {
    if report.len() != REPORT_LEN {
        return Err(Rejection::Malformed {
            detail: format!("an SEV-SNP report is {REPORT_LEN} bytes, not {}", report.len()),
        });
    }
    AttestationReport::from_bytes(report).map_err(|e| Rejection::Malformed {
        detail: format!("SEV-SNP report: {e}"),
    })
}

/// The name of the pinned root whose ASK signed the VCEK (the ARK self-signed and signing the ASK).
fn chain_root(vcek: &Certificate, roots: &SnpRoots) -> Result<String, Rejection> {
    let mut failures = Vec::new();
    for (name, ca) in &roots.roots {
        let chain = sev::certs::snp::Chain {
            ca: ca.clone(),
            vek: vcek.clone(),
        };
        match (&chain).verify() {
            Ok(_) => return Ok(name.clone()),
            Err(e) => failures.push(format!("{name}: {e}")),
        }
    }
    Err(Rejection::UnknownRoot {
        detail: failures.join("; "),
    })
}

fn check_signature(raw: &[u8], parsed: &AttestationReport, vcek: &Certificate) -> Result<(), Rejection> {
    let bad = |detail: String| Rejection::BadSignature { detail };
    let key = p384::ecdsa::VerifyingKey::from_sec1_bytes(vcek.public_key_sec1())
        .map_err(|e| bad(format!("the VCEK's key is not a P-384 key: {e}")))?;
    let signature =
        p384::ecdsa::Signature::try_from(&parsed.signature).map_err(|e| bad(format!("unreadable signature: {e}")))?;
    key.verify_digest(Sha384::new_with_prefix(&raw[..SIGNED_LEN]), &signature)
        .map_err(|_| bad("the VCEK did not sign this report".into()))
}
