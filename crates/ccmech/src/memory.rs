//! Encrypted memory as a program sees it: STREAM-style bandwidth (copy, triad), the latency of a
//! dependent load chased through a random cycle of cache lines, and the cost of the first touch of
//! fresh pages (where a confidential guest validates or accepts them).

use std::hint::black_box;
use std::time::Instant;

use serde_json::{json, Value};

use crate::procfs::unaccepted_now;
use crate::region::{Pages, Region, HUGE_PAGE, SMALL_PAGE};

const LINE: usize = 64;
const WORDS_PER_LINE: usize = LINE / std::mem::size_of::<usize>();
/// loads timed per pass of the chase
const CHASE_STEPS: usize = 1 << 21;

/// A small deterministic generator (xorshift64*): the chase order needs to be unpredictable to the
/// prefetcher, not to an adversary.
pub struct Shuffle(u64);

impl Shuffle {
    pub fn new(seed: u64) -> Shuffle {
        Shuffle(seed | 1)
    }

    fn below(&mut self, bound: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % bound as u64) as usize
    }
}

/// Link `lines` cache lines of `words` into one cycle in random order (Sattolo's algorithm): the first
/// word of each line holds the word index of the next line.
pub fn link_random_cycle(words: &mut [usize], lines: usize, shuffle: &mut Shuffle) {
    let mut order: Vec<usize> = (0..lines).collect();
    for i in (1..lines).rev() {
        let j = shuffle.below(i);
        order.swap(i, j);
    }
    for i in 0..lines {
        words[order[i] * WORDS_PER_LINE] = order[(i + 1) % lines] * WORDS_PER_LINE;
    }
}

/// Nanoseconds per dependent load over `steps` loads of the cycle.
fn chase(words: &[usize], steps: usize) -> f64 {
    let mut at = 0usize;
    let start = Instant::now();
    for _ in 0..steps {
        at = words[at];
    }
    let elapsed = start.elapsed().as_nanos() as f64;
    black_box(at);
    elapsed / steps as f64
}

fn bytes_per_second(bytes: usize, start: Instant) -> f64 {
    bytes as f64 / start.elapsed().as_secs_f64()
}

/// Bandwidth and latency over `array_bytes` per array on the given pages, `passes` times each.
pub fn memory(pages: Pages, array_bytes: usize, chase_bytes: usize, passes: usize) -> Result<Value, String> {
    let (mut a_region, mut b_region, mut c_region) = (
        Region::map(array_bytes, pages)?,
        Region::map(array_bytes, pages)?,
        Region::map(array_bytes, pages)?,
    );
    let (a, b, c) = (
        a_region.slice::<f64>(),
        b_region.slice::<f64>(),
        c_region.slice::<f64>(),
    );
    // first touch outside the timing: the bandwidth is that of memory already mapped
    a.fill(1.0);
    b.fill(2.0);
    c.fill(0.5);
    let elements = a.len();
    let (mut copy, mut triad) = (Vec::new(), Vec::new());
    for _ in 0..passes {
        let start = Instant::now();
        b.copy_from_slice(black_box(&*a));
        copy.push(bytes_per_second(2 * 8 * elements, start));
        let start = Instant::now();
        let scalar = black_box(3.0);
        for ((x, y), z) in a.iter_mut().zip(b.iter()).zip(c.iter()) {
            *x = y + scalar * z;
        }
        triad.push(bytes_per_second(3 * 8 * elements, start));
        black_box(&a[elements / 2]);
    }
    let array_bytes = elements * 8;
    let huge_arrays = a_region.huge_bytes() + b_region.huge_bytes() + c_region.huge_bytes();
    drop((a_region, b_region, c_region));
    let mut chase_region = Region::map(chase_bytes, pages)?;
    let words = chase_region.slice::<usize>();
    let lines = words.len() / WORDS_PER_LINE;
    link_random_cycle(words, lines, &mut Shuffle::new(0x5eed));
    // linking wrote every line, so the pages are mapped; a bounded number of loads along the random
    // cycle gives the mean latency without walking all of a large buffer on every pass
    let steps = CHASE_STEPS;
    chase(words, steps / 4); // warm the TLB and caches as far as they reach
    let latency: Vec<f64> = (0..passes).map(|_| chase(words, steps)).collect();
    Ok(json!({
        "pages": pages.name(),
        "array_bytes": array_bytes,
        "chase_bytes": chase_region.len,
        "chase_steps": steps,
        "huge_bytes_arrays": huge_arrays,
        "huge_bytes_chase": chase_region.huge_bytes(),
        "mapped_bytes_arrays": 3 * array_bytes,
        "copy_bytes_per_s": copy,
        "triad_bytes_per_s": triad,
        "chase_ns_per_load": latency,
    }))
}

/// Map a fresh region and write one byte in every 4K page of it, timed; unaccepted memory before and after.
pub fn first_touch(pages: Pages, bytes: usize) -> Result<Value, String> {
    let before = unaccepted_now();
    let mut region = Region::map(bytes, pages)?;
    let memory = region.slice::<u8>();
    let start = Instant::now();
    for offset in (0..memory.len()).step_by(SMALL_PAGE) {
        // SAFETY: offset is inside the region; volatile so the touch is not merged or dropped
        unsafe { std::ptr::write_volatile(memory.as_mut_ptr().add(offset), 1) };
    }
    let elapsed_ns = start.elapsed().as_nanos() as f64;
    let after = unaccepted_now();
    Ok(json!({
        "pages": pages.name(),
        "bytes": region.len,
        "elapsed_ns": elapsed_ns,
        "ns_per_4k_page": elapsed_ns / (region.len / SMALL_PAGE) as f64,
        "ns_per_2m_page": elapsed_ns / (region.len / HUGE_PAGE) as f64,
        "huge_bytes": region.huge_bytes(),
        "nr_unaccepted_before": before.0,
        "nr_unaccepted_after": after.0,
        "unaccepted_kb_before": before.1,
        "unaccepted_kb_after": after.1,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_chase_visits_every_line_once_before_returning() {
        let lines = 1000;
        let mut words = vec![usize::MAX; lines * WORDS_PER_LINE];
        link_random_cycle(&mut words, lines, &mut Shuffle::new(7));
        let mut seen = vec![false; lines];
        let mut at = 0;
        for _ in 0..lines {
            assert_eq!(at % WORDS_PER_LINE, 0);
            assert!(!seen[at / WORDS_PER_LINE], "line {} visited twice", at / WORDS_PER_LINE);
            seen[at / WORDS_PER_LINE] = true;
            at = words[at];
        }
        assert_eq!(at, 0);
        assert!(seen.iter().all(|&s| s));
        // random order, not the sequence a prefetcher follows
        assert_ne!(words[0], WORDS_PER_LINE);
    }

    #[test]
    fn memory_and_first_touch_report_what_they_measured() {
        let report = memory(Pages::Small, 1 << 20, 1 << 20, 2).unwrap();
        assert_eq!(report["copy_bytes_per_s"].as_array().unwrap().len(), 2);
        assert!(report["triad_bytes_per_s"][0].as_f64().unwrap() > 0.0);
        assert!(report["chase_ns_per_load"][1].as_f64().unwrap() > 0.0);
        assert_eq!(report["huge_bytes_arrays"], 0);
        let touch = first_touch(Pages::Small, 4 << 20).unwrap();
        assert_eq!(touch["bytes"], 4 << 20);
        let per_4k = touch["ns_per_4k_page"].as_f64().unwrap();
        let per_2m = touch["ns_per_2m_page"].as_f64().unwrap();
        assert!((per_2m / per_4k - 512.0).abs() < 1e-6);
    }
}
