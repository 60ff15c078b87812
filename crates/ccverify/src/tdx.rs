//! TDX: the quote checked with Intel DCAP collateral by `dcap-qvl` (PCK chain to Intel's pinned SGX
//! root, CRLs, TCB info and QE identity signatures and validity), then the policy.

use dcap_qvl::quote::Report;
pub use dcap_qvl::QuoteCollateralV3 as Collateral;
use serde_json::json;

use crate::{check_measurement, check_report_data, Claims, Policy, Rejection, Revocation, REPORT_DATA_LEN};

/// Collateral as `dcap-qvl` serialises it (JSON: TCB info, QE identity, CRLs, issuer chains).
pub fn collateral_from_json(bytes: &[u8]) -> Result<Collateral, Rejection> {
    serde_json::from_slice(bytes).map_err(|e| Rejection::Malformed {
        detail: format!("DCAP collateral: {e}"),
    })
}

/// dcap-qvl reports failures as messages; sort them into the typed reasons.
fn classify(error: &str) -> Rejection {
    let lower = error.to_ascii_lowercase();
    let detail = error.to_string();
    if lower.contains("revoked") {
        Rejection::Revoked { detail }
    } else if lower.contains("expired")
        || lower.contains("in the future")
        || lower.contains("not valid yet")
        || lower.contains("notvalidyet")
        || lower.contains("next update")
        || lower.contains("nextupdate")
    {
        Rejection::Stale { detail }
    } else if lower.contains("no matching tcb level") {
        // the platform's TCB is below every level Intel's TCB info lists
        Rejection::TcbTooOld { detail }
    } else if lower.contains("debug mode") {
        Rejection::DebugEnabled
    } else if lower.contains("signature") || lower.contains("hash mismatch") {
        // before the root test: "Failed to parse root CA CRL: InvalidCrlSignatureForPublicKey" is a
        // CRL not signed by the pinned root
        Rejection::BadSignature { detail }
    } else if lower.contains("unknownissuer") || lower.contains("unknown issuer") || lower.contains("root") {
        Rejection::UnknownRoot { detail }
    } else if lower.contains("decode") || lower.contains("unsupported") || lower.contains("too short") {
        Rejection::Malformed { detail }
    } else {
        Rejection::Unverified { detail }
    }
}

/// Verify a TDX quote at `now_unix` (seconds): vendor checks, TCB status, report data, policy.
pub fn verify(
    quote: &[u8],
    collateral: Option<&Collateral>,
    now_unix: u64,
    policy: &Policy,
    expected_report_data: Option<&[u8; REPORT_DATA_LEN]>,
) -> Result<Claims, Rejection> {
    verify_with_root(quote, collateral, None, now_unix, policy, expected_report_data)
}

/// [`verify`] with a root CA of the caller's (DER) in place of Intel's pinned SGX root, e.g. a
/// generated test PKI; `None` is Intel's. The claims then name the root "given root".
pub fn verify_with_root(
    quote: &[u8],
    collateral: Option<&Collateral>,
    root_ca_der: Option<&[u8]>,
    now_unix: u64,
    policy: &Policy,
    expected_report_data: Option<&[u8; REPORT_DATA_LEN]>,
) -> Result<Claims, Rejection> {
    let collateral = collateral.ok_or(Rejection::MissingCollateral)?;
    let verifier = match root_ca_der {
        Some(root) => dcap_qvl::verify::QuoteVerifier::new(root.to_vec()),
        None => dcap_qvl::verify::QuoteVerifier::new_prod(),
    };
    let verified = verifier
        .allow_debug(policy.allow_debug)
        .verify(quote, collateral, now_unix)
        .map_err(|e| classify(&format!("{e:#}")))?;
    let td = match &verified.report {
        Report::TD10(td) => *td,
        Report::TD15(td) => td.base,
        Report::TD15Ex(td) => td.base.base,
        Report::SgxEnclave(_) => {
            return Err(Rejection::Malformed {
                detail: "an SGX quote, not a TDX one".into(),
            })
        }
    };
    check_report_data(&td.report_data, expected_report_data)?;
    // TDATTRIBUTES bit 0: the TD is debuggable (dcap-qvl refuses it too unless allowed)
    let debug = td.td_attributes[0] & 1 == 1;
    if debug && !policy.allow_debug {
        return Err(Rejection::DebugEnabled);
    }
    if verified.status == "Revoked" {
        return Err(Rejection::Revoked {
            detail: "TCB status Revoked".into(),
        });
    }
    if !policy.tdx_tcb_statuses.iter().any(|s| s == &verified.status) {
        return Err(Rejection::TcbTooOld {
            detail: format!(
                "TCB status {} (advisories {}) is not one of {}",
                verified.status,
                verified.advisory_ids.join(", "),
                policy.tdx_tcb_statuses.join(", ")
            ),
        });
    }
    check_measurement(&td.mr_td, &policy.measurements)?;
    let rtmrs = [td.rt_mr0, td.rt_mr1, td.rt_mr2, td.rt_mr3];
    for (index, expected) in policy.rtmrs.iter().enumerate() {
        if let (Some(expected), Some(got)) = (expected, rtmrs.get(index)) {
            if !expected.trim().eq_ignore_ascii_case(&hex::encode(got)) {
                return Err(Rejection::MeasurementMismatch {
                    got: format!("RTMR{index} {}", hex::encode(got)),
                });
            }
        }
    }
    Ok(Claims {
        technology: "tdx".into(),
        measurement: hex::encode(td.mr_td),
        report_data: hex::encode(td.report_data),
        debug,
        tcb: json!({"status": verified.status, "advisory_ids": verified.advisory_ids,
                    "tee_tcb_svn": hex::encode(td.tee_tcb_svn)}),
        root: if root_ca_der.is_some() {
            "given root".into()
        } else {
            "Intel SGX Root CA".into()
        },
        details: json!({"rtmrs": rtmrs.iter().map(hex::encode).collect::<Vec<_>>(),
                        "mr_seam": hex::encode(td.mr_seam), "td_attributes": hex::encode(td.td_attributes)}),
        // dcap-qvl refuses a quote whose collateral lacks either CRL, so a verified quote was checked
        revocation: Revocation {
            checked: true,
            detail: "Intel's root CA CRL and PCK CRL from the DCAP collateral (checked by dcap-qvl)".into(),
        },
    })
}

/// Parse a quote (no verification): for the fuzz target.
pub fn parse(quote: &[u8]) -> Result<(), Rejection> {
    dcap_qvl::quote::Quote::parse(quote)
        .map(|_| ())
        .map_err(|e| Rejection::Malformed {
            detail: format!("{e:#}"),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// dcap-qvl's own messages (dcap-qvl 0.7: webpki's errors print as their names, wrapped in
    /// dcap-qvl's context) land on the typed reasons.
    #[test]
    fn dcap_qvl_messages_map_to_the_typed_reasons() {
        let cases = [
            ("Failed to verify certificate chain: CertRevoked", "revoked"),
            ("TCB status is invalid: Revoked", "revoked"),
            (
                "Failed to verify certificate chain: CrlExpired { time: UnixTime(1), next_update: UnixTime(0) }",
                "stale",
            ),
            ("TCBInfo expired", "stale"),
            ("TCBInfo issue date is in the future", "stale"),
            ("Failed to verify certificate chain: UnknownIssuer", "unknown-root"),
            (
                "Failed to parse root CA CRL: InvalidCrlSignatureForPublicKey",
                "bad-signature",
            ),
            (
                "Failed to verify certificate chain: UnknownRevocationStatus",
                "unverified",
            ),
            ("No matching TCB level found", "tcb-too-old"),
            ("Debug mode is enabled", "debug-enabled"),
        ];
        for (message, code) in cases {
            assert_eq!(classify(message).code(), code, "{message}");
        }
    }
}
