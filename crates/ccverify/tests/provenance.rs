//! The claims' details that describe a confidential machine (SEV-SNP guest policy, VMPL, reported and
//! current TCB, platform info; TDX TEE_TCB_SVN, MRSEAM, TD attributes), on real reports and quotes from
//! ../shared/fixtures/real-world/evidence (read in place; CCBENCH_SHARED names another place), each
//! checked by hand against the vendor's layout: the bytes at the documented offsets, read here without
//! the `sev` or `dcap-qvl` parsers, must say what the details say.
//!
//! Layouts: AMD SEV-SNP Firmware ABI Specification (ATTESTATION_REPORT: POLICY at 0x08, VMPL at 0x30,
//! CURRENT_TCB at 0x38, PLATFORM_INFO at 0x40, REPORTED_TCB at 0x180; TCB_VERSION of Milan and Genoa:
//! byte 0 BOOT_LOADER, 1 TEE, 6 SNP, 7 MICROCODE; GUEST_POLICY bit 16 SMT, 18 MIGRATE_MA, 19 DEBUG,
//! 20 SINGLE_SOCKET; PLATFORM_INFO bit 0 SMT_EN, 1 TSME_EN). Intel TDX DCAP quote (header 48 bytes; a v5
//! quote adds a 2-byte body type and a 4-byte body size before the body; TD report body: TEE_TCB_SVN at
//! 0, MRSEAM at 16, TDATTRIBUTES at 120, little-endian, bit 0 DEBUG, bit 28 SEPT_VE_DISABLE).

use std::path::PathBuf;

use ccverify::{snp, tdx, Policy, SnpCollateral, SnpRoots};

/// 2026-11-24T00:00:00Z, the time the fixtures' expected verdicts give for the SEV-SNP cases
const AT_2026_11_24: u64 = 1_795_478_400;
/// 2025-06-05T03:45:00Z, inside the SPR quote's collateral window
const AT_2025_06_05: u64 = 1_749_095_100;

fn evidence_dir() -> Option<PathBuf> {
    let shared = std::env::var_os("CCBENCH_SHARED")
        .map(PathBuf::from)
        .unwrap_or_else(|| manifest_dir().join("../../../shared"));
    let dir = shared.join("fixtures/real-world/evidence");
    if dir.is_dir() {
        Some(dir)
    } else {
        eprintln!(
            "skipped: {} is absent (set CCBENCH_SHARED to the folder holding fixtures/real-world)",
            dir.display()
        );
        None
    }
}

fn read(case: &str, file: &str) -> Option<Vec<u8>> {
    evidence_dir().map(|dir| std::fs::read(dir.join(case).join(file)).unwrap())
}

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap())
}

/// Milan and Genoa TCB_VERSION by hand: byte 0 boot loader, 1 TEE, 6 SNP, 7 microcode.
fn tcb_by_hand(report: &[u8], at: usize) -> serde_json::Value {
    let b = &report[at..at + 8];
    serde_json::json!({"bootloader": b[0], "tee": b[1], "snp": b[6], "microcode": b[7], "fmc": null})
}

#[test]
fn snp_details_agree_with_the_abi_specs_offsets_on_every_real_report() {
    let cases = [
        "snp-milan-vcek-trustee",
        "snp-milan-vlek-trustee",
        "snp-milan-debug-go-sev-guest",
        "snp-azure-milan-hcl",
        "snp-azure-genoa-hcl",
    ];
    for case in cases {
        let Some(report) = read(case, "evidence.bin") else {
            return;
        };
        let details = snp::describe(&report).unwrap();
        let policy = u64_at(&report, 0x08);
        let platform = u64_at(&report, 0x40);
        assert_eq!(details["policy"]["raw"], format!("{policy:#x}"), "{case}");
        assert_eq!(details["policy"]["debug"], policy & (1 << 19) != 0, "{case}");
        assert_eq!(details["policy"]["smt"], policy & (1 << 16) != 0, "{case}");
        assert_eq!(details["policy"]["migrate_ma"], policy & (1 << 18) != 0, "{case}");
        assert_eq!(details["policy"]["single_socket"], policy & (1 << 20) != 0, "{case}");
        let vmpl = u32::from_le_bytes(report[0x30..0x34].try_into().unwrap());
        assert_eq!(details["vmpl"], vmpl, "{case}");
        assert_eq!(details["current_tcb"], tcb_by_hand(&report, 0x38), "{case}");
        assert_eq!(details["reported_tcb"], tcb_by_hand(&report, 0x180), "{case}");
        assert_eq!(details["platform_info"]["raw"], format!("{platform:#x}"), "{case}");
        assert_eq!(details["platform_info"]["smt_enabled"], platform & 1 != 0, "{case}");
        assert_eq!(details["platform_info"]["tsme_enabled"], platform & 2 != 0, "{case}");
    }
}

#[test]
fn snp_details_of_known_reports_say_what_their_sources_say() {
    // go-sev-guest's debug report: policy 0xb0000 (SMT allowed, the reserved bit 17, DEBUG)
    let Some(debug) = read("snp-milan-debug-go-sev-guest", "evidence.bin") else {
        return;
    };
    let details = snp::describe(&debug).unwrap();
    assert_eq!(details["policy"]["raw"], "0xb0000");
    assert_eq!(details["policy"]["debug"], true);
    assert_eq!(details["policy"]["smt"], true);
    assert_eq!(details["policy"]["migrate_ma"], false);
    // trustee's VLEK report was requested from VMPL 1 (expected.json), on a platform with SMT and TSME on
    let vlek = snp::describe(&read("snp-milan-vlek-trustee", "evidence.bin").unwrap()).unwrap();
    assert_eq!(vlek["vmpl"], 1);
    assert_eq!(vlek["platform_info"]["raw"], "0x27");
    assert_eq!(
        (
            vlek["platform_info"]["smt_enabled"].as_bool(),
            vlek["platform_info"]["tsme_enabled"].as_bool()
        ),
        (Some(true), Some(true))
    );
    assert_eq!(vlek["reported_tcb"]["microcode"], 217);
    assert_eq!(vlek["current_tcb"]["microcode"], 220);
}

#[test]
fn verified_snp_claims_carry_the_same_details() {
    let case = "snp-milan-vcek-trustee";
    let (Some(report), Some(vcek)) = (read(case, "evidence.bin"), read(case, "vcek.der")) else {
        return;
    };
    let collateral = SnpCollateral {
        vcek: Some(&vcek),
        ..Default::default()
    };
    let claims = snp::verify(
        &report,
        &collateral,
        &SnpRoots::amd(),
        &Policy::default(),
        None,
        AT_2026_11_24,
    )
    .unwrap();
    assert_eq!(claims.details, snp::describe(&report).unwrap());
    // expected.json of the case: TCB bootloader 3, TEE 0, SNP 8, microcode 115; VMPL 0; not debug
    assert_eq!(
        claims.details["reported_tcb"],
        serde_json::json!({"bootloader": 3, "tee": 0, "snp": 8, "microcode": 115, "fmc": null})
    );
    assert_eq!(claims.details["reported_tcb"], claims.tcb);
    assert_eq!(claims.details["vmpl"], 0);
    assert_eq!(claims.details["policy"]["debug"], false);
    assert_eq!(claims.details["policy"]["raw"], "0x3001f");
}

/// The TD report body's start: after the 48-byte header, and in a v5 quote the body type and size.
fn body_at(quote: &[u8]) -> usize {
    match u16::from_le_bytes([quote[0], quote[1]]) {
        4 => 48,
        5 => 48 + 2 + 4,
        other => panic!("quote version {other}"),
    }
}

#[test]
fn tdx_details_agree_with_the_quote_layout_on_every_real_quote() {
    for case in [
        "tdx-v4-spr-outofdate-automata",
        "tdx-v5-alibaba-servicetd-automata",
        "tdx-v4-no-tcb-level-go-tdx-guest",
    ] {
        let Some(quote) = read(case, "evidence.bin") else {
            return;
        };
        let details = tdx::describe(&quote).unwrap();
        let body = body_at(&quote);
        assert_eq!(details["tee_tcb_svn"], hex::encode(&quote[body..body + 16]), "{case}");
        assert_eq!(details["mr_seam"], hex::encode(&quote[body + 16..body + 64]), "{case}");
        let attributes = &quote[body + 120..body + 128];
        assert_eq!(details["td_attributes"]["raw"], hex::encode(attributes), "{case}");
        assert_eq!(details["td_attributes"]["debug"], attributes[0] & 1 == 1, "{case}");
        assert_eq!(
            details["td_attributes"]["sept_ve_disable"],
            attributes[3] & 0x10 != 0,
            "{case}"
        );
    }
}

#[test]
fn verified_tdx_claims_carry_the_module_and_the_td_attributes() {
    let case = "tdx-v4-spr-outofdate-automata";
    let (Some(quote), Some(collateral)) = (read(case, "evidence.bin"), read(case, "collateral.json")) else {
        return;
    };
    let collateral = tdx::collateral_from_json(&collateral).unwrap();
    let policy = Policy {
        tdx_tcb_statuses: vec!["UpToDate".into(), "OutOfDate".into()],
        ..Policy::default()
    };
    let claims = tdx::verify(&quote, Some(&collateral), AT_2025_06_05, &policy, None).unwrap();
    assert_eq!(claims.details, tdx::describe(&quote).unwrap());
    // the SPR quote's TD: SEPT_VE_DISABLE set (TDATTRIBUTES 0x10000000), not debuggable; TEE_TCB_SVN 04 01 07
    assert_eq!(claims.details["td_attributes"]["raw"], "0000001000000000");
    assert_eq!(claims.details["td_attributes"]["sept_ve_disable"], true);
    assert_eq!(claims.details["td_attributes"]["debug"], false);
    assert_eq!(claims.details["tee_tcb_svn"], "04010700000000000000000000000000");
    assert_eq!(claims.details["tee_tcb_svn"], claims.tcb["tee_tcb_svn"]);
}

#[test]
fn an_hcl_report_is_not_described_as_a_quote() {
    let Some(hcl) = read("tdx-azure-hclreport-constellation", "evidence.bin") else {
        return;
    };
    assert_eq!(tdx::describe(&hcl).unwrap_err().code(), "malformed");
    let Some(quote) = read("tdx-v4-spr-outofdate-automata", "evidence.bin") else {
        return;
    };
    assert_eq!(snp::describe(&quote).unwrap_err().code(), "malformed");
}

/// The crate's directory as cargo gives it when it runs this test: the build directory is shared by
/// every checkout (scripts/cargo.sh), so the path compiled in may be another checkout's, since removed.
fn manifest_dir() -> std::path::PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")))
}
