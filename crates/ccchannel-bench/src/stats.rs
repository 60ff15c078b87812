//! The latency summary every timed series is reported with: count, mean, and the 50th, 95th and
//! 99th percentiles by linear interpolation between the closest ranks (Hyndman and Fan's type 7,
//! numpy's default, so a figure recomputed from `samples_us` in Python is the same number).
//!
//! Kept here rather than taken from a crate: statrs' `quantile` is type 8, and `average`'s
//! quantiles are streaming P-square estimates, so either would change every published figure;
//! the whole definition is the ten lines below and the tests that pin it.

use serde::{Deserialize, Serialize};

/// The `p`-th percentile (0..=100) of `sorted`, interpolated linearly; NaN for no samples.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = (p / 100.0) * (sorted.len() - 1) as f64;
    let (low, high) = (rank.floor() as usize, rank.ceil() as usize);
    sorted[low] + (sorted[high] - sorted[low]) * (rank - low as f64)
}

/// One timed series in microseconds: its summary and the samples themselves, sorted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LatencySummary {
    pub n: usize,
    pub mean_us: f64,
    pub p50_us: f64,
    pub p95_us: f64,
    pub p99_us: f64,
    pub samples_us: Vec<f64>,
}

impl LatencySummary {
    pub fn from_samples(mut samples_us: Vec<f64>) -> LatencySummary {
        samples_us.sort_by(f64::total_cmp);
        // an empty series has mean 0 and NaN percentiles (printed as null), as it always had
        let mean_us = samples_us.iter().sum::<f64>() / samples_us.len().max(1) as f64;
        LatencySummary {
            n: samples_us.len(),
            mean_us,
            p50_us: percentile(&samples_us, 50.0),
            p95_us: percentile(&samples_us, 95.0),
            p99_us: percentile(&samples_us, 99.0),
            samples_us,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_interpolate_between_the_closest_ranks() {
        let sorted = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0];
        assert_eq!(percentile(&sorted, 0.0), 1.0);
        assert_eq!(percentile(&sorted, 100.0), 10.0);
        assert_eq!(percentile(&sorted, 50.0), 5.5);
        // rank 0.95 * 9 = 8.55: between 9 and 10
        assert!((percentile(&sorted, 95.0) - 9.55).abs() < 1e-12);
        assert_eq!(percentile(&[42.0], 99.0), 42.0);
        assert!(percentile(&[], 50.0).is_nan());
    }

    #[test]
    fn a_summary_sorts_its_samples_and_counts_them() {
        let summary = LatencySummary::from_samples(vec![30.0, 10.0, 20.0, 40.0]);
        assert_eq!(summary.samples_us, [10.0, 20.0, 30.0, 40.0]);
        assert_eq!(summary.n, 4);
        assert_eq!(summary.mean_us, 25.0);
        assert_eq!(summary.p50_us, 25.0);
        assert!((summary.p99_us - 39.7).abs() < 1e-9);
    }

    #[test]
    fn an_empty_series_has_mean_zero_and_no_percentiles() {
        let summary = LatencySummary::from_samples(Vec::new());
        assert_eq!((summary.n, summary.mean_us), (0, 0.0));
        assert!(summary.p50_us.is_nan());
        let json = serde_json::to_value(&summary).unwrap();
        assert!(json["p50_us"].is_null(), "{json}");
    }
}
