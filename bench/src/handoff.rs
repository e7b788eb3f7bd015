//! Figure 2: contended hand-off. Eight workers, each with its own `Client` (so contention crosses the backend
//! rather than the client's local queue), take one lock, note the time, and release it at once.
//!
//! Arrival order: a worker books its place just before it calls `lock()` (the first `lock()` of every worker counts
//! as one simultaneous arrival, since their requests race to the backend). An acquisition is served in arrival order
//! when no other worker that was waiting at that moment had booked earlier; acquisitions with nobody else waiting
//! are not judged.
//!
//! Where the backend serves both wait orders (Redis), the figure runs once per order in the same run: the fair
//! wake-one queue, then the free-for-all in which every release wakes every waiter.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use fencelock::{Client, LockOptions};
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::baseline::Baseline;
use crate::report::{Table, Target, dur, rate};
use crate::stats::Samples;
use crate::{BoxResult, Targets};

const NAME: &str = "bench-handoff";
const WORKERS: usize = 8;
const RTT_SAMPLES: usize = 2_000;

/// Gaps as seen under the lock; only the holder touches `last_release`, so the order of events is the lock's.
#[derive(Debug, Default)]
struct Log {
    /// (worker, instant just before it called release) of the previous holder.
    last_release: Option<(usize, Instant)>,
    gaps: Vec<Duration>,
    /// Gaps where the lock went to a different worker than the one that released it.
    cross: Vec<Duration>,
    /// Per worker: the arrival number of its pending `lock()` call, if it is waiting.
    waiting: Vec<Option<u64>>,
    next_arrival: u64,
    /// Acquisitions made while another worker was waiting, and how many of them went to the earliest arrival.
    judged: u64,
    in_order: u64,
}

type Shared = Arc<Mutex<Log>>;

fn log(shared: &Shared) -> std::sync::MutexGuard<'_, Log> {
    shared.lock().unwrap_or_else(|p| p.into_inner())
}

/// Books one acquisition made at `got` by worker `me`; false once the run is over (the lock is then only released).
fn record(shared: &Shared, me: usize, got: Instant, end: Instant) -> bool {
    let mut l = log(shared);
    let prev = l.last_release.take();
    let mine = l.waiting[me].take();
    if got >= end {
        return false;
    }
    let earliest_other = l.waiting.iter().flatten().min().copied();
    if let (Some(mine), Some(other)) = (mine, earliest_other) {
        l.judged += 1;
        if mine <= other {
            l.in_order += 1;
        }
    }
    if let Some((who, released_at)) = prev {
        l.gaps.push(got - released_at);
        if who != me {
            l.cross.push(got - released_at);
        }
    }
    // Taken just before release() is called: the gap includes the release round trip, as a waiter sees it.
    l.last_release = Some((me, Instant::now()));
    true
}

/// Books `me`'s place in the arrival order, just before it calls `lock()`.
fn arrive(shared: &Shared, me: usize) {
    let mut l = log(shared);
    l.next_arrival += 1;
    l.waiting[me] = Some(l.next_arrival);
}

/// The wait order one run of the figure asks for.
#[derive(Debug, Clone)]
pub struct Order {
    /// Shown in the title; `None` for the backend's only order.
    pub label: Option<&'static str>,
    pub opts: LockOptions,
}

/// One worker: lock, record the gap since the previous release started, release, repeat until `end`.
async fn worker(me: usize, client: Client, shared: Shared, end: Instant, opts: LockOptions) -> BoxResult<u64> {
    // A bound so a lost wake-up shows up as an error instead of a hung benchmark.
    let opts = opts.timeout(Duration::from_secs(30));
    let mut taken = 0;
    loop {
        let lease = client.lock(NAME, &opts).await?;
        let more = record(&shared, me, Instant::now(), end);
        lease.release().await?;
        if !more {
            break;
        }
        taken += 1;
        arrive(&shared, me);
    }
    client.close().await;
    Ok(taken)
}

pub async fn run(url: &str, raw: &Baseline, span: Duration, targets: &Targets, order: &Order) -> BoxResult<Table> {
    let rtt = raw.round_trips(RTT_SAMPLES).await?;
    let mut clients = Vec::with_capacity(WORKERS);
    for _ in 0..WORKERS {
        let c = Client::connect(url).await?;
        // Warm each client (script load, statement cache, pub/sub connection on first wait comes later).
        c.lock(NAME, &order.opts).await?.release().await?;
        clients.push(c);
    }
    // Every worker's first lock() is one arrival (number 0): they start together.
    let shared = Shared::new(Mutex::new(Log { waiting: vec![Some(0); WORKERS], ..Log::default() }));
    let end = Instant::now() + span;
    let mut set = JoinSet::new();
    for (me, c) in clients.into_iter().enumerate() {
        set.spawn(worker(me, c, shared.clone(), end, order.opts.clone()));
    }
    let mut counts = Vec::with_capacity(WORKERS);
    while let Some(r) = set.join_next().await {
        counts.push(r??);
    }
    let l = std::mem::take(&mut *log(&shared));
    let total: u64 = counts.iter().sum();
    let gaps = Samples::from_vec(l.gaps, span);
    let cross = Samples::from_vec(l.cross, span);
    let (min, max) = (*counts.iter().min().unwrap_or(&0), *counts.iter().max().unwrap_or(&0));
    let unit = rtt.pct(50.0);
    let in_rtts = |d: Duration| d.as_secs_f64() / unit.as_secs_f64().max(1e-12);

    let mut t = Table::new(format!(
        "2. contended hand-off{}: {WORKERS} workers, one Client each, one lock, {} s",
        order.label.map(|l| format!(" ({l})")).unwrap_or_default(),
        span.as_secs_f64()
    ));
    t.plain("acquisitions", format!("{total} ({})", rate(total as f64 / span.as_secs_f64())), None);
    let p50 = gaps.pct(50.0);
    let target = match (targets.gap_rtts, targets.gap_abs) {
        (Some(n), _) => Some(Target::at_most(in_rtts(p50), n, "gap/rtt")),
        (None, Some(d)) => Some(Target::within(p50, d)),
        (None, None) => None,
    };
    t.row("hand-off gap p50 (in raw RTTs)", dur(p50), dur(unit), Some(in_rtts(p50)), target);
    t.row("hand-off gap p99", dur(gaps.pct(99.0)), dur(rtt.pct(99.0)), Some(in_rtts(gaps.pct(99.0))), None);
    t.row("gap p50, to another worker only", dur(cross.pct(50.0)), dur(unit), Some(in_rtts(cross.pct(50.0))), None);
    let share = cross.len() as f64 / gaps.len().max(1) as f64;
    t.plain("hand-offs to another worker", format!("{:.0} %", share * 100.0), None);
    let fairness = min as f64 / max.max(1) as f64;
    t.plain("acquisitions/worker min / max", format!("{min} / {max}"), None);
    t.plain(
        "fairness min/max",
        format!("{fairness:.2}"),
        Some(Target::at_least(fairness, targets.fairness.unwrap_or(0.5), "min/max")),
    );
    let fifo = l.in_order as f64 / l.judged.max(1) as f64;
    t.plain(
        "served in arrival order",
        format!("{:.1} % ({}/{})", fifo * 100.0, l.in_order, l.judged),
        targets.fifo.then(|| Target::at_least(fifo, 1.0, "fraction")),
    );
    t.note(format!(
        "gap = next lock() return − previous holder's instant before release(); raw RTT = p50 of {RTT_SAMPLES} × {}",
        raw.round_trip_desc()
    ));
    t.note("arrival order = order of the workers' lock() calls; judged only when another worker was waiting");
    Ok(t)
}
