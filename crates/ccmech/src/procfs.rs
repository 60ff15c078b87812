//! What the kernel says about this process's memory and the machine's unaccepted memory, parsed from
//! the text of /proc files (pure functions, so the unit tests feed them recorded text).

use std::fs;

/// Bytes of transparent huge pages backing the mappings that overlap `[start, start + len)`, from the
/// text of /proc/self/smaps (its `AnonHugePages:` lines, in kB).
pub fn anon_huge_bytes(smaps: &str, start: usize, len: usize) -> u64 {
    let end = start + len;
    let mut inside = false;
    let mut total_kb = 0u64;
    for line in smaps.lines() {
        if let Some((low, high)) = mapping_range(line) {
            inside = low < end && high > start;
            continue;
        }
        if inside {
            if let Some(rest) = line.strip_prefix("AnonHugePages:") {
                total_kb += rest.trim().trim_end_matches("kB").trim().parse::<u64>().unwrap_or(0);
            }
        }
    }
    total_kb * 1024
}

/// The address range of an smaps header line (`7f12a0000000-7f12a4000000 rw-p ...`), or None.
fn mapping_range(line: &str) -> Option<(usize, usize)> {
    let first = line.split_whitespace().next()?;
    let (low, high) = first.split_once('-')?;
    Some((
        usize::from_str_radix(low, 16).ok()?,
        usize::from_str_radix(high, 16).ok()?,
    ))
}

/// The value of `key` in /proc/vmstat text (`nr_unaccepted 0`), or None where the kernel lacks it.
pub fn vmstat_value(vmstat: &str, key: &str) -> Option<u64> {
    vmstat.lines().find_map(|line| {
        let (name, value) = line.split_once(' ')?;
        (name == key).then(|| value.trim().parse().ok()).flatten()
    })
}

/// The value in kB of `key` in /proc/meminfo text (`Unaccepted:      1024 kB`), or None.
pub fn meminfo_kb(meminfo: &str, key: &str) -> Option<u64> {
    meminfo.lines().find_map(|line| {
        let (name, value) = line.split_once(':')?;
        (name == key)
            .then(|| value.trim().trim_end_matches("kB").trim().parse().ok())
            .flatten()
    })
}

/// The machine's unaccepted memory as the kernel counts it now: (nr_unaccepted pages, Unaccepted kB).
pub fn unaccepted_now() -> (Option<u64>, Option<u64>) {
    let vmstat = fs::read_to_string("/proc/vmstat").unwrap_or_default();
    let meminfo = fs::read_to_string("/proc/meminfo").unwrap_or_default();
    (
        vmstat_value(&vmstat, "nr_unaccepted"),
        meminfo_kb(&meminfo, "Unaccepted"),
    )
}

pub fn smaps_huge_bytes(start: usize, len: usize) -> u64 {
    anon_huge_bytes(&fs::read_to_string("/proc/self/smaps").unwrap_or_default(), start, len)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMAPS: &str = "\
55d0c0000000-55d0c0021000 r--p 00000000 08:01 1234 /usr/bin/ccmech
AnonHugePages:      2048 kB
7f0000000000-7f0000800000 rw-p 00000000 00:00 0
Size:               8192 kB
AnonHugePages:      6144 kB
7f0000800000-7f0000a00000 rw-p 00000000 00:00 0
AnonHugePages:      2048 kB
";

    #[test]
    fn huge_bytes_count_only_the_mappings_that_overlap_the_region() {
        assert_eq!(anon_huge_bytes(SMAPS, 0x7f0000000000, 0x800000), 6144 * 1024);
        assert_eq!(anon_huge_bytes(SMAPS, 0x7f0000000000, 0xa00000), 8192 * 1024);
        assert_eq!(anon_huge_bytes(SMAPS, 0x1000, 0x1000), 0);
    }

    #[test]
    fn unaccepted_counters_are_read_by_exact_name_and_absent_when_missing() {
        let vmstat = "nr_free_pages 12\nnr_unaccepted 512\nnr_unaccepted_extra 9\n";
        assert_eq!(vmstat_value(vmstat, "nr_unaccepted"), Some(512));
        assert_eq!(vmstat_value("nr_free_pages 12\n", "nr_unaccepted"), None);
        let meminfo = "MemTotal:       16384000 kB\nUnaccepted:      1048576 kB\n";
        assert_eq!(meminfo_kb(meminfo, "Unaccepted"), Some(1048576));
        assert_eq!(meminfo_kb("MemTotal: 1 kB\n", "Unaccepted"), None);
    }
}
