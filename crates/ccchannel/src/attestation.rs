//! Attestation evidence, its binding to the handshake, providers and the verifier.
//!
//! Binding: the evidence's 64-byte report data is SHA-512 over a label, the final Noise handshake
//! hash (which covers both ephemeral keys) and, for XX, the sender's static public key. Evidence
//! taken for one session cannot be replayed into another, nor lifted onto another static key.
//!
//! Real SEV-SNP and TDX evidence is verified by `ccverify` (the verifier ccbench's bundles use too):
//! the SEV-SNP report's VCEK signature and the VCEK -> ASK -> ARK chain to AMD's pinned roots (the
//! VCEK from the evidence's certificate table, `aux`, or from [`VendorCheck::vcek`]); the TDX quote
//! with DCAP collateral ([`VendorCheck::tdx_collateral`]; without it TDX evidence is rejected), then
//! the vendor policy (debug off, TCB, VMPL) and the binding. Mock evidence is checked for its
//! binding only: it proves nothing and exists for tests and the benchmark's handshake figures.

use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha512};

use crate::error::{ChannelError, RejectReason};

pub const REPORT_DATA_LEN: usize = 64;
const BINDING_LABEL: &[u8] = b"ccchannel attestation binding v1";

/// The report data that binds evidence to a handshake (and a static key, when there is one).
pub fn binding(handshake_hash: &[u8], static_key: Option<&[u8]>) -> [u8; REPORT_DATA_LEN] {
    let mut hasher = Sha512::new();
    hasher.update(BINDING_LABEL);
    hasher.update((handshake_hash.len() as u32).to_be_bytes());
    hasher.update(handshake_hash);
    let key = static_key.unwrap_or(&[]);
    hasher.update((key.len() as u32).to_be_bytes());
    hasher.update(key);
    let mut out = [0u8; REPORT_DATA_LEN];
    out.copy_from_slice(&hasher.finalize());
    out
}

/// Hex of `bytes`, written into one buffer (the `hex` crate's `encode` collects a `String` char
/// by char, several times slower: it showed in the handshake's profile).
fn hex_encode(bytes: impl AsRef<[u8]>) -> String {
    let bytes = bytes.as_ref();
    let mut out = vec![0u8; bytes.len() * 2];
    hex::encode_to_slice(bytes, &mut out).expect("twice the input's length");
    String::from_utf8(out).expect("hex digits are ASCII")
}

/// The bytes of hex `text`, decoded into one buffer; errors as the `hex` crate's `decode` names them.
fn hex_decode(text: &str) -> Result<Vec<u8>, hex::FromHexError> {
    if !text.len().is_multiple_of(2) {
        return Err(hex::FromHexError::OddLength);
    }
    let mut out = vec![0u8; text.len() / 2];
    hex::decode_to_slice(text, &mut out)?;
    Ok(out)
}

/// Evidence as it travels: the raw report or quote and how to read it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Evidence {
    /// "mock", "sev-snp" or "tdx": how `raw` is laid out
    pub format: String,
    /// the configfs-tsm provider that produced it ("sev_guest", "tdx_guest") or "mock"
    pub provider: String,
    /// hex of the raw report / quote
    pub raw: String,
    /// when it was produced (seconds since the epoch, the producer's clock)
    pub issued_at_unix: u64,
    /// hex of configfs-tsm's auxblob (SEV-SNP: the certificate table with the VCEK), empty if none
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub aux: String,
}

/// The fields the verifier checks, parsed from `raw`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claims {
    pub technology: String,
    pub measurement: Vec<u8>,
    pub report_data: [u8; REPORT_DATA_LEN],
    /// whether the vendor's revocation list was consulted for this peer (`checked: false` when no
    /// AMD CRL was given: "revocation not checked"); None for mock evidence, which has no vendor chain
    pub revocation: Option<ccverify::Revocation>,
}

// SEV-SNP ATTESTATION_REPORT (AMD SEV-SNP ABI): REPORT_DATA at 0x50, MEASUREMENT at 0x90
const SNP_REPORT_DATA: usize = 0x50;
const SNP_MEASUREMENT: usize = 0x90;
const SNP_MIN_LEN: usize = 0x2A0;
// TDX quote v4: 48-byte header, then the TD report body: MRTD at +136, REPORTDATA at +520
const TDX_BODY: usize = 48;
const TDX_MRTD: usize = TDX_BODY + 136;
const TDX_REPORT_DATA: usize = TDX_BODY + 520;
const MOCK_MAGIC: &[u8; 8] = b"CCMOCK01";

impl Evidence {
    pub fn claims(&self) -> Result<Claims, RejectReason> {
        let raw = hex_decode(&self.raw).map_err(|e| RejectReason::Malformed(format!("raw is not hex: {e}")))?;
        let take = |offset: usize, len: usize| -> Result<Vec<u8>, RejectReason> {
            raw.get(offset..offset + len)
                .map(|s| s.to_vec())
                .ok_or_else(|| RejectReason::Malformed(format!("{} evidence is too short", self.format)))
        };
        let (technology, measurement, report_data) = match self.format.as_str() {
            "mock" => {
                if raw.len() < 8 || &raw[..8] != MOCK_MAGIC {
                    return Err(RejectReason::Malformed("not a mock report".into()));
                }
                let tech_len = *raw
                    .get(8)
                    .ok_or_else(|| RejectReason::Malformed("mock report too short".into()))?
                    as usize;
                let technology = String::from_utf8(take(9, tech_len)?)
                    .map_err(|_| RejectReason::Malformed("technology is not UTF-8".into()))?;
                let measurement = take(9 + tech_len, 48)?;
                let report_data = take(9 + tech_len + 48, REPORT_DATA_LEN)?;
                (technology, measurement, report_data)
            }
            "sev-snp" => {
                if raw.len() < SNP_MIN_LEN {
                    return Err(RejectReason::Malformed("SEV-SNP report is too short".into()));
                }
                (
                    "sev-snp".to_string(),
                    take(SNP_MEASUREMENT, 48)?,
                    take(SNP_REPORT_DATA, REPORT_DATA_LEN)?,
                )
            }
            "tdx" => (
                "tdx".to_string(),
                take(TDX_MRTD, 48)?,
                take(TDX_REPORT_DATA, REPORT_DATA_LEN)?,
            ),
            other => return Err(RejectReason::Malformed(format!("unknown evidence format {other}"))),
        };
        let mut data = [0u8; REPORT_DATA_LEN];
        data.copy_from_slice(&report_data);
        Ok(Claims {
            technology,
            measurement,
            report_data: data,
            revocation: None,
        })
    }
}

/// Produces evidence whose report data is the given binding.
pub trait AttestationProvider: Send + Sync {
    fn attest(&self, report_data: &[u8; REPORT_DATA_LEN]) -> Result<Evidence, ChannelError>;
}

fn now_unix() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// Deterministic evidence for tests and benchmarks: a fixed technology and measurement.
#[derive(Debug, Clone)]
pub struct MockProvider {
    pub technology: String,
    pub measurement: [u8; 48],
}

impl MockProvider {
    pub fn new(technology: &str, measurement_label: &str) -> Self {
        let digest = Sha512::digest(measurement_label.as_bytes());
        let mut measurement = [0u8; 48];
        measurement.copy_from_slice(&digest[..48]);
        MockProvider {
            technology: technology.to_string(),
            measurement,
        }
    }

    pub fn measurement_hex(&self) -> String {
        hex_encode(self.measurement)
    }
}

impl AttestationProvider for MockProvider {
    fn attest(&self, report_data: &[u8; REPORT_DATA_LEN]) -> Result<Evidence, ChannelError> {
        let mut raw = Vec::with_capacity(9 + self.technology.len() + 48 + REPORT_DATA_LEN);
        raw.extend_from_slice(MOCK_MAGIC);
        raw.push(self.technology.len() as u8);
        raw.extend_from_slice(self.technology.as_bytes());
        raw.extend_from_slice(&self.measurement);
        raw.extend_from_slice(report_data);
        Ok(Evidence {
            format: "mock".into(),
            provider: "mock".into(),
            raw: hex_encode(raw),
            issued_at_unix: now_unix(),
            aux: String::new(),
        })
    }
}

/// Linux configfs-tsm (`/sys/kernel/config/tsm/report`): real SEV-SNP and TDX evidence on such guests.
#[derive(Debug, Clone)]
pub struct TsmProvider {
    pub root: PathBuf,
}

impl Default for TsmProvider {
    fn default() -> Self {
        TsmProvider {
            root: PathBuf::from("/sys/kernel/config/tsm/report"),
        }
    }
}

impl AttestationProvider for TsmProvider {
    fn attest(&self, report_data: &[u8; REPORT_DATA_LEN]) -> Result<Evidence, ChannelError> {
        let io = |what: &str, e: std::io::Error| ChannelError::Io(format!("configfs-tsm {what}: {e}"));
        let entry = self
            .root
            .join(format!("ccchannel-{}-{}", std::process::id(), now_unix()));
        std::fs::create_dir(&entry).map_err(|e| io("create report entry", e))?;
        let generation = |entry: &std::path::Path| -> Result<String, ChannelError> {
            std::fs::read_to_string(entry.join("generation")).map_err(|e| io("read generation", e))
        };
        let result = (|| {
            // another writer to this entry between our write and our reads would hand us evidence for
            // its report data: generation before and after must agree, else try again
            for _attempt in 0..3 {
                std::fs::write(entry.join("inblob"), report_data).map_err(|e| io("write inblob", e))?;
                let before = generation(&entry)?;
                let raw = std::fs::read(entry.join("outblob")).map_err(|e| io("read outblob", e))?;
                // no auxblob (or an empty one) when the host supplies no certificates
                let aux = std::fs::read(entry.join("auxblob")).unwrap_or_default();
                let provider = std::fs::read_to_string(entry.join("provider")).map_err(|e| io("read provider", e))?;
                if generation(&entry)? != before {
                    continue;
                }
                let provider = provider.trim().to_string();
                let format = match provider.as_str() {
                    "sev_guest" => "sev-snp",
                    "tdx_guest" => "tdx",
                    other => {
                        return Err(ChannelError::Io(format!(
                            "configfs-tsm provider {other} is not supported"
                        )))
                    }
                };
                return Ok(Evidence {
                    format: format.into(),
                    provider,
                    raw: hex_encode(raw),
                    issued_at_unix: now_unix(),
                    aux: hex_encode(aux),
                });
            }
            Err(ChannelError::Io(
                "configfs-tsm: the report entry kept changing (another writer)".into(),
            ))
        })();
        let _ = std::fs::remove_dir(&entry);
        result
    }
}

/// The vendor side of verification: trust anchors, the vendor policy and the collateral real
/// evidence needs. [`VendorCheck::default`] pins AMD's roots (and dcap-qvl pins Intel's), requires
/// debug off and TDX status UpToDate, and has no TDX collateral.
pub struct VendorCheck {
    pub snp_roots: ccverify::SnpRoots,
    pub policy: ccverify::Policy,
    /// TDX: DCAP collateral for the peer's platform (TDX evidence is rejected without it)
    pub tdx_collateral: Option<ccverify::tdx::Collateral>,
    /// SEV-SNP: the peer's VCEK, when its evidence carries no certificate table
    pub vcek: Option<Vec<u8>>,
    /// SEV-SNP: AMD's CRL for the peer's product (KDS `/vcek/v1/{product}/crl`), when the peer's
    /// certificate table has none; without one revocation is not checked (the policy's
    /// `require_revocation_check` makes that a rejection)
    pub amd_crl: Option<Vec<u8>>,
}

impl Default for VendorCheck {
    fn default() -> Self {
        VendorCheck {
            snp_roots: ccverify::SnpRoots::amd(),
            policy: ccverify::Policy::default(),
            tdx_collateral: None,
            vcek: None,
            amd_crl: None,
        }
    }
}

/// The default vendor check, built once (parsing AMD's roots is not free).
pub fn default_vendor_check() -> &'static VendorCheck {
    static DEFAULT: OnceLock<VendorCheck> = OnceLock::new();
    DEFAULT.get_or_init(VendorCheck::default)
}

/// What a verifier accepts.
#[derive(Debug, Clone)]
pub struct Policy {
    /// accepted technologies ("sev-snp", "tdx", "mock-...")
    pub technologies: Vec<String>,
    /// expected measurement (hex), if any
    pub measurement: Option<String>,
    pub max_age: Duration,
}

impl Policy {
    /// Verify with the default vendor check (AMD's and Intel's pinned roots, no TDX collateral).
    pub fn verify(&self, evidence: &Evidence, expected: &[u8; REPORT_DATA_LEN]) -> Result<Claims, RejectReason> {
        self.verify_with(evidence, expected, default_vendor_check())
    }

    /// Verify real evidence against the vendor's chain (`ccverify`) and mock evidence for its binding,
    /// then this policy (technology, measurement, age).
    pub fn verify_with(
        &self,
        evidence: &Evidence,
        expected: &[u8; REPORT_DATA_LEN],
        vendor: &VendorCheck,
    ) -> Result<Claims, RejectReason> {
        let claims = match evidence.format.as_str() {
            "sev-snp" | "tdx" => vendor_verify(evidence, expected, vendor)?,
            _ => {
                let claims = evidence.claims()?;
                // constant-time comparison of the binding
                if !bool::from(subtle::ConstantTimeEq::ct_eq(&claims.report_data[..], &expected[..])) {
                    return Err(RejectReason::WrongBinding);
                }
                claims
            }
        };
        if !self.technologies.iter().any(|t| t == &claims.technology) {
            return Err(RejectReason::WrongTechnology { got: claims.technology });
        }
        if let Some(expected_measurement) = &self.measurement {
            let got = hex_encode(&claims.measurement);
            if !got.eq_ignore_ascii_case(expected_measurement) {
                return Err(RejectReason::WrongMeasurement { got });
            }
        }
        let age = now_unix().saturating_sub(evidence.issued_at_unix);
        if age > self.max_age.as_secs() {
            return Err(RejectReason::Expired { age_secs: age });
        }
        Ok(claims)
    }
}

fn vendor_verify(
    evidence: &Evidence,
    expected: &[u8; REPORT_DATA_LEN],
    vendor: &VendorCheck,
) -> Result<Claims, RejectReason> {
    let raw = hex_decode(&evidence.raw).map_err(|e| RejectReason::Malformed(format!("raw is not hex: {e}")))?;
    let aux = hex_decode(&evidence.aux).map_err(|e| RejectReason::Malformed(format!("aux is not hex: {e}")))?;
    let verified = if evidence.format == "sev-snp" {
        let table = if aux.is_empty() { None } else { Some(aux.as_slice()) };
        let collateral = ccverify::SnpCollateral {
            vcek: vendor.vcek.as_deref(),
            cert_table: table,
            crl: vendor.amd_crl.as_deref(),
        };
        ccverify::snp::verify(
            &raw,
            &collateral,
            &vendor.snp_roots,
            &vendor.policy,
            Some(expected),
            now_unix(),
        )
    } else {
        ccverify::tdx::verify(
            &raw,
            vendor.tdx_collateral.as_ref(),
            now_unix(),
            &vendor.policy,
            Some(expected),
        )
    };
    let verified = verified.map_err(|rejection| match rejection {
        ccverify::Rejection::ReportDataMismatch { .. } => RejectReason::WrongBinding,
        other => RejectReason::Vendor(other),
    })?;
    Ok(Claims {
        technology: verified.technology,
        measurement: hex_decode(&verified.measurement).unwrap_or_default(),
        report_data: *expected,
        revocation: Some(verified.revocation),
    })
}

#[cfg(test)]
mod tests {
    use super::{hex_decode, hex_encode};

    #[test]
    fn hex_helpers_agree_with_the_hex_crate() {
        let bytes: Vec<u8> = (0..=255u8).chain([0, 1, 0xfe, 0xff]).collect();
        assert_eq!(hex_encode(&bytes), hex::encode(&bytes));
        assert_eq!(hex_decode(&hex::encode(&bytes)).unwrap(), bytes);
        assert_eq!(hex_decode("ABcd").unwrap(), vec![0xab, 0xcd]);
        assert_eq!(hex_decode("").unwrap(), Vec::<u8>::new());
        for bad in ["a", "abc", "zz", "0g", "  "] {
            assert_eq!(hex_decode(bad).unwrap_err(), hex::decode(bad).unwrap_err(), "{bad:?}");
        }
    }
}
