//! Figure 1: one client, one task, `lock` + `release` back to back on one name, next to the raw two-step cycle.
//! Where the backend serves both wait orders, the free-for-all's cycle is timed in the same alternating slices:
//! the figure that decides which order is the default.

use std::time::Duration;

use fencelock::{Client, LockOptions};

use crate::baseline::Baseline;
use crate::report::{Table, Target, dur, rate};
use crate::stats::{SLICES, Samples, timed};
use crate::{BoxResult, Targets};

const NAME: &str = "bench-uncontended";

/// Warm-up cycles before timing: loads scripts, prepares statements, fills connection pools.
const WARMUP: usize = 200;

/// One `lock` + `release` of `NAME` with the defaults a user gets: ttl 30 s, watchdog on.
async fn cycle(client: &Client, opts: &LockOptions) -> BoxResult<()> {
    client.lock(NAME, opts).await?.release().await?;
    Ok(())
}

/// The warm-up cycles.
pub async fn warm_up(client: &Client) -> BoxResult<()> {
    let opts = LockOptions::default();
    for _ in 0..WARMUP {
        cycle(client, &opts).await?;
    }
    Ok(())
}

/// Cycles back to back for `span`, timed.
pub async fn fencelock_timed(client: &Client, span: Duration) -> BoxResult<Samples> {
    let opts = LockOptions::default();
    timed(span, || cycle(client, &opts)).await
}

pub async fn run(url: &str, raw: &Baseline, span: Duration, targets: &Targets, orders: bool) -> BoxResult<Table> {
    let client = Client::connect(url).await?;
    raw.cycles(Duration::from_millis(200)).await?;
    warm_up(&client).await?;
    let racing_opts = LockOptions::default().fair(false);
    // Alternating slices: load from elsewhere on a shared machine falls on both sides alike.
    let slice = span / SLICES;
    let (mut base, mut ours, mut racing) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..SLICES {
        base.push(raw.cycles(slice).await?);
        ours.push(fencelock_timed(&client, slice).await?);
        if orders {
            racing.push(timed(slice, || cycle(&client, &racing_opts)).await?);
        }
    }
    client.close().await;
    let (base, ours) = (Samples::merge(base), Samples::merge(ours));

    let mut t = Table::new(format!("1. uncontended acquire+release: 1 client, 1 task, {} s", span.as_secs_f64()));
    let ratio = ours.rate() / base.rate();
    let target = targets.cycle_ratio.map(|bound| Target::at_least(ratio, bound, "ratio"));
    t.row("cycles/s", rate(ours.rate()), rate(base.rate()), Some(ratio), target);
    for (label, p) in [("p50 cycle latency", 50.0), ("p99 cycle latency", 99.0)] {
        let (a, b) = (ours.pct(p), base.pct(p));
        t.row(label, dur(a), dur(b), Some(a.as_secs_f64() / b.as_secs_f64().max(1e-12)), None);
    }
    if orders {
        let racing = Samples::merge(racing);
        let (label, a, b) = ("cycles/s, free-for-all (fair=false)", racing.rate(), base.rate());
        t.row(label, rate(a), rate(b), Some(a / b), None);
        let (a, b) = (racing.pct(50.0), base.pct(50.0));
        t.row("p50, free-for-all", dur(a), dur(b), Some(a.as_secs_f64() / b.as_secs_f64().max(1e-12)), None);
        t.note("the rows above the free-for-all's use the default order, the fair queue");
    }
    t.note(format!("raw limit: {}; ratio = fencelock/raw for cycles/s and latencies", raw.cycle_desc()));
    t.note(format!("{SLICES} alternating slices of {} per side", dur(slice)));
    Ok(t)
}
