//! Lock metrics, recorded once in core for every binding: atomics on the hot path, no allocation per acquire.
//! `Client::metrics` reads them as a [`MetricsSnapshot`]; [`MetricsSnapshot::families`] is the one mapping to
//! metric families that fencelockd's `/metrics` and the Python, Node and Java adapters share.
//!
//! Series are labelled by backend scheme and outcome only. Lock names are unbounded, so per-name series exist only
//! for names the user opts in ([`MetricsNames`]), and at most [`MAX_NAMED_SERIES`] of them.

mod histogram;
mod names;
mod snapshot;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, Instant};

pub use self::histogram::{BUCKET_BOUNDS, Bucket, Histogram, HistogramSnapshot};
pub use self::names::{MAX_NAMED_SERIES, MetricsNames, OTHER_NAMES};
pub use self::snapshot::{Family, FamilyKind, MetricsSnapshot, NameSnapshot, Sample, families_json, prometheus_text};

use self::names::{NameStats, Names};
use crate::error::{ErrorKind, Result};

/// How one `lock`/`try_lock` call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    Acquired,
    Busy,
    Timeout,
    Cancelled,
    Error,
}

const OUTCOMES: [&str; 5] = ["acquired", "busy", "timeout", "cancelled", "error"];

impl Outcome {
    pub(crate) fn label(self) -> &'static str {
        OUTCOMES[self as usize]
    }

    pub(crate) fn of<T>(result: &Result<Option<T>>) -> Outcome {
        match result {
            Ok(Some(_)) => Outcome::Acquired,
            Ok(None) => Outcome::Busy,
            Err(e) if e.kind() == ErrorKind::Timeout => Outcome::Timeout,
            Err(e) if e.kind() == ErrorKind::Cancelled => Outcome::Cancelled,
            Err(_) => Outcome::Error,
        }
    }
}

/// Why a held lease was lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Loss {
    /// The TTL passed with the watchdog off.
    Expired,
    /// A renewal found the record gone or another's.
    Taken,
    /// No renewal got through within the lease's validity.
    Unreachable,
}

const LOSSES: [&str; 3] = ["expired", "taken", "unreachable"];

/// A backend operation core times.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    Acquire,
    Renew,
    Release,
    ForceRelease,
    Inspect,
    FenceWrite,
    FenceRead,
}

const OPS: [&str; 7] = ["acquire", "renew", "release", "force_release", "inspect", "fence_write", "fence_read"];

/// Kinds that are the backend's answer (a refusal), not a failure to reach it.
fn answered(kind: ErrorKind) -> bool {
    matches!(kind, ErrorKind::LockLost | ErrorKind::NotHeld | ErrorKind::Fenced)
}

/// One client's recorder. With metrics off every hook returns at its first branch.
#[derive(Debug)]
pub(crate) struct Recorder {
    on: bool,
    backend: String,
    acquire: [Histogram; 5],
    hold: Histogram,
    active: AtomicI64,
    renewals: [AtomicU64; 2],
    lost: [AtomicU64; 3],
    fence: [AtomicU64; 3],
    waiting: AtomicI64,
    ops: [[Histogram; 2]; 7],
    names: Names,
}

/// The scheme of a described backend URL (`redis://…` → `redis`, `sqlite:path` → `sqlite`).
fn scheme(described: &str) -> String {
    described.split([':', '?']).next().unwrap_or("unknown").to_string()
}

impl Recorder {
    pub(crate) fn new(on: bool, described: &str, names: &MetricsNames) -> Self {
        Recorder {
            on,
            backend: scheme(described),
            acquire: Default::default(),
            hold: Histogram::default(),
            active: AtomicI64::new(0),
            renewals: Default::default(),
            lost: Default::default(),
            fence: Default::default(),
            waiting: AtomicI64::new(0),
            ops: Default::default(),
            names: Names::new(if on { names.clone() } else { MetricsNames::None }),
        }
    }

    /// The backend's scheme, the `backend` label.
    pub(crate) fn backend(&self) -> &str {
        &self.backend
    }

    /// Starts timing one `lock`/`try_lock` call; it counts as waiting until finished or dropped (then `cancelled`).
    pub(crate) fn start_acquire(self: &Arc<Self>, name: &str) -> AcquireTimer {
        if !self.on {
            return AcquireTimer { inner: None };
        }
        let named = self.names.stats(name);
        self.waiting.fetch_add(1, Ordering::Relaxed);
        if let Some(n) = &named {
            n.waiting.fetch_add(1, Ordering::Relaxed);
        }
        AcquireTimer { inner: Some((self.clone(), named, Instant::now())) }
    }

    /// Starts counting one grant as active; it ends at release or loss.
    pub(crate) fn start_hold(self: &Arc<Self>, name: &str) -> HoldTimer {
        if !self.on {
            return HoldTimer { inner: None, ended: AtomicBool::new(true) };
        }
        let named = self.names.stats(name);
        self.active.fetch_add(1, Ordering::Relaxed);
        if let Some(n) = &named {
            n.active.fetch_add(1, Ordering::Relaxed);
        }
        HoldTimer { inner: Some((self.clone(), named, Instant::now())), ended: AtomicBool::new(false) }
    }

    pub(crate) fn renewal(&self, ok: bool) {
        if self.on {
            self.renewals[usize::from(!ok)].fetch_add(1, Ordering::Relaxed);
        }
    }

    pub(crate) fn fence_write<T>(&self, result: &Result<T>) {
        if !self.on {
            return;
        }
        let i = match result {
            Ok(_) => 0,
            Err(e) if e.kind() == ErrorKind::Fenced => 1,
            Err(_) => 2,
        };
        self.fence[i].fetch_add(1, Ordering::Relaxed);
    }

    /// Runs one backend operation, timing it by outcome.
    pub(crate) async fn timed<T>(&self, op: Op, call: impl Future<Output = Result<T>>) -> Result<T> {
        if !self.on {
            return call.await;
        }
        let t0 = Instant::now();
        let result = call.await;
        let failed = matches!(&result, Err(e) if !answered(e.kind()));
        self.ops[op as usize][usize::from(failed)].observe(t0.elapsed());
        result
    }

    pub(crate) fn snapshot(&self) -> MetricsSnapshot {
        let by = |names: &[&str], values: &[AtomicU64]| -> BTreeMap<String, u64> {
            names.iter().zip(values).map(|(k, v)| (k.to_string(), v.load(Ordering::Relaxed))).collect()
        };
        let backend_ops = OPS
            .iter()
            .zip(&self.ops)
            .map(|(op, [ok, err])| {
                (
                    op.to_string(),
                    BTreeMap::from([("ok".to_string(), ok.snapshot()), ("error".to_string(), err.snapshot())]),
                )
            })
            .collect();
        MetricsSnapshot {
            backend: self.backend.clone(),
            enabled: self.on,
            acquire_wait: outcomes(&self.acquire),
            hold_time: self.hold.snapshot(),
            active_leases: gauge(&self.active),
            renewals: by(&["ok", "failed"], &self.renewals),
            lost: by(&LOSSES, &self.lost),
            fence_writes: by(&["ok", "refused", "error"], &self.fence),
            local_queue_depth: gauge(&self.waiting),
            backend_ops,
            names: self.names.snapshot(),
        }
    }
}

fn outcomes(hists: &[Histogram; 5]) -> BTreeMap<String, HistogramSnapshot> {
    OUTCOMES.iter().zip(hists).map(|(k, h)| (k.to_string(), h.snapshot())).collect()
}

fn gauge(g: &AtomicI64) -> u64 {
    g.load(Ordering::Relaxed).max(0) as u64
}

/// One `lock`/`try_lock` call in flight.
pub(crate) struct AcquireTimer {
    inner: Option<(Arc<Recorder>, Option<Arc<NameStats>>, Instant)>,
}

impl AcquireTimer {
    pub(crate) fn finish(mut self, outcome: Outcome) {
        self.record(outcome);
    }

    fn record(&mut self, outcome: Outcome) {
        let Some((rec, named, t0)) = self.inner.take() else { return };
        let waited = t0.elapsed();
        rec.acquire[outcome as usize].observe(waited);
        rec.waiting.fetch_sub(1, Ordering::Relaxed);
        if let Some(n) = named {
            n.acquire[outcome as usize].observe(waited);
            n.waiting.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

impl Drop for AcquireTimer {
    /// A call dropped before it finished was cancelled by its caller.
    fn drop(&mut self) {
        self.record(Outcome::Cancelled);
    }
}

/// One grant, active until [`HoldTimer::end`] (the first end counts).
#[derive(Debug)]
pub(crate) struct HoldTimer {
    inner: Option<(Arc<Recorder>, Option<Arc<NameStats>>, Instant)>,
    ended: AtomicBool,
}

impl HoldTimer {
    /// The hold ended, lost with `loss` or released.
    pub(crate) fn end(&self, loss: Option<Loss>) {
        let Some((rec, named, t0)) = &self.inner else { return };
        if self.ended.swap(true, Ordering::AcqRel) {
            return;
        }
        let held: Duration = t0.elapsed();
        rec.hold.observe(held);
        rec.active.fetch_sub(1, Ordering::Relaxed);
        if let Some(loss) = loss {
            rec.lost[loss as usize].fetch_add(1, Ordering::Relaxed);
        }
        if let Some(n) = named {
            n.hold.observe(held);
            n.active.fetch_sub(1, Ordering::Relaxed);
            if loss.is_some() {
                n.lost.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

impl Drop for HoldTimer {
    fn drop(&mut self) {
        self.end(None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schemes_are_the_url_prefix() {
        assert_eq!(scheme("redis://127.0.0.1:6379"), "redis");
        assert_eq!(scheme("sqlite:/tmp/x.db"), "sqlite");
        assert_eq!(scheme("redis+cluster://a,b"), "redis+cluster");
        assert_eq!(scheme("memory://t"), "memory");
    }

    #[test]
    fn a_dropped_acquire_counts_as_cancelled_and_stops_waiting() {
        let rec = Arc::new(Recorder::new(true, "memory://t", &MetricsNames::None));
        let timer = rec.start_acquire("a");
        assert_eq!(rec.snapshot().local_queue_depth, 1);
        drop(timer);
        let s = rec.snapshot();
        assert_eq!(s.local_queue_depth, 0);
        assert_eq!(s.acquire_wait["cancelled"].count, 1);
        rec.start_acquire("a").finish(Outcome::Timeout);
        assert_eq!(rec.snapshot().acquire_wait["timeout"].count, 1);
        assert_eq!(rec.snapshot().acquire_wait["cancelled"].count, 1);
    }

    #[test]
    fn a_hold_ends_once_and_counts_its_loss() {
        let rec = Arc::new(Recorder::new(true, "memory://t", &MetricsNames::None));
        let hold = rec.start_hold("a");
        assert_eq!(rec.snapshot().active_leases, 1);
        hold.end(Some(Loss::Taken));
        hold.end(None);
        drop(hold);
        let s = rec.snapshot();
        assert_eq!((s.active_leases, s.hold_time.count, s.lost["taken"]), (0, 1, 1));
    }

    #[test]
    fn metrics_off_records_nothing() {
        let rec = Arc::new(Recorder::new(false, "memory://t", &MetricsNames::All));
        rec.start_acquire("a").finish(Outcome::Acquired);
        rec.start_hold("a").end(Some(Loss::Expired));
        rec.renewal(true);
        let s = rec.snapshot();
        assert!(!s.enabled);
        assert_eq!((s.acquire_wait["acquired"].count, s.lost["expired"], s.renewals["ok"]), (0, 0, 0));
        assert!(s.names.is_empty());
    }
}
