//! TDX: the quote checked with Intel DCAP collateral by `dcap-qvl` (PCK chain to Intel's pinned SGX
//! root, CRLs, TCB info and QE identity signatures and validity), then the policy.
//!
//! The quote is parsed before anything else, so input that is not a TDX quote (an Azure HCL report, a
//! raw TDREPORT, an SEV-SNP report) is `malformed`, saying what it is, whether or not collateral was
//! given. A TDX 1.5 TD bound to a service TD (non-zero MRSERVICETD) is accepted only when the
//! policy's `tdx_service_tds` lists that measurement.

use dcap_qvl::quote::Report;
pub use dcap_qvl::QuoteCollateralV3 as Collateral;
use serde_json::json;

/// The quote header's TEE type of a TD (0 is an SGX enclave).
const TEE_TYPE_TDX: u32 = 0x81;

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
    let parsed = parse_quote(quote)?;
    let collateral = collateral.ok_or(Rejection::MissingCollateral)?;
    let verifier = match root_ca_der {
        Some(root) => dcap_qvl::verify::QuoteVerifier::new(root.to_vec()),
        None => dcap_qvl::verify::QuoteVerifier::new_prod(),
    };
    // dcap-qvl judges the service-TD binding after every signature; a non-empty list lets it through
    // to the comparison with the list below
    let verified = verifier
        .allow_debug(policy.allow_debug)
        .allow_service_td(!policy.tdx_service_tds.is_empty())
        .verify(quote, collateral, now_unix)
        .map_err(|e| service_td_refusal(&parsed, &e.to_string()).unwrap_or_else(|| classify(&format!("{e:#}"))))?;
    let td = *td_body(&verified.report).ok_or_else(|| Rejection::Malformed {
        detail: "an SGX quote, not a TDX one".into(),
    })?;
    let mr_service_td = service_td(&verified.report);
    if let Some(got) = mr_service_td.filter(|m| m.iter().any(|&b| b != 0)) {
        check_service_td(&got, &policy.tdx_service_tds)?;
    }
    check_report_data(&td.report_data, expected_report_data)?;
    // TDATTRIBUTES DEBUG: the TD is debuggable (dcap-qvl refuses it too unless allowed)
    let debug = u64::from_le_bytes(td.td_attributes) >> TD_DEBUG_BIT & 1 == 1;
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
        signing_key: "PCK".into(),
        root: if root_ca_der.is_some() {
            "given root".into()
        } else {
            "Intel SGX Root CA".into()
        },
        details: details(&parsed),
        // dcap-qvl refuses a quote whose collateral lacks either CRL, so a verified quote was checked
        revocation: Revocation {
            checked: true,
            detail: "Intel's root CA CRL and PCK CRL from the DCAP collateral (checked by dcap-qvl)".into(),
        },
    })
}

/// TDATTRIBUTES bits (Intel TDX Module ABI specification, "TDATTRIBUTES"; a little-endian 64-bit
/// field of the TD report): 0 DEBUG (the TD is debuggable: its memory and state readable by the host),
/// 28 SEPT_VE_DISABLE (EPT violations on pending pages are not turned into #VE in the TD).
const TD_DEBUG_BIT: u32 = 0;
const TD_SEPT_VE_DISABLE_BIT: u32 = 28;

/// The TD report body of any quote version: a TDX 1.5 body extends the 1.0 one.
fn td_body(report: &Report) -> Option<&dcap_qvl::quote::TDReport10> {
    match report {
        Report::TD10(td) => Some(td),
        Report::TD15(td) => Some(&td.base),
        Report::TD15Ex(td) => Some(&td.base.base),
        Report::SgxEnclave(_) => None,
    }
}

/// What the quote says of the TDX module and the TD beside the measurement: TEE_TCB_SVN (the TDX
/// module's and its loader's security versions), MRSEAM (the measurement of the TDX module), the TD
/// attributes (debug, SEPT_VE_DISABLE), RTMRs, quote version and MRSERVICETD.
pub fn details(parsed: &dcap_qvl::quote::Quote) -> serde_json::Value {
    let Some(td) = td_body(&parsed.report) else {
        return json!({"quote_version": parsed.header.version});
    };
    let attributes = u64::from_le_bytes(td.td_attributes);
    let rtmrs = [td.rt_mr0, td.rt_mr1, td.rt_mr2, td.rt_mr3];
    json!({
        "tee_tcb_svn": hex::encode(td.tee_tcb_svn),
        "mr_seam": hex::encode(td.mr_seam),
        "td_attributes": {"raw": hex::encode(td.td_attributes),
                          "debug": attributes >> TD_DEBUG_BIT & 1 == 1,
                          "sept_ve_disable": attributes >> TD_SEPT_VE_DISABLE_BIT & 1 == 1},
        "rtmrs": rtmrs.iter().map(hex::encode).collect::<Vec<_>>(),
        "quote_version": parsed.header.version,
        "mr_service_td": service_td(&parsed.report).map(hex::encode),
    })
}

/// The details of a quote that is only parsed, not verified (`ccverify --parse-only`).
pub fn describe(quote: &[u8]) -> Result<serde_json::Value, Rejection> {
    parse_quote(quote).map(|parsed| details(&parsed))
}

/// Parse a quote (no verification): for the fuzz target.
pub fn parse(quote: &[u8]) -> Result<(), Rejection> {
    parse_quote(quote).map(|_| ())
}

/// The quote's structure, or `malformed` saying what the input looks like instead.
fn parse_quote(quote: &[u8]) -> Result<dcap_qvl::quote::Quote, Rejection> {
    let not_a_quote = |why: String| Rejection::Malformed {
        detail: format!(
            "not a TDX quote ({why}): this looks like {}; ccverify --technology tdx needs {}",
            crate::sniff::describe(quote),
            crate::sniff::TDX_EXPECTED
        ),
    };
    let parsed = dcap_qvl::quote::Quote::parse(quote).map_err(|e| not_a_quote(format!("{e:#}")))?;
    if parsed.header.tee_type != TEE_TYPE_TDX {
        return Err(not_a_quote(format!("TEE type {:#x}", parsed.header.tee_type)));
    }
    Ok(parsed)
}

/// MRSERVICETD of a TDX 1.5 report; None for a TDX 1.0 body, which has none.
fn service_td(report: &Report) -> Option<[u8; 48]> {
    match report {
        Report::TD15(td) => Some(td.mr_service_td),
        Report::TD15Ex(td) => Some(td.base.mr_service_td),
        _ => None,
    }
}

/// A non-zero MRSERVICETD must be one the policy lists.
fn check_service_td(got: &[u8; 48], allowed: &[String]) -> Result<(), Rejection> {
    let got = hex::encode(got);
    if allowed.iter().any(|m| m.trim().eq_ignore_ascii_case(&got)) {
        Ok(())
    } else {
        Err(Rejection::MeasurementMismatch {
            got: format!(
                "MRSERVICETD {got} (the TD is bound to a service TD; list the service TDs you accept in the \
                 policy's tdx_service_tds)"
            ),
        })
    }
}

/// dcap-qvl's refusal of a service-TD binding (reached only after every signature verified) as the
/// measurement it is, naming MRSERVICETD and the policy key; None for any other failure.
fn service_td_refusal(parsed: &dcap_qvl::quote::Quote, error: &str) -> Option<Rejection> {
    if error.contains("SERVTD_EXT") {
        return Some(Rejection::MeasurementMismatch {
            got: "SERVTD_EXT set in TDATTRIBUTES (the TD takes service TDs; list the service TDs you accept in \
                  the policy's tdx_service_tds)"
                .into(),
        });
    }
    if !error.contains("Invalid MR service TD") {
        return None;
    }
    let got = service_td(&parsed.report).unwrap_or([0; 48]);
    Some(check_service_td(&got, &[]).expect_err("an empty list accepts nothing"))
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
