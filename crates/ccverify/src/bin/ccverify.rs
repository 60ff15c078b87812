//! ccverify: verify one piece of SEV-SNP or TDX evidence and print the verdict as JSON.
//!
//! usage: ccverify --technology sev-snp|tdx --evidence FILE [--report-data HEX]
//!                 [--vcek FILE] [--cert-table FILE] [--crl FILE] [--collateral FILE] [--policy FILE] [--at UNIX]
//!                 [--trust-ark FILE --trust-ask FILE [--trust-asvk FILE]]
//!        ccverify --technology sev-snp|tdx --evidence FILE --parse-only
//!
//! Exit 0: verified (JSON claims); 1: rejected (JSON with the reason's code and detail);
//! 2: bad input (a one-line message on stderr).

use std::time::{SystemTime, UNIX_EPOCH};

use ccverify::{snp, tdx, Policy, Rejection, SnpRoots, REPORT_DATA_LEN};
use serde_json::json;

const USAGE: &str = "usage: ccverify --technology sev-snp|tdx --evidence FILE [--report-data HEX] [--vcek FILE] \
[--cert-table FILE] [--crl FILE] [--collateral FILE] [--policy FILE] [--at UNIX] [--trust-ark FILE --trust-ask FILE \
[--trust-asvk FILE]]
       ccverify --technology sev-snp|tdx --evidence FILE --parse-only

Verifies an SEV-SNP attestation report (the VCEK's or VLEK's signature, VCEK -> ASK -> ARK or
VLEK -> ASVK -> ARK with AMD's pinned Milan, Genoa and Turin roots, every certificate's validity
period, AMD's CRL when --crl gives it: DER or PEM, as the KDS serves it at
/vcek/v1/{Milan,Genoa,Turin}/crl or /vlek/v1/...; --vcek takes a VLEK too) or a TDX quote (Intel DCAP
collateral as dcap-qvl's JSON), then the policy (JSON: allow_debug, measurements, min_tcb, max_vmpl,
rtmrs, tdx_tcb_statuses, tdx_service_tds, require_revocation_check) and the expected report data. --at
verifies at that time (seconds since the epoch; default now). --trust-ark/--trust-ask (and
--trust-asvk) replace AMD's roots with the given ones (test chains only). Prints JSON; exit 0
verified, 1 rejected, 2 bad input. --parse-only checks nothing: it prints what the evidence says of
itself ({\"parsed\": true, \"verified\": false, \"details\": ...}: SEV-SNP guest policy, VMPL, TCBs,
platform info; TDX TEE_TCB_SVN, MRSEAM, TD attributes), exit 1 when it is not evidence of that kind.";

#[derive(Default)]
struct Args {
    technology: Option<String>,
    evidence: Option<String>,
    report_data: Option<String>,
    vcek: Option<String>,
    cert_table: Option<String>,
    crl: Option<String>,
    collateral: Option<String>,
    policy: Option<String>,
    at: Option<u64>,
    trust_ark: Option<String>,
    trust_ask: Option<String>,
    trust_asvk: Option<String>,
    parse_only: bool,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args::default();
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        if arg == "-h" || arg == "--help" {
            println!("{USAGE}");
            std::process::exit(0);
        }
        if arg == "--parse-only" {
            args.parse_only = true;
            continue;
        }
        let value = it.next().ok_or_else(|| format!("{arg} needs a value (see --help)"))?;
        match arg.as_str() {
            "--technology" => args.technology = Some(value),
            "--evidence" => args.evidence = Some(value),
            "--report-data" => args.report_data = Some(value),
            "--vcek" => args.vcek = Some(value),
            "--cert-table" => args.cert_table = Some(value),
            "--crl" => args.crl = Some(value),
            "--collateral" => args.collateral = Some(value),
            "--policy" => args.policy = Some(value),
            "--at" => {
                args.at = Some(
                    value
                        .parse()
                        .map_err(|_| format!("--at needs seconds since the epoch, not {value}"))?,
                )
            }
            "--trust-ark" => args.trust_ark = Some(value),
            "--trust-ask" => args.trust_ask = Some(value),
            "--trust-asvk" => args.trust_asvk = Some(value),
            other => return Err(format!("unknown argument {other} (see --help)")),
        }
    }
    Ok(args)
}

fn read(path: &str, what: &str) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| format!("cannot read the {what} {path}: {e}"))
}

/// What a run of ccverify found: claims of verified evidence, or the details of parsed evidence.
enum Outcome {
    Verified(Box<ccverify::Claims>),
    Parsed(String, serde_json::Value),
}

fn run() -> Result<Result<Outcome, Rejection>, String> {
    let args = parse_args()?;
    let technology = args
        .technology
        .clone()
        .ok_or("--technology is required (sev-snp or tdx)")?;
    let evidence = read(args.evidence.as_deref().ok_or("--evidence is required")?, "evidence")?;
    if args.parse_only {
        let details = match technology.as_str() {
            "sev-snp" => snp::describe(&evidence),
            "tdx" => tdx::describe(&evidence),
            other => return Err(format!("unknown technology {other}: sev-snp or tdx")),
        };
        return Ok(details.map(|details| Outcome::Parsed(technology, details)));
    }
    verify(args, technology, evidence).map(|verdict| verdict.map(|claims| Outcome::Verified(Box::new(claims))))
}

fn verify(args: Args, technology: String, evidence: Vec<u8>) -> Result<Result<ccverify::Claims, Rejection>, String> {
    let policy: Policy = match &args.policy {
        Some(path) => serde_json::from_slice(&read(path, "policy")?).map_err(|e| format!("policy {path}: {e}"))?,
        None => Policy::default(),
    };
    let expected = match &args.report_data {
        Some(text) => {
            let bytes = hex::decode(text.trim()).map_err(|e| format!("--report-data is not hex: {e}"))?;
            let array: [u8; REPORT_DATA_LEN] = bytes
                .try_into()
                .map_err(|_| format!("--report-data must be {REPORT_DATA_LEN} bytes"))?;
            Some(array)
        }
        None => None,
    };
    let now = args.at.unwrap_or_else(|| {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0)
    });
    match technology.as_str() {
        "sev-snp" => {
            let roots = match (&args.trust_ark, &args.trust_ask, &args.trust_asvk) {
                (Some(ark), Some(ask), asvk) => {
                    let roots = SnpRoots::only("given root", &read(ark, "ARK")?, &read(ask, "ASK")?)
                        .map_err(|e| e.to_string())?;
                    match asvk {
                        Some(asvk) => roots.with_asvk(&read(asvk, "ASVK")?).map_err(|e| e.to_string())?,
                        None => roots,
                    }
                }
                (None, None, None) => SnpRoots::amd(),
                _ => return Err("--trust-ark and --trust-ask go together (and --trust-asvk only with them)".into()),
            };
            let vcek = args.vcek.as_deref().map(|p| read(p, "VCEK")).transpose()?;
            let table = args
                .cert_table
                .as_deref()
                .map(|p| read(p, "certificate table"))
                .transpose()?;
            let crl = args.crl.as_deref().map(|p| read(p, "CRL")).transpose()?;
            let collateral = snp::SnpCollateral {
                vcek: vcek.as_deref(),
                cert_table: table.as_deref(),
                crl: crl.as_deref(),
            };
            Ok(snp::verify(
                &evidence,
                &collateral,
                &roots,
                &policy,
                expected.as_ref(),
                now,
            ))
        }
        "tdx" => {
            let collateral = match &args.collateral {
                Some(path) => Some(tdx::collateral_from_json(&read(path, "collateral")?).map_err(|e| e.to_string())?),
                None => None,
            };
            Ok(tdx::verify(
                &evidence,
                collateral.as_ref(),
                now,
                &policy,
                expected.as_ref(),
            ))
        }
        other => Err(format!("unknown technology {other}: sev-snp or tdx")),
    }
}

fn main() {
    match run() {
        Ok(Ok(Outcome::Verified(claims))) => {
            println!("{}", json!({"verified": true, "claims": claims}));
        }
        Ok(Ok(Outcome::Parsed(technology, details))) => {
            println!(
                "{}",
                json!({"parsed": true, "verified": false, "technology": technology, "details": details})
            );
        }
        Ok(Err(rejection)) => {
            println!(
                "{}",
                json!({"verified": false, "reason": rejection, "message": rejection.to_string()})
            );
            std::process::exit(1);
        }
        Err(message) => {
            eprintln!("ccverify: {message}");
            std::process::exit(2);
        }
    }
}
