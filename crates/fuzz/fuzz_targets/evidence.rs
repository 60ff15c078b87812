//! SEV-SNP report, certificate table and TDX quote parsing (and SEV-SNP verification against AMD's
//! roots with a real VCEK), and AMD CRL parsing and checking, under arbitrary input: errors, never
//! panics. The first byte picks the mode: 0: the bytes are an SEV-SNP report (parsed, then verified);
//! 1: an auxblob certificate table (its VCEK and CRL entries); 2: a TDX quote; 3: a CRL (parsed, then
//! checked against AMD's Milan chain with the real report and VCEK).
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;

const VCEK: &[u8] = include_bytes!("../../../tests/data/attestation/vcek_milan.der");
const REPORT_HEX: &str = include_str!("../../../tests/data/attestation/report_milan.hex");
/// inside the Milan VCEK's validity period (2023-04-03 .. 2030-04-03)
const AT: u64 = 1_767_225_600;

fn milan_report() -> &'static [u8] {
    static REPORT: OnceLock<Vec<u8>> = OnceLock::new();
    REPORT.get_or_init(|| hex::decode(REPORT_HEX.trim()).expect("the Milan report vector"))
}

fn roots() -> &'static ccverify::SnpRoots {
    static ROOTS: OnceLock<ccverify::SnpRoots> = OnceLock::new();
    ROOTS.get_or_init(ccverify::SnpRoots::amd)
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else { return };
    let policy = ccverify::Policy::default();
    match mode % 4 {
        0 => {
            if ccverify::snp::parse(rest).is_ok() {
                let collateral = ccverify::SnpCollateral {
                    vcek: Some(VCEK),
                    ..Default::default()
                };
                let _ = ccverify::snp::verify(rest, &collateral, roots(), &policy, Some(&[0u8; 64]), AT);
            }
        }
        1 => {
            let _ = ccverify::snp::vcek_from_cert_table(rest);
            let _ = ccverify::snp::crl_from_cert_table(rest);
        }
        2 => {
            let _ = ccverify::tdx::parse(rest);
        }
        _ => {
            if ccverify::snp::parse_crl(rest).is_ok() {
                let collateral = ccverify::SnpCollateral {
                    vcek: Some(VCEK),
                    crl: Some(rest),
                    ..Default::default()
                };
                let _ = ccverify::snp::verify(milan_report(), &collateral, roots(), &policy, None, AT);
            }
        }
    }
});
