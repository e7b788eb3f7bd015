//! A histogram of durations in fixed buckets, lock-free: one atomic add per bucket, count and sum. The bounds are
//! Prometheus-style (seconds, cumulative on export) and span 100 µs to 5 min, wide enough for a loopback round trip
//! and for a wait on a lock held for minutes.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde::Serialize;

/// Upper bounds of the finite buckets, in seconds. The last bucket (`+Inf`) takes the rest.
pub const BUCKET_BOUNDS: [f64; 19] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
    300.0,
];

const BOUNDS_NS: [u64; 19] = {
    let mut ns = [0u64; 19];
    let mut i = 0;
    while i < ns.len() {
        ns[i] = (BUCKET_BOUNDS[i] * 1e9) as u64;
        i += 1;
    }
    ns
};

/// The recording side: updated from any thread, read by snapshots. Public so that programs built on core
/// (fencelockd) record their own durations in the same buckets.
#[derive(Debug, Default)]
pub struct Histogram {
    buckets: [AtomicU64; BUCKET_BOUNDS.len() + 1],
    sum_ns: AtomicU64,
}

impl Histogram {
    /// Counts one duration.
    pub fn observe(&self, d: Duration) {
        let ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        let i = BOUNDS_NS.partition_point(|&b| b < ns);
        self.buckets[i].fetch_add(1, Ordering::Relaxed);
        self.sum_ns.fetch_add(ns, Ordering::Relaxed);
    }

    /// The counts so far, cumulative by bound.
    pub fn snapshot(&self) -> HistogramSnapshot {
        let mut cumulative = 0;
        let mut buckets = Vec::with_capacity(self.buckets.len());
        for (i, b) in self.buckets.iter().enumerate() {
            cumulative += b.load(Ordering::Relaxed);
            buckets.push(Bucket { le: BUCKET_BOUNDS.get(i).copied().unwrap_or(f64::INFINITY), count: cumulative });
        }
        HistogramSnapshot { count: cumulative, sum: self.sum_ns.load(Ordering::Relaxed) as f64 / 1e9, buckets }
    }
}

/// A histogram as read at one moment.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HistogramSnapshot {
    /// Observations so far.
    pub count: u64,
    /// Their sum, in seconds.
    pub sum: f64,
    /// Cumulative counts by upper bound, the last one `+Inf` (Prometheus's `le`).
    pub buckets: Vec<Bucket>,
}

/// One cumulative bucket.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Bucket {
    /// The upper bound in seconds (`f64::INFINITY` for the last; JSON writes it as `null`).
    #[serde(serialize_with = "finite_or_null")]
    pub le: f64,
    /// Observations at or below it.
    pub count: u64,
}

fn finite_or_null<S: serde::Serializer>(le: &f64, s: S) -> std::result::Result<S::Ok, S::Error> {
    if le.is_finite() { s.serialize_f64(*le) } else { s.serialize_none() }
}

impl HistogramSnapshot {
    /// An empty histogram with the standard buckets.
    pub fn empty() -> Self {
        Histogram::default().snapshot()
    }

    /// The smallest bucket bound at or above the `q` quantile (0–1): an upper estimate, `None` if empty.
    pub fn quantile_bound(&self, q: f64) -> Option<f64> {
        if self.count == 0 {
            return None;
        }
        let rank = (q.clamp(0.0, 1.0) * self.count as f64).ceil().max(1.0) as u64;
        self.buckets.iter().find(|b| b.count >= rank).map(|b| b.le)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn observations_land_in_their_bucket_and_export_cumulatively() {
        let h = Histogram::default();
        h.observe(Duration::from_micros(50)); // ≤ 100 µs
        h.observe(Duration::from_micros(100)); // on the bound: still ≤ 100 µs
        h.observe(Duration::from_millis(3)); // ≤ 5 ms
        h.observe(Duration::from_secs(1000)); // +Inf
        let s = h.snapshot();
        assert_eq!(s.count, 4);
        assert_eq!(s.buckets[0], Bucket { le: 0.0001, count: 2 });
        assert_eq!(s.buckets[5], Bucket { le: 0.005, count: 3 });
        assert_eq!(s.buckets[18].count, 3);
        assert_eq!(s.buckets[19].count, 4);
        assert!(s.buckets[19].le.is_infinite());
        assert!((s.sum - 1000.00315).abs() < 1e-9, "{}", s.sum);
        assert_eq!(s.quantile_bound(0.5), Some(0.0001));
        assert_eq!(s.quantile_bound(0.75), Some(0.005));
        assert_eq!(HistogramSnapshot::empty().quantile_bound(0.5), None);
        let json = serde_json::to_value(&s).unwrap();
        assert!(json["buckets"][19]["le"].is_null());
    }
}
