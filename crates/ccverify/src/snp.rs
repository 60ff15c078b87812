//! SEV-SNP: the attestation report, its VCEK or VLEK signature, that key's chain to AMD's roots, the
//! policy.
//!
//! The `sev` crate parses the report and checks ARK (self-signed) -> ASK -> VCEK with AMD's roots
//! for Milan, Genoa and Turin built in; the same check runs ARK -> ASVK -> VLEK for reports signed by
//! a VLEK (a key a cloud provider loads, as on AWS), with AMD's ASVKs pinned in this crate
//! (`roots/`). `p384` checks the key's ECDSA P-384 / SHA-384 signature over the report's own first
//! 0x2A0 bytes (not a re-serialisation of the parsed report).
//!
//! Beyond what `sev` checks: every certificate of the chain (ARK, ASK or ASVK, VCEK or VLEK) must be
//! inside its validity period at the verification time, and AMD's CRL (served by the KDS at
//! `/vcek/v1/{Milan,Genoa,Turin}/crl`, and `/vlek/v1/...` for the ASVK, issued and signed by the ARK
//! with RSA-PSS / SHA-384), when given, is verified against the same pinned ARK that anchors the chain
//! (`x509-cert` parses it, `rsa` checks the signature), must be current (thisUpdate <= now <=
//! nextUpdate), and revokes the chain when it lists the intermediate's or the key's serial number.

use p384::ecdsa::signature::DigestVerifier;
use serde_json::json;
use sev::certs::snp::{ca, Certificate, Verifiable};
use sev::firmware::guest::AttestationReport;
use sev::firmware::host::{CertTableEntry, CertType};
use sev::parser::ByteParser;
use sha2::{Digest, Sha384};
use x509_cert::crl::CertificateList;
use x509_cert::der::referenced::OwnedToRef;
use x509_cert::der::{Decode, Encode};

use crate::{check_measurement, check_report_data, Claims, Policy, Rejection, Revocation, REPORT_DATA_LEN};

/// Size of an SEV-SNP ATTESTATION_REPORT; the signature covers bytes 0..0x2A0.
pub const REPORT_LEN: usize = 0x4A0;
const SIGNED_LEN: usize = 0x2A0;
/// RSASSA-PSS (RFC 4055), the algorithm of AMD's ARK and ASK signatures and of its CRL
const RSA_PSS_OID: x509_cert::der::oid::ObjectIdentifier =
    x509_cert::der::oid::ObjectIdentifier::new_unwrap("1.2.840.113549.1.1.10");
/// PSS salt length of AMD's signatures (the SHA-384 digest length)
const PSS_SALT_LEN: usize = 48;

/// What the SEV-SNP verifier is given beside the report; every field optional.
#[derive(Debug, Clone, Copy, Default)]
pub struct SnpCollateral<'a> {
    /// the VCEK (PEM or DER) as a file supplies it; otherwise it is taken from `cert_table`
    pub vcek: Option<&'a [u8]>,
    /// the configfs-tsm `auxblob` / extended-report certificate table
    pub cert_table: Option<&'a [u8]>,
    /// AMD's CRL for the product (DER as the KDS serves it, or PEM); otherwise the certificate
    /// table's CRL entry when it has one. Without either the verdict says "revocation not checked".
    pub crl: Option<&'a [u8]>,
}

/// Which key signed a report: a VCEK (per chip, issued by AMD's ASK) or a VLEK (loaded by a cloud
/// provider, e.g. AWS's SEV-SNP instances, issued by AMD's ASVK). Both chain to the same ARK.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum SigningKey {
    Vcek,
    Vlek,
}

impl SigningKey {
    /// The name of the key and of the intermediate certificate that issues it.
    pub fn names(self) -> (&'static str, &'static str) {
        match self {
            SigningKey::Vcek => ("VCEK", "ASK"),
            SigningKey::Vlek => ("VLEK", "ASVK"),
        }
    }

    /// The report's SIGNING_KEY field (KEY_INFO bits 4:2): 0 VCEK, 1 VLEK, anything else neither.
    fn from_report(report: &AttestationReport) -> Option<SigningKey> {
        match report.key_info.signing_key() {
            0 => Some(SigningKey::Vcek),
            1 => Some(SigningKey::Vlek),
            _ => None,
        }
    }
}

/// AMD's ASVKs (the VLEK issuers) for Milan, Genoa and Turin. The `sev` crate ships only the ARKs and
/// ASKs, so these are pinned here, as AMD's KDS serves them at /vlek/v1/{product}/cert_chain; a unit
/// test checks that each is signed by the `sev` crate's ARK of its product.
const AMD_ASVKS: [(&str, &[u8]); 3] = [
    ("AMD Milan", include_bytes!("../roots/asvk-milan.pem")),
    ("AMD Genoa", include_bytes!("../roots/asvk-genoa.pem")),
    ("AMD Turin", include_bytes!("../roots/asvk-turin.pem")),
];

/// One trust anchor: an ARK and the intermediates it signed (the ASK for VCEKs, the ASVK for VLEKs).
struct Anchor {
    name: String,
    ark: Certificate,
    ask: Option<Certificate>,
    asvk: Option<Certificate>,
}

impl Anchor {
    fn intermediates(&self) -> impl Iterator<Item = (SigningKey, &Certificate)> {
        [(SigningKey::Vcek, &self.ask), (SigningKey::Vlek, &self.asvk)]
            .into_iter()
            .filter_map(|(kind, cert)| cert.as_ref().map(|cert| (kind, cert)))
    }
}

/// Trust anchors: named ARKs with their ASK and ASVK. [`SnpRoots::amd`] pins AMD's; tests add their own
/// explicitly.
pub struct SnpRoots {
    roots: Vec<Anchor>,
}

impl SnpRoots {
    /// AMD's ARK and ASK for Milan, Genoa and Turin, as the `sev` crate ships them, and AMD's ASVK for
    /// each (pinned in this crate).
    pub fn amd() -> SnpRoots {
        use sev::certs::snp::builtin::{genoa, milan, turin};
        let mut roots = Vec::new();
        for ((name, ark, ask), (_, asvk)) in [
            ("AMD Milan", milan::ark(), milan::ask()),
            ("AMD Genoa", genoa::ark(), genoa::ask()),
            ("AMD Turin", turin::ark(), turin::ask()),
        ]
        .into_iter()
        .zip(AMD_ASVKS)
        {
            // the built-in PEMs are part of the build; one that fails to parse is left out, never trusted
            if let (Ok(ark), Ok(ask)) = (ark, ask) {
                roots.push(Anchor {
                    name: name.to_string(),
                    ark,
                    ask: Some(ask),
                    asvk: Certificate::from_pem(asvk).ok(),
                });
            }
        }
        SnpRoots { roots }
    }

    /// Exactly these anchors (PEM or DER ARK and ASK), e.g. a test chain; nothing of AMD's.
    pub fn only(name: &str, ark: &[u8], ask: &[u8]) -> Result<SnpRoots, Rejection> {
        Ok(SnpRoots {
            roots: vec![Anchor {
                name: name.to_string(),
                ark: certificate(ark)?,
                ask: Some(certificate(ask)?),
                asvk: None,
            }],
        })
    }

    /// These anchors with an ASVK (PEM or DER) beside each ASK, e.g. a test chain that issues VLEKs.
    pub fn with_asvk(mut self, asvk: &[u8]) -> Result<SnpRoots, Rejection> {
        let asvk = certificate(asvk)?;
        for anchor in &mut self.roots {
            anchor.asvk = Some(asvk.clone());
        }
        Ok(self)
    }

    pub fn names(&self) -> Vec<&str> {
        self.roots.iter().map(|anchor| anchor.name.as_str()).collect()
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
    cert_table_entry(table, |kind| matches!(kind, CertType::VCEK | CertType::VLEK))
}

/// The CRL entry of a certificate table (GUID 92f81bc3-5811-4d3d-97ff-d19f88dc67ea), if the host put one there.
pub fn crl_from_cert_table(table: &[u8]) -> Result<Option<Vec<u8>>, Rejection> {
    cert_table_entry(table, |kind| matches!(kind, CertType::CRL))
}

fn cert_table_entry(table: &[u8], wanted: impl Fn(&CertType) -> bool) -> Result<Option<Vec<u8>>, Rejection> {
    const ENTRY: usize = 24;
    let malformed = |detail: &str| Rejection::Malformed {
        detail: format!("certificate table: {detail}"),
    };
    let mut at: usize = 0;
    loop {
        let entry = at
            .checked_add(ENTRY)
            .and_then(|end| table.get(at..end))
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
            if wanted(&entry.cert_type) {
                return Ok(Some(entry.data().to_vec()));
            }
        }
        at += ENTRY;
    }
}

/// Verify an SEV-SNP report at `now_unix` (seconds since the epoch): parse, chain, certificate
/// validity, revocation, signature, report data, policy.
pub fn verify(
    report: &[u8],
    collateral: &SnpCollateral,
    roots: &SnpRoots,
    policy: &Policy,
    expected_report_data: Option<&[u8; REPORT_DATA_LEN]>,
    now_unix: u64,
) -> Result<Claims, Rejection> {
    let parsed = parse(report)?;
    let vek_bytes = match (collateral.vcek, collateral.cert_table) {
        (Some(vcek), _) => vcek.to_vec(),
        (None, Some(table)) => vcek_from_cert_table(table)?.ok_or(Rejection::MissingCertificate)?,
        (None, None) => return Err(Rejection::MissingCertificate),
    };
    let vek = certificate(&vek_bytes)?;
    let anchor = chain_root(&vek, roots)?;
    let revocation = check_chain_status(&anchor, &vek, collateral, policy, now_unix)?;
    check_signing_key(&parsed, anchor.kind)?;
    check_signature(report, &parsed, &vek, anchor.kind)?;
    check_report_data(&parsed.report_data, expected_report_data)?;
    let debug = check_policy(&parsed, policy)?;
    let tcb = parsed.reported_tcb;
    Ok(Claims {
        technology: "sev-snp".into(),
        measurement: hex::encode(parsed.measurement),
        report_data: hex::encode(parsed.report_data),
        debug,
        tcb: tcb_json(&tcb),
        root: anchor.name.to_string(),
        signing_key: anchor.kind.names().0.into(),
        details: details(report, &parsed),
        revocation,
    })
}

/// Byte offsets in the ATTESTATION_REPORT (AMD SEV-SNP Firmware ABI Specification, "ATTESTATION_REPORT
/// Structure"): the fields read from the report's own bytes rather than through the `sev` crate, so the
/// raw values are the report's (the crate sets the reserved policy bit 17 when it converts).
const POLICY_AT: usize = 0x08;
const PLATFORM_INFO_AT: usize = 0x40;

fn u64_at(report: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(report[at..at + 8].try_into().expect("8 bytes inside a parsed report"))
}

/// GUEST_POLICY bits (ABI spec, "Guest Policy Structure"): 16 SMT allowed, 18 MIGRATE_MA, 19 DEBUG,
/// 20 SINGLE_SOCKET; PLATFORM_INFO bits ("PLATFORM_INFO"): 0 SMT_EN, 1 TSME_EN.
fn bit(value: u64, index: u32) -> bool {
    value >> index & 1 == 1
}

fn tcb_json(tcb: &sev::firmware::host::TcbVersion) -> serde_json::Value {
    json!({"bootloader": tcb.bootloader, "tee": tcb.tee, "snp": tcb.snp, "microcode": tcb.microcode, "fmc": tcb.fmc})
}

/// What decides the guest's performance and trust beside the measurement: the guest policy, the VMPL the
/// report was requested from, the reported TCB (the one the VCEK is derived from) and the current TCB
/// (what the platform runs now), and the platform info. `report` is the report's bytes, `parsed` their
/// parse; both are the same report.
pub fn details(report: &[u8], parsed: &AttestationReport) -> serde_json::Value {
    let policy = u64_at(report, POLICY_AT);
    let platform = u64_at(report, PLATFORM_INFO_AT);
    json!({
        "version": parsed.version,
        "vmpl": parsed.vmpl,
        "guest_svn": parsed.guest_svn,
        "policy": {"raw": format!("{policy:#x}"), "debug": bit(policy, 19), "smt": bit(policy, 16),
                   "migrate_ma": bit(policy, 18), "single_socket": bit(policy, 20),
                   "abi_major": policy >> 8 & 0xff, "abi_minor": policy & 0xff},
        "reported_tcb": tcb_json(&parsed.reported_tcb),
        "current_tcb": tcb_json(&parsed.current_tcb),
        "platform_info": {"raw": format!("{platform:#x}"), "smt_enabled": bit(platform, 0),
                          "tsme_enabled": bit(platform, 1)},
        "chip_id": hex::encode(parsed.chip_id),
    })
}

/// The details of a report that is only parsed, not verified (`ccverify --parse-only`): what the report
/// says of itself, its signature unchecked.
pub fn describe(report: &[u8]) -> Result<serde_json::Value, Rejection> {
    let parsed = parse(report)?;
    Ok(details(report, &parsed))
}

/// Every certificate of the chain inside its validity period, then AMD's CRL (given, or from the
/// certificate table) when there is one.
fn check_chain_status(
    anchor: &ChainFound,
    vek: &Certificate,
    collateral: &SnpCollateral,
    policy: &Policy,
    now_unix: u64,
) -> Result<Revocation, Rejection> {
    let (vek_name, intermediate_name) = anchor.kind.names();
    let ark = x509_cert::Certificate::from(anchor.ark.clone());
    let intermediate = x509_cert::Certificate::from(anchor.intermediate.clone());
    let vek_x509 = x509_cert::Certificate::from(vek.clone());
    for (name, cert) in [("ARK", &ark), (intermediate_name, &intermediate), (vek_name, &vek_x509)] {
        check_validity(name, cert, now_unix)?;
    }
    let table_crl = match (collateral.crl, collateral.cert_table) {
        (None, Some(table)) => crl_from_cert_table(table)?,
        _ => None,
    };
    match collateral.crl.or(table_crl.as_deref()) {
        Some(crl) => check_crl(
            crl,
            &ark,
            [(intermediate_name, &intermediate), (vek_name, &vek_x509)],
            now_unix,
        ),
        None if policy.require_revocation_check => Err(Rejection::RevocationNotChecked),
        None => Ok(Revocation {
            checked: false,
            detail: "revocation not checked: no AMD CRL was supplied".into(),
        }),
    }
}

/// The report names the kind of key that signed it; a VCEK given for a report that says VLEK (or the
/// other way round) is the wrong certificate, whatever its chain.
fn check_signing_key(parsed: &AttestationReport, chained: SigningKey) -> Result<(), Rejection> {
    match SigningKey::from_report(parsed) {
        Some(said) if said != chained => Err(Rejection::BadSignature {
            detail: format!(
                "the report says a {} signed it, but the given certificate is a {} (chained through the {})",
                said.names().0,
                chained.names().0,
                chained.names().1
            ),
        }),
        _ => Ok(()),
    }
}

/// Debug, VMPL, measurement and minimum TCB; returns whether debugging is enabled.
fn check_policy(parsed: &AttestationReport, policy: &Policy) -> Result<bool, Rejection> {
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
    Ok(debug)
}

/// Parse a report (no verification): for the fuzz target and for reading claims.
pub fn parse(report: &[u8]) -> Result<AttestationReport, Rejection> {
    let not_a_report = |why: String| Rejection::Malformed {
        detail: format!(
            "not an SEV-SNP report ({why}): this looks like {}; ccverify --technology sev-snp needs {}",
            crate::sniff::describe(report),
            crate::sniff::SNP_EXPECTED
        ),
    };
    if report.len() != REPORT_LEN {
        return Err(not_a_report(format!("{} bytes, not {REPORT_LEN}", report.len())));
    }
    AttestationReport::from_bytes(report).map_err(|e| not_a_report(e.to_string()))
}

/// The anchor a VCEK or VLEK chained to: its name, the kind of key, the ARK and the intermediate.
struct ChainFound<'r> {
    name: &'r str,
    kind: SigningKey,
    ark: &'r Certificate,
    intermediate: &'r Certificate,
}

/// The pinned root whose ASK (for a VCEK) or ASVK (for a VLEK) signed the key, the ARK self-signed
/// and signing that intermediate.
fn chain_root<'r>(vek: &Certificate, roots: &'r SnpRoots) -> Result<ChainFound<'r>, Rejection> {
    let mut failures = Vec::new();
    for anchor in &roots.roots {
        for (kind, intermediate) in anchor.intermediates() {
            let chain = sev::certs::snp::Chain {
                ca: ca::Chain {
                    ark: anchor.ark.clone(),
                    ask: intermediate.clone(),
                },
                vek: vek.clone(),
            };
            match (&chain).verify() {
                Ok(_) => {
                    return Ok(ChainFound {
                        name: &anchor.name,
                        kind,
                        ark: &anchor.ark,
                        intermediate,
                    })
                }
                Err(e) => failures.push(format!("{} via its {}: {e}", anchor.name, kind.names().1)),
            }
        }
    }
    Err(Rejection::UnknownRoot {
        detail: failures.join("; "),
    })
}

/// notBefore <= now <= notAfter (the `sev` crate checks signatures only).
fn check_validity(name: &str, cert: &x509_cert::Certificate, now_unix: u64) -> Result<(), Rejection> {
    let validity = &cert.tbs_certificate.validity;
    let not_before = validity.not_before.to_unix_duration().as_secs();
    let not_after = validity.not_after.to_unix_duration().as_secs();
    let subject = &cert.tbs_certificate.subject;
    if now_unix < not_before {
        return Err(Rejection::CertificateExpired {
            detail: format!(
                "the {name} ({subject}) is not valid before {} (verification time {})",
                validity.not_before,
                unix_text(now_unix)
            ),
        });
    }
    if now_unix > not_after {
        return Err(Rejection::CertificateExpired {
            detail: format!(
                "the {name} ({subject}) expired at {} (verification time {})",
                validity.not_after,
                unix_text(now_unix)
            ),
        });
    }
    Ok(())
}

fn unix_text(unix: u64) -> String {
    x509_cert::der::DateTime::from_unix_duration(std::time::Duration::from_secs(unix))
        .map(|t| t.to_string())
        .unwrap_or_else(|_| format!("{unix} s since the epoch"))
}

/// A CRL in DER, or in PEM ("X509 CRL").
pub fn parse_crl(bytes: &[u8]) -> Result<CertificateList, Rejection> {
    let malformed = |detail: String| Rejection::Malformed {
        detail: format!("CRL: {detail}"),
    };
    let der = if bytes.starts_with(b"-----BEGIN") {
        let (label, der) = x509_cert::der::pem::decode_vec(bytes).map_err(|e| malformed(format!("PEM: {e}")))?;
        if label != "X509 CRL" {
            return Err(malformed(format!("a PEM {label}, not an X509 CRL")));
        }
        der
    } else {
        bytes.to_vec()
    };
    let crl = CertificateList::from_der(&der).map_err(|e| malformed(e.to_string()))?;
    // the signature is checked over the re-encoded TBSCertList: only sound when that is the input's own bytes
    if crl.to_der().ok().as_deref() != Some(der.as_slice()) {
        return Err(malformed("not in canonical DER".into()));
    }
    Ok(crl)
}

/// AMD's CRL: issued and signed (RSA-PSS, SHA-384) by the pinned ARK, current at `now_unix`, and
/// listing neither the intermediate's (ASK or ASVK) nor the key's (VCEK or VLEK) serial number.
fn check_crl(
    bytes: &[u8],
    ark: &x509_cert::Certificate,
    chain: [(&str, &x509_cert::Certificate); 2],
    now_unix: u64,
) -> Result<Revocation, Rejection> {
    use rsa::signature::Verifier;
    let crl = parse_crl(bytes)?;
    let tbs = &crl.tbs_cert_list;
    let ark_name = &ark.tbs_certificate.subject;
    if &tbs.issuer != ark_name {
        return Err(Rejection::UnknownRoot {
            detail: format!("the CRL is issued by {}, not by the ARK ({ark_name})", tbs.issuer),
        });
    }
    let bad = |detail: String| Rejection::BadSignature {
        detail: format!("the CRL: {detail}"),
    };
    if crl.signature_algorithm.oid != RSA_PSS_OID || tbs.signature != crl.signature_algorithm {
        return Err(bad(format!(
            "signed with {} (AMD signs with RSASSA-PSS, SHA-384)",
            crl.signature_algorithm.oid
        )));
    }
    let key = rsa::RsaPublicKey::try_from(ark.tbs_certificate.subject_public_key_info.owned_to_ref())
        .map_err(|e| bad(format!("the ARK's key is not an RSA key: {e}")))?;
    let verifier = rsa::pss::VerifyingKey::<Sha384>::new_with_salt_len(key, PSS_SALT_LEN);
    let signature = crl
        .signature
        .as_bytes()
        .and_then(|raw| rsa::pss::Signature::try_from(raw).ok())
        .ok_or_else(|| bad("unreadable signature".into()))?;
    let message = tbs.to_der().map_err(|e| bad(format!("TBSCertList: {e}")))?;
    verifier
        .verify(&message, &signature)
        .map_err(|_| bad(format!("not signed by the pinned ARK ({ark_name})")))?;
    let this_update = tbs.this_update.to_unix_duration().as_secs();
    if now_unix < this_update {
        return Err(Rejection::Stale {
            detail: format!(
                "the CRL's thisUpdate {} is after the verification time {}",
                tbs.this_update,
                unix_text(now_unix)
            ),
        });
    }
    let next_update = tbs.next_update.ok_or_else(|| Rejection::Stale {
        detail: "the CRL has no nextUpdate, so its freshness cannot be judged".into(),
    })?;
    if now_unix > next_update.to_unix_duration().as_secs() {
        return Err(Rejection::Stale {
            detail: format!(
                "the CRL's nextUpdate {next_update} is before the verification time {}: fetch a current one",
                unix_text(now_unix)
            ),
        });
    }
    for revoked in tbs.revoked_certificates.iter().flatten() {
        for (name, cert) in chain {
            if revoked.serial_number == cert.tbs_certificate.serial_number {
                return Err(Rejection::Revoked {
                    detail: format!(
                        "the {name} (serial {}) is listed in the CRL of {ark_name} since {}",
                        cert.tbs_certificate.serial_number, revoked.revocation_date
                    ),
                });
            }
        }
    }
    Ok(Revocation {
        checked: true,
        detail: format!(
            "CRL of {ark_name} (thisUpdate {}, nextUpdate {next_update}, {} entries): {} and {} not listed",
            tbs.this_update,
            tbs.revoked_certificates.as_ref().map_or(0, Vec::len),
            chain[0].0,
            chain[1].0
        ),
    })
}

fn check_signature(
    raw: &[u8],
    parsed: &AttestationReport,
    vek: &Certificate,
    kind: SigningKey,
) -> Result<(), Rejection> {
    let bad = |detail: String| Rejection::BadSignature { detail };
    let name = kind.names().0;
    let key = p384::ecdsa::VerifyingKey::from_sec1_bytes(vek.public_key_sec1())
        .map_err(|e| bad(format!("the {name}'s key is not a P-384 key: {e}")))?;
    let signature =
        p384::ecdsa::Signature::try_from(&parsed.signature).map_err(|e| bad(format!("unreadable signature: {e}")))?;
    key.verify_digest(Sha384::new_with_prefix(&raw[..SIGNED_LEN]), &signature)
        .map_err(|_| bad(format!("the {name} did not sign this report")))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each pinned ASVK is the one its product's ARK (as the `sev` crate ships it) signed: a wrong or
    /// damaged PEM in `roots/` would fail here rather than silently never verify a VLEK.
    #[test]
    fn the_pinned_asvks_are_signed_by_amds_arks() {
        let roots = SnpRoots::amd();
        assert_eq!(roots.names(), ["AMD Milan", "AMD Genoa", "AMD Turin"]);
        for anchor in &roots.roots {
            let asvk = anchor
                .asvk
                .as_ref()
                .unwrap_or_else(|| panic!("{}: no ASVK", anchor.name));
            (&anchor.ark, asvk)
                .verify()
                .unwrap_or_else(|e| panic!("{}: the ASVK is not signed by the ARK: {e}", anchor.name));
            let subject = x509_cert::Certificate::from(asvk.clone())
                .tbs_certificate
                .subject
                .to_string();
            assert!(subject.contains("SEV-VLEK-"), "{}: {subject}", anchor.name);
        }
    }
}
