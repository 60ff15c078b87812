//! What a verifier accepts. Read from JSON (`ccverify --policy FILE`); every field optional, unknown
//! fields refused (a misspelt requirement must not silently accept everything).

use serde::{Deserialize, Serialize};

/// SEV-SNP TCB security version numbers (the reported TCB's components).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SnpTcb {
    #[serde(default)]
    pub bootloader: u8,
    #[serde(default)]
    pub tee: u8,
    #[serde(default)]
    pub snp: u8,
    #[serde(default)]
    pub microcode: u8,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Policy {
    /// accept guests and TDs whose debugging is enabled (never for production evidence)
    #[serde(default)]
    pub allow_debug: bool,
    /// accepted launch measurements, hex (SEV-SNP MEASUREMENT or TDX MRTD); empty: any
    #[serde(default)]
    pub measurements: Vec<String>,
    /// SEV-SNP: the lowest reported TCB accepted, component by component
    #[serde(default)]
    pub min_tcb: Option<SnpTcb>,
    /// SEV-SNP: the highest VMPL (least privileged level) a report may come from; 0 is the most privileged
    #[serde(default)]
    pub max_vmpl: Option<u32>,
    /// TDX: expected RTMR0..3, hex; a missing or null entry accepts any value
    #[serde(default)]
    pub rtmrs: Vec<Option<String>>,
    /// TDX: accepted TCB statuses (Intel's names); "Revoked" is never accepted
    #[serde(default = "default_tdx_statuses")]
    pub tdx_tcb_statuses: Vec<String>,
    /// TDX 1.5: the service-TD measurements (MRSERVICETD, hex) a TD may be bound to, e.g. a migration
    /// or vTPM service TD the verifier knows; empty: only a TD bound to no service TD (MRSERVICETD all
    /// zero, SERVTD_EXT off) is accepted
    #[serde(default)]
    pub tdx_service_tds: Vec<String>,
    /// SEV-SNP: reject evidence whose chain was not checked against AMD's CRL (no CRL supplied).
    /// TDX always checks the CRLs in its DCAP collateral.
    #[serde(default)]
    pub require_revocation_check: bool,
}

fn default_tdx_statuses() -> Vec<String> {
    vec!["UpToDate".to_string()]
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            allow_debug: false,
            measurements: Vec::new(),
            min_tcb: None,
            max_vmpl: None,
            rtmrs: Vec::new(),
            tdx_tcb_statuses: default_tdx_statuses(),
            tdx_service_tds: Vec::new(),
            require_revocation_check: false,
        }
    }
}
