//! Failover on the 3-member etcd cluster of `FENCELOCK_TEST_ETCD_CLUSTER` (scripts/services.sh): the leader is killed
//! with SIGKILL while a lock is held and two other clients wait for it. The holder's lease outlives the election (a
//! new leader extends every lease), nobody else holds meanwhile, and after the release the lock passes on with larger
//! fence tokens. The clients list the leader first, so the member they all talk to is the one that dies: they fail
//! over to the others without a single Unavailable. The killed member is started again, so later tests and runs see
//! three members.

mod support;

use support::members::Members;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fencelock::{Client, ClientOptions, ErrorKind, LockOptions};
use support::etcd_raw::Raw;
use tokio::time::{Instant, sleep, timeout, timeout_at};

/// The lock's TTL: the holder's lease must survive an election shorter than this.
const TTL: Duration = Duration::from_secs(6);
/// How long any awaited event may take before the test fails.
const BOUND: Duration = Duration::from_secs(20);
/// Pause between two polls of the cluster's state.
const POLL: Duration = Duration::from_millis(100);

/// The cluster as scripts/services.sh describes it.
struct Cluster {
    endpoints: Vec<String>,
    /// Its processes, to kill and restart.
    members: Members,
}

impl Cluster {
    /// `None` (the test is skipped) when no cluster is configured.
    fn open() -> Option<Cluster> {
        let url = support::service_url("FENCELOCK_TEST_ETCD_CLUSTER")?;
        let endpoints: Vec<String> = url.trim_start_matches("etcd://").split(',').map(str::to_string).collect();
        assert_eq!(endpoints.len(), 3, "{url}: expected three members");
        Some(Cluster {
            members: Members::from_env("FENCELOCK_TEST_ETCD_CLUSTER", "--name etcd-cluster-{n} "),
            endpoints,
        })
    }

    /// The fencelock URL with member `first` listed first: the endpoint a new client prefers.
    fn url_with_first(&self, first: usize) -> String {
        let mut order = vec![self.endpoints[first].clone()];
        order.extend(self.endpoints.iter().enumerate().filter(|&(i, _)| i != first).map(|(_, e)| e.clone()));
        format!("etcd://{}", order.join(","))
    }

    /// A raw client of the whole cluster, for reading keys behind fencelock's back.
    fn raw(&self) -> Raw {
        Raw::new(&self.endpoints, Duration::from_secs(2))
    }

    /// Member `i`'s own id and the leader it follows, or `None` if it does not answer.
    async fn status(&self, i: usize) -> Option<(u64, u64)> {
        let one = Raw::new(&self.endpoints[i..=i], Duration::from_secs(1));
        timeout(Duration::from_secs(2), one.status()).await.ok()?.ok()
    }

    /// Polls until every member of `among` answers and all follow the same leader, one of them; returns its index.
    async fn leader(&self, among: &[usize]) -> usize {
        let deadline = Instant::now() + BOUND;
        loop {
            let mut seen = Vec::new();
            for &i in among {
                seen.push((i, self.status(i).await));
            }
            let ids: Vec<_> = seen.iter().filter_map(|(i, s)| s.map(|(id, _)| (*i, id))).collect();
            let leaders: Vec<_> = seen.iter().filter_map(|(_, s)| s.map(|(_, leader)| leader)).collect();
            if ids.len() == among.len()
                && leaders.iter().all(|&l| l != 0 && l == leaders[0])
                && let Some(&(i, _)) = ids.iter().find(|(_, id)| *id == leaders[0])
            {
                return i;
            }
            assert!(Instant::now() < deadline, "members {among:?} agreed on no leader within {BOUND:?}: {seen:?}");
            sleep(POLL).await;
        }
    }
}

/// Locks `name` on a client of its own and records the token while it holds.
async fn wait_then_hold(url: String, name: String, inside: Arc<AtomicUsize>, grants: Arc<Mutex<Vec<u64>>>) {
    let client = Client::connect(&url).await.unwrap();
    let lease = client.lock(&name, &LockOptions::default().ttl(TTL)).await.unwrap();
    assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0, "a waiter got the lock while another held it");
    grants.lock().unwrap().push(lease.fence());
    inside.fetch_sub(1, Ordering::SeqCst);
    lease.release().await.unwrap();
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_lock_survives_the_leader_being_killed() {
    let Some(cluster) = Cluster::open() else { return };
    let members = [0, 1, 2];
    cluster.members.revive_dead().await;
    cluster.leader(&members).await;
    let raw = cluster.raw();
    let name = support::unique("fencelock-etcd-cluster-test");
    let keys = format!("{name}/");
    let count = |raw: Raw| {
        let keys = keys.clone();
        async move { raw.count(&keys).await.map(|(n, _)| n).ok() }
    };

    // Every client prefers the first endpoint listed: the leader, about to be killed.
    let url = cluster.url_with_first(cluster.leader(&members).await);
    let holder = Client::connect(&url).await.unwrap();
    let lease = holder.lock(&name, &LockOptions::default().ttl(TTL)).await.unwrap();
    let inside = Arc::new(AtomicUsize::new(1));
    let grants = Arc::new(Mutex::new(vec![lease.fence()]));
    let waiters: Vec<_> = (0..2)
        .map(|_| tokio::spawn(wait_then_hold(url.clone(), name.clone(), inside.clone(), grants.clone())))
        .collect();
    let deadline = Instant::now() + BOUND;
    while count(raw.clone()).await != Some(3) {
        assert!(Instant::now() < deadline, "the waiters never queued");
        sleep(POLL).await;
    }
    // The waiters' allowance for an outage must count from the outage, not from the start of their wait: they have
    // waited longer than it when the leader dies.
    sleep(ClientOptions::default().request_timeout + POLL).await;

    let leader = cluster.leader(&members).await;
    let killed_at = Instant::now();
    let revive = cluster.members.kill(leader).await;
    let survivors: Vec<usize> = members.into_iter().filter(|&i| i != leader).collect();
    let new_leader = cluster.leader(&survivors).await;
    let election = killed_at.elapsed();
    println!("killed member {leader} (the leader); member {new_leader} leads after {election:?}");
    assert!(election < TTL, "the election took {election:?}, longer than the TTL");

    // Had the keepalives stopped at the kill, the lease would be gone a TTL later; watch one renewal beyond that.
    let watched_until = killed_at + TTL + TTL / 3;
    assert!(timeout_at(watched_until, lease.lost()).await.is_err(), "the holder lost its lease over the failover");
    assert!(lease.is_valid());
    assert!(waiters.iter().all(|w| !w.is_finished()), "a waiter finished while the lock was held");
    lease.renew(None).await.expect("the lease renews on the new leader");
    let deadline = Instant::now() + BOUND;
    let (owner, base) = loop {
        // The raw client may still try the dead member first.
        match (raw.keys(&keys).await, raw.epoch().await) {
            (Ok(found), Ok(base)) => break (found, base),
            (Err(e), _) | (_, Err(e)) => assert!(Instant::now() < deadline, "the cluster never answered: {e}"),
        }
        sleep(POLL).await;
    };
    let token = base + owner[0].create_revision as u64;
    assert_eq!(token, lease.fence(), "the holder's key still comes first");
    let fence = holder.fence(&format!("{name}-resource"));
    fence.write(lease.fence(), b"after failover").await.unwrap();

    inside.fetch_sub(1, Ordering::SeqCst);
    lease.release().await.unwrap();
    for w in waiters {
        timeout(BOUND, w).await.expect("the waiters get the lock after release").unwrap();
    }
    let grants = grants.lock().unwrap().clone();
    println!("fence tokens in grant order: {grants:?}");
    assert!(grants.windows(2).all(|w| w[0] < w[1]), "tokens must rise: {grants:?}");
    fence.write(grants[2], b"last holder").await.unwrap();
    let err = fence.write(grants[0], b"stale").await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Fenced, "the first holder's token is stale now");

    revive.run().await;
    cluster.leader(&members).await;
    holder.close().await;
    let deadline = Instant::now() + BOUND;
    while let Err(e) = raw.delete(&format!("fencelock/fence/{name}-resource")).await {
        assert!(Instant::now() < deadline, "the cluster never answered: {e}");
        sleep(POLL).await;
    }
    while count(raw.clone()).await != Some(0) {
        assert!(Instant::now() < deadline, "keys left under {keys}");
        sleep(POLL).await;
    }
}
