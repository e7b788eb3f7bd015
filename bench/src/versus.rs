//! Figure 1b, Redlock only: Redlock's uncontended acquire+release next to one Redis measured in the same run. The one
//! Redis is the set's first instance (`redis://` on it), so the servers compared are the same build with the same
//! settings; the phases alternate in slices so that load from elsewhere on a shared machine falls on both sides.
//! The figure is taken twice in one run: on loopback, where it measures CPU, and with every instance behind a relay
//! that holds each reply for [`PROXY_DELAY`], where it measures round trips.

use std::time::Duration;

use fencelock::Client;

use crate::baseline::{RedisRaw, RedlockRaw, instance_urls};
use crate::report::{Table, Target, dur, rate};
use crate::stats::{SLICES, Samples};
use crate::uncontended::{fencelock_timed, warm_up};
use crate::{BoxResult, latency_proxy};

/// Redlock's acquire+release p50 over one Redis's, at most.
const LATENCY_RATIO: f64 = 1.5;

/// The reply latency of the second measurement.
const PROXY_DELAY: Duration = Duration::from_millis(5);

/// Figure 1b on loopback, then behind the latency relay.
pub async fn run(redlock_url: &str, span: Duration) -> BoxResult<Vec<Table>> {
    let loopback = compare(redlock_url, span, "loopback").await?;
    let behind = compare(&proxied(redlock_url).await?, span, &format!("{} reply latency", dur(PROXY_DELAY))).await?;
    Ok(vec![loopback, behind])
}

/// `redlock_url` with every instance behind a latency relay of its own.
async fn proxied(redlock_url: &str) -> BoxResult<String> {
    let (head, rest) = redlock_url.split_once("://").ok_or("expected redlock://h1,h2,h3")?;
    let (rest, query) = rest.split_once('?').map_or((rest, None), |(r, q)| (r, Some(q)));
    let (rest, db) = rest.split_once('/').map_or((rest, None), |(r, db)| (r, Some(db)));
    let auth = rest.rsplit_once('@').map(|(a, _)| a);
    let mut hosts = Vec::new();
    for url in instance_urls(redlock_url)? {
        let rest = url.trim_start_matches("redis://");
        let rest = rest.rsplit_once('@').map_or(rest, |(_, h)| h);
        let host_port = rest.split_once('/').map_or(rest, |(h, _)| h);
        hosts.push(format!("127.0.0.1:{}", latency_proxy::start(host_port.to_string(), PROXY_DELAY).await?));
    }
    let auth = auth.map(|a| format!("{a}@")).unwrap_or_default();
    let db = db.map(|d| format!("/{d}")).unwrap_or_default();
    let query = query.map(|q| format!("?{q}")).unwrap_or_default();
    Ok(format!("{head}://{auth}{}{db}{query}", hosts.join(",")))
}

async fn compare(redlock_url: &str, span: Duration, network: &str) -> BoxResult<Table> {
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
            "1b. Redlock ({n} instances) next to one Redis, uncontended acquire+release, {network}, {} s each",
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
