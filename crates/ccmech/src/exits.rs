//! Exit round trips: an instruction the hypervisor (or, in a confidential guest, the TEE's firmware)
//! must serve, timed per operation in nanoseconds and TSC cycles, with the empty loop measured the
//! same way so the caller can subtract it.

// elsewhere than x86_64 only the "skipped" answer is built: the measuring parts are unused there
#![cfg_attr(not(target_arch = "x86_64"), allow(dead_code, unused_imports))]

use std::hint::black_box;
use std::time::Instant;

use serde_json::{json, Value};

/// The CPUID leaves timed, with what serves each in a confidential guest (Linux's SEV-SNP #VC handler,
/// arch/x86/kernel/sev-shared.c snp_cpuid; its TDX #VE handler, arch/x86/coco/tdx/tdx.c handle_cpuid).
pub const CPUID_LEAVES: [(u32, &str); 3] = [
    (
        0x0,
        "SEV-SNP: the CPUID page alone; TDX: the TDX module; plain KVM: the hypervisor",
    ),
    (
        0xB,
        "SEV-SNP: the CPUID page, then the hypervisor for the x2APIC ID (GHCB); plain KVM: the hypervisor",
    ),
    (
        0x4000_0000,
        "TDX: #VE, then the VMM (TDVMCALL); plain KVM: the hypervisor",
    ),
];
pub const PORT: u16 = 0x80;

/// (ns per op, TSC cycles per op) of `iterations` calls of `op`.
#[cfg(target_arch = "x86_64")]
fn time_per_op(iterations: u64, mut op: impl FnMut(u64)) -> (f64, f64) {
    let start = Instant::now();
    let cycles = rdtsc();
    for i in 0..iterations {
        op(i);
    }
    let cycles = rdtsc().wrapping_sub(cycles) as f64;
    let ns = start.elapsed().as_nanos() as f64;
    (ns / iterations as f64, cycles / iterations as f64)
}

#[cfg(target_arch = "x86_64")]
fn rdtsc() -> u64 {
    // SAFETY: RDTSC has no preconditions on x86_64
    unsafe { core::arch::x86_64::_rdtsc() }
}

#[cfg(target_arch = "x86_64")]
#[allow(unused_unsafe)] // safe to call from Rust 1.87 on, unsafe before
fn cpuid(leaf: u32) -> u32 {
    // SAFETY: CPUID is available on every x86_64 CPU
    let result = unsafe { core::arch::x86_64::__cpuid_count(leaf, 0) };
    result.eax ^ result.ebx ^ result.ecx ^ result.edx
}

#[cfg(target_arch = "x86_64")]
fn port_write(value: u8) {
    // SAFETY: called only after ioperm granted this port; port 0x80 is the POST diagnostic port,
    // which no device uses for anything but a delay
    unsafe { core::arch::asm!("out dx, al", in("dx") PORT, in("al") value, options(nomem, nostack)) };
}

#[cfg(target_arch = "x86_64")]
fn grant_port() -> Result<(), String> {
    // SAFETY: ioperm only changes this process's I/O permission bitmap
    if unsafe { libc::ioperm(PORT as libc::c_ulong, 1, 1) } == 0 {
        Ok(())
    } else {
        let error = std::io::Error::last_os_error();
        Err(match error.raw_os_error() {
            Some(libc::ENOSYS) => {
                format!("ioperm(0x80): {error}: this kernel has no ioperm (CONFIG_X86_IOPL_IOPERM off)")
            }
            Some(libc::EPERM) => format!("ioperm(0x80): {error}: port I/O needs root (CAP_SYS_RAWIO)"),
            _ => format!("ioperm(0x80) failed: {error}"),
        })
    }
}

#[cfg(target_arch = "x86_64")]
fn batches(count: usize, iterations: u64, mut op: impl FnMut(u64)) -> Value {
    let (mut ns, mut cycles) = (Vec::new(), Vec::new());
    for _ in 0..count {
        let (n, c) = time_per_op(iterations, &mut op);
        ns.push(n);
        cycles.push(c);
    }
    json!({"ns_per_op": ns, "cycles_per_op": cycles})
}

#[cfg(target_arch = "x86_64")]
pub fn exits(iterations: u64, count: usize) -> Value {
    let mut cases = vec![];
    let mut empty = batches(count, iterations, |i| {
        black_box(i);
    });
    empty["name"] = json!("empty");
    cases.push(empty);
    for (leaf, served_by) in CPUID_LEAVES {
        let mut case = batches(count, iterations, |_| {
            black_box(cpuid(black_box(leaf)));
        });
        case["name"] = json!("cpuid");
        case["leaf"] = json!(format!("{leaf:#x}"));
        case["served_by"] = json!(served_by);
        cases.push(case);
    }
    let mut port = match grant_port() {
        Ok(()) => batches(count, iterations, |i| port_write(i as u8)),
        Err(reason) => json!({"skipped": reason}),
    };
    port["name"] = json!("port_io");
    port["port"] = json!(format!("{PORT:#x}"));
    cases.push(port);
    json!({"iterations": iterations, "batches": count, "cases": cases})
}

#[cfg(not(target_arch = "x86_64"))]
pub fn exits(_iterations: u64, _count: usize) -> Value {
    json!({"skipped": "CPUID and port I/O exits are x86_64 instructions"})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_case_reports_each_batch_or_why_it_was_skipped() {
        let report = exits(1000, 3);
        let cases = report["cases"].as_array().unwrap();
        assert_eq!(cases.len(), 2 + CPUID_LEAVES.len());
        for case in cases {
            if case.get("skipped").is_some() {
                assert_eq!(case["name"], "port_io");
                continue;
            }
            assert_eq!(case["ns_per_op"].as_array().unwrap().len(), 3);
            assert!(case["cycles_per_op"][0].as_f64().unwrap() >= 0.0);
        }
        let leaves: Vec<&str> = cases.iter().filter_map(|c| c.get("leaf")?.as_str()).collect();
        assert_eq!(leaves, ["0x0", "0xb", "0x40000000"]);
    }
}
