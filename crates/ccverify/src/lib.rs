//! ccverify: one verifier for confidential-computing evidence, shared by the secure channel
//! (`ccchannel`) and by ccbench's attested result bundles.
//!
//! * SEV-SNP: the attestation report's ECDSA P-384 signature is checked against the VCEK (from the
//!   configfs-tsm `auxblob` certificate table, or a file the user supplies), the VCEK against AMD's
//!   ASK and ARK for Milan, Genoa or Turin (pinned: the `sev` crate ships them), or a VLEK against
//!   AMD's ASVK and the same ARK (the ASVKs pinned in this crate), then the policy:
//!   debug disabled, launch measurement, minimum TCB, VMPL, report data. Every certificate's validity
//!   period is checked at the verification time; AMD's CRL, when supplied, is verified against the same
//!   pinned ARK and revokes a listed ASK or VCEK. See [`snp`].
//! * TDX: the quote is checked with Intel DCAP collateral (TCB info, QE identity, CRLs) supplied as
//!   a file, through the `dcap-qvl` crate (Intel's SGX root pinned there), then the policy: MRTD,
//!   RTMRs, TCB status, debug off, report data. See [`tdx`].
//!
//! Every failure is a typed [`Rejection`]; nothing here writes a cryptographic primitive or a
//! certificate-chain check of its own.

pub mod policy;
pub mod sniff;
pub mod snp;
pub mod tdx;

use std::fmt;

use serde::Serialize;

pub use policy::{Policy, SnpTcb};
pub use snp::{SigningKey, SnpCollateral, SnpRoots};

/// Length of the report data that evidence binds (SEV-SNP REPORT_DATA, TDX REPORTDATA).
pub const REPORT_DATA_LEN: usize = 64;

/// Why evidence was rejected. `code()` gives a stable name for JSON and for tests.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "code", rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Rejection {
    /// The report or quote (or a certificate) could not be parsed.
    Malformed { detail: String },
    /// No VCEK was supplied, neither in the certificate table nor as a file.
    MissingCertificate,
    /// TDX evidence without DCAP collateral to check it against.
    MissingCollateral,
    /// The signing chain does not end in a pinned vendor root.
    UnknownRoot { detail: String },
    /// A signature (the report's, a certificate's, the collateral's) does not verify.
    BadSignature { detail: String },
    /// A certificate or the platform's TCB is revoked.
    Revoked { detail: String },
    /// No revocation list was supplied, and the policy requires a revocation check.
    RevocationNotChecked,
    /// A certificate of the chain is outside its validity period (expired, or not yet valid) at the
    /// verification time.
    CertificateExpired { detail: String },
    /// The platform's TCB is below the policy's minimum or its status is not accepted.
    TcbTooOld { detail: String },
    /// The guest or TD allows debugging: its memory is readable by the host.
    DebugEnabled,
    /// The launch measurement (MEASUREMENT, MRTD) or a runtime register is not an expected one.
    MeasurementMismatch { got: String },
    /// The report data does not commit to what the verifier expected (another handshake, bundle or nonce).
    ReportDataMismatch { got: String },
    /// The report was requested from a VMPL the policy does not accept.
    VmplNotAllowed { got: u32 },
    /// The collateral (or the evidence) is outside its validity window.
    Stale { detail: String },
    /// The vendor library refused the evidence for a reason not named above.
    Unverified { detail: String },
}

impl Rejection {
    pub fn code(&self) -> &'static str {
        match self {
            Rejection::Malformed { .. } => "malformed",
            Rejection::MissingCertificate => "missing-certificate",
            Rejection::MissingCollateral => "missing-collateral",
            Rejection::UnknownRoot { .. } => "unknown-root",
            Rejection::BadSignature { .. } => "bad-signature",
            Rejection::Revoked { .. } => "revoked",
            Rejection::RevocationNotChecked => "revocation-not-checked",
            Rejection::CertificateExpired { .. } => "certificate-expired",
            Rejection::TcbTooOld { .. } => "tcb-too-old",
            Rejection::DebugEnabled => "debug-enabled",
            Rejection::MeasurementMismatch { .. } => "measurement-mismatch",
            Rejection::ReportDataMismatch { .. } => "report-data-mismatch",
            Rejection::VmplNotAllowed { .. } => "vmpl-not-allowed",
            Rejection::Stale { .. } => "stale",
            Rejection::Unverified { .. } => "unverified",
        }
    }
}

impl fmt::Display for Rejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rejection::Malformed { detail } => write!(f, "malformed evidence: {detail}"),
            Rejection::MissingCertificate => {
                write!(f, "no VCEK certificate (neither in the certificate table nor given)")
            }
            Rejection::MissingCollateral => write!(f, "no DCAP collateral to verify the TDX quote with"),
            Rejection::UnknownRoot { detail } => write!(f, "the chain does not end in a pinned vendor root: {detail}"),
            Rejection::BadSignature { detail } => write!(f, "bad signature: {detail}"),
            Rejection::Revoked { detail } => write!(f, "revoked: {detail}"),
            Rejection::RevocationNotChecked => write!(
                f,
                "revocation not checked: no CRL was supplied and the policy requires a revocation check \
                 (give AMD's CRL, e.g. crl.der from the KDS, beside the VCEK)"
            ),
            Rejection::CertificateExpired { detail } => write!(f, "certificate outside its validity period: {detail}"),
            Rejection::TcbTooOld { detail } => write!(f, "TCB too old: {detail}"),
            Rejection::DebugEnabled => write!(f, "debugging is enabled"),
            Rejection::MeasurementMismatch { got } => write!(f, "measurement {got} is not an expected one"),
            Rejection::ReportDataMismatch { got } => write!(f, "report data {got} does not bind what was expected"),
            Rejection::VmplNotAllowed { got } => write!(f, "report requested from VMPL {got}"),
            Rejection::Stale { detail } => write!(f, "stale: {detail}"),
            Rejection::Unverified { detail } => write!(f, "not verified: {detail}"),
        }
    }
}

impl std::error::Error for Rejection {}

/// What verified evidence says, for the verdict a user reads.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Claims {
    /// "sev-snp" or "tdx"
    pub technology: String,
    /// the launch measurement (SEV-SNP MEASUREMENT, TDX MRTD), hex
    pub measurement: String,
    /// hex of the 64-byte report data
    pub report_data: String,
    pub debug: bool,
    /// the TCB the evidence was verified at (SNP: reported TCB SVNs; TDX: status and TEE TCB SVN)
    pub tcb: serde_json::Value,
    /// the pinned root the chain ended in
    pub root: String,
    /// the kind of key that signed the evidence: SEV-SNP "VCEK" (per chip, under AMD's ASK) or "VLEK"
    /// (loaded by a cloud provider, under AMD's ASVK); TDX "PCK" (the quoting enclave's attestation
    /// key, certified by the platform's PCK certificate)
    pub signing_key: String,
    /// technology-specific fields (SNP: vmpl, chip id; TDX: RTMRs, advisories)
    pub details: serde_json::Value,
    /// whether the chain was checked against the vendor's revocation list, and which
    pub revocation: Revocation,
}

/// Whether a revocation list was consulted. `checked: false` is said out loud in every verdict
/// ("revocation not checked"), never implied by silence.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Revocation {
    pub checked: bool,
    /// what was checked (the CRL's issuer and its thisUpdate/nextUpdate), or why nothing was
    pub detail: String,
}

/// Constant-time comparison of the report data with the expected value, when one is expected.
pub(crate) fn check_report_data(
    got: &[u8; REPORT_DATA_LEN],
    expected: Option<&[u8; REPORT_DATA_LEN]>,
) -> Result<(), Rejection> {
    if let Some(expected) = expected {
        if !bool::from(subtle::ConstantTimeEq::ct_eq(&got[..], &expected[..])) {
            return Err(Rejection::ReportDataMismatch { got: hex::encode(got) });
        }
    }
    Ok(())
}

/// A measurement list check: an empty list accepts any (the caller said nothing).
pub(crate) fn check_measurement(got: &[u8], accepted: &[String]) -> Result<(), Rejection> {
    let got = hex::encode(got);
    if accepted.is_empty() || accepted.iter().any(|m| m.trim().eq_ignore_ascii_case(&got)) {
        Ok(())
    } else {
        Err(Rejection::MeasurementMismatch { got })
    }
}
