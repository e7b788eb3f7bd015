//! Figure 1b, Redlock only: Redlock's uncontended acquire+release next to one Redis measured in the same run. The one
//! Redis is the set's first instance (`redis://` on it), so the servers compared are the same build with the same
//! settings; the phases alternate in slices so that load from elsewhere on a shared machine falls on both sides.

use std::time::Duration;

use fencelock::Client;

use crate::BoxResult;
use crate::baseline::{RedisRaw, RedlockRaw, instance_urls};
use crate::report::{Table, Target, dur, rate};
use crate::stats::{SLICES, Samples};
use crate::uncontended::{fencelock_timed, warm_up};

/// Redlock's acquire+release p50 over one Redis's, at most.
const LATENCY_RATIO: f64 = 1.5;

pub async fn run(redlock_url: &str, span: Duration) -> BoxResult<Table> {
    let urls = instance_urls(redlock_url)?;
    let single_url = urls.first().ok_or("a Redlock URL without instances")?;
    let (redlock, single) = (Client::connect(redlock_url).await?, Client::connect(single_url).await?);
    let (raw_redlock, raw_single) = (RedlockRaw::connect(redlock_url).await?, RedisRaw::connect(single_url).await?);
    warm_up(&redlock).await?;
    warm_up(&single).await?;
    raw_redlock.cycles(Duration::from_millis(100)).await?;
    raw_single.cycles(Duration::from_millis(100)).await?;

    let slice = span / SLICES;
    let (mut ours, mut theirs, mut raw_ours, mut raw_theirs) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..SLICES {
        theirs.push(fencelock_timed(&single, slice).await?);
        ours.push(fencelock_timed(&redlock, slice).await?);
        raw_theirs.push(raw_single.cycles(slice).await?);
        raw_ours.push(raw_redlock.cycles(slice).await?);
    }
    redlock.close().await;
    single.close().await;
    let (ours, theirs) = (Samples::merge(ours), Samples::merge(theirs));
    let (raw_ours, raw_theirs) = (Samples::merge(raw_ours), Samples::merge(raw_theirs));

    let n = urls.len();
    let mut t = Table::with_columns(
        format!(
            "1b. Redlock ({n} instances) next to one Redis, uncontended acquire+release, {} s each",
            span.as_secs_f64()
        ),
        &format!("redlock ({n})"),
        "1 Redis",
    );
    let ratio = |a: Duration, b: Duration| a.as_secs_f64() / b.as_secs_f64().max(1e-12);
    let (a, b) = (ours.pct(50.0), theirs.pct(50.0));
    let target = Target::at_most(ratio(a, b), LATENCY_RATIO, "ratio");
    t.row("fencelock p50 cycle latency", dur(a), dur(b), Some(ratio(a, b)), Some(target));
    let (a, b) = (ours.pct(99.0), theirs.pct(99.0));
    t.row("fencelock p99 cycle latency", dur(a), dur(b), Some(ratio(a, b)), None);
    t.row("fencelock cycles/s", rate(ours.rate()), rate(theirs.rate()), Some(ours.rate() / theirs.rate()), None);
    let (a, b) = (raw_ours.pct(50.0), raw_theirs.pct(50.0));
    t.row("raw p50 cycle latency", dur(a), dur(b), Some(ratio(a, b)), None);
    t.note(format!(
        "1 Redis = fencelock on redis:// to the first instance; {SLICES} alternating slices of {} per side",
        dur(slice)
    ));
    t.note("raw = the raw Redis cycle on that instance vs the same cycle on every instance in parallel");
    Ok(t)
}
