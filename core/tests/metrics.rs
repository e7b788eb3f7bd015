//! Client metrics move as a scripted workload says they must, on a real Redis and on SQLite: acquires by outcome
//! (a timeout is `timeout`, a dropped call `cancelled`), holds, losses by reason, renewals, refused fenced writes,
//! waiting calls and backend round trips; and lock names never become series unless opted in.

mod support;

use std::collections::BTreeSet;
use std::time::Duration;

use fencelock::metrics::{FamilyKind, MAX_NAMED_SERIES, OTHER_NAMES};
use fencelock::{Client, ClientOptions, ErrorKind, LeaseEnd, LockOptions, MetricsNames, MetricsSnapshot};
use tokio::time::Instant;

/// Polls `cond` on the client's snapshot until it holds, for at most 10 s.
async fn eventually(client: &Client, what: &str, cond: impl Fn(&MetricsSnapshot) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let m = client.metrics();
        if cond(&m) {
            return;
        }
        assert!(Instant::now() < deadline, "{what} never held: {m:#?}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

async fn scripted_workload(url: &str, scheme: &str) {
    let named = ClientOptions::default().metrics_names(MetricsNames::Only(BTreeSet::from(["m-hot".to_string()])));
    let a = Client::connect_with(url, &named).await.unwrap();
    let b = Client::connect(url).await.unwrap();
    let name = support::unique("m");
    let short = LockOptions::default().ttl(Duration::from_secs(5));

    let fresh = a.metrics();
    assert_eq!(fresh.backend, scheme);
    assert!(fresh.enabled);
    assert_eq!((fresh.acquire_wait["acquired"].count, fresh.active_leases), (0, 0));

    // acquired, then busy and timeout on the other client while it is held.
    let lease = a.lock(&name, &short).await.unwrap();
    assert_eq!((a.metrics().acquire_wait["acquired"].count, a.metrics().active_leases), (1, 1));
    assert!(b.try_lock(&name, &short).await.unwrap().is_none());
    let err = b.lock(&name, &short.clone().timeout(Duration::from_millis(150))).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Timeout);
    let m = b.metrics();
    assert_eq!((m.acquire_wait["busy"].count, m.acquire_wait["timeout"].count), (1, 1));
    assert!(m.acquire_wait["timeout"].sum >= 0.15, "{:?}", m.acquire_wait["timeout"]);
    assert_eq!(m.local_queue_depth, 0);

    // A waiting call is in the queue depth; dropping it is `cancelled`.
    let waiter = {
        let (b, name, opts) = (b.clone(), name.clone(), short.clone());
        tokio::spawn(async move { b.lock(&name, &opts).await })
    };
    eventually(&b, "one call waiting", |m| m.local_queue_depth == 1).await;
    waiter.abort();
    eventually(&b, "the aborted call counted as cancelled", |m| {
        m.acquire_wait["cancelled"].count == 1 && m.local_queue_depth == 0
    })
    .await;

    // An explicit renewal, a release: one hold ends.
    lease.renew(None).await.unwrap();
    lease.release().await.unwrap();
    let m = a.metrics();
    assert_eq!((m.renewals["ok"], m.active_leases, m.hold_time.count), (1, 0, 1));
    assert!(m.backend_ops["acquire"]["ok"].count >= 1 && m.backend_ops["release"]["ok"].count == 1, "{m:#?}");
    assert_eq!(m.backend_ops["renew"]["ok"].count, 1);

    // taken: another client force-releases, and the next renewal finds the record gone.
    let lease = a.lock(&name, &short.clone().watchdog(false)).await.unwrap();
    assert!(b.force_release(&name).await.unwrap());
    assert_eq!(lease.renew(None).await.unwrap_err().kind(), ErrorKind::LockLost);
    let m = a.metrics();
    assert_eq!((m.lost["taken"], m.renewals["failed"], m.active_leases), (1, 1, 0));
    let _ = lease.release().await;

    // expired: watchdog off, the TTL passes.
    let lease = a.lock(&name, &LockOptions::default().ttl(Duration::from_millis(200)).watchdog(false)).await.unwrap();
    assert!(matches!(lease.lost().await, LeaseEnd::Lost(_)));
    assert_eq!(a.metrics().lost["expired"], 1);
    let _ = lease.release().await;

    // Fenced writes: the older token is refused and counted.
    let resource = support::unique("m-res");
    let (fence, token) = (a.fence(&resource), lease.fence());
    fence.write(token + 1, b"new").await.unwrap();
    assert_eq!(fence.write(token, b"stale").await.unwrap_err().kind(), ErrorKind::Fenced);
    let m = a.metrics();
    assert_eq!((m.fence_writes["ok"], m.fence_writes["refused"]), (1, 1));
    assert_eq!(m.backend_ops["fence_write"]["ok"].count, 2, "a refusal is the backend's answer");

    // Only the opted-in name has series of its own.
    a.lock("m-hot", &short).await.unwrap().release().await.unwrap();
    let m = a.metrics();
    assert_eq!(m.names.keys().collect::<Vec<_>>(), ["m-hot"]);
    assert_eq!((m.names["m-hot"].acquire_wait["acquired"].count, m.names["m-hot"].hold_time.count), (1, 1));

    // The exposition has every family, with the backend label.
    let text = m.prometheus_text();
    for family in
        ["fencelock_acquire_wait_seconds_bucket", "fencelock_lost_total", "fencelock_backend_op_seconds_count"]
    {
        assert!(text.contains(&format!("{family}{{backend=\"{scheme}\"")), "{family} missing:\n{text}");
    }
    assert!(text.contains(&format!("fencelock_lost_total{{backend=\"{scheme}\",reason=\"taken\"}} 1\n")), "{text}");
    assert!(text.contains("fencelock_lock_hold_seconds_count{backend=") && text.contains("lock=\"m-hot\"} 1\n"));
    a.close().await;
    b.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scripted_workload_moves_the_metrics_on_redis() {
    let Some(url) = support::service_url("FENCELOCK_TEST_REDIS") else { return };
    scripted_workload(&url, "redis").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scripted_workload_moves_the_metrics_on_sqlite() {
    scripted_workload(&support::sqlite_url("fencelock-metrics"), "sqlite").await;
}

/// Series in the exposition: one per sample (a histogram's buckets belong to its one series).
fn series(m: &MetricsSnapshot) -> usize {
    m.families().iter().map(|f| f.samples.len()).sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_lock_names_make_no_series_unless_opted_in() {
    let url = support::sqlite_url("fencelock-metrics");
    let plain = Client::connect(&url).await.unwrap();
    let all = Client::connect_with(&url, &ClientOptions::default().metrics_names(MetricsNames::All)).await.unwrap();
    let before = series(&plain.metrics());
    let opts = LockOptions::default();
    for i in 0..10_000 {
        let name = format!("card-{i}");
        for c in [&plain, &all] {
            c.try_lock(&name, &opts).await.unwrap().expect("free").release().await.unwrap();
        }
    }
    let m = plain.metrics();
    assert_eq!(m.acquire_wait["acquired"].count, 10_000);
    assert!(m.names.is_empty());
    assert_eq!(series(&m), before, "no series per name without opting in");
    let m = all.metrics();
    assert_eq!(m.names.len(), MAX_NAMED_SERIES + 1, "opted in, the names stop at the cap plus {OTHER_NAMES}");
    assert_eq!(m.names[OTHER_NAMES].acquire_wait["acquired"].count, 10_000 - MAX_NAMED_SERIES as u64);
    let lock_families = m.families().into_iter().filter(|f| f.name.starts_with("fencelock_lock_")).count();
    assert_eq!(lock_families, 5);
    assert!(m.families().iter().all(|f| f.kind != FamilyKind::Counter || f.name.ends_with("_total")));
}

#[tokio::test]
async fn metrics_off_keeps_nothing() {
    let client =
        Client::connect_with(&support::sqlite_url("fencelock-metrics"), &ClientOptions::default().metrics(false))
            .await
            .unwrap();
    client.lock("off", &LockOptions::default()).await.unwrap().release().await.unwrap();
    let m = client.metrics();
    assert!(!m.enabled);
    assert_eq!((m.acquire_wait["acquired"].count, m.hold_time.count), (0, 0));
    assert!(m.backend_ops.values().flat_map(|o| o.values()).all(|h| h.count == 0));
}
