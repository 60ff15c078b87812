//! Exit round trips: an instruction the hypervisor (or, in a confidential guest, the TEE's firmware)
//! must serve, timed per operation in nanoseconds and TSC cycles, with the empty loop measured the
//! same way so the caller can subtract it.
//!
//! Each case is printed as one JSON line the moment it is measured (the first line says how the cases
//! were measured), so a case that dies loses only itself. Port I/O runs in a child process: a guest
//! whose kernel cannot serve a user-space port write kills the child, not the run. In a TDX guest it is
//! not attempted at all: there a user-space `out` raises #VE, which Linux serves for CPUID alone
//! (arch/x86/coco/tdx/tdx.c, virt_exception_user), so the process gets SIGSEGV.
//!
//! Who serves each CPUID leaf differs by platform (SEV-SNP's CPUID table, the TDX module, the VMM, a
//! paravisor): ccbench derives that from its probe of the machine, never from this program.

// elsewhere than x86_64 only the "skipped" answer is built: the measuring parts are unused there
#![cfg_attr(not(target_arch = "x86_64"), allow(dead_code, unused_imports))]

use std::hint::black_box;
use std::io::Write;
use std::time::Instant;

use serde_json::{json, Value};

/// The CPUID leaves timed: 0x0 (the SEV-SNP CPUID table or the TDX module can answer it inside the
/// guest), 0xB (the x2APIC topology: the hypervisor's on SEV-SNP), 0x4000_0000 (the hypervisor range:
/// the VMM's on TDX).
pub const CPUID_LEAVES: [u32; 3] = [0x0, 0xB, 0x4000_0000];
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
fn cpuid_registers(leaf: u32) -> [u32; 4] {
    // SAFETY: CPUID is available on every x86_64 CPU
    let r = unsafe { core::arch::x86_64::__cpuid_count(leaf, 0) };
    [r.eax, r.ebx, r.ecx, r.edx]
}

#[cfg(target_arch = "x86_64")]
fn cpuid(leaf: u32) -> u32 {
    let [a, b, c, d] = cpuid_registers(leaf);
    a ^ b ^ c ^ d
}

/// The 12 characters of a CPUID signature in EBX, EDX, ECX order (as tdx_early_init reads leaf 0x21).
fn signature(ebx: u32, ecx: u32, edx: u32) -> String {
    [ebx, edx, ecx]
        .iter()
        .flat_map(|r| r.to_le_bytes())
        .map(char::from)
        .collect()
}

/// A system file's path, under `$CCMECH_ROOT` where that is set: a fake /proc and /sys tree, so that
/// tests can show ccmech a TDX guest's cpuinfo or a locked-down kernel this machine is not.
fn under_root(path: &str) -> String {
    match std::env::var("CCMECH_ROOT") {
        Ok(root) if !root.is_empty() => format!("{}{path}", root.trim_end_matches('/')),
        _ => path.to_string(),
    }
}

/// Why a user-space port write is not attempted here, from the cpuinfo text and CPUID's answers
/// (leaf 0 and leaf 0x21 as [eax, ebx, ecx, edx]): Some in a TDX guest.
pub fn tdx_guest_reason(cpuinfo: &str, leaf0: [u32; 4], leaf21: Option<[u32; 4]>) -> Option<String> {
    let flagged = cpuinfo
        .lines()
        .filter(|line| line.starts_with("flags"))
        .any(|line| line.split_whitespace().any(|flag| flag == "tdx_guest"));
    let intel = signature(leaf0[1], leaf0[2], leaf0[3]) == "GenuineIntel" && leaf0[0] >= 0x21;
    let tdx_leaf = intel && leaf21.is_some_and(|r| signature(r[1], r[2], r[3]) == "IntelTDX    ");
    let source = match (flagged, tdx_leaf) {
        (true, _) => "the cpuinfo flag tdx_guest",
        (false, true) => "CPUID leaf 0x21 reads \"IntelTDX\"",
        _ => return None,
    };
    Some(format!(
        "not attempted in a TDX guest ({source}): a user-space port write raises #VE, which Linux serves \
         only for CPUID (virt_exception_user), so the process would die by SIGSEGV"
    ))
}

/// The reason ioperm failed with `errno`, given the text of /sys/kernel/security/lockdown (None where
/// unreadable) and whether the process runs as root.
pub fn ioperm_reason(errno: i32, lockdown: Option<&str>, root: bool) -> String {
    let error = std::io::Error::from_raw_os_error(errno);
    let locked = lockdown.and_then(|text| {
        let mode = text.split_whitespace().find(|w| w.starts_with('['))?;
        let mode = mode.trim_matches(|c| c == '[' || c == ']');
        (mode != "none").then(|| mode.to_string())
    });
    match errno {
        libc::ENOSYS => format!("ioperm(0x80): {error}: this kernel has no ioperm (CONFIG_X86_IOPL_IOPERM off)"),
        libc::EPERM => match locked {
            Some(mode) => format!(
                "ioperm(0x80): {error}: kernel lockdown ({mode}) forbids port I/O, even for root (LOCKDOWN_IOPORT; \
                 Secure Boot usually turns lockdown on)"
            ),
            None if root => format!("ioperm(0x80): {error}: refused to root (a security module?)"),
            None => format!("ioperm(0x80): {error}: port I/O needs root (CAP_SYS_RAWIO)"),
        },
        _ => format!("ioperm(0x80) failed: {error}"),
    }
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
        return Ok(());
    }
    let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
    let lockdown = std::fs::read_to_string(under_root("/sys/kernel/security/lockdown")).ok();
    // SAFETY: geteuid has no preconditions
    let root = unsafe { libc::geteuid() } == 0;
    Err(ioperm_reason(errno, lockdown.as_deref(), root))
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

/// The port-I/O case measured in a forked child, which sends its JSON through a pipe: a signal that
/// kills the child (a fault on the `out`) costs this case only.
#[cfg(target_arch = "x86_64")]
fn port_io_in_child(count: usize, iterations: u64) -> Value {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: pipe fills the two descriptors
    if unsafe { libc::pipe(fds.as_mut_ptr()) } != 0 {
        return json!({"skipped": format!("pipe for the port-I/O child: {}", std::io::Error::last_os_error())});
    }
    let _ = std::io::stdout().flush();
    // SAFETY: this program is single-threaded; the child only computes, writes to the pipe and _exits
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        let answer = match grant_port() {
            Ok(()) => batches(count, iterations, |i| port_write(i as u8)),
            Err(reason) => json!({"skipped": reason}),
        };
        let text = answer.to_string();
        let mut written = 0;
        while written < text.len() {
            // SAFETY: writing from a live buffer to the pipe's write end
            let n = unsafe { libc::write(fds[1], text[written..].as_ptr().cast(), text.len() - written) };
            if n <= 0 {
                break;
            }
            written += n as usize;
        }
        // SAFETY: leave the child without running the parent's exit handlers or flushing its buffers
        unsafe { libc::_exit(0) };
    }
    // SAFETY: closing the write end this process does not use
    unsafe { libc::close(fds[1]) };
    if pid < 0 {
        // SAFETY: closing the read end of the pipe made above
        unsafe { libc::close(fds[0]) };
        return json!({"skipped": format!("fork for the port-I/O child: {}", std::io::Error::last_os_error())});
    }
    let mut text = Vec::new();
    let mut buffer = [0u8; 4096];
    loop {
        // SAFETY: reading into a live buffer of its stated length
        let n = unsafe { libc::read(fds[0], buffer.as_mut_ptr().cast(), buffer.len()) };
        if n <= 0 {
            break;
        }
        text.extend_from_slice(&buffer[..n as usize]);
    }
    // SAFETY: closing the read end and reaping the child made above
    unsafe { libc::close(fds[0]) };
    let mut status = 0;
    // SAFETY: waiting for the child made above
    unsafe { libc::waitpid(pid, &mut status, 0) };
    if libc::WIFSIGNALED(status) {
        let signal = libc::WTERMSIG(status);
        return json!({"skipped": format!(
            "the port write killed its process with signal {signal}{}: this guest's kernel does not serve \
             user-space port I/O (measured in a child; the other cases are unaffected)",
            if signal == libc::SIGSEGV { " (SIGSEGV)" } else { "" }
        )});
    }
    serde_json::from_slice(&text)
        .unwrap_or_else(|_| json!({"skipped": format!("the port-I/O child printed no result (wait status {status})")}))
}

/// Print one case as a JSON line and flush it.
fn emit(out: &mut impl Write, case: &Value) -> Result<(), String> {
    writeln!(out, "{case}")
        .and_then(|()| out.flush())
        .map_err(|e| format!("stdout: {e}"))
}

#[cfg(target_arch = "x86_64")]
pub fn exits(out: &mut impl Write, iterations: u64, count: usize) -> Result<(), String> {
    let leaf0 = cpuid_registers(0);
    let leaf21 = (leaf0[0] >= 0x21).then(|| cpuid_registers(0x21));
    let cpuinfo = std::fs::read_to_string(under_root("/proc/cpuinfo")).unwrap_or_default();
    let tdx = tdx_guest_reason(&cpuinfo, leaf0, leaf21);
    let leaves: Vec<String> = CPUID_LEAVES.iter().map(|leaf| format!("{leaf:#x}")).collect();
    emit(
        out,
        &json!({"iterations": iterations, "batches": count, "leaves": leaves, "port": format!("{PORT:#x}")}),
    )?;
    let mut empty = batches(count, iterations, |i| {
        black_box(i);
    });
    empty["name"] = json!("empty");
    emit(out, &empty)?;
    for leaf in CPUID_LEAVES {
        let mut case = batches(count, iterations, |_| {
            black_box(cpuid(black_box(leaf)));
        });
        case["name"] = json!("cpuid");
        case["leaf"] = json!(format!("{leaf:#x}"));
        emit(out, &case)?;
    }
    let mut port = match tdx {
        Some(reason) => json!({"skipped": reason}),
        None => port_io_in_child(count, iterations),
    };
    port["name"] = json!("port_io");
    port["port"] = json!(format!("{PORT:#x}"));
    emit(out, &port)
}

#[cfg(not(target_arch = "x86_64"))]
pub fn exits(out: &mut impl Write, _iterations: u64, _count: usize) -> Result<(), String> {
    emit(
        out,
        &json!({"skipped": "CPUID and port I/O exits are x86_64 instructions"}),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(iterations: u64, count: usize) -> Vec<Value> {
        let mut out = Vec::new();
        exits(&mut out, iterations, count).unwrap();
        String::from_utf8(out)
            .unwrap()
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect()
    }

    #[test]
    #[cfg(target_arch = "x86_64")]
    fn every_case_is_a_line_of_its_own_with_each_batch_or_why_it_was_skipped() {
        let lines = lines(1000, 3);
        assert_eq!(lines[0]["iterations"], 1000);
        let cases = &lines[1..];
        assert_eq!(cases.len(), 2 + CPUID_LEAVES.len());
        for case in cases {
            assert!(case.get("served_by").is_none());
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

    fn registers(text: &[u8; 12], eax: u32) -> [u32; 4] {
        let word = |i: usize| u32::from_le_bytes(text[i..i + 4].try_into().unwrap());
        // EBX, EDX, ECX hold the text in that order
        [eax, word(0), word(8), word(4)]
    }

    #[test]
    fn a_tdx_guest_is_known_by_its_flag_or_its_cpuid_leaf() {
        let intel = registers(b"GenuineIntel", 0x23);
        let tdx = registers(b"IntelTDX    ", 0);
        let plain = "flags\t\t: fpu vme hypervisor\n";
        assert!(tdx_guest_reason(plain, intel, Some(tdx)).unwrap().contains("0x21"));
        assert!(tdx_guest_reason("flags\t: fpu tdx_guest\n", intel, None)
            .unwrap()
            .contains("tdx_guest"));
        assert_eq!(tdx_guest_reason(plain, intel, Some([0; 4])), None);
        // an AMD CPU's leaf 0x21 is no TDX signature, whatever it holds
        assert_eq!(
            tdx_guest_reason(plain, registers(b"AuthenticAMD", 0x10), Some(tdx)),
            None
        );
    }

    #[test]
    fn an_ioperm_refused_under_lockdown_names_lockdown_not_root() {
        let locked = "none [integrity] confidentiality\n";
        let reason = ioperm_reason(libc::EPERM, Some(locked), true);
        assert!(reason.contains("lockdown (integrity)"), "{reason}");
        assert!(!reason.contains("needs root"));
        assert!(ioperm_reason(libc::EPERM, Some("[none] integrity confidentiality"), false).contains("needs root"));
        assert!(ioperm_reason(libc::EPERM, None, false).contains("needs root"));
        assert!(ioperm_reason(libc::ENOSYS, None, true).contains("no ioperm"));
    }
}
