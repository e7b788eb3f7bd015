//! Latency samples of one timed run: rate and percentiles from a sorted Vec (runs are short enough that keeping
//! every sample is cheaper than getting a histogram's buckets right).

use std::time::Duration;

use tokio::time::Instant;

use crate::BoxResult;

/// Slices a timed phase that compares two things is cut into, alternating between them.
pub const SLICES: u32 = 4;

#[derive(Debug, Default)]
pub struct Samples {
    lat: Vec<Duration>,
    elapsed: Duration,
}

impl Samples {
    pub fn from_vec(mut lat: Vec<Duration>, elapsed: Duration) -> Samples {
        lat.sort_unstable();
        Samples { lat, elapsed }
    }

    pub fn len(&self) -> usize {
        self.lat.len()
    }

    /// Operations per second over the whole run.
    pub fn rate(&self) -> f64 {
        self.lat.len() as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// The `p`-th percentile (0–100); zero for an empty run.
    pub fn pct(&self, p: f64) -> Duration {
        if self.lat.is_empty() {
            return Duration::ZERO;
        }
        let i = ((p / 100.0) * (self.lat.len() - 1) as f64).round() as usize;
        self.lat[i.min(self.lat.len() - 1)]
    }
}

/// Runs `op` back to back for `span`, timing each call.
pub async fn timed<F, Fut>(span: Duration, mut op: F) -> BoxResult<Samples>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = BoxResult<()>>,
{
    let start = Instant::now();
    let mut lat = Vec::with_capacity(1 << 16);
    while start.elapsed() < span {
        let t = Instant::now();
        op().await?;
        lat.push(t.elapsed());
    }
    Ok(Samples::from_vec(lat, start.elapsed()))
}

/// `timed` for blocking operations; call it from a blocking thread.
pub fn timed_blocking<F>(span: Duration, mut op: F) -> BoxResult<Samples>
where
    F: FnMut() -> BoxResult<()>,
{
    let start = std::time::Instant::now();
    let mut lat = Vec::with_capacity(1 << 16);
    while start.elapsed() < span {
        let t = std::time::Instant::now();
        op()?;
        lat.push(t.elapsed());
    }
    Ok(Samples::from_vec(lat, start.elapsed()))
}

impl Samples {
    /// The samples of several runs as one, over their summed elapsed time.
    pub fn merge(parts: impl IntoIterator<Item = Samples>) -> Samples {
        let (mut lat, mut elapsed) = (Vec::new(), Duration::ZERO);
        for p in parts {
            lat.extend(p.lat);
            elapsed += p.elapsed;
        }
        Samples::from_vec(lat, elapsed)
    }

    /// The samples of runs that ran at the same time as one, over the longest of them (the wall time): summing
    /// their times would divide the rate by the number of runs.
    pub fn concurrent(parts: impl IntoIterator<Item = Samples>) -> Samples {
        let (mut lat, mut elapsed) = (Vec::new(), Duration::ZERO);
        for p in parts {
            lat.extend(p.lat);
            elapsed = elapsed.max(p.elapsed);
        }
        Samples::from_vec(lat, elapsed)
    }
}
