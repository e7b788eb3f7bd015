//! The etcd backend against a real server (`FENCELOCK_TEST_ETCD`, started by scripts/services.sh): queue order,
//! cleanup of abandoned queue keys, interop with `etcdctl lock`, `etcdctl elect` and with recipe-shaped read-write keys, and the key
//! layouts of read-write locks and semaphores. Each test works under a prefix of its own and ends by checking that
//! nothing is left under it.

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
        self.etcdctl(&["lock", "--ttl=5", name])
    }

    /// `etcdctl <args>` against this server, its stdout read line by line.
    fn etcdctl(&self, args: &[&str]) -> (Child, tokio::io::Lines<BufReader<tokio::process::ChildStdout>>) {
        let mut child = Command::new("etcdctl")
            .env("ETCDCTL_API", "3")
            .args(["--endpoints", &self.endpoint])
            .args(args)
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

/// The next line etcdctl prints.
async fn next_line(lines: &mut tokio::io::Lines<BufReader<tokio::process::ChildStdout>>, what: &str) -> String {
    timeout(BOUND, lines.next_line()).await.unwrap_or_else(|_| panic!("etcdctl: {what}")).unwrap().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_elected_by_etcdctl_excludes_fencelock() {
    let Some(etcd) = Etcd::open().await else { return };
    let name = etcd.name("elect-etcdctl-first");
    let (child, mut lines) = etcd.etcdctl(&["elect", &name, "from-etcdctl"]);
    let key = next_line(&mut lines, "etcdctl leads the free election").await;
    assert!(key.starts_with(&format!("{name}/")), "etcdctl printed {key:?}");

    let client = Client::connect(&etcd.url).await.unwrap();
    let election = client.election(&name);
    assert!(election.try_campaign(b"fencelock", &LockOptions::default()).await.unwrap().is_none());
    let leader = election.leader().await.unwrap().expect("etcdctl's candidate leads");
    assert_eq!(leader.value, b"from-etcdctl");
    let kv = etcd.raw.keys(&format!("{name}/")).await.unwrap().remove(0);
    let term = etcd.raw.epoch().await.unwrap() + kv.create_revision as u64;
    assert_eq!(leader.term, term, "the term is the epoch plus the leader key's create revision");

    let waiting = {
        let election = election.clone();
        tokio::spawn(async move { election.campaign(b"fencelock", &LockOptions::default()).await })
    };
    etcd.until_count(&format!("{name}/"), 2).await;
    assert!(!waiting.is_finished());
    interrupt(child).await;
    let won = timeout(BOUND, waiting).await.expect("fencelock leads once etcdctl lets go").unwrap().unwrap();
    assert!(won.term() > leader.term);
    assert_eq!(election.leader().await.unwrap().unwrap().value, b"fencelock");
    won.resign().await.unwrap();
    etcd.assert_clean().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcdctl_sees_a_fencelock_leader_and_waits_for_it() {
    let Some(etcd) = Etcd::open().await else { return };
    let name = etcd.name("elect-fencelock-first");
    let client = Client::connect(&etcd.url).await.unwrap();
    let won = client.election(&name).campaign(b"fl-1", &LockOptions::default()).await.unwrap();

    // `etcdctl elect -l` prints the leader's key and value, and again on every proclaim.
    let (observer, mut observed) = etcd.etcdctl(&["elect", "-l", &name]);
    assert!(next_line(&mut observed, "observes the leader's key").await.starts_with(&format!("{name}/")));
    assert_eq!(next_line(&mut observed, "observes the leader's value").await, "fl-1");
    won.proclaim(b"fl-2").await.unwrap();
    next_line(&mut observed, "observes the proclaimed key").await;
    assert_eq!(next_line(&mut observed, "observes the proclaimed value").await, "fl-2");
    interrupt(observer).await;

    let (candidate, mut lines) = etcd.etcdctl(&["elect", &name, "from-etcdctl"]);
    etcd.until_count(&format!("{name}/"), 2).await;
    won.resign().await.unwrap();
    let key = next_line(&mut lines, "etcdctl leads after the resign").await;
    assert!(key.starts_with(&format!("{name}/")), "etcdctl printed {key:?}");
    let leader = client.election(&name).leader().await.unwrap().unwrap();
    assert_eq!(leader.value, b"from-etcdctl");
    assert!(leader.term > won.term());
    interrupt(candidate).await;
    etcd.assert_clean().await;
}

/// The number of watchers etcd on `port` serves, from its metrics.
async fn watchers(port: &str) -> u64 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut conn = tokio::net::TcpStream::connect(format!("127.0.0.1:{port}")).await.unwrap();
    conn.write_all(b"GET /metrics HTTP/1.0\r\nHost: etcd\r\n\r\n").await.unwrap();
    let mut text = String::new();
    conn.read_to_string(&mut text).await.unwrap();
    let line = text.lines().find_map(|l| l.strip_prefix("etcd_debugging_mvcc_watcher_total "));
    line.expect("etcd reports its watchers").trim().parse::<f64>().unwrap() as u64
}

/// A client's wait opens the name's watch, which outlives the wait: the next wait finds it, caught up (a new
/// watch may be served late: `watches.rs`), instead of opening another. Closing the client ends it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_leaves_its_watch_for_the_next() {
    if !support::own_etcd::installed() {
        return;
    }
    let server = support::own_etcd::OwnEtcd::spawn().await;
    let url = server.url();
    let port = url.rsplit(':').next().unwrap().to_string();
    let (a, b) = (Client::connect(&url).await.unwrap(), Client::connect(&url).await.unwrap());
    let opts = LockOptions::default();
    for round in 0..2 {
        let held = a.lock("shared", &opts).await.unwrap();
        let waiter = {
            let b = b.clone();
            tokio::spawn(async move { b.lock("shared", &LockOptions::default()).await })
        };
        let deadline = Instant::now() + BOUND;
        while watchers(&port).await == 0 {
            assert!(Instant::now() < deadline, "round {round}: b never watched");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(watchers(&port).await, 1, "round {round}: one watch");
        held.release().await.unwrap();
        timeout(BOUND, waiter).await.unwrap().unwrap().unwrap().release().await.unwrap();
        assert_eq!(watchers(&port).await, 1, "round {round}: the watch outlives the wait");
    }
    b.close().await;
    let deadline = Instant::now() + BOUND;
    while watchers(&port).await > 0 {
        assert!(Instant::now() < deadline, "closing the client left its watch open");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    a.close().await;
}

/// etcd's data lost (a member back with a blank disk): the register and every key are gone and revisions start
/// again at 1, yet the register refuses the tokens of before (they lie below the new epoch), and tokens keep rising.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_register_refuses_tokens_from_before_a_loss_of_the_data() {
    if !support::own_etcd::installed() {
        return;
    }
    let mut server = support::own_etcd::OwnEtcd::spawn().await;
    let client = Client::connect(&server.url()).await.unwrap();
    let opts = LockOptions::default().watchdog(false);
    let first = client.lock("reg", &opts).await.unwrap();
    let older = first.fence();
    first.release().await.unwrap();
    let newer = client.lock("reg", &opts).await.unwrap().fence();
    let register = client.fence("reg-register");
    register.write(newer, b"newer").await.unwrap();
    assert_eq!(register.write(older, b"stale").await.unwrap_err().kind(), ErrorKind::Fenced);
    let before = server.raw().epoch().await.unwrap();

    server.lose_data().await;
    assert!(server.raw().keys("fencelock/").await.unwrap().is_empty(), "the restarted member kept data");
    for (token, who) in [(older, "the deposed holder"), (newer, "the holder whose key the loss took")] {
        support::refused_after_loss(&register, token, who).await;
    }
    // The client's lease died with the data: the next acquire takes a new one, in the new epoch.
    let after = client.lock("reg", &opts).await.unwrap();
    assert!(server.raw().epoch().await.unwrap() > before, "the loss began no new epoch");
    assert!(after.fence() > newer, "{} <= {newer}", after.fence());
    register.write(after.fence(), b"after").await.unwrap();
    assert_eq!(register.read().await.unwrap(), (after.fence(), b"after".to_vec()));
    after.release().await.unwrap();
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

/// The Unix nanoseconds a recipe-shaped key ends in, checked to be about now.
fn nanos_in(key: &str) -> u128 {
    let nanos: u128 = key.rsplit_once('/').unwrap().1.parse().unwrap_or_else(|_| panic!("{key}: no nanos"));
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    assert!(now.abs_diff(nanos) < 60_000_000_000, "{key}: not a timestamp of now");
    nanos
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_and_write_keys_follow_the_rwmutex_recipe_layout() {
    let Some(etcd) = Etcd::open().await else { return };
    let name = etcd.name("rw-layout");
    let records = format!("fencelock/rwepoch/{name}/");
    let opts = LockOptions::default();
    let (a, b, c) = (
        Client::connect(&etcd.url).await.unwrap(),
        Client::connect(&etcd.url).await.unwrap(),
        Client::connect(&etcd.url).await.unwrap(),
    );
    let first = a.rw_lock(&name).read(&opts).await.unwrap();
    let keys = etcd.raw.keys(&format!("{name}/")).await.unwrap();
    assert_eq!(keys.len(), 1);
    let key = String::from_utf8(keys[0].key.clone()).unwrap();
    assert!(key.starts_with(&format!("{name}/read/")), "{key}");
    assert!(keys[0].lease != 0 && !keys[0].value.is_empty(), "on the lease, the holder id as value");
    // The first reader of a run starts the epoch: its record is empty, and its create revision makes the token
    // (added to the keyspace's epoch, as every etcd revision is).
    let base = etcd.raw.epoch().await.unwrap();
    let record = etcd.raw.keys(&records).await.unwrap();
    assert_eq!(record.len(), 1);
    assert_eq!(record[0].key, format!("{records}{}", nanos_in(&key)).into_bytes());
    assert_eq!((record[0].value.as_slice(), base + record[0].create_revision as u64), (&b""[..], first.fence()));

    let second = b.rw_lock(&name).read(&opts).await.unwrap();
    assert_eq!(second.fence(), first.fence(), "readers of one run share the epoch");
    let record = etcd.raw.keys(&records).await.unwrap();
    assert_eq!(record[1].value, (first.fence() - base).to_string().into_bytes(), "a later reader copies the epoch");

    let writer = {
        let (c, name) = (c.clone(), name.clone());
        tokio::spawn(async move { c.rw_lock(&name).write(&LockOptions::default()).await })
    };
    etcd.until_count(&format!("{name}/"), 3).await;
    let keys = etcd.raw.keys(&format!("{name}/")).await.unwrap();
    let write_key = String::from_utf8(keys[2].key.clone()).unwrap();
    assert!(write_key.starts_with(&format!("{name}/write/")), "{write_key}");
    nanos_in(&write_key);
    // What a Go recipe.RWMutex would wait for: keys are never modified, so its mod-revision order is ours.
    let below_writer = etcd.raw.last_modified_before(&format!("{name}/"), keys[2].create_revision).await.unwrap();
    assert_eq!(below_writer.as_deref(), Some(String::from_utf8(keys[1].key.clone()).unwrap().as_str()));
    assert!(keys.iter().all(|kv| kv.mod_revision == kv.create_revision));

    first.release().await.unwrap();
    second.release().await.unwrap();
    let write = timeout(BOUND, writer).await.expect("the writer follows the readers").unwrap().unwrap();
    assert!(write.fence() > first.fence());
    assert_eq!(etcd.raw.count(&records).await.unwrap().0, 0, "records go with their read keys");
    write.release().await.unwrap();
    etcd.assert_clean().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recipe_writer_key_excludes_fencelock_and_a_fencelock_reader_blocks_a_recipe_writer() {
    let Some(etcd) = Etcd::open().await else { return };
    let name = etcd.name("rw-recipe");
    let client = Client::connect(&etcd.url).await.unwrap();
    let opts = LockOptions::default();
    // A Go recipe.RWMutex's Lock(): a valueless key <pfx>/write/<unix nanos> on its session's lease.
    let lease = etcd.raw.grant(30).await.unwrap();
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    let recipe_key = format!("{name}/write/{nanos}");
    etcd.raw.put(&recipe_key, b"", lease).await.unwrap();
    assert!(client.rw_lock(&name).try_read(&opts).await.unwrap().is_none(), "the recipe's writer excludes readers");
    assert!(client.rw_lock(&name).try_write(&opts).await.unwrap().is_none(), "and writers");
    let reader = {
        let (client, name) = (client.clone(), name.clone());
        tokio::spawn(async move { client.rw_lock(&name).read(&LockOptions::default()).await })
    };
    etcd.until_count(&format!("{name}/"), 2).await;
    assert!(!reader.is_finished());
    etcd.raw.delete(&recipe_key).await.unwrap(); // the recipe's Unlock()
    let read = timeout(BOUND, reader).await.expect("the reader follows the recipe's writer").unwrap().unwrap();

    // The other way: a recipe writer queued now waits for our reader, a recipe reader for no one.
    let recipe_rev = etcd.raw.put(&format!("{name}/write/{}", nanos + 1), b"", lease).await.unwrap();
    let our_key = String::from_utf8(etcd.raw.keys(&format!("{name}/read/")).await.unwrap()[0].key.clone()).unwrap();
    let writer_waits_for = etcd.raw.last_modified_before(&format!("{name}/"), recipe_rev).await.unwrap();
    assert_eq!(writer_waits_for, Some(our_key));
    let reader_waits_for = etcd.raw.last_modified_before(&format!("{name}/write"), recipe_rev).await.unwrap();
    assert_eq!(reader_waits_for, None);
    etcd.raw.revoke(lease).await.unwrap();
    read.release().await.unwrap();
    etcd.assert_clean().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn semaphore_keys_follow_the_documented_layout_and_waiters_are_served_in_order() {
    let Some(etcd) = Etcd::open().await else { return };
    let name = etcd.name("sem-layout");
    let config = format!("fencelock/sempermits/{name}");
    let opts = LockOptions::default();
    let clients = [(); 4].map(|_| Client::connect(&etcd.url));
    let [a, b, c, d] = futures::future::join_all(clients).await.try_into().unwrap();
    let (a, b, c, d) = (a.unwrap(), b.unwrap(), c.unwrap(), d.unwrap());
    let p = a.semaphore(&name, 2).acquire(&opts).await.unwrap();
    let q = b.semaphore(&name, 2).acquire(&opts).await.unwrap();
    let slots = etcd.raw.keys(&format!("{name}/sem/slot/")).await.unwrap();
    let expect = |lease: &fencelock::Lease| format!("{name}/sem/slot/{}", lease.slot().unwrap()).into_bytes();
    assert_eq!(slots.iter().map(|kv| kv.key.clone()).collect::<Vec<_>>(), [expect(&p), expect(&q)]);
    let token = etcd.raw.epoch().await.unwrap() + slots[0].create_revision as u64;
    assert_eq!(token, p.fence(), "a slot's token is the epoch plus its key's create revision");
    assert!(slots.iter().all(|kv| kv.lease != 0));
    assert_eq!(etcd.raw.keys(&config).await.unwrap()[0].value, b"2");

    let wait = |client: &Client| {
        let (client, name) = (client.clone(), name.clone());
        tokio::spawn(async move { client.semaphore(&name, 2).acquire(&LockOptions::default()).await })
    };
    let waiters = format!("{name}/sem/wait/");
    let third = wait(&c);
    etcd.until_count(&waiters, 1).await;
    let fourth = wait(&d);
    etcd.until_count(&waiters, 2).await;
    for kv in etcd.raw.keys(&waiters).await.unwrap() {
        nanos_in(&String::from_utf8(kv.key).unwrap());
    }

    let (p_slot, p_token) = (p.slot(), p.fence());
    p.release().await.unwrap();
    let third = timeout(BOUND, third).await.expect("the first waiter gets the freed slot").unwrap().unwrap();
    assert_eq!((third.slot(), third.fence() > p_token), (p_slot, true));
    etcd.until_count(&waiters, 1).await;
    assert!(!fourth.is_finished(), "one slot freed serves one waiter");
    q.release().await.unwrap();
    let fourth = timeout(BOUND, fourth).await.expect("the second waiter gets the next slot").unwrap().unwrap();
    assert_eq!(a.semaphore(&name, 2).available().await.unwrap(), 0);
    third.release().await.unwrap();
    fourth.release().await.unwrap();
    etcd.assert_clean().await;
    etcd.raw.delete(&config).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readers_that_start_together_share_one_epoch() {
    let Some(etcd) = Etcd::open().await else { return };
    let name = etcd.name("rw-race");
    // Eight first readers at once: each record Txn checks that no record appeared since it looked, so only one
    // starts the epoch and the others copy it.
    let reads = (0..8).map(|_| {
        let (url, name) = (etcd.url.clone(), name.clone());
        async move {
            let client = Client::connect(&url).await.unwrap();
            let lease = client.rw_lock(&name).read(&LockOptions::default()).await.unwrap();
            (client, lease)
        }
    });
    let held = futures::future::join_all(reads).await;
    let tokens: Vec<u64> = held.iter().map(|(_, lease)| lease.fence()).collect();
    assert!(tokens.iter().all(|&t| t == tokens[0]), "overlapping readers drew {tokens:?}");
    for (client, lease) in held {
        lease.release().await.unwrap();
        client.close().await;
    }
    etcd.assert_clean().await;
    assert_eq!(etcd.raw.count(&format!("fencelock/rwepoch/{name}/")).await.unwrap().0, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_downgrade_passes_a_queued_writer_which_then_waits_for_the_read() {
    let Some(etcd) = Etcd::open().await else { return };
    let name = etcd.name("rw-downgrade");
    let (a, c) = (Client::connect(&etcd.url).await.unwrap(), Client::connect(&etcd.url).await.unwrap());
    let job = LockOptions::default().owner("job");
    let write = a.rw_lock(&name).write(&job).await.unwrap();
    let mut writer = {
        let (c, name) = (c.clone(), name.clone());
        tokio::spawn(async move { c.rw_lock(&name).write(&LockOptions::default()).await })
    };
    etcd.until_count(&format!("{name}/"), 2).await;
    // The read key lies above the queued writer's: the owner's write hold lets it through all the same.
    let read = timeout(BOUND, a.rw_lock(&name).read(&job)).await.expect("a downgrade does not queue").unwrap();
    assert!(read.fence() > write.fence());
    write.release().await.unwrap();
    // The writer's key is below the read key, so only the read's grant record keeps the writer out.
    // A negative: the writer is woken by the write key's delete and must stay out for as long as we look.
    let early = timeout(Duration::from_millis(500), &mut writer).await;
    assert!(early.is_err(), "the writer got in beside the downgraded read");
    read.release().await.unwrap();
    let w = timeout(BOUND, writer).await.expect("the writer follows the read").unwrap().unwrap();
    assert!(w.fence() > read.fence());
    w.release().await.unwrap();
    etcd.assert_clean().await;
}

/// How many acquire attempts `client` has sent to the backend.
fn attempts(client: &Client) -> u64 {
    client.metrics().backend_ops.get("acquire").map_or(0, |by| by.values().map(|h| h.count).sum())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_freed_slot_wakes_one_waiter_not_all() {
    let Some(etcd) = Etcd::open().await else { return };
    let name = etcd.name("sem-herd");
    let waiters = format!("{name}/sem/wait/");
    let holder = Client::connect(&etcd.url).await.unwrap();
    let held = holder.semaphore(&name, 1).acquire(&LockOptions::default()).await.unwrap();
    let mut queued = Vec::new();
    for i in 0..3 {
        let client = Client::connect(&etcd.url).await.unwrap();
        let (c, name) = (client.clone(), name.clone());
        let task = tokio::spawn(async move { c.semaphore(&name, 1).acquire(&LockOptions::default()).await });
        etcd.until_count(&waiters, i + 1).await;
        queued.push((client, task));
    }
    assert!(queued.iter().all(|(c, _)| attempts(c) == 1), "each waiter looked once and watches");
    held.release().await.unwrap();
    let (first, task) = queued.remove(0);
    let permit = timeout(BOUND, task).await.expect("the first waiter gets the slot").unwrap().unwrap();
    // A negative: the others must not look again for as long as we watch (a herd would at once).
    tokio::time::sleep(Duration::from_millis(300)).await;
    let looks: Vec<u64> = queued.iter().map(|(c, _)| attempts(c)).collect();
    assert_eq!(looks, [1, 1], "a waiter that could not gain looked again");
    permit.release().await.unwrap();
    first.close().await;
    for (client, task) in queued {
        let permit = timeout(BOUND, task).await.expect("the next waiter gets the slot").unwrap().unwrap();
        permit.release().await.unwrap();
        client.close().await;
    }
    etcd.assert_clean().await;
    etcd.raw.delete(&format!("fencelock/sempermits/{name}")).await.unwrap();
}

/// What the mixed workload's clients hold, as they see it: a hold is noted after its grant returns and forgotten
/// before its release is sent, so an overlap seen here is an overlap in etcd.
#[derive(Default)]
struct Holds {
    readers: u32,
    writer: bool,
    /// The largest token of a hold already forgotten.
    ended: u64,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mixed_readers_and_writers_never_overlap_and_tokens_rise() {
    let Some(etcd) = Etcd::open().await else { return };
    let name = etcd.name("rw-mixed");
    let holds = Arc::new(Mutex::new(Holds::default()));
    let workers = (0..4u64).map(|w| {
        let (url, name, holds) = (etcd.url.clone(), name.clone(), holds.clone());
        tokio::spawn(async move {
            let client = Client::connect(&url).await.unwrap();
            let rw = client.rw_lock(&name);
            for i in 0..12u64 {
                // A fixed mix: every third hold of a worker is a write, at a different step per worker.
                let write = (i + w) % 3 == 0;
                let opts = LockOptions::default().timeout(BOUND);
                let lease = if write { rw.write(&opts).await } else { rw.read(&opts).await }.unwrap();
                {
                    let mut h = holds.lock().unwrap();
                    assert!(!h.writer, "a hold beside a writer");
                    assert!(lease.fence() >= h.ended, "token {} below an ended hold's {}", lease.fence(), h.ended);
                    if write {
                        assert_eq!(h.readers, 0, "a writer beside readers");
                        assert!(lease.fence() > h.ended, "a write token not above every ended hold's");
                        h.writer = true;
                    } else {
                        h.readers += 1;
                    }
                }
                tokio::task::yield_now().await;
                {
                    let mut h = holds.lock().unwrap();
                    if write {
                        h.writer = false
                    } else {
                        h.readers -= 1
                    }
                    h.ended = h.ended.max(lease.fence());
                }
                lease.release().await.unwrap();
            }
            client.close().await;
        })
    });
    for worker in futures::future::join_all(workers).await {
        worker.unwrap();
    }
    etcd.assert_clean().await;
}
