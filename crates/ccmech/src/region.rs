//! An anonymous mapping of its own, on 4K pages (THP refused) or asking for 2M pages (aligned to 2M,
//! MADV_HUGEPAGE); what the kernel gave is read back from smaps, never assumed.

pub const SMALL_PAGE: usize = 4096;
pub const HUGE_PAGE: usize = 2 << 20;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pages {
    Small,
    Huge,
}

impl Pages {
    pub fn parse(text: &str) -> Result<Pages, String> {
        match text {
            "4k" => Ok(Pages::Small),
            "2m" => Ok(Pages::Huge),
            other => Err(format!("pages must be 4k or 2m, not {other:?}")),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Pages::Small => "4k",
            Pages::Huge => "2m",
        }
    }
}

pub struct Region {
    mapping: *mut libc::c_void,
    mapping_len: usize,
    pub start: *mut u8,
    pub len: usize,
}

/// `len` rounded up to a whole number of 2M pages (so both page sizes map the same bytes).
pub fn round_to_huge(len: usize) -> usize {
    len.div_ceil(HUGE_PAGE).max(1) * HUGE_PAGE
}

impl Region {
    pub fn map(len: usize, pages: Pages) -> Result<Region, String> {
        let len = round_to_huge(len);
        // room for a 2M-aligned start with an inaccessible margin on each side: the margins keep the
        // region a mapping (VMA) of its own, so smaps's AnonHugePages for it counts it alone
        let mapping_len = len + 3 * HUGE_PAGE;
        // SAFETY: a fresh private anonymous mapping; no existing memory is touched
        let mapping = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                mapping_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if mapping == libc::MAP_FAILED {
            return Err(format!(
                "mmap of {mapping_len} bytes failed: {}",
                std::io::Error::last_os_error()
            ));
        }
        let base = mapping as usize;
        let start = (base + 1).div_ceil(HUGE_PAGE) * HUGE_PAGE;
        let region = Region {
            mapping,
            mapping_len,
            start: start as *mut u8,
            len,
        };
        let advice = match pages {
            Pages::Small => libc::MADV_NOHUGEPAGE,
            Pages::Huge => libc::MADV_HUGEPAGE,
        };
        let end = start + len;
        // SAFETY: every range lies inside the mapping made above
        let failed = unsafe {
            libc::mprotect(mapping, start - base, libc::PROT_NONE) != 0
                || libc::mprotect(end as *mut libc::c_void, base + mapping_len - end, libc::PROT_NONE) != 0
                || libc::madvise(start as *mut libc::c_void, len, advice) != 0
        };
        if failed {
            return Err(format!("mprotect/madvise failed: {}", std::io::Error::last_os_error()));
        }
        Ok(region)
    }

    /// The region as a slice of `T`, zero-filled by the kernel on first touch.
    pub fn slice<T: Copy>(&mut self) -> &mut [T] {
        // SAFETY: the mapping is readable and writable, aligned to 2M, zero-filled (a valid value
        // for the integer and float types used here) and lives as long as self
        unsafe { std::slice::from_raw_parts_mut(self.start as *mut T, self.len / std::mem::size_of::<T>()) }
    }

    pub fn huge_bytes(&self) -> u64 {
        crate::procfs::smaps_huge_bytes(self.start as usize, self.len)
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly the mapping this value owns
        unsafe { libc::munmap(self.mapping, self.mapping_len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regions_are_whole_huge_pages_aligned_to_2m_and_zero_filled() {
        assert_eq!(round_to_huge(1), HUGE_PAGE);
        assert_eq!(round_to_huge(HUGE_PAGE + 1), 2 * HUGE_PAGE);
        let mut region = Region::map(3 << 20, Pages::Small).unwrap();
        assert_eq!(region.start as usize % HUGE_PAGE, 0);
        assert_eq!(region.len, 4 << 20);
        let words = region.slice::<u64>();
        assert!(words.iter().all(|&w| w == 0));
        let last = words.len() - 1;
        words[last] = 7;
        assert_eq!(region.slice::<u64>()[last], 7);
        // refused THP: the kernel backs a 4K region with no huge page
        assert_eq!(region.huge_bytes(), 0);
    }

    #[test]
    fn each_region_counts_its_own_huge_pages_only() {
        let mut regions: Vec<Region> = (0..3).map(|_| Region::map(4 << 20, Pages::Huge).unwrap()).collect();
        for region in &mut regions {
            region.slice::<u8>().fill(1);
        }
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let given: Vec<u64> = regions
            .iter()
            .map(|r| crate::procfs::anon_huge_bytes(&smaps, r.start as usize, r.len))
            .collect();
        // the kernel may refuse huge pages (THP off); it never reports more than the region holds
        assert!(given.iter().all(|&bytes| bytes <= 4 << 20), "{given:?}");
    }

    #[test]
    fn page_names_round_trip_and_others_are_refused() {
        assert_eq!(Pages::parse("2m").unwrap().name(), "2m");
        assert_eq!(Pages::parse("4k").unwrap(), Pages::Small);
        assert!(Pages::parse("1g").is_err());
    }
}
