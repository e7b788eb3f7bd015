//! The etcd backend against a real server (`FENCELOCK_TEST_ETCD`, started by scripts/services.sh): queue order,
//! cleanup of abandoned queue keys, and interop with `etcdctl lock`. Each test works under a prefix of its own and
//! ends by checking that nothing is left under it.

mod support;

use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fencelock::{Client, ClientOptions, ErrorKind, LockOptions};
use support::etcd_raw::Raw;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::time::{Instant, timeout};

/// How long any awaited event may take before the test fails.
const BOUND: Duration = Duration::from_secs(10);

/// A test's view of etcd: the fencelock URL, a raw client, and a prefix no other run uses.
struct Etcd {
    url: String,
    endpoint: String,
    raw: Raw,
    prefix: String,
}

impl Etcd {
    /// `None` (the test is skipped) when no server is configured.
    async fn open() -> Option<Etcd> {
        let url = support::service_url("FENCELOCK_TEST_ETCD")?;
        let endpoint = url.trim_start_matches("etcd://").split(',').next().unwrap().to_string();
        let raw = Raw::new(&[endpoint.as_str()], BOUND);
        Some(Etcd { url, endpoint, raw, prefix: support::unique("fencelock-etcd-test") })
    }

    fn name(&self, label: &str) -> String {
        format!("{}/{label}", self.prefix)
    }

    /// The keys under `<name>/`, in queue order.
    async fn queue(&self, name: &str) -> Vec<String> {
        let keys = self.raw.keys(&format!("{name}/")).await.unwrap();
        keys.into_iter().map(|kv| String::from_utf8(kv.key).unwrap()).collect()
    }

    /// Waits, by watching etcd, until exactly `n` keys lie under `prefix`.
    async fn until_count(&self, prefix: &str, n: i64) {
        let waiting = async {
            loop {
                let (count, rev) = self.raw.count(prefix).await.unwrap();
                if count == n {
                    return;
                }
                self.raw.next_change(prefix, rev).await.unwrap();
            }
        };
        timeout(BOUND, waiting).await.unwrap_or_else(|_| panic!("{prefix}: never {n} keys"));
    }

    /// Nothing of this test is left in etcd.
    async fn assert_clean(&self) {
        self.until_count(&format!("{}/", self.prefix), 0).await;
    }

    /// `etcdctl lock <name>`, its stdout read line by line.
    fn etcdctl_lock(&self, name: &str) -> (Child, tokio::io::Lines<BufReader<tokio::process::ChildStdout>>) {
        let mut child = Command::new("etcdctl")
            .env("ETCDCTL_API", "3")
            .args(["--endpoints", &self.endpoint, "lock", "--ttl=5", name])
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("etcdctl is installed (Debian etcd-client)");
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        (child, lines)
    }
}

/// Stops etcdctl the way a user does (it unlocks on SIGINT) and waits for it to exit.
async fn interrupt(mut child: Child) {
    let pid = child.id().unwrap().to_string();
    let sent = Command::new("kill").args(["-INT", &pid]).status().await.unwrap();
    assert!(sent.success());
    timeout(BOUND, child.wait()).await.expect("etcdctl exits on SIGINT").unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_are_served_in_arrival_order() {
    let Some(etcd) = Etcd::open().await else { return };
    let name = etcd.name("fifo");
    let holder = Client::connect(&etcd.url).await.unwrap();
    let first = holder.lock(&name, &LockOptions::default()).await.unwrap();
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut waiters = Vec::new();
    for i in 0..5 {
        let client = Client::connect(&etcd.url).await.unwrap();
        let (mine, order) = (name.clone(), order.clone());
        waiters.push(tokio::spawn(async move {
            let lease = client.lock(&mine, &LockOptions::default()).await.unwrap();
            order.lock().unwrap().push(i);
            lease.release().await.unwrap();
        }));
        // Arrival order is queue-key order: the next waiter starts once this one's key is in place.
        etcd.until_count(&format!("{name}/"), i + 2).await;
    }
    first.release().await.unwrap();
    for w in waiters {
        timeout(BOUND, w).await.unwrap().unwrap();
    }
    assert_eq!(*order.lock().unwrap(), vec![0, 1, 2, 3, 4]);
    etcd.assert_clean().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn busy_try_lock_leaves_no_key() {
    let Some(etcd) = Etcd::open().await else { return };
    let name = etcd.name("try");
    let (a, b) = (Client::connect(&etcd.url).await.unwrap(), Client::connect(&etcd.url).await.unwrap());
    let held = a.lock(&name, &LockOptions::default()).await.unwrap();
    let owner_key = etcd.queue(&name).await;
    assert!(b.try_lock(&name, &LockOptions::default()).await.unwrap().is_none());
    etcd.until_count(&format!("{name}/"), 1).await;
    assert_eq!(etcd.queue(&name).await, owner_key, "only the holder's key is left");
    held.release().await.unwrap();
    etcd.assert_clean().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelled_and_timed_out_locks_leave_no_key() {
    let Some(etcd) = Etcd::open().await else { return };
    let name = etcd.name("cancel");
    let (a, b) = (Client::connect(&etcd.url).await.unwrap(), Client::connect(&etcd.url).await.unwrap());
    let held = a.lock(&name, &LockOptions::default()).await.unwrap();

    let waiting = {
        let (b, name) = (b.clone(), name.clone());
        tokio::spawn(async move { b.lock(&name, &LockOptions::default()).await })
    };
    etcd.until_count(&format!("{name}/"), 2).await;
    waiting.abort();
    assert!(waiting.await.unwrap_err().is_cancelled());
    etcd.until_count(&format!("{name}/"), 1).await;

    let err = b.lock(&name, &LockOptions::default().timeout(Duration::from_millis(200))).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Timeout);
    etcd.until_count(&format!("{name}/"), 1).await;
    assert_eq!(b.local_entries(), 0);

    held.release().await.unwrap();
    etcd.assert_clean().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_held_by_etcdctl_excludes_fencelock() {
    let Some(etcd) = Etcd::open().await else { return };
    let name = etcd.name("etcdctl-first");
    let (child, mut lines) = etcd.etcdctl_lock(&name);
    let key = timeout(BOUND, lines.next_line()).await.expect("etcdctl takes the free lock").unwrap().unwrap();
    assert!(key.starts_with(&format!("{name}/")), "etcdctl printed {key:?}");

    let client = Client::connect(&etcd.url).await.unwrap();
    assert!(client.try_lock(&name, &LockOptions::default()).await.unwrap().is_none());
    let info = client.inspect(&name).await.unwrap();
    assert_eq!(info.holder.as_deref(), Some(key.as_str()));

    let waiting = {
        let (client, name) = (client.clone(), name.clone());
        tokio::spawn(async move { client.lock(&name, &LockOptions::default()).await })
    };
    etcd.until_count(&format!("{name}/"), 2).await;
    assert!(!waiting.is_finished());
    assert_eq!(client.inspect(&name).await.unwrap().waiters, Some(1), "the key queued behind etcdctl's");
    interrupt(child).await;
    let lease = timeout(BOUND, waiting).await.expect("the waiter gets the lock when etcdctl lets go").unwrap().unwrap();
    assert!(lease.fence() > info.last_token.unwrap());
    lease.release().await.unwrap();
    etcd.assert_clean().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_held_by_fencelock_excludes_etcdctl() {
    let Some(etcd) = Etcd::open().await else { return };
    let name = etcd.name("fencelock-first");
    let client = Client::connect(&etcd.url).await.unwrap();
    let lease = client.lock(&name, &LockOptions::default()).await.unwrap();

    let (child, mut lines) = etcd.etcdctl_lock(&name);
    // etcdctl has queued behind us once its key is there; it must not report the lock until we release.
    etcd.until_count(&format!("{name}/"), 2).await;
    let started = Instant::now();
    lease.release().await.unwrap();
    let key = timeout(BOUND, lines.next_line()).await.expect("etcdctl gets the lock after release").unwrap().unwrap();
    assert!(key.starts_with(&format!("{name}/")), "etcdctl printed {key:?}");
    println!("hand-off fencelock → etcdctl took {:?}", started.elapsed());
    assert!(client.try_lock(&name, &LockOptions::default()).await.unwrap().is_none());
    interrupt(child).await;
    etcd.assert_clean().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fence_tokens_rise_and_stale_writes_are_rejected() {
    let Some(etcd) = Etcd::open().await else { return };
    let name = etcd.name("fence");
    let client = Client::connect(&etcd.url).await.unwrap();
    let first = client.lock(&name, &LockOptions::default()).await.unwrap();
    first.release().await.unwrap();
    let second = client.lock(&name, &LockOptions::default()).await.unwrap();
    assert!(second.fence() > first.fence());

    let fence = client.fence(&etcd.name("resource"));
    fence.write(second.fence(), b"new").await.unwrap();
    let err = fence.write(first.fence(), b"stale").await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Fenced);
    assert_eq!(fence.read().await.unwrap(), (second.fence(), b"new".to_vec()));
    second.release().await.unwrap();
    etcd.raw.delete(&format!("fencelock/fence/{}", etcd.name("resource"))).await.unwrap();
    etcd.assert_clean().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_revokes_the_lease_and_frees_its_locks() {
    let Some(etcd) = Etcd::open().await else { return };
    let name = etcd.name("close");
    let client = Client::connect(&etcd.url).await.unwrap();
    let _unreleased = client.lock(&name, &LockOptions::default()).await.unwrap();
    client.close().await;
    etcd.assert_clean().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_endpoints_are_unavailable_within_the_connect_timeout() {
    let Some(_etcd) = Etcd::open().await else { return };
    // A listener that never answers: TCP connects, the gRPC handshake does not.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = silent.local_addr().unwrap().port();
    let opts = ClientOptions::default().connect_timeout(Duration::from_millis(500));
    for url in ["etcd://127.0.0.1:1".to_string(), format!("etcd://127.0.0.1:{port}")] {
        let started = Instant::now();
        let err = Client::connect_with(&url, &opts).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Unavailable, "{url}: {err}");
        assert!(started.elapsed() < Duration::from_secs(2), "{url}: took {:?}", started.elapsed());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_first_endpoint_fails_over_to_the_next() {
    let Some(etcd) = Etcd::open().await else { return };
    // A port that was just free: nothing listens there, so connecting is refused.
    let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap().local_addr().unwrap().port();
    let url = format!("etcd://127.0.0.1:{closed},{}", etcd.endpoint);
    let started = Instant::now();
    let client = Client::connect(&url).await.unwrap();
    let name = etcd.name("failover");
    let lease = client.lock(&name, &LockOptions::default()).await.unwrap();
    lease.renew(None).await.unwrap();
    let fence = client.fence(&format!("{name}-resource"));
    fence.write(lease.fence(), b"through the second endpoint").await.unwrap();
    assert_eq!(fence.read().await.unwrap(), (lease.fence(), b"through the second endpoint".to_vec()));
    lease.release().await.unwrap();
    assert!(started.elapsed() < BOUND, "took {:?}", started.elapsed());
    client.close().await;
    etcd.raw.delete(&format!("fencelock/fence/{name}-resource")).await.unwrap();
    etcd.assert_clean().await;
}
