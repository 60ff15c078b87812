//! SEV-SNP report, certificate table and TDX quote parsing (and SEV-SNP verification against AMD's
//! roots with a real VCEK) under arbitrary input: errors, never panics. The first byte picks the mode:
//! 0: the bytes are an SEV-SNP report (parsed, then verified); 1: an auxblob certificate table;
//! 2: a TDX quote.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;

const VCEK: &[u8] = include_bytes!("../../../tests/data/attestation/vcek_milan.der");

fn roots() -> &'static ccverify::SnpRoots {
    static ROOTS: OnceLock<ccverify::SnpRoots> = OnceLock::new();
    ROOTS.get_or_init(ccverify::SnpRoots::amd)
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else { return };
    match mode % 3 {
        0 => {
            if ccverify::snp::parse(rest).is_ok() {
                let policy = ccverify::Policy::default();
                let _ = ccverify::snp::verify(rest, Some(VCEK), None, roots(), &policy, Some(&[0u8; 64]));
            }
        }
        1 => {
            let _ = ccverify::snp::vcek_from_cert_table(rest);
        }
        _ => {
            let _ = ccverify::tdx::parse(rest);
        }
    }
});
