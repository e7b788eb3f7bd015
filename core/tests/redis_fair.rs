//! The fair, wake-one waiter queue on a real redis-server (and Redis Cluster): Redisson RFairLock's keys, strict
//! arrival order across clients, one wake-up per release, server-clock pruning of dead waiters, cancel safety, the
//! per-lock and per-URL choice, and exclusion with the free-for-all on the same name.

mod support;

use std::time::Duration;

use fencelock::{Client, ErrorKind, LockOptions};
use futures::StreamExt;
use redis::AsyncCommands;
use redis::aio::ConnectionLike;
use tokio::time::Instant;

const BOUND: Duration = Duration::from_secs(10);

async fn setup() -> Option<(String, redis::aio::MultiplexedConnection)> {
    let url = support::service_url("FENCELOCK_TEST_REDIS")?;
    let raw = redis::Client::open(url.as_str()).unwrap().get_multiplexed_async_connection().await.unwrap();
    Some((url, raw))
}

/// Redisson's `prefixName`: braces are added only to a name that has none.
fn prefixed(prefix: &str, name: &str) -> String {
    if name.contains('{') { format!("{prefix}:{name}") } else { format!("{prefix}:{{{name}}}") }
}

fn queue(name: &str) -> String {
    prefixed("redisson_lock_queue", name)
}

fn deadlines(name: &str) -> String {
    prefixed("redisson_lock_timeout", name)
}

/// fencelock's own waiter deadlines (Redisson's timeouts follow its own scheme).
fn own_deadlines(name: &str) -> String {
    prefixed("fencelock_queue_deadline", name)
}

fn channel(name: &str) -> String {
    prefixed("redisson_lock__channel", name)
}

/// Waits (bounded) until `name`'s queue holds `n` entries, and returns them.
async fn queued(raw: &mut impl ConnectionLike, name: &str, n: usize) -> Vec<String> {
    let deadline = Instant::now() + BOUND;
    loop {
        let entries: Vec<String> = redis::cmd("LRANGE").arg(queue(name)).arg(0).arg(-1).query_async(raw).await.unwrap();
        if entries.len() == n {
            return entries;
        }
        assert!(Instant::now() < deadline, "queue of {name} never held {n}: {entries:?}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

async fn tidy(raw: &mut impl ConnectionLike, name: &str) {
    let _: () = redis::cmd("DEL")
        .arg(name)
        .arg(queue(name))
        .arg(deadlines(name))
        .arg(own_deadlines(name))
        .arg(prefixed("redisson_lock_token", name))
        .query_async(raw)
        .await
        .unwrap();
}

/// Starts `lock(name)` on `client` as `owner`; the task reports the order of its grant through `order`.
fn contend(
    client: &Client,
    name: &str,
    owner: &str,
    order: tokio::sync::mpsc::UnboundedSender<String>,
) -> tokio::task::JoinHandle<()> {
    let (client, name, owner) = (client.clone(), name.to_string(), owner.to_string());
    tokio::spawn(async move {
        let opts = LockOptions::default().owner(owner.clone()).timeout(BOUND);
        let lease = client.lock(&name, &opts).await.unwrap();
        order.send(owner).unwrap();
        lease.release().await.unwrap();
    })
}

/// Waiters of different clients, queued one after another behind a holder, are granted in that order, and each
/// waits on its own Redisson RFairLock channel.
async fn fifo_across_clients(url: &str, raw: &mut impl ConnectionLike, name: &str) {
    let holder = Client::connect(url).await.unwrap();
    let lease = holder.lock(name, &LockOptions::default()).await.unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let mut clients = Vec::new();
    let mut tasks = Vec::new();
    for i in 0..4 {
        let c = Client::connect(url).await.unwrap();
        tasks.push(contend(&c, name, &format!("w{i}"), tx.clone()));
        let entries = queued(raw, name, i + 1).await;
        assert_eq!(entries[i], format!("{}:w{i}", c.id()));
        clients.push(c);
    }
    let scores: Vec<(String, f64)> =
        redis::cmd("ZRANGE").arg(deadlines(name)).arg(0).arg(-1).arg("WITHSCORES").query_async(raw).await.unwrap();
    assert_eq!(scores.len(), 4, "one Redisson timeout per waiter: {scores:?}");
    let ours: u64 = redis::cmd("ZCARD").arg(own_deadlines(name)).query_async(raw).await.unwrap();
    assert_eq!(ours, 4, "one deadline per waiter");
    lease.release().await.unwrap();
    let mut order = Vec::new();
    for _ in 0..4 {
        order.push(tokio::time::timeout(BOUND, rx.recv()).await.unwrap().unwrap());
    }
    assert_eq!(order, ["w0", "w1", "w2", "w3"]);
    for t in tasks {
        t.await.unwrap();
    }
    assert!(queued(raw, name, 0).await.is_empty());
}

#[tokio::test]
async fn waiters_of_different_clients_are_served_in_arrival_order() {
    let Some((url, mut raw)) = setup().await else { return };
    let name = support::unique("fair-fifo");
    let client = Client::connect(&url).await.unwrap();
    assert!(client.capability().fair, "fair is the default on redis://");
    fifo_across_clients(&url, &mut raw, &name).await;
    tidy(&mut raw, &name).await;
}

#[tokio::test]
async fn the_queue_works_on_a_cluster() {
    let Some(url) = support::service_url("FENCELOCK_TEST_REDIS_CLUSTER") else { return };
    let nodes: Vec<String> =
        url.trim_start_matches("redis+cluster://").split(',').map(|h| format!("redis://{h}")).collect();
    let mut raw = redis::cluster::ClusterClient::new(nodes).unwrap().get_async_connection().await.unwrap();
    for name in [support::unique("fair-cluster"), format!("{{{}}}:x", support::unique("fair-tag"))] {
        fifo_across_clients(&url, &mut raw, &name).await;
        tidy(&mut raw, &name).await;
    }
}

#[tokio::test]
async fn a_release_wakes_only_the_head() {
    let Some((url, mut raw)) = setup().await else { return };
    let name = support::unique("fair-wake");
    let mut watch = redis::Client::open(url.as_str()).unwrap().get_async_pubsub().await.unwrap();
    watch.psubscribe(format!("{}*", channel(&name))).await.unwrap();
    let holder = Client::connect(&url).await.unwrap();
    let lease = holder.lock(&name, &LockOptions::default()).await.unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let mut waiters = Vec::new();
    for i in 0..3 {
        let c = Client::connect(&url).await.unwrap();
        // The head keeps the lock, so the two behind it must not be woken at all.
        let (c2, name2, tx) = (c.clone(), name.clone(), tx.clone());
        tokio::spawn(async move {
            let lease = c2.lock(&name2, &LockOptions::default().owner(format!("w{i}")).timeout(BOUND)).await;
            tx.send((i, lease)).unwrap();
        });
        queued(&mut raw, &name, i + 1).await;
        waiters.push(c);
    }
    lease.release().await.unwrap();
    let (first, granted) = tokio::time::timeout(BOUND, rx.recv()).await.unwrap().unwrap();
    assert_eq!(first, 0);
    let _kept = granted.unwrap();
    // Every message published before this marker reaches the watcher before it.
    let marker = format!("{}:marker", channel(&name));
    let _: () = raw.publish(&marker, "end").await.unwrap();
    let mut heard = Vec::new();
    let mut messages = watch.on_message();
    loop {
        let msg = tokio::time::timeout(BOUND, messages.next()).await.unwrap().unwrap();
        if msg.get_channel_name() == marker {
            break;
        }
        heard.push(msg.get_channel_name().to_string());
    }
    assert_eq!(heard, [format!("{}:{}:w0", channel(&name), waiters[0].id())], "one message, to the head");
    assert!(rx.try_recv().is_err(), "the others still wait");
    drop(messages);
    for c in &waiters {
        c.close().await;
    }
    tidy(&mut raw, &name).await;
}

#[tokio::test]
async fn a_dead_waiter_blocks_the_queue_only_until_its_server_clock_deadline() {
    let Some((url, mut raw)) = setup().await else { return };
    let name = support::unique("fair-dead");
    let holder = Client::connect(&url).await.unwrap();
    let lease = holder.lock(&name, &LockOptions::default()).await.unwrap();
    // A crashed client's entry, as a Redisson RFairLock leaves it: queued first, deadline 1.5 s on the server clock.
    let (secs, micros): (u64, u64) = redis::cmd("TIME").query_async(&mut raw).await.unwrap();
    let due = secs * 1000 + micros / 1000 + 1500;
    let enqueued = Instant::now();
    let _: () = raw.rpush(queue(&name), "dead-client:1").await.unwrap();
    let _: () = raw.zadd(deadlines(&name), "dead-client:1", due).await.unwrap();
    let waiter = Client::connect(&url).await.unwrap();
    let task = {
        let (waiter, name) = (waiter.clone(), name.clone());
        tokio::spawn(async move {
            let lease = waiter.lock(&name, &LockOptions::default().timeout(BOUND)).await.unwrap();
            (Instant::now(), lease)
        })
    };
    queued(&mut raw, &name, 2).await;
    // The release wakes the dead head only; the live waiter takes its turn once the dead one's deadline passes.
    lease.release().await.unwrap();
    let (at, lease) = task.await.unwrap();
    let waited = at - enqueued;
    assert!(waited >= Duration::from_millis(1400), "the dead waiter was skipped early: {waited:?}");
    assert!(waited < Duration::from_secs(5), "the dead waiter blocked past its deadline: {waited:?}");
    let entries: Vec<String> = raw.lrange(queue(&name), 0, -1).await.unwrap();
    assert!(entries.is_empty(), "{entries:?}");
    lease.release().await.unwrap();
    tidy(&mut raw, &name).await;
}

#[tokio::test]
async fn an_entry_left_by_this_client_s_ended_call_does_not_hold_up_its_next_call() {
    let Some((url, mut raw)) = setup().await else { return };
    let name = support::unique("fair-own");
    let client = Client::connect(&url).await.unwrap();
    // What a timed-out lock of another owner leaves while its leave is on the way: our client's entry, at the head,
    // alive for a minute. Only one call per client and name reaches the server, so it cannot be a live call.
    let (secs, _): (u64, u64) = redis::cmd("TIME").query_async(&mut raw).await.unwrap();
    let ghost = format!("{}:ended-call", client.id());
    let _: () = raw.rpush(queue(&name), &ghost).await.unwrap();
    let _: () = raw.zadd(own_deadlines(&name), &ghost, (secs + 60) * 1000).await.unwrap();
    let lease =
        client.try_lock(&name, &LockOptions::default()).await.unwrap().expect("our ended call's entry held us up");
    let entries: Vec<String> = raw.lrange(queue(&name), 0, -1).await.unwrap();
    assert!(entries.is_empty(), "{entries:?}");
    lease.release().await.unwrap();
    // Another client's entry is a live waiter: it stays ahead.
    let _: () = raw.rpush(queue(&name), "other-client:1").await.unwrap();
    let _: () = raw.zadd(own_deadlines(&name), "other-client:1", (secs + 60) * 1000).await.unwrap();
    assert!(client.try_lock(&name, &LockOptions::default()).await.unwrap().is_none(), "jumped a live waiter");
    tidy(&mut raw, &name).await;
}

#[tokio::test]
async fn a_live_waiter_refreshes_its_deadline_and_keeps_its_place() {
    let Some((url, mut raw)) = setup().await else { return };
    let name = support::unique("fair-refresh");
    let holder = Client::connect(&url).await.unwrap();
    let lease = holder.lock(&name, &LockOptions::default()).await.unwrap();
    let waiter = Client::connect(&url).await.unwrap();
    let task = {
        let (waiter, name) = (waiter.clone(), name.clone());
        tokio::spawn(async move {
            let opts = LockOptions::default().ttl(Duration::from_millis(1500)).timeout(BOUND);
            waiter.lock(&name, &opts).await.unwrap()
        })
    };
    let me = queued(&mut raw, &name, 1).await.remove(0);
    let first: f64 = raw.zscore(own_deadlines(&name), &me).await.unwrap();
    // Past its first deadline, it is still queued, under a later one.
    let deadline = Instant::now() + BOUND;
    loop {
        let now: f64 = raw.zscore(own_deadlines(&name), &me).await.unwrap();
        if now > first + 1500.0 {
            break;
        }
        assert!(Instant::now() < deadline, "the deadline was never refreshed past {first}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(queued(&mut raw, &name, 1).await, [me]);
    lease.release().await.unwrap();
    task.await.unwrap().release().await.unwrap();
    tidy(&mut raw, &name).await;
}

#[tokio::test]
async fn a_redisson_acquire_s_timeout_decrement_does_not_drop_our_waiter() {
    let Some((url, mut raw)) = setup().await else { return };
    let name = support::unique("fair-decrement");
    let holder = Client::connect(&url).await.unwrap();
    let lease = holder.lock(&name, &LockOptions::default()).await.unwrap();
    let waiter = Client::connect(&url).await.unwrap();
    let task = {
        let (waiter, name) = (waiter.clone(), name.clone());
        tokio::spawn(async move { waiter.lock(&name, &LockOptions::default().timeout(BOUND)).await.unwrap() })
    };
    let me = queued(&mut raw, &name, 1).await.remove(0);
    // What an RFairLock acquire does to every waiter's timeout (its threadWaitTime, 5 min by default), then the
    // stale-waiter pruning its next script runs, on its clock.
    let _: () = raw.zincr(deadlines(&name), &me, -300_000).await.unwrap();
    let score: f64 = raw.zscore(deadlines(&name), &me).await.unwrap();
    let (secs, _): (u64, u64) = redis::cmd("TIME").query_async(&mut raw).await.unwrap();
    assert!(score > (secs * 1000) as f64, "a Redisson client would prune our live waiter now");
    let released = Instant::now();
    lease.release().await.unwrap();
    task.await.unwrap().release().await.unwrap();
    assert!(released.elapsed() < Duration::from_secs(3), "woken as the head");
    tidy(&mut raw, &name).await;
}

#[tokio::test]
async fn a_cancelled_or_timed_out_acquire_leaves_no_queue_entry() {
    let Some((url, mut raw)) = setup().await else { return };
    let name = support::unique("fair-cancel");
    let holder = Client::connect(&url).await.unwrap();
    let lease = holder.lock(&name, &LockOptions::default()).await.unwrap();
    let other = Client::connect(&url).await.unwrap();
    // A try_lock never queues.
    assert!(other.try_lock(&name, &LockOptions::default()).await.unwrap().is_none());
    assert!(queued(&mut raw, &name, 0).await.is_empty());
    // Timed out.
    let err = other.lock(&name, &LockOptions::default().timeout(Duration::from_millis(300))).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Timeout);
    // Dropped mid-wait, once it is queued.
    let dropped = {
        let (other, name) = (other.clone(), name.clone());
        tokio::spawn(async move { other.lock(&name, &LockOptions::default()).await })
    };
    queued(&mut raw, &name, 1).await;
    dropped.abort();
    let _ = dropped.await;
    // The undo runs before close returns; a try_lock meanwhile is not held up by it.
    assert!(other.try_lock(&name, &LockOptions::default()).await.unwrap().is_none());
    other.close().await;
    assert!(queued(&mut raw, &name, 0).await.is_empty());
    for key in [deadlines(&name), own_deadlines(&name)] {
        let zcard: u64 = raw.zcard(&key).await.unwrap();
        assert_eq!(zcard, 0, "{key}");
    }
    // The holder is untouched.
    lease.release().await.unwrap();
    tidy(&mut raw, &name).await;
}

#[tokio::test]
async fn a_waiter_that_leaves_as_head_passes_the_wake_up_on() {
    let Some((url, mut raw)) = setup().await else { return };
    let name = support::unique("fair-leave");
    let holder = Client::connect(&url).await.unwrap();
    let lease = holder.lock(&name, &LockOptions::default()).await.unwrap();
    let (first, second) = (Client::connect(&url).await.unwrap(), Client::connect(&url).await.unwrap());
    let head = {
        let (first, name) = (first.clone(), name.clone());
        tokio::spawn(async move { first.lock(&name, &LockOptions::default()).await })
    };
    queued(&mut raw, &name, 1).await;
    let next = {
        let (second, name) = (second.clone(), name.clone());
        tokio::spawn(async move {
            let lease = second.lock(&name, &LockOptions::default().timeout(BOUND)).await.unwrap();
            (Instant::now(), lease)
        })
    };
    queued(&mut raw, &name, 2).await;
    // Free the lock while the head is gone from its wait: its leaving must wake the next one, not leave it to its
    // 10 s refresh bound.
    head.abort();
    let _ = head.await;
    let released = Instant::now();
    lease.release().await.unwrap();
    first.close().await;
    let (at, lease) = next.await.unwrap();
    assert!(at - released < Duration::from_secs(3), "the hand-off took {:?}", at - released);
    lease.release().await.unwrap();
    tidy(&mut raw, &name).await;
}

#[tokio::test]
async fn the_order_is_chosen_per_url_and_per_lock_and_both_exclude_each_other() {
    let Some((url, mut raw)) = setup().await else { return };
    let name = support::unique("fair-mixed");
    let racing = Client::connect(&format!("{url}?fair=false")).await.unwrap();
    assert!(!racing.capability().fair);
    let fair = Client::connect(&format!("{url}?fair=true")).await.unwrap();
    assert!(fair.capability().fair);

    // A free-for-all holder excludes a fair waiter, whose wait its release (on the shared channel) ends.
    let lease = racing.lock(&name, &LockOptions::default()).await.unwrap();
    assert!(fair.try_lock(&name, &LockOptions::default()).await.unwrap().is_none());
    let waiter = {
        let (fair, name) = (fair.clone(), name.clone());
        tokio::spawn(async move { fair.lock(&name, &LockOptions::default().timeout(BOUND)).await.unwrap() })
    };
    queued(&mut raw, &name, 1).await;
    let released = Instant::now();
    lease.release().await.unwrap();
    let lease = waiter.await.unwrap();
    assert!(released.elapsed() < Duration::from_secs(3), "woken by the message, not the 30 s bound");

    // A fair holder excludes a free-for-all waiter, and with nobody queued its release wakes the shared channel.
    assert!(racing.try_lock(&name, &LockOptions::default()).await.unwrap().is_none());
    let waiter = {
        let (racing, name) = (racing.clone(), name.clone());
        tokio::spawn(async move { racing.lock(&name, &LockOptions::default().timeout(BOUND)).await.unwrap() })
    };
    let deadline = Instant::now() + BOUND;
    while racing.inspect(&name).await.unwrap().waiters != Some(1) {
        assert!(Instant::now() < deadline, "the free-for-all waiter never subscribed");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(queued(&mut raw, &name, 0).await.is_empty(), "a free-for-all waiter does not queue");
    let released = Instant::now();
    lease.release().await.unwrap();
    let lease = waiter.await.unwrap();
    assert!(released.elapsed() < Duration::from_secs(3));

    // Per lock: a fair call on a free-for-all client queues.
    let other = Client::connect(&format!("{url}?fair=false")).await.unwrap();
    let waiter = {
        let (other, name) = (other.clone(), name.clone());
        tokio::spawn(async move {
            other.lock(&name, &LockOptions::default().fair(true).owner("q").timeout(BOUND)).await.unwrap()
        })
    };
    assert_eq!(queued(&mut raw, &name, 1).await, [format!("{}:q", other.id())]);
    lease.release().await.unwrap();
    waiter.await.unwrap().release().await.unwrap();
    tidy(&mut raw, &name).await;
}

#[tokio::test]
async fn a_bad_fair_parameter_is_refused_by_name() {
    let Some((url, _raw)) = setup().await else { return };
    let err = Client::connect(&format!("{url}?fair=sometimes")).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert!(err.message().contains("fair=\"sometimes\""), "{err}");
}

#[tokio::test]
async fn asking_for_arrival_order_where_waiters_race_is_unsupported() {
    let client = Client::connect(&format!("memory://{}", support::unique("fair-memory"))).await.unwrap();
    assert!(!client.capability().fair);
    let err = client.lock("x", &LockOptions::default().fair(true)).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unsupported);
    assert!(err.message().contains("arrival order"), "{err}");
    assert!(client.inspect("x").await.unwrap().holder.is_none(), "no lock left behind");
    // A free-for-all is what this backend does anyway.
    client.lock("x", &LockOptions::default().fair(false)).await.unwrap().release().await.unwrap();
}
