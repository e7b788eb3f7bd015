//! The Redis Cluster backend against a real three-master cluster: locks on every master, one slot per lock, the
//! Redisson layout and its sharded unlock message, names that cannot share a slot, and nothing left behind.

mod support;

use std::collections::HashMap;
use std::time::Duration;

use fencelock::{Client, ErrorKind, LockOptions};
use redis::AsyncCommands;
use redis::aio::MultiplexedConnection;
use redis::cluster_async::ClusterConnection;
use support::redis_tls::{self, TlsServer};
use tokio::time::Instant;

/// The test cluster: one plain connection per master (for CLUSTER, PUBSUB and KEYS, which are per node) and one
/// cluster connection for data.
struct Cluster {
    url: String,
    nodes: Vec<MultiplexedConnection>,
    data: ClusterConnection,
}

async fn setup() -> Option<Cluster> {
    let url = support::service_url("FENCELOCK_TEST_REDIS_CLUSTER")?;
    let hosts: Vec<String> =
        url.strip_prefix("redis+cluster://").unwrap().split(',').map(|h| format!("redis://{h}")).collect();
    let mut nodes = Vec::new();
    for h in &hosts {
        nodes.push(redis::Client::open(h.as_str()).unwrap().get_multiplexed_async_connection().await.unwrap());
    }
    let data = redis::cluster::ClusterClient::new(hosts).unwrap().get_async_connection().await.unwrap();
    Some(Cluster { url, nodes, data })
}

impl Cluster {
    /// The index of the master that owns `key`: the only node that answers for it instead of sending MOVED.
    async fn owner(&self, key: &str) -> usize {
        let mut owners = Vec::new();
        for (i, node) in self.nodes.iter().enumerate() {
            let r: redis::RedisResult<bool> = node.clone().exists(key).await;
            if r.is_ok() {
                owners.push(i);
            }
        }
        assert_eq!(owners.len(), 1, "{key}: owned by {owners:?}");
        owners[0]
    }

    async fn keyslot(&self, key: &str) -> i64 {
        redis::cmd("CLUSTER").arg("KEYSLOT").arg(key).query_async(&mut self.nodes[0].clone()).await.unwrap()
    }

    /// One name per master, each carrying `prefix`.
    async fn names_on_every_master(&self, prefix: &str) -> Vec<String> {
        let mut found: Vec<Option<String>> = vec![None; self.nodes.len()];
        for _ in 0..1000 {
            let name = support::unique(prefix);
            let i = self.owner(&name).await;
            found[i].get_or_insert(name);
            if found.iter().all(Option::is_some) {
                return found.into_iter().flatten().collect();
            }
        }
        panic!("no name found for some master: {found:?}");
    }

    /// Keys matching `*pattern*` on any master.
    async fn keys(&self, pattern: &str) -> Vec<String> {
        let mut all = Vec::new();
        for node in &self.nodes {
            let keys: Vec<String> = node.clone().keys(format!("*{pattern}*")).await.unwrap();
            all.extend(keys);
        }
        all
    }

    /// Deletes the fence counters the test made (kept by design), then fails if anything with `pattern` remains.
    async fn clean_up(&mut self, pattern: &str, counters: &[String]) {
        for c in counters {
            let _: () = self.data.del(c).await.unwrap();
        }
        let left = self.keys(pattern).await;
        assert!(left.is_empty(), "stray keys: {left:?}");
    }

    /// Sharded subscribers of `channel` on its master.
    async fn shard_subscribers(&self, channel: &str) -> i64 {
        let node = self.owner(channel).await;
        let (_, n): (String, i64) = redis::cmd("PUBSUB")
            .arg("SHARDNUMSUB")
            .arg(channel)
            .query_async(&mut self.nodes[node].clone())
            .await
            .unwrap();
        n
    }

    async fn await_subscriber(&self, channel: &str) {
        let deadline = Instant::now() + Duration::from_secs(5);
        while self.shard_subscribers(channel).await == 0 {
            assert!(Instant::now() < deadline, "nobody subscribed to {channel}");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

fn token_key(name: &str) -> String {
    format!("redisson_lock_token:{{{name}}}")
}

fn channel(name: &str) -> String {
    format!("redisson_lock__channel:{{{name}}}")
}

#[tokio::test]
async fn the_keys_of_a_lock_share_its_slot_in_the_redisson_layout() {
    let Some(mut cluster) = setup().await else { return };
    let plain = support::unique("rc-layout");
    let tagged = format!("{{{}}}:orders", support::unique("rc-tag"));
    let client = Client::connect(&cluster.url).await.unwrap();
    let mut counters = Vec::new();
    for (name, counter, chan) in [
        (plain.clone(), token_key(&plain), channel(&plain)),
        // A name with its own hash tag keeps it: Redisson's prefixName adds no braces then.
        (tagged.clone(), format!("redisson_lock_token:{tagged}"), format!("redisson_lock__channel:{tagged}")),
    ] {
        let lease =
            client.lock(&name, &LockOptions::default().owner("worker-7").ttl(Duration::from_secs(20))).await.unwrap();
        let fields: HashMap<String, i64> = cluster.data.hgetall(&name).await.unwrap();
        assert_eq!(fields, HashMap::from([(format!("{}:worker-7", client.id()), 1)]));
        let pttl: i64 = cluster.data.pttl(&name).await.unwrap();
        assert!((15_000..=20_000).contains(&pttl), "pttl {pttl}");
        let token: u64 = cluster.data.get(&counter).await.unwrap();
        assert_eq!(token, lease.fence());
        let slot = cluster.keyslot(&name).await;
        assert_eq!(cluster.keyslot(&counter).await, slot, "{counter}");
        assert_eq!(cluster.keyslot(&chan).await, slot, "{chan}");
        lease.release().await.unwrap();
        let exists: bool = cluster.data.exists(&name).await.unwrap();
        assert!(!exists);
        counters.push(counter);
    }
    cluster.clean_up("rc-layout", &counters[..1]).await;
    cluster.clean_up("rc-tag", &counters[1..]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locks_on_every_master_exclude_hand_off_and_fence() {
    let Some(mut cluster) = setup().await else { return };
    let names = cluster.names_on_every_master("rc-masters").await;
    let a = Client::connect(&cluster.url).await.unwrap();
    let b = Client::connect(&cluster.url).await.unwrap();
    for name in &names {
        let first = a.lock(name, &LockOptions::default()).await.unwrap();
        assert!(b.try_lock(name, &LockOptions::default()).await.unwrap().is_none(), "{name}");
        let info = b.inspect(name).await.unwrap();
        assert!(info.holder.as_deref().is_some_and(|h| h.starts_with(&a.id().to_string())), "{info:?}");
        assert_eq!(info.last_token, Some(first.fence()));
        let waiter = {
            let (b, name) = (b.clone(), name.clone());
            tokio::spawn(async move {
                let lease = b.lock(&name, &LockOptions::default().timeout(Duration::from_secs(20))).await.unwrap();
                (Instant::now(), lease)
            })
        };
        cluster.await_subscriber(&channel(name)).await;
        let released_at = Instant::now();
        first.release().await.unwrap();
        let (acquired_at, second) = waiter.await.unwrap();
        // Woken by the sharded release message, not by the 30 s TTL bound.
        assert!(
            acquired_at - released_at < Duration::from_secs(2),
            "{name}: hand-off took {:?}",
            acquired_at - released_at
        );
        assert!(second.fence() > first.fence(), "{name}: {} <= {}", second.fence(), first.fence());
        second.release().await.unwrap();
    }
    let counters: Vec<String> = names.iter().map(|n| token_key(n)).collect();
    // The waiters' subscriptions go once nobody waits.
    for name in &names {
        let deadline = Instant::now() + Duration::from_secs(5);
        while cluster.shard_subscribers(&channel(name)).await != 0 {
            assert!(Instant::now() < deadline, "{name}: subscription left behind");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    cluster.clean_up("rc-masters", &counters).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redisson_holder_excludes_us_and_its_sharded_unlock_wakes_us() {
    let Some(mut cluster) = setup().await else { return };
    let name = support::unique("rc-redisson");
    // What Redisson's RLock writes: hash field "<uuid>:<thread id>" = hold count, with a TTL.
    let _: () = cluster.data.hset(&name, "3f6c1d2e-redisson:42", 1).await.unwrap();
    let _: () = cluster.data.pexpire(&name, 30_000).await.unwrap();
    let client = Client::connect(&cluster.url).await.unwrap();
    assert!(client.try_lock(&name, &LockOptions::default()).await.unwrap().is_none());
    let waiter = {
        let (client, name) = (client.clone(), name.clone());
        tokio::spawn(async move {
            let lease = client.lock(&name, &LockOptions::default().timeout(Duration::from_secs(20))).await.unwrap();
            (Instant::now(), lease)
        })
    };
    cluster.await_subscriber(&channel(&name)).await;
    // Redisson's unlock on a Redis 7 cluster: delete and SPUBLISH 0 on the channel.
    let released_at = Instant::now();
    let _: () = cluster.data.del(&name).await.unwrap();
    let _: i64 = redis::cmd("SPUBLISH").arg(channel(&name)).arg(0).query_async(&mut cluster.data).await.unwrap();
    let (acquired_at, lease) = waiter.await.unwrap();
    assert!(acquired_at - released_at < Duration::from_secs(2), "hand-off took {:?}", acquired_at - released_at);
    lease.release().await.unwrap();
    cluster.clean_up("rc-redisson", &[token_key(&name)]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aborted_acquires_leave_no_lock_and_no_subscription() {
    let Some(mut cluster) = setup().await else { return };
    let name = support::unique("rc-abort");
    let holder = Client::connect(&cluster.url).await.unwrap();
    let contender = Client::connect(&cluster.url).await.unwrap();
    for i in 0..40u32 {
        // Half the rounds contend with a holder (aborting waiters), half abort an acquire that would succeed.
        let held = if i % 2 == 0 { Some(holder.lock(&name, &LockOptions::default()).await.unwrap()) } else { None };
        let (c, n) = (contender.clone(), name.clone());
        let task = tokio::spawn(async move { c.lock(&n, &LockOptions::default()).await });
        tokio::time::sleep(Duration::from_micros(u64::from(i % 10) * 150)).await;
        task.abort();
        if let Ok(Ok(lease)) = task.await {
            lease.release().await.unwrap();
        }
        if let Some(h) = held {
            h.release().await.unwrap();
        }
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let exists: bool = cluster.data.exists(&name).await.unwrap();
        let subs = cluster.shard_subscribers(&channel(&name)).await;
        if !exists && subs == 0 && contender.local_entries() == 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "left behind: lock {exists}, subscribers {subs}, local {}",
            contender.local_entries()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    cluster.clean_up("rc-abort", &[token_key(&name)]).await;
}

#[tokio::test]
async fn names_whose_keys_would_split_across_slots_are_refused() {
    let Some(cluster) = setup().await else { return };
    let client = Client::connect(&cluster.url).await.unwrap();
    for name in ["rc-split}x", "rc-split{x", "{}rc-split"] {
        let err = client.try_lock(name, &LockOptions::default()).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{name}: {err}");
        assert!(err.message().contains("hash tag"), "{err}");
        assert_eq!(client.inspect(name).await.unwrap_err().kind(), ErrorKind::InvalidArgument);
    }
    assert_eq!(client.local_entries(), 0);
    assert_eq!(cluster.keys("rc-split").await, Vec::<String>::new());
}

#[tokio::test]
async fn fence_registers_work_on_any_master() {
    let Some(mut cluster) = setup().await else { return };
    let resources = cluster.names_on_every_master("rc-fence").await;
    let client = Client::connect(&cluster.url).await.unwrap();
    for r in &resources {
        // A token granted on the register's own master; one made up and small is below the master's start floor.
        let token = client.lock(r, &LockOptions::default()).await.unwrap();
        let t = token.fence();
        token.release().await.unwrap();
        let fence = client.fence(r);
        assert_eq!(fence.write(7, b"seven").await.unwrap_err().kind(), ErrorKind::Fenced);
        fence.write(t, b"granted").await.unwrap();
        assert_eq!(fence.write(t - 1, b"older").await.unwrap_err().kind(), ErrorKind::Fenced);
        assert_eq!(fence.read().await.unwrap(), (t, b"granted".to_vec()));
    }
    let registers: Vec<String> = resources
        .iter()
        .flat_map(|r| [format!("fencelock_fence:{{{r}}}"), format!("redisson_lock_token:{{{r}}}")])
        .collect();
    cluster.clean_up("rc-fence", &registers).await;
}

#[tokio::test]
async fn unreachable_cluster_is_unavailable_quickly() {
    let started = Instant::now();
    let err = Client::connect("redis+cluster://127.0.0.1:1,127.0.0.1:2").await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    assert!(err.message().contains("127.0.0.1:1"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(8), "{:?}", started.elapsed());
    let err = Client::connect("redis+cluster://127.0.0.1:1/2").await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
}

/// `FENCELOCK_TEST_REDIS_CLUSTER_TLS`: three masters that accept TLS only (their bus too) and require a password.
/// The URL lists every master, but each connection after the first goes to a node redis-rs learned of from the
/// cluster (CLUSTER SLOTS), so those get the same TLS and credentials.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_and_authentication_on_every_node() {
    let Some(server) = TlsServer::from_env("FENCELOCK_TEST_REDIS_CLUSTER_TLS") else { return };
    redis_tls::locks_fence_and_wake(&server, &server.with_ca(""), true).await;
    // One seed only: the other masters are found through it.
    let seed = server.url.split(',').next().unwrap();
    let one_seed = format!("{seed}?tls=true&ca={}", server.ca);
    let client = Client::connect_with(&one_seed, &redis_tls::opts()).await.unwrap();
    for n in 0..12 {
        let lease = client.lock(&format!("{}-{n}", support::unique("rc-tls")), &LockOptions::default()).await.unwrap();
        lease.release().await.unwrap();
    }
    client.close().await;
}

#[tokio::test]
async fn a_plaintext_url_a_wrong_ca_and_a_wrong_password_are_refused() {
    let Some(server) = TlsServer::from_env("FENCELOCK_TEST_REDIS_CLUSTER_TLS") else { return };
    redis_tls::refuses_plaintext(&server, "add tls=true").await;
    redis_tls::refuses_a_wrong_ca(&server).await;
    redis_tls::refuses_a_wrong_password(&server).await;
}

/// Redisson's `prefixName` on a cluster: braces added unless the name has its own.
fn prefixed(prefix: &str, name: &str) -> String {
    if name.contains('{') { format!("{prefix}:{name}") } else { format!("{prefix}:{{{name}}}") }
}

/// Redisson's `suffixName`: `{name}:suffix`, or `name:suffix` for a name with its own braces.
fn suffixed(name: &str, suffix: &str) -> String {
    if name.contains('{') { format!("{name}:{suffix}") } else { format!("{{{name}}}:{suffix}") }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rw_locks_and_semaphores_keep_their_keys_in_one_slot_and_hand_off() {
    let Some(mut cluster) = setup().await else { return };
    let plain = support::unique("rc-prim");
    let tagged = format!("{{{}}}:jobs", support::unique("rc-primtag"));
    let (a, b) = (Client::connect(&cluster.url).await.unwrap(), Client::connect(&cluster.url).await.unwrap());
    let mut side = Vec::new();
    for name in [plain.clone(), tagged.clone()] {
        let slot = cluster.keyslot(&name).await;
        // Read-write lock: readers share, a waiting writer is woken by the last reader's sharded release.
        let r1 = a.rw_lock(&name).read(&LockOptions::default().owner("r")).await.unwrap();
        let r2 = b.rw_lock(&name).try_read(&LockOptions::default()).await.unwrap().unwrap();
        assert_eq!(r1.fence(), r2.fence());
        let timeout = suffixed(&name, &format!("{}:rwlock_timeout:1", r1.holder()));
        let alive: bool = cluster.data.exists(&timeout).await.unwrap();
        assert!(alive, "{timeout}");
        let rw_keys = [
            timeout,
            prefixed("redisson_rwlock", &name),
            prefixed("fencelock_rw_epoch", &name),
            prefixed("fencelock_rw_writers", &name),
        ];
        for key in &rw_keys {
            assert_eq!(cluster.keyslot(key).await, slot, "{key}");
        }
        r2.release().await.unwrap();
        let writer = {
            let (b, name) = (b.clone(), name.clone());
            tokio::spawn(async move {
                b.rw_lock(&name).write(&LockOptions::default().timeout(Duration::from_secs(20))).await.unwrap()
            })
        };
        cluster.await_subscriber(&rw_keys[1]).await;
        let released = Instant::now();
        r1.release().await.unwrap();
        let w = writer.await.unwrap();
        assert!(released.elapsed() < Duration::from_secs(2), "{name}: woken after {:?}", released.elapsed());
        assert!(w.fence() > r1.fence());
        w.release().await.unwrap();
        // Semaphore: Redisson's count string and timeout zset, our slots, all in the name's slot.
        let sem = a.semaphore(&name, 2);
        let p = sem.acquire(&LockOptions::default()).await.unwrap();
        let q = b.semaphore(&name, 2).try_acquire(&LockOptions::default()).await.unwrap().unwrap();
        assert_ne!(p.slot(), q.slot());
        assert!(b.semaphore(&name, 2).try_acquire(&LockOptions::default()).await.unwrap().is_none());
        let count: String = cluster.data.get(&name).await.unwrap();
        assert_eq!(count, "0");
        let out: i64 = cluster.data.zcard(suffixed(&name, "timeout")).await.unwrap();
        assert_eq!(out, 2);
        let sem_keys = [
            prefixed("redisson_sc", &name),
            prefixed("fencelock_sem_slots", &name),
            prefixed("fencelock_sem_tokens", &name),
            prefixed("fencelock_sem_permits", &name),
        ];
        for key in &sem_keys {
            assert_eq!(cluster.keyslot(key).await, slot, "{key}");
        }
        p.release().await.unwrap();
        q.release().await.unwrap();
        assert_eq!(sem.available().await.unwrap(), 2);
        side.extend([name.clone(), prefixed("redisson_lock_token", &name), rw_keys[2].clone()]);
        side.extend(sem_keys[1..].iter().cloned());
    }
    let (plain_keys, tagged_keys) = side.split_at(side.len() / 2);
    cluster.clean_up("rc-primtag", tagged_keys).await;
    cluster.clean_up("rc-prim", plain_keys).await;
}
