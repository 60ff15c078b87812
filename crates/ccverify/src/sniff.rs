//! What a file handed over as evidence looks like, for the `malformed` verdict: a user who passes an
//! Azure HCL report, a raw TDREPORT, a quote of the other technology or a certificate learns what it
//! is and what to pass instead, rather than a parser's error or a misleading later reason.

/// What ccverify expects for each technology, said after "needs".
pub const TDX_EXPECTED: &str =
    "a TDX quote (version 4 or 5, TEE type 0x81) as the quoting enclave makes it (configfs-tsm's outblob on a TD)";
pub const SNP_EXPECTED: &str =
    "an SEV-SNP attestation report of 0x4A0 bytes (configfs-tsm's outblob or /dev/sev-guest on an SNP guest)";

/// Size of an Azure HCL report's header ("HCLA", version, size, request type, status, reserved).
const HCL_HEADER_LEN: usize = 0x20;
/// Where the HCL report's runtime-data header names the hardware report type (after the hardware report).
const HCL_REPORT_TYPE_AT: usize = 0x4C8;
/// The TDREPORT's REPORTTYPE.TYPE for TDX (REPORTMACSTRUCT's first byte).
const TDREPORT_TYPE_TDX: u8 = 0x81;
const TDREPORT_LEN: usize = 1024;
const SNP_REPORT_LEN: usize = 0x4A0;

fn u16_at(bytes: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(bytes.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(bytes: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(bytes.get(at..at + 4)?.try_into().ok()?))
}

/// A phrase naming what `bytes` look like and, where it is known, what to pass instead.
pub fn describe(bytes: &[u8]) -> String {
    if bytes.is_empty() {
        return "an empty file".into();
    }
    if bytes.starts_with(b"HCLA") {
        return describe_hcl(bytes);
    }
    if bytes.starts_with(b"-----BEGIN") {
        let label: String = bytes[11..]
            .iter()
            .take_while(|&&b| b != b'-' && b != b'\n')
            .map(|&b| b as char)
            .collect();
        return format!(
            "a PEM file ({}), not evidence: pass it as a certificate or CRL",
            label.trim()
        );
    }
    if matches!(bytes.first(), Some(b'{') | Some(b'[')) {
        return "JSON text, not binary evidence (collateral or a wrapped report? pass the raw report or quote)".into();
    }
    if let (Some(version), Some(tee_type)) = (u16_at(bytes, 0), u32_at(bytes, 4)) {
        if matches!(version, 3..=5) && tee_type == 0x81 {
            return format!(
                "a TDX quote (version {version}, {} bytes): verify it with --technology tdx",
                bytes.len()
            );
        }
        if matches!(version, 3 | 4) && tee_type == 0 && u16_at(bytes, 2) == Some(2) {
            return format!("an SGX quote (version {version}), not a TD's: ccverify verifies TDX and SEV-SNP evidence");
        }
    }
    if bytes.len() == SNP_REPORT_LEN && matches!(u32_at(bytes, 0), Some(2..=5)) {
        return format!(
            "an SEV-SNP attestation report (version {}): verify it with --technology sev-snp",
            u32_at(bytes, 0).unwrap_or(0)
        );
    }
    if bytes.len() == TDREPORT_LEN && bytes[0] == TDREPORT_TYPE_TDX {
        return "a raw TDREPORT (TDG.MR.REPORT's output, MACed for this machine only), not a quote: pass the quote \
                the quoting enclave makes from it (configfs-tsm's outblob)"
            .into();
    }
    if bytes.starts_with(&[0x30, 0x82]) {
        return "DER (a certificate or CRL?), not evidence".into();
    }
    let start = hex::encode(&bytes[..bytes.len().min(8)]);
    format!("{} bytes of an unknown format (starting {start})", bytes.len())
}

/// Azure's confidential VMs hand out an HCL report from the vTPM: the paravisor's header, then the
/// hardware report (an SEV-SNP report or a TDX TDREPORT), then runtime data with the vTPM's key.
fn describe_hcl(bytes: &[u8]) -> String {
    let tdx = u32_at(bytes, HCL_REPORT_TYPE_AT) == Some(4) || bytes.get(HCL_HEADER_LEN) == Some(&TDREPORT_TYPE_TDX);
    let snp = u32_at(bytes, HCL_REPORT_TYPE_AT) == Some(2);
    if tdx {
        format!(
            "an Azure HCL report (magic HCLA, {} bytes) wrapping a TDX TDREPORT, not a DCAP quote: a TDREPORT is \
             MACed for its machine only; pass the TD quote Azure's quote service makes from it (IMDS \
             /acc/tdquote, e.g. through trustee's az-tdx-vtpm)",
            bytes.len()
        )
    } else if snp {
        format!(
            "an Azure HCL report (magic HCLA, {} bytes) wrapping an SEV-SNP report: pass the report inside it \
             (bytes 0x20..0x4C0) as the evidence, with the VCEK Azure serves",
            bytes.len()
        )
    } else {
        format!(
            "an Azure HCL report (magic HCLA, {} bytes) of an unknown hardware report type, not evidence ccverify reads",
            bytes.len()
        )
    }
}
