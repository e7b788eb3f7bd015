//! `redis+sentinel://` against the topology scripts/services.sh starts (a master, two replicas, three sentinels,
//! and a TLS copy): discovery, following failovers, replica-synced grants, and what a failover does to a lock with
//! and without WAIT. Tests that fail the master over run one at a time and put the topology back.

mod support;

use std::time::Duration;

use fencelock::{Client, ErrorKind, LockOptions};
use redis::AsyncCommands;
use support::sentinel::{ONE_AT_A_TIME, Topology};
use tokio::time::Instant;

fn opts() -> LockOptions {
    LockOptions::default().ttl(Duration::from_secs(30))
}

#[tokio::test]
async fn locks_fences_and_wakes_through_the_sentinels() {
    let Some(topo) = Topology::from_env() else { return };
    let _one = ONE_AT_A_TIME.lock().await;
    topo.wait_healthy().await;
    let name = support::unique("sentinel");
    let a = Client::connect(&topo.url).await.unwrap();
    let b = Client::connect(&topo.url).await.unwrap();
    let lease = a.lock(&name, &opts()).await.unwrap();
    // The Redisson layout on the master.
    let mut master = topo.node(topo.master_port().await).await;
    let holders: Vec<String> = master.hkeys(&name).await.unwrap();
    assert_eq!(holders.len(), 1);
    assert!(b.try_lock(&name, &opts()).await.unwrap().is_none());
    let waiter = {
        let (b, name) = (b.clone(), name.clone());
        tokio::spawn(async move { b.lock(&name, &opts().timeout(Duration::from_secs(20))).await })
    };
    support::sentinel::wait_subscribed(&mut master, &name).await;
    let released = Instant::now();
    lease.release().await.unwrap();
    let next = waiter.await.unwrap().unwrap();
    assert!(released.elapsed() < Duration::from_secs(2), "woken after {:?}", released.elapsed());
    assert!(next.fence() > lease.fence());
    b.fence(&name).write(next.fence(), b"b").await.unwrap();
    let err = a.fence(&name).write(lease.fence(), b"a").await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Fenced, "{err}");
    next.release().await.unwrap();
}

#[tokio::test]
async fn grants_wait_for_a_majority_of_replicas_by_default() {
    let Some(topo) = Topology::from_env() else { return };
    let _one = ONE_AT_A_TIME.lock().await;
    topo.wait_healthy().await;
    let name = support::unique("majority");
    // Two replicas: master and one replica make a majority of the data nodes, so one must confirm.
    let client = Client::connect(&topo.url_with("wait_timeout_ms=200")).await.unwrap();
    client.lock(&name, &opts()).await.unwrap().release().await.unwrap();
    let master = topo.master_port().await;
    topo.cut_replication(master).await;
    let err = client.try_lock(&name, &opts()).await.unwrap_err();
    topo.mend_replication(master).await;
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    assert!(err.message().contains("only 0 of 1 replicas confirmed"), "the default is 1 of 2: {err}");
    // More replicas than there are: the grant is released, and says why.
    let client = Client::connect(&topo.url_with("wait_replicas=3&wait_timeout_ms=200")).await.unwrap();
    let err = client.try_lock(&name, &opts()).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    assert!(err.message().contains("only 2 of 3 replicas confirmed"), "{err}");
    let mut master = topo.node(topo.master_port().await).await;
    let exists: bool = master.exists(&name).await.unwrap();
    assert!(!exists, "an unconfirmed grant was left behind");
    let err = client.fence(&name).write(1 << 60, b"x").await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    assert!(err.message().contains("reached the master only"), "{err}");
}

#[tokio::test]
async fn without_wait_a_failover_lets_two_hold_and_the_stale_write_is_fenced() {
    let Some(topo) = Topology::from_env() else { return };
    let _one = ONE_AT_A_TIME.lock().await;
    topo.wait_healthy().await;
    let (name, url) = (support::unique("no-wait"), topo.url_with("wait_replicas=0"));
    let a = Client::connect(&url).await.unwrap();
    let old = topo.master_port().await;
    topo.cut_replication(old).await;
    let lease_a = a.lock(&name, &opts()).await.unwrap();
    let killed = topo.kill(old).await;
    topo.wait_failover(old).await;
    let b = Client::connect(&url).await.unwrap();
    let lease_b = b.try_lock(&name, &opts()).await.unwrap().expect("the promoted replica never saw A's grant");
    // Two hold; the clock-based token still puts B after A, and the register refuses A's stale write.
    assert!(lease_b.fence() > lease_a.fence(), "{} <= {}", lease_b.fence(), lease_a.fence());
    b.fence(&name).write(lease_b.fence(), b"b").await.unwrap();
    let err = a.fence(&name).write(lease_a.fence(), b"a").await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Fenced, "{err}");
    lease_b.release().await.unwrap();
    drop(lease_a);
    killed.restore(&topo).await;
}

#[tokio::test]
async fn with_wait_an_unconfirmed_grant_fails_up_front_and_a_confirmed_one_survives_the_failover() {
    let Some(topo) = Topology::from_env() else { return };
    let _one = ONE_AT_A_TIME.lock().await;
    topo.wait_healthy().await;
    let (name, url) = (support::unique("wait"), topo.url_with("wait_replicas=1&wait_timeout_ms=300"));
    let a = Client::connect(&url).await.unwrap();
    // Round 1: replication cut, so no replica confirms: no grant, and no record left.
    let old = topo.master_port().await;
    let earlier = a.lock(&support::unique("renewed"), &opts()).await.unwrap();
    topo.cut_replication(old).await;
    // Renewals do not wait: one made while no replica listens returns at once (WAIT would take 300 ms).
    let renewing = Instant::now();
    earlier.renew(Some(Duration::from_secs(30))).await.unwrap();
    assert!(renewing.elapsed() < Duration::from_millis(250), "renew took {:?}", renewing.elapsed());
    let err = a.try_lock(&name, &opts()).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    assert!(err.message().contains("only 0 of 1 replicas confirmed"), "{err}");
    let exists: bool = topo.node(old).await.exists(&name).await.unwrap();
    assert!(!exists, "an unconfirmed grant was left behind");
    earlier.release().await.unwrap();
    topo.mend_replication(old).await;
    // Round 2: replication intact: the grant survives the master's death, and B waits.
    let lease_a = a.lock(&name, &opts()).await.unwrap();
    let killed = topo.kill(old).await;
    topo.wait_failover(old).await;
    let b = Client::connect(&url).await.unwrap();
    assert!(b.try_lock(&name, &opts()).await.unwrap().is_none(), "B got a lock A holds");
    lease_a.release().await.unwrap();
    b.try_lock(&name, &opts()).await.unwrap().expect("free after A's release").release().await.unwrap();
    killed.restore(&topo).await;
}

#[tokio::test]
async fn a_client_keeps_working_across_a_failover_and_its_waiter_is_woken_there() {
    let Some(topo) = Topology::from_env() else { return };
    let _one = ONE_AT_A_TIME.lock().await;
    topo.wait_healthy().await;
    let (name, url) = (support::unique("follow"), topo.url_with("wait_replicas=1"));
    let holder = Client::connect(&url).await.unwrap();
    let waiting = Client::connect(&url).await.unwrap();
    let lease = holder.lock(&name, &opts()).await.unwrap();
    let waiter = {
        let (waiting, name) = (waiting.clone(), name.clone());
        tokio::spawn(async move {
            let lease = waiting.lock(&name, &opts().timeout(Duration::from_secs(60))).await;
            (Instant::now(), lease)
        })
    };
    let old = topo.master_port().await;
    support::sentinel::wait_subscribed(&mut topo.node(old).await, &name).await;
    let killed = topo.kill(old).await;
    let new = topo.wait_failover(old).await;
    // The waiter's subscription moves to the new master.
    support::sentinel::wait_subscribed(&mut topo.node(new).await, &name).await;
    let released = Instant::now();
    lease.release().await.unwrap();
    let (woken, next) = waiter.await.unwrap();
    let next = next.unwrap();
    assert!(woken - released < Duration::from_secs(3), "woken {:?} after the release", woken - released);
    next.release().await.unwrap();
    // The holder's client goes on, on the new master, within a bound.
    let started = Instant::now();
    holder.lock(&name, &opts()).await.unwrap().release().await.unwrap();
    assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
    killed.restore(&topo).await;
}

#[tokio::test]
async fn tls_sentinels_and_nodes() {
    let Some(url) = support::service_url("FENCELOCK_TEST_SENTINEL_TLS") else { return };
    let name = support::unique("sentinel-tls");
    let client = Client::connect(&url).await.unwrap();
    let lease = client.lock(&name, &opts()).await.unwrap();
    client.fence(&name).write(lease.fence(), b"v").await.unwrap();
    assert_eq!(client.fence(&name).read().await.unwrap(), (lease.fence(), b"v".to_vec()));
    lease.release().await.unwrap();
    // A plaintext URL to the TLS-only sentinel fails, naming it.
    let plain = url.split('?').next().unwrap().to_string();
    let opts = fencelock::ClientOptions::default().connect_timeout(Duration::from_secs(2));
    let err = Client::connect_with(&plain, &opts).await.unwrap_err();
    assert!(err.message().contains("sentinel"), "{err}");
}

#[tokio::test]
async fn bad_urls_are_clear_errors() {
    let Some(topo) = Topology::from_env() else { return };
    // Some of these get as far as discovery, which a failover in another test would disturb.
    let _one = ONE_AT_A_TIME.lock().await;
    let hosts = topo.url.trim_start_matches("redis+sentinel://").split('/').next().unwrap().to_string();
    let err = Client::connect(&format!("redis+sentinel://u:secret@{hosts}/no-such-master")).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    assert!(err.message().contains("no sentinel knows a master named \"no-such-master\""), "{err}");
    assert!(err.message().contains(hosts.split(',').next().unwrap()), "{err}");
    assert!(!err.message().contains("secret"), "{err}");
    for (url, says) in [
        (format!("redis+sentinel://{hosts}"), "no master name"),
        (topo.url_with("color=blue"), "unknown parameters [\"color\"]"),
        (topo.url_with("wait_replicas=all"), "wait_replicas=\"all\" is not a whole number"),
        (topo.url_with("wait_timeout_ms=9000"), "must be shorter than the request timeout"),
    ] {
        let err = Client::connect(&url).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{url}: {err}");
        assert!(err.message().contains(says), "{url}: {err}");
    }
    let started = Instant::now();
    let err = Client::connect("redis+sentinel://:secret@127.0.0.1:1,127.0.0.1:2/m").await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    assert!(err.message().contains("127.0.0.1:1") && err.message().contains("127.0.0.1:2"), "{err}");
    assert!(!err.message().contains("secret"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
}

#[tokio::test]
async fn wait_replicas_on_a_server_without_replicas_refuses_the_grant() {
    let Some(url) = support::service_url("FENCELOCK_TEST_REDIS") else { return };
    let name = support::unique("no-replicas");
    let client = Client::connect(&format!("{url}?wait_replicas=1&wait_timeout_ms=100")).await.unwrap();
    let err = client.try_lock(&name, &opts()).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    assert!(err.message().contains("only 0 of 1 replicas confirmed"), "{err}");
    let plain = Client::connect(&url).await.unwrap();
    assert!(plain.inspect(&name).await.unwrap().holder.is_none(), "an unconfirmed grant was left behind");
    let err = client.fence(&name).write(1 << 60, b"x").await.unwrap_err();
    assert!(err.message().contains("reached the master only"), "{err}");
}

#[tokio::test]
async fn rw_locks_and_semaphores_through_the_sentinels() {
    let Some(topo) = Topology::from_env() else { return };
    let _one = ONE_AT_A_TIME.lock().await;
    topo.wait_healthy().await;
    let name = support::unique("sentinel-prim");
    let a = Client::connect(&topo.url).await.unwrap();
    let b = Client::connect(&topo.url).await.unwrap();
    let mut master = topo.node(topo.master_port().await).await;
    // Read-write lock, replica-synced like the mutex: readers share, a writer waits and is woken.
    let r = a.rw_lock(&name).read(&opts()).await.unwrap();
    let mode: String = master.hget(&name, "mode").await.unwrap();
    assert_eq!(mode, "read");
    assert!(b.rw_lock(&name).try_write(&opts()).await.unwrap().is_none());
    let writer = {
        let (b, name) = (b.clone(), name.clone());
        tokio::spawn(async move { b.rw_lock(&name).write(&opts().timeout(Duration::from_secs(20))).await })
    };
    let marks = format!("fencelock_rw_writers:{{{name}}}");
    let deadline = Instant::now() + Duration::from_secs(10);
    while master.zcard::<_, i64>(&marks).await.unwrap() == 0 {
        assert!(Instant::now() < deadline, "the writer never marked itself as waiting");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let released = Instant::now();
    r.release().await.unwrap();
    let w = writer.await.unwrap().unwrap();
    assert!(released.elapsed() < Duration::from_secs(2), "woken after {:?}", released.elapsed());
    assert!(w.fence() > r.fence());
    w.release().await.unwrap();
    // Semaphore: Redisson's count string on the master, slot tokens, the count back whole.
    let sem = a.semaphore(&name, 2);
    let p = sem.acquire(&opts()).await.unwrap();
    let count: String = master.get(&name).await.unwrap();
    assert_eq!(count, "1");
    let q = b.semaphore(&name, 2).try_acquire(&opts()).await.unwrap().unwrap();
    assert_ne!(p.slot(), q.slot());
    assert!(b.semaphore(&name, 2).try_acquire(&opts()).await.unwrap().is_none());
    p.release().await.unwrap();
    q.release().await.unwrap();
    assert_eq!(sem.available().await.unwrap(), 2);
    let side =
        ["fencelock_rw_epoch", "fencelock_sem_tokens", "fencelock_sem_permits"].map(|p| format!("{p}:{{{name}}}"));
    let _: () = master.del(&name).await.unwrap();
    let _: () = master.del(&side).await.unwrap();
}
