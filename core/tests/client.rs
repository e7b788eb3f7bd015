//! The public layer on the in-process backend: local queue, reentrancy, cancel safety, watchdog timing (on tokio's
//! paused clock), close.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use fencelock::{Client, ErrorKind, LeaseEnd, LockOptions};
use tokio::time::Instant;

async fn memory_client(store: &str) -> Client {
    Client::connect(&format!("memory://{store}")).await.unwrap()
}

/// Retries `check` until it holds or `bound` passes: for effects that finish in the background.
async fn eventually<F: AsyncFnMut() -> bool>(bound: Duration, mut check: F) -> bool {
    let deadline = Instant::now() + bound;
    while Instant::now() < deadline {
        if check().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    check().await
}

#[tokio::test]
async fn cancelled_waiter_leaves_no_queue_entry() {
    let store = support::unique("cancel");
    let (a, b) = (memory_client(&store).await, memory_client(&store).await);
    let held = a.lock("L", &LockOptions::default()).await.unwrap();
    let waiting = tokio::time::timeout(Duration::from_millis(30), b.lock("L", &LockOptions::default())).await;
    assert!(waiting.is_err(), "the waiter should still be waiting");
    assert_eq!(b.local_entries(), 0, "the dropped waiter left its local queue entry");
    held.release().await.unwrap();
    let next = b.try_lock("L", &LockOptions::default()).await.unwrap().expect("free after release");
    assert!(next.fence() > held.fence());
    next.release().await.unwrap();
    assert_eq!((a.local_entries(), b.local_entries()), (0, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aborted_acquires_never_leak_a_lock() {
    let store = support::unique("abort");
    let (a, checker) = (memory_client(&store).await, memory_client(&store).await);
    for i in 0..200u64 {
        let c = a.clone();
        let task = tokio::spawn(async move { c.lock("L", &LockOptions::default()).await });
        // Abort at varying points: before, during and after the acquire.
        for _ in 0..(i % 7) {
            tokio::task::yield_now().await;
        }
        task.abort();
        if let Ok(Ok(lease)) = task.await {
            lease.release().await.unwrap();
        }
    }
    let free = eventually(Duration::from_secs(2), async || checker.inspect("L").await.unwrap().holder.is_none()).await;
    assert!(free, "an aborted acquire left the lock held");
    assert!(eventually(Duration::from_secs(2), async || a.local_entries() == 0).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contenders_never_overlap_and_tokens_rise() {
    let store = support::unique("contend");
    let inside = Arc::new(AtomicUsize::new(0));
    let tokens = Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for c in 0..3 {
        let client = memory_client(&store).await;
        for w in 0..5 {
            let (client, inside, tokens) = (client.clone(), inside.clone(), tokens.clone());
            tasks.push(tokio::spawn(async move {
                for _ in 0..20 {
                    let opts = LockOptions::default().owner(format!("c{c}w{w}"));
                    let lease = client.lock("L", &opts).await.unwrap();
                    assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0, "two holders at once");
                    tokens.lock().unwrap().push(lease.fence());
                    tokio::task::yield_now().await;
                    inside.fetch_sub(1, Ordering::SeqCst);
                    lease.release().await.unwrap();
                }
            }));
        }
    }
    for t in tasks {
        t.await.unwrap();
    }
    let tokens = tokens.lock().unwrap();
    assert_eq!(tokens.len(), 300);
    assert!(tokens.windows(2).all(|w| w[0] < w[1]), "tokens must rise in acquisition order");
}

#[tokio::test(start_paused = true)]
async fn watchdog_renews_at_a_third_of_the_ttl() {
    let store = support::unique("watchdog");
    let (a, b) = (memory_client(&store).await, memory_client(&store).await);
    let ttl = Duration::from_secs(3);
    let lease = a.lock("L", &LockOptions::default().ttl(ttl)).await.unwrap();
    for _ in 0..30 {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let info = b.inspect("L").await.unwrap();
        assert!(info.holder.is_some(), "the watchdog let the lock expire");
        // Renewed every ttl/3, so the record never has less than about 2/3 of its TTL left.
        assert!(info.remaining.unwrap() >= ttl * 2 / 3 - Duration::from_millis(10), "{:?}", info.remaining);
    }
    assert!(!lease.is_lost() && lease.is_valid());
    lease.release().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn without_watchdog_lost_fires_at_validity_end_not_before() {
    let store = support::unique("expiry");
    let a = memory_client(&store).await;
    let ttl = Duration::from_secs(10);
    let lease = a.lock("L", &LockOptions::default().ttl(ttl).watchdog(false)).await.unwrap();
    // Validity = ttl − drift (1 % + 2 ms): 9.898 s.
    tokio::time::sleep(Duration::from_millis(9_890)).await;
    assert!(!lease.is_lost() && lease.is_valid());
    tokio::time::sleep(Duration::from_millis(20)).await;
    tokio::task::yield_now().await;
    assert!(lease.is_lost(), "lost must fire once validity ends");
    assert!(!lease.is_valid());
    assert_eq!(lease.release().await.unwrap_err().kind(), ErrorKind::LockLost);
}

/// A process resumed after a pause past the TTL learns of the loss at its first check, before its next write: the
/// check itself compares the validity with the clock. Here the pause is a blocked current-thread runtime, so the
/// watchdog's timer cannot run before the check.
#[tokio::test]
async fn a_check_after_a_pause_past_the_ttl_reports_the_loss() {
    let store = support::unique("paused");
    let a = memory_client(&store).await;
    for (watchdog, why) in [(true, "no renewal succeeded"), (false, "the TTL passed")] {
        let opts = LockOptions::default().ttl(Duration::from_millis(200)).watchdog(watchdog);
        let lease = a.lock(&format!("L-{watchdog}"), &opts).await.unwrap();
        std::thread::sleep(Duration::from_millis(300));
        assert!(lease.is_lost(), "watchdog {watchdog}: a check after the validity ended must report the loss");
        assert!(!lease.is_valid());
        let LeaseEnd::Lost(reason) = lease.lost().await else { panic!("watchdog {watchdog}: not a loss") };
        assert!(reason.contains(why), "{reason}");
        assert_eq!(lease.release().await.unwrap_err().kind(), ErrorKind::LockLost);
    }
}

#[tokio::test]
async fn lost_fires_once_and_stops_renewals() {
    let store = support::unique("lost");
    let (a, b) = (memory_client(&store).await, memory_client(&store).await);
    let lease = a.lock("L", &LockOptions::default().ttl(Duration::from_millis(150))).await.unwrap();
    let (first, second) = (lease.lost(), lease.lost());
    assert!(b.force_release("L").await.unwrap());
    let end = tokio::time::timeout(Duration::from_secs(2), first).await.expect("lost fired");
    let LeaseEnd::Lost(reason) = end else { panic!("a loss, not {end:?}") };
    assert_eq!(lease.lost_reason().as_deref(), Some(reason.as_str()));
    assert!(!reason.starts_with("lock "), "the reason is core's, without the lock prefix: {reason}");
    let end = tokio::time::timeout(Duration::from_secs(2), second).await.expect("every waiter sees it");
    assert_eq!(end, LeaseEnd::Lost(reason.clone()));
    // A watcher that starts after the loss sees it at once.
    assert_eq!(lease.lost().await, LeaseEnd::Lost(reason));
    let thief = b.lock("L", &LockOptions::default()).await.unwrap();
    // The stale holder's watchdog stopped: the thief keeps the lock.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!thief.is_lost());
    assert_eq!(lease.renew(None).await.unwrap_err().kind(), ErrorKind::LockLost);
    thief.release().await.unwrap();
}

#[tokio::test]
async fn dropped_lease_is_released_in_the_background() {
    let store = support::unique("drop");
    let (a, b) = (memory_client(&store).await, memory_client(&store).await);
    drop(a.lock("L", &LockOptions::default()).await.unwrap());
    let free = eventually(Duration::from_secs(2), async || b.inspect("L").await.unwrap().holder.is_none()).await;
    assert!(free, "a dropped lease must not keep the lock until its TTL");
    assert!(eventually(Duration::from_secs(1), async || a.local_entries() == 0).await);
}

#[tokio::test]
async fn a_release_cut_short_still_frees_the_name() {
    let store = support::unique("release-cut");
    let (a, b) = (memory_client(&store).await, memory_client(&store).await);
    let lease = a.lock("L", &LockOptions::default().owner("x")).await.unwrap();
    // The caller stops waiting at the release's first await (a deadline, a cancelled RPC): the memory backend has
    // deleted the record by then and yields.
    let mut release = Box::pin(lease.release());
    assert!(futures::poll!(&mut release).is_pending(), "the release must be cut short");
    drop(release);
    let next = tokio::time::timeout(Duration::from_secs(2), a.lock("L", &LockOptions::default().owner("y")))
        .await
        .expect("a release cut short must not keep the name's local gate taken")
        .unwrap();
    assert!(next.fence() > lease.fence());
    assert_eq!(b.inspect("L").await.unwrap().holder.as_deref(), Some(next.holder()));
    assert_eq!(lease.release().await.unwrap_err().kind(), ErrorKind::NotHeld);
    next.release().await.unwrap();
    assert!(eventually(Duration::from_secs(1), async || a.local_entries() == 0).await);
}

#[tokio::test]
async fn lost_resolves_released_once_released() {
    let store = support::unique("ended");
    let a = memory_client(&store).await;
    let lease = a.lock("L", &LockOptions::default()).await.unwrap();
    let watcher = tokio::spawn(lease.lost());
    assert_eq!(lease.lost_reason(), None);
    lease.release().await.unwrap();
    let end = tokio::time::timeout(Duration::from_secs(2), watcher).await.expect("a release ends the signal");
    assert_eq!(end.unwrap(), LeaseEnd::Released);
    assert!(!lease.is_lost() && lease.lost_reason().is_none());

    // A reentrant sibling's release ends only its own signal; a dropped lease and a closed client end theirs.
    let opts = LockOptions::default().owner("job");
    let (outer, inner) = (a.lock("L", &opts).await.unwrap(), a.lock("L", &opts).await.unwrap());
    let outer_end = outer.lost();
    inner.release().await.unwrap();
    assert_eq!(inner.lost().await, LeaseEnd::Released);
    let dropped = a.lock("M", &LockOptions::default()).await.unwrap();
    let dropped_end = dropped.lost();
    drop(dropped);
    assert_eq!(tokio::time::timeout(Duration::from_secs(2), dropped_end).await.unwrap(), LeaseEnd::Released);
    a.close().await;
    assert_eq!(tokio::time::timeout(Duration::from_secs(2), outer_end).await.unwrap(), LeaseEnd::Released);
}

#[tokio::test]
async fn errors_name_the_lock_and_backend_as_fields() {
    let store = support::unique("fields");
    let (a, b) = (memory_client(&store).await, memory_client(&store).await);
    let held = a.lock("L", &LockOptions::default()).await.unwrap();
    let err = b.lock("L", &LockOptions::default().timeout(Duration::from_millis(20))).await.unwrap_err();
    assert_eq!((err.kind(), err.lock(), err.backend()), (ErrorKind::Timeout, Some("L"), Some(a.url())));
    assert!(!err.message().contains("lock \"L\""), "the message does not repeat the lock: {err}");
    assert!(err.to_string().starts_with(&format!("TIMEOUT: lock \"L\" on {}: ", a.url())), "{err}");
    held.release().await.unwrap();
    let err = held.release().await.unwrap_err();
    assert_eq!((err.kind(), err.lock()), (ErrorKind::NotHeld, Some("L")));
}

#[tokio::test]
async fn reentrant_hold_after_loss_is_refused() {
    let store = support::unique("reenter");
    let (a, b) = (memory_client(&store).await, memory_client(&store).await);
    let opts = LockOptions::default().owner("job").ttl(Duration::from_millis(150));
    let outer = a.lock("L", &opts).await.unwrap();
    b.force_release("L").await.unwrap();
    tokio::time::timeout(Duration::from_secs(2), outer.lost()).await.unwrap();
    assert_eq!(a.lock("L", &opts).await.unwrap_err().kind(), ErrorKind::LockLost);
    assert_eq!(outer.release().await.unwrap_err().kind(), ErrorKind::LockLost);
    // Once the lost hold is released, the owner can take the lock afresh.
    let again = a.lock("L", &opts.clone().ttl(Duration::from_secs(5))).await.unwrap();
    assert!(again.fence() > outer.fence());
    again.release().await.unwrap();
}

#[tokio::test]
async fn close_releases_and_refuses_later_calls() {
    let store = support::unique("close");
    let (a, b) = (memory_client(&store).await, memory_client(&store).await);
    let lease = a.lock("L", &LockOptions::default()).await.unwrap();
    a.close().await;
    assert!(b.inspect("L").await.unwrap().holder.is_none(), "close must release held locks");
    assert_eq!(a.lock("M", &LockOptions::default()).await.unwrap_err().kind(), ErrorKind::Closed);
    assert_eq!(lease.renew(None).await.unwrap_err().kind(), ErrorKind::Closed);
    assert_eq!(lease.release().await.unwrap_err().kind(), ErrorKind::Closed);
    assert_eq!(a.fence("R").read().await.unwrap_err().kind(), ErrorKind::Closed);
}

#[tokio::test]
async fn try_lock_on_a_locally_held_name_does_not_wait() {
    let store = support::unique("trylocal");
    let a = memory_client(&store).await;
    let held = a.lock("L", &LockOptions::default().owner("x")).await.unwrap();
    let started = Instant::now();
    assert!(a.try_lock("L", &LockOptions::default().owner("y")).await.unwrap().is_none());
    assert!(started.elapsed() < Duration::from_secs(1));
    held.release().await.unwrap();
}

#[tokio::test]
async fn close_waits_for_background_releases() {
    let store = support::unique("close-wait");
    let (a, b) = (memory_client(&store).await, memory_client(&store).await);
    drop(a.lock("L", &LockOptions::default()).await.unwrap());
    a.close().await;
    // No retry here: once close returns, the dropped lease's background release has run.
    assert!(b.inspect("L").await.unwrap().holder.is_none());
}

#[tokio::test]
async fn a_timeout_too_long_for_the_clock_waits_forever() {
    let store = support::unique("huge-timeout");
    let (a, b) = (memory_client(&store).await, memory_client(&store).await);
    let forever = LockOptions::default().timeout(Duration::MAX);
    let free = a.lock("free", &forever).await.expect("a free name with Duration::MAX as timeout");
    free.release().await.unwrap();

    let held = a.lock("L", &LockOptions::default()).await.unwrap();
    let mut waiter = tokio::spawn(async move {
        let lease = b.lock("L", &forever).await;
        (b, lease)
    });
    let still = tokio::time::timeout(Duration::from_millis(30), &mut waiter).await;
    assert!(still.is_err(), "the waiter should still be waiting, not fail");
    held.release().await.unwrap();
    let (b, lease) = waiter.await.expect("no panic");
    let lease = lease.expect("granted once the holder let go");
    assert!(lease.fence() > held.fence());

    for ttl in [Duration::MAX, Duration::from_secs(u64::MAX / 2)] {
        let err = lease.renew(Some(ttl)).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
        let err = b.lock("M", &LockOptions::default().ttl(ttl)).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    }
    lease.release().await.unwrap();
}
