//! Figure 1: one client, one task, `lock` + `release` back to back on one name, next to the raw two-step cycle.

use std::time::Duration;

use fencelock::{Client, LockOptions};

use crate::baseline::Baseline;
use crate::report::{Table, Target, dur, rate};
use crate::stats::{Samples, timed};
use crate::{BoxResult, Targets};

const NAME: &str = "bench-uncontended";

/// Warm-up cycles before timing: loads scripts, prepares statements, fills connection pools.
const WARMUP: usize = 200;

async fn fencelock_cycles(client: &Client, span: Duration) -> BoxResult<Samples> {
    // The defaults a user gets: ttl 30 s, watchdog on.
    let opts = LockOptions::default();
    let cycle = || async {
        let lease = client.lock(NAME, &opts).await?;
        lease.release().await?;
        Ok(())
    };
    for _ in 0..WARMUP {
        cycle().await?;
    }
    timed(span, cycle).await
}

pub async fn run(url: &str, raw: &Baseline, span: Duration, targets: &Targets) -> BoxResult<Table> {
    let client = Client::connect(url).await?;
    raw.cycles(Duration::from_millis(200)).await?;
    let base = raw.cycles(span).await?;
    let ours = fencelock_cycles(&client, span).await?;
    client.close().await;

    let mut t = Table::new(format!("1. uncontended acquire+release: 1 client, 1 task, {} s", span.as_secs_f64()));
    let ratio = ours.rate() / base.rate();
    let target = targets.cycle_ratio.map(|bound| Target::at_least(ratio, bound, "ratio"));
    t.row("cycles/s", rate(ours.rate()), rate(base.rate()), Some(ratio), target);
    for (label, p) in [("p50 cycle latency", 50.0), ("p99 cycle latency", 99.0)] {
        let (a, b) = (ours.pct(p), base.pct(p));
        t.row(label, dur(a), dur(b), Some(a.as_secs_f64() / b.as_secs_f64().max(1e-12)), None);
    }
    t.note(format!("raw limit: {}; ratio = fencelock/raw for cycles/s and latencies", raw.cycle_desc()));
    Ok(t)
}
