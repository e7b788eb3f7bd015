//! Figure 1c, Redis and memory: figure 1's cycle with metrics on (the default) next to the same cycle on a client
//! with `ClientOptions::metrics(false)`, in the same run. The target, on Redis: recording costs at most 2 % of
//! cycles/s.

use std::time::Duration;

use fencelock::{Client, ClientOptions};

use crate::BoxResult;
use crate::report::{Table, Target, dur, rate};
use crate::stats::Samples;
use crate::uncontended::{fencelock_timed, warm_up};

/// Metrics-on cycles/s over metrics-off cycles/s on Redis, at least (a cost of at most 2 %).
pub const REDIS_RATIO: f64 = 0.98;

/// Slices per side. More than the other figures' four: a 2 % difference drowns in a busy machine's drift otherwise.
const SLICES: u32 = 10;

/// Runs the figure on `url`; `target` is the least on/off ratio that passes (none on the memory reference, where the
/// figure shows the cost per cycle without a network round trip to hide it).
pub async fn run(label: &str, url: &str, span: Duration, target: Option<f64>) -> BoxResult<Table> {
    let on = Client::connect(url).await?;
    let off = Client::connect_with(url, &ClientOptions::default().metrics(false)).await?;
    warm_up(&on).await?;
    warm_up(&off).await?;

    // Alternating slices, the order flipped every pair (on, off, off, on, …) so a trend in the load favours neither.
    let slice = span / SLICES;
    let (mut with, mut without) = (Vec::new(), Vec::new());
    for i in 0..SLICES {
        if i % 2 == 0 {
            with.push(fencelock_timed(&on, slice).await?);
            without.push(fencelock_timed(&off, slice).await?);
        } else {
            without.push(fencelock_timed(&off, slice).await?);
            with.push(fencelock_timed(&on, slice).await?);
        }
    }
    let recorded = on.metrics().acquire_wait.get("acquired").map_or(0, |h| h.count);
    let unrecorded = off.metrics().acquire_wait.get("acquired").map_or(0, |h| h.count);
    on.close().await;
    off.close().await;
    // The median of the slice pairs' ratios: a stall from another process lands in one slice and moves it little.
    let mut pairs: Vec<f64> = with.iter().zip(&without).map(|(a, b)| a.rate() / b.rate().max(1e-9)).collect();
    pairs.sort_by(f64::total_cmp);
    let median_pair = (pairs[pairs.len() / 2] + pairs[(pairs.len() - 1) / 2]) / 2.0;
    let (with, without) = (Samples::merge(with), Samples::merge(without));

    let mut t = Table::with_columns(
        format!("1c. metrics cost, uncontended acquire+release on {label}, {} s per side", span.as_secs_f64()),
        "metrics on",
        "metrics off",
    );
    let ratio = with.rate() / without.rate();
    let target_row = target.map(|bound| Target::at_least(ratio, bound, "ratio"));
    t.row("cycles/s", rate(with.rate()), rate(without.rate()), Some(ratio), target_row);
    t.plain("median of the slice pairs' ratios", format!("{median_pair:.3}"), None);
    for (label, p) in [("p50 cycle latency", 50.0), ("p99 cycle latency", 99.0)] {
        let (a, b) = (with.pct(p), without.pct(p));
        t.row(label, dur(a), dur(b), Some(a.as_secs_f64() / b.as_secs_f64().max(1e-12)), None);
    }
    let per_cycle_ns = (1.0 / with.rate() - 1.0 / without.rate()) * 1e9;
    t.note(format!(
        "cost = {:.2} % of cycles/s, {per_cycle_ns:.0} ns per cycle; ratio = on/off",
        (1.0 - ratio) * 100.0
    ));
    t.note(format!("{SLICES} alternating slices of {} per side (on, off, off, on, …)", dur(slice)));
    // A figure that compared two clients that both (or neither) recorded would be meaningless: show it did not.
    t.note(format!("acquires recorded: {recorded} with metrics on, {unrecorded} with metrics off"));
    Ok(t)
}
