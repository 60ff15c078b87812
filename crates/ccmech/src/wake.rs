//! Cross-vCPU wake-ups: one thread waking another pinned on another CPU through a futex (ping-pong),
//! and a pool of workers, one per CPU, fanned out and joined by a coordinator, timed per wake-up and
//! per round, with the rescheduling and function-call IPIs the CPUs in use received meanwhile
//! (/proc/interrupts) and the idle states they entered (cpuidle in sysfs: a non-POLL state is a halt).
//!
//! On `--vcpus 1` every thread shares one CPU: a wake-up is then a context switch, not an IPI. Each
//! side counts the waits that really slept (a FUTEX_WAIT that returned 0, not EAGAIN), so the reader
//! sees how many hand-offs found the other side asleep.

use std::fs;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use serde_json::{json, Value};

const STOP: u32 = u32::MAX;

fn futex_wait(word: &AtomicU32, expected: u32) -> bool {
    // SAFETY: the word outlives the call; a null timeout waits until woken or the value differs
    let done = unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
            expected,
            std::ptr::null::<libc::timespec>(),
        )
    };
    done == 0
}

fn futex_wake(word: &AtomicU32, count: i32) {
    // SAFETY: waking waiters on a word this process owns
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
            count,
        );
    }
}

/// The CPUs this process may run on, ascending.
pub fn allowed_cpus() -> Vec<usize> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; sched_getaffinity fills it
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return vec![0];
        }
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&cpu| libc::CPU_ISSET(cpu, &set))
            .collect()
    }
}

/// Pin the calling thread to one CPU.
fn pin(cpu: usize) -> Result<(), String> {
    // SAFETY: as above; pid 0 is the calling thread
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(format!(
                "cannot pin a thread to CPU {cpu}: {}",
                std::io::Error::last_os_error()
            ));
        }
    }
    Ok(())
}

/// Rescheduling and function-call IPIs received by `cpus`, from /proc/interrupts text: the rows whose
/// description is "Rescheduling interrupts" (x86 RES, arm64 IPI0) and "Function call interrupts" (x86
/// CAL, arm64 IPI1), summed over the columns of those CPUs; None where the table has no such row.
pub fn ipis(interrupts: &str, cpus: &[usize]) -> Option<(u64, u64)> {
    let mut lines = interrupts.lines();
    let header: Vec<usize> = lines
        .next()?
        .split_whitespace()
        .filter_map(|word| word.strip_prefix("CPU")?.parse().ok())
        .collect();
    let columns: Vec<usize> = cpus
        .iter()
        .filter_map(|cpu| header.iter().position(|c| c == cpu))
        .collect();
    let (mut res, mut cal) = (None, None);
    for line in lines {
        let Some((_, rest)) = line.split_once(':') else {
            continue;
        };
        let words: Vec<&str> = rest.split_whitespace().collect();
        let counts: Vec<u64> = words.iter().take(header.len()).map_while(|w| w.parse().ok()).collect();
        let description = words[counts.len()..].join(" ");
        let sum: u64 = columns.iter().filter_map(|&i| counts.get(i)).sum();
        if description == "Rescheduling interrupts" {
            res = Some(sum);
        } else if description == "Function call interrupts" {
            cal = Some(sum);
        }
    }
    Some((res?, cal?))
}

/// Entries into each idle state of `cpus`, by the state's name, from sysfs under `root`
/// (devices/system/cpu/cpu<N>/cpuidle/state<K>/{name,usage}); empty where there is no cpuidle.
pub fn idle_entries(root: &str, cpus: &[usize]) -> Vec<(String, u64)> {
    let mut found: Vec<(String, u64)> = Vec::new();
    for cpu in cpus {
        let Ok(states) = fs::read_dir(format!("{root}/devices/system/cpu/cpu{cpu}/cpuidle")) else {
            continue;
        };
        let mut paths: Vec<_> = states.filter_map(|s| s.ok()).map(|s| s.path()).collect();
        paths.sort();
        for state in paths {
            let name = fs::read_to_string(state.join("name"))
                .unwrap_or_default()
                .trim()
                .to_string();
            let usage: Option<u64> = fs::read_to_string(state.join("usage"))
                .ok()
                .and_then(|t| t.trim().parse().ok());
            if let (false, Some(usage)) = (name.is_empty(), usage) {
                match found.iter_mut().find(|(n, _)| *n == name) {
                    Some(entry) => entry.1 += usage,
                    None => found.push((name, usage)),
                }
            }
        }
    }
    found
}

struct Counts {
    ipis: Option<(u64, u64)>,
    idle: Vec<(String, u64)>,
}

fn counts(cpus: &[usize]) -> Counts {
    Counts {
        ipis: ipis(&fs::read_to_string("/proc/interrupts").unwrap_or_default(), cpus),
        idle: idle_entries("/sys", cpus),
    }
}

/// The change of the counts between two snapshots as JSON: {"res", "cal"} (null where unreadable) and
/// {"idle": {state: entries}} (empty where there is no cpuidle).
fn change(before: &Counts, after: &Counts) -> Value {
    let ipis = match (before.ipis, after.ipis) {
        (Some((r0, c0)), Some((r1, c1))) => json!({"res": r1.saturating_sub(r0), "cal": c1.saturating_sub(c0)}),
        _ => Value::Null,
    };
    let mut idle = serde_json::Map::new();
    for (name, end) in &after.idle {
        if let Some((_, start)) = before.idle.iter().find(|(n, _)| n == name) {
            idle.insert(name.clone(), json!(end.saturating_sub(*start)));
        }
    }
    json!({"ipis": ipis, "idle": idle})
}

/// `round_trips` hand-offs there and back between a thread on `cpus[0]` and one on `cpus[1]` (the same
/// CPU when only one is given), per batch: ns per wake-up (half a round trip) of each batch.
fn ping_pong(cpus: &[usize], round_trips: u64, batches: usize) -> Result<Value, String> {
    let (here, there) = (cpus[0], *cpus.get(1).unwrap_or(&cpus[0]));
    let turn = Arc::new(AtomicU32::new(0));
    let slept = Arc::new(AtomicU64::new(0));
    let partner = {
        let (turn, slept) = (turn.clone(), slept.clone());
        std::thread::spawn(move || -> Result<(), String> {
            pin(there)?;
            loop {
                let mut value = turn.load(Ordering::SeqCst);
                while value == 0 {
                    if futex_wait(&turn, 0) {
                        slept.fetch_add(1, Ordering::Relaxed);
                    }
                    value = turn.load(Ordering::SeqCst);
                }
                if value == STOP {
                    return Ok(());
                }
                turn.store(0, Ordering::SeqCst);
                futex_wake(&turn, 1);
            }
        })
    };
    let measured = (|| {
        pin(here)?;
        let before = counts(cpus);
        let mut per_wakeup = Vec::with_capacity(batches);
        for _ in 0..batches {
            let start = Instant::now();
            for _ in 0..round_trips {
                turn.store(1, Ordering::SeqCst);
                futex_wake(&turn, 1);
                while turn.load(Ordering::SeqCst) == 1 {
                    if futex_wait(&turn, 1) {
                        slept.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
            per_wakeup.push(start.elapsed().as_nanos() as f64 / (2 * round_trips) as f64);
        }
        Ok::<_, String>((per_wakeup, change(&before, &counts(cpus))))
    })();
    turn.store(STOP, Ordering::SeqCst);
    futex_wake(&turn, 1);
    partner
        .join()
        .map_err(|_| "the ping-pong partner thread panicked".to_string())??;
    let (per_wakeup, counted) = measured?;
    Ok(json!({
        "cpus": [here, there],
        "round_trips": round_trips,
        "batches": batches,
        "wakeups": 2 * round_trips * batches as u64,
        "slept": slept.load(Ordering::Relaxed),
        "ns_per_wakeup": per_wakeup,
        "counts": counted,
    }))
}

/// A pool of one worker per CPU of `cpus` and a coordinator on `cpus[0]`: per round the coordinator
/// wakes every worker (one FUTEX_WAKE for all) and sleeps until the last one wakes it; ns per round.
fn fan_out(cpus: &[usize], rounds: u64, batches: usize) -> Result<Value, String> {
    let generation = Arc::new(AtomicU32::new(0));
    let remaining = Arc::new(AtomicU32::new(0));
    let slept = Arc::new(AtomicU64::new(0));
    let workers: Vec<_> = cpus
        .iter()
        .map(|&cpu| {
            let (generation, remaining, slept) = (generation.clone(), remaining.clone(), slept.clone());
            std::thread::spawn(move || -> Result<(), String> {
                pin(cpu)?;
                let mut seen = 0;
                loop {
                    let mut now = generation.load(Ordering::SeqCst);
                    while now == seen {
                        if futex_wait(&generation, seen) {
                            slept.fetch_add(1, Ordering::Relaxed);
                        }
                        now = generation.load(Ordering::SeqCst);
                    }
                    if now == STOP {
                        return Ok(());
                    }
                    seen = now;
                    if remaining.fetch_sub(1, Ordering::SeqCst) == 1 {
                        futex_wake(&remaining, 1);
                    }
                }
            })
        })
        .collect();
    let measured = (|| {
        pin(cpus[0])?;
        let before = counts(cpus);
        let (mut per_round, mut round) = (Vec::with_capacity(batches), 0u32);
        for _ in 0..batches {
            let start = Instant::now();
            for _ in 0..rounds {
                round += 1;
                remaining.store(cpus.len() as u32, Ordering::SeqCst);
                generation.store(round, Ordering::SeqCst);
                futex_wake(&generation, i32::MAX);
                loop {
                    let left = remaining.load(Ordering::SeqCst);
                    if left == 0 {
                        break;
                    }
                    if futex_wait(&remaining, left) {
                        slept.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
            per_round.push(start.elapsed().as_nanos() as f64 / rounds as f64);
        }
        Ok::<_, String>((per_round, change(&before, &counts(cpus))))
    })();
    generation.store(STOP, Ordering::SeqCst);
    futex_wake(&generation, i32::MAX);
    for worker in workers {
        worker.join().map_err(|_| "a pool worker panicked".to_string())??;
    }
    let (per_round, counted) = measured?;
    Ok(json!({
        "cpus": cpus,
        "workers": cpus.len(),
        "rounds": rounds,
        "batches": batches,
        // per round: one wake-up per worker, and the coordinator's by the last worker
        "wakeups": (cpus.len() as u64 + 1) * rounds * batches as u64,
        "slept": slept.load(Ordering::Relaxed),
        "ns_per_round": per_round,
        "counts": counted,
    }))
}

/// Both patterns over the first `vcpus` CPUs this process may use.
pub fn wake(vcpus: usize, round_trips: u64, rounds: u64, batches: usize) -> Result<Value, String> {
    let allowed = allowed_cpus();
    if vcpus > allowed.len() {
        return Ok(json!({
            "vcpus": vcpus,
            "skipped": format!("{vcpus} vCPUs asked, this process may run on {} ({allowed:?})", allowed.len()),
        }));
    }
    let cpus = &allowed[..vcpus];
    let driver = fs::read_to_string("/sys/devices/system/cpu/cpuidle/current_driver").ok();
    Ok(json!({
        "vcpus": vcpus,
        "cpus": cpus,
        "allowed_cpus": allowed.len(),
        "idle_driver": driver.map(|d| d.trim().to_string()),
        "ping_pong": ping_pong(cpus, round_trips, batches)?,
        "fan_out": fan_out(cpus, rounds, batches)?,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    const X86: &str = "\
            CPU0       CPU1       CPU3
  0:         40          0          0   IO-APIC   2-edge      timer
LOC:       5000       6000       7000   Local timer interrupts
RES:         30         40         50   Rescheduling interrupts
CAL:          7          8          9   Function call interrupts
TLB:          1          2          3   TLB shootdowns
ERR:          0
";
    const ARM64: &str = "\
           CPU0       CPU1
IPI0:        11         12       Rescheduling interrupts
IPI1:         3          4       Function call interrupts
";

    #[test]
    fn ipis_sum_the_columns_of_the_cpus_named_by_the_header() {
        assert_eq!(ipis(X86, &[0, 1]), Some((70, 15)));
        assert_eq!(ipis(X86, &[3]), Some((50, 9)));
        assert_eq!(ipis(X86, &[2]), Some((0, 0))); // an offline CPU has no column
        assert_eq!(ipis(ARM64, &[1]), Some((12, 4)));
        assert_eq!(ipis("           CPU0\n  0:  4  IO-APIC timer\n", &[0]), None);
    }

    #[test]
    fn the_futex_hand_offs_really_run_and_are_counted() {
        let cpus = vec![allowed_cpus()[0]];
        let document = wake(1, 200, 50, 2).unwrap();
        assert_eq!(document["cpus"], json!(cpus));
        assert_eq!(document["ping_pong"]["wakeups"], json!(800));
        assert_eq!(document["fan_out"]["wakeups"], json!(200));
        assert!(document["ping_pong"]["ns_per_wakeup"][0].as_f64().unwrap() > 0.0);
        let too_many = wake(allowed_cpus().len() + 1, 1, 1, 1).unwrap();
        assert!(too_many["skipped"].as_str().unwrap().contains("vCPUs asked"));
    }
}
