//! Failover on the 3-server ZooKeeper ensemble of `FENCELOCK_TEST_ZK_ENSEMBLE` (scripts/services.sh): the leader is
//! killed with SIGKILL while a lock is held and two other clients wait for it. The holder's session survives (its
//! client reconnects to another server within the session timeout), so its node and lease stay; nobody else holds
//! meanwhile, and after the release the lock passes on with larger czxid tokens. The killed server is started again,
//! so later tests and runs see three servers.

mod support;

use support::members::Members;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fencelock::{Client, ErrorKind, LockOptions};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::{Instant, sleep, timeout, timeout_at};
use zookeeper_client as zk;

/// The lock's TTL (below the backend's 10 s session timeout, which would cap it).
const TTL: Duration = Duration::from_secs(6);
/// The backend's session timeout with the default client options: twice the 5 s request timeout.
const SESSION_TIMEOUT: Duration = Duration::from_secs(10);
/// How long any awaited event may take before the test fails.
const BOUND: Duration = Duration::from_secs(20);
/// Pause between two polls of the ensemble's state.
const POLL: Duration = Duration::from_millis(100);

/// The ensemble as scripts/services.sh describes it.
struct Ensemble {
    url: String,
    hosts: Vec<String>,
    /// Its processes, to kill and restart.
    members: Members,
}

impl Ensemble {
    /// `None` (the test is skipped) when no ensemble is configured.
    fn open() -> Option<Ensemble> {
        let url = support::service_url("FENCELOCK_TEST_ZK_ENSEMBLE")?;
        let hosts: Vec<String> = url.trim_start_matches("zk://").split(',').map(str::to_string).collect();
        assert_eq!(hosts.len(), 3, "{url}: expected three servers");
        Some(Ensemble {
            members: Members::from_env("FENCELOCK_TEST_ZK_ENSEMBLE", "/zk-ensemble-{n}/zoo.cfg"),
            url,
            hosts,
        })
    }

    /// The `Mode:` server `i` reports through the `srvr` four-letter word, or `None` if it does not serve.
    async fn mode(&self, i: usize) -> Option<String> {
        let asking = async {
            let mut conn = tokio::net::TcpStream::connect(&self.hosts[i]).await.ok()?;
            conn.write_all(b"srvr").await.ok()?;
            let mut reply = String::new();
            conn.read_to_string(&mut reply).await.ok()?;
            reply.lines().find_map(|l| l.strip_prefix("Mode: ")).map(str::to_string)
        };
        timeout(Duration::from_secs(2), asking).await.ok().flatten()
    }

    /// Polls until every server of `among` serves, one as the leader; returns its index.
    async fn leader(&self, among: &[usize]) -> usize {
        let deadline = Instant::now() + BOUND;
        loop {
            let mut modes = Vec::new();
            for &i in among {
                modes.push((i, self.mode(i).await));
            }
            let leaders: Vec<usize> =
                modes.iter().filter(|(_, m)| m.as_deref() == Some("leader")).map(|(i, _)| *i).collect();
            let followers = modes.iter().filter(|(_, m)| m.as_deref() == Some("follower")).count();
            if leaders.len() == 1 && followers == among.len() - 1 {
                return leaders[0];
            }
            assert!(Instant::now() < deadline, "servers {among:?} formed no quorum within {BOUND:?}: {modes:?}");
            sleep(POLL).await;
        }
    }
}

/// The lock nodes under `dir` with their czxids, in Curator's queue order; `None` if the ensemble did not answer.
async fn queue(raw: &zk::Client, dir: &str) -> Option<Vec<(String, i64)>> {
    let listing = async {
        let mut children = match raw.list_children(dir).await {
            Err(zk::Error::NoNode) => Vec::new(),
            listed => listed.ok()?,
        };
        children.retain(|c| c.contains("lock-"));
        children.sort_by_key(|c| c.rsplit_once("lock-").map(|(_, seq)| seq.to_string()));
        let mut nodes = Vec::new();
        for child in children {
            match raw.get_data(&format!("{dir}/{child}")).await {
                Ok((_, stat)) => nodes.push((child, stat.czxid)),
                Err(zk::Error::NoNode) => {}
                Err(_) => return None,
            }
        }
        Some(nodes)
    };
    timeout(Duration::from_secs(5), listing).await.ok().flatten()
}

/// Locks `name` on a client of its own, retrying what failover makes retryable; records the token while it holds.
async fn wait_then_hold(url: String, name: String, inside: Arc<AtomicUsize>, grants: Arc<Mutex<Vec<u64>>>) -> usize {
    let client = Client::connect(&url).await.unwrap();
    let mut retries = 0;
    let lease = loop {
        match client.lock(&name, &LockOptions::default().ttl(TTL)).await {
            Ok(lease) => break lease,
            // A request cut off by the kill or made during the election; the lock call can simply be made again.
            Err(e) if e.kind() == ErrorKind::Unavailable => {
                retries += 1;
                assert!(retries < 100, "{name}: still unavailable: {e}");
                sleep(POLL).await;
            }
            Err(e) => panic!("{name}: {e}"),
        }
    };
    assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0, "a waiter got the lock while another held it");
    grants.lock().unwrap().push(lease.fence());
    inside.fetch_sub(1, Ordering::SeqCst);
    lease.release().await.unwrap();
    client.close().await;
    retries
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_lock_survives_the_leader_being_killed() {
    let Some(ensemble) = Ensemble::open() else { return };
    let servers = [0, 1, 2];
    ensemble.members.revive_dead().await;
    ensemble.leader(&servers).await;
    let raw = zk::Client::connect(&ensemble.hosts.join(",")).await.expect("raw ZooKeeper session");
    let name = format!("/{}", support::unique("fencelock-zk-ensemble-test"));
    let resource = format!("{}-resource", &name[1..]);

    let holder = Client::connect(&ensemble.url).await.unwrap();
    let lease = holder.lock(&name, &LockOptions::default().ttl(TTL)).await.unwrap();
    let inside = Arc::new(AtomicUsize::new(1));
    let grants = Arc::new(Mutex::new(vec![lease.fence()]));
    let waiters: Vec<_> = (0..2)
        .map(|_| tokio::spawn(wait_then_hold(ensemble.url.clone(), name.clone(), inside.clone(), grants.clone())))
        .collect();
    let deadline = Instant::now() + BOUND;
    while queue(&raw, &name).await.is_none_or(|q| q.len() != 3) {
        assert!(Instant::now() < deadline, "the waiters never queued");
        sleep(POLL).await;
    }

    let leader = ensemble.leader(&servers).await;
    let killed_at = Instant::now();
    let revive = ensemble.members.kill(leader).await;
    let survivors: Vec<usize> = servers.into_iter().filter(|&i| i != leader).collect();
    let new_leader = ensemble.leader(&survivors).await;
    let election = killed_at.elapsed();
    println!("killed server {leader} (the leader); server {new_leader} leads after {election:?}");
    assert!(election < TTL, "the election took {election:?}, longer than the TTL");

    // A client cut off from the ensemble loses the lease when its validity (the TTL) passes without a renewal, and
    // its session (with the node) a session timeout after the cut: watch past both, and one renewal period more.
    let watched_until = killed_at + SESSION_TIMEOUT + TTL / 3;
    assert!(timeout_at(watched_until, lease.lost()).await.is_err(), "the holder lost its lease over the failover");
    assert!(lease.is_valid());
    assert!(waiters.iter().all(|w| !w.is_finished()), "a waiter finished while the lock was held");
    lease.renew(None).await.expect("the lease renews after the failover");
    let deadline = Instant::now() + BOUND;
    let nodes = loop {
        match queue(&raw, &name).await {
            Some(nodes) => break nodes,
            None => assert!(Instant::now() < deadline, "the raw session never answered again"),
        }
        sleep(POLL).await;
    };
    assert_eq!(
        nodes.first().map(|n| n.1 as u64),
        Some(lease.fence()),
        "the holder's node still comes first: {nodes:?}"
    );
    let fence = holder.fence(&resource);
    fence.write(lease.fence(), b"after failover").await.unwrap();

    inside.fetch_sub(1, Ordering::SeqCst);
    lease.release().await.unwrap();
    let mut retries = 0;
    for w in waiters {
        retries += timeout(BOUND, w).await.expect("the waiters get the lock after release").unwrap();
    }
    let grants = grants.lock().unwrap().clone();
    println!("fence tokens (czxids) in grant order: {grants:?}; waiters retried {retries} times");
    assert!(grants.windows(2).all(|w| w[0] < w[1]), "tokens must rise: {grants:?}");
    fence.write(grants[2], b"last holder").await.unwrap();
    let err = fence.write(grants[0], b"stale").await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Fenced, "the first holder's token is stale now");

    revive.run().await;
    ensemble.leader(&servers).await;
    holder.close().await;
    let deadline = Instant::now() + BOUND;
    while queue(&raw, &name).await.is_none_or(|q| !q.is_empty()) {
        assert!(Instant::now() < deadline, "lock nodes left under {name}");
        sleep(POLL).await;
    }
    for path in [format!("/fencelock/fences/{resource}"), name] {
        match raw.delete(&path, None).await {
            Ok(()) | Err(zk::Error::NoNode) => {}
            Err(e) => panic!("delete {path}: {e}"),
        }
    }
}
