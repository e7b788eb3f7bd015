//! The `zk://` backend against the ZooKeeper server of `FENCELOCK_TEST_ZK`: Curator's node layout, FIFO hand-off,
//! interop with hand-made Curator nodes, cleanup of abandoned attempts, and session-bound leases. Every test works
//! under its own root node and checks that no lock node is left there before removing it.

mod support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fencelock::{Client, ClientOptions, ErrorKind, LockOptions};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;
use zookeeper_client as zk;

const BOUND: Duration = Duration::from_secs(10);

/// A raw session on the test server, for looking at and making nodes behind fencelock's back.
struct Raw {
    zk: zk::Client,
    root: String,
}

impl Raw {
    /// A raw session and a fresh root path; `None` (test skipped) without a server.
    async fn open() -> Option<(String, Raw)> {
        let url = support::service_url("FENCELOCK_TEST_ZK")?;
        let zk = zk::Client::connect(url.trim_start_matches("zk://")).await.expect("raw ZooKeeper session");
        Some((url, Raw { zk, root: format!("/{}", support::unique("fencelock-test")) }))
    }

    fn path(&self, name: &str) -> String {
        format!("{}/{name}", self.root)
    }

    /// Children of `dir` as this session sees them after catching up with the leader.
    async fn children(&self, dir: &str) -> Vec<String> {
        self.zk.sync(dir).await.ok();
        match self.zk.list_children(dir).await {
            Err(zk::Error::NoNode) => Vec::new(),
            listed => listed.unwrap(),
        }
    }

    /// Waits, on child watches, until `dir` has exactly `n` children.
    async fn await_children(&self, dir: &str, n: usize) -> Vec<String> {
        let wait = async {
            loop {
                let (children, watch) = match self.zk.list_and_watch_children(dir).await {
                    Ok(found) => found,
                    // Not made yet: wait for its creation.
                    Err(zk::Error::NoNode) => {
                        let (_, watch) = self.zk.check_and_watch_stat(dir).await.unwrap();
                        watch.changed().await;
                        continue;
                    }
                    Err(e) => panic!("list {dir}: {e}"),
                };
                if children.len() == n {
                    return children;
                }
                watch.changed().await;
            }
        };
        tokio::time::timeout(BOUND, wait).await.unwrap_or_else(|_| panic!("{dir} never had {n} children"))
    }

    /// Makes a Curator-style waiter by hand: `<dir>/_c_<id>-lock-<seq>`, ephemeral on this raw session.
    async fn curator_node(&self, dir: &str, id: &str) -> (String, i64) {
        self.protected_node(dir, id, "lock-", b"curator").await
    }

    /// `<dir>/_c_<id>-<marker><seq>` holding `data`, ephemeral on this raw session: what Curator's recipes make.
    async fn protected_node(&self, dir: &str, id: &str, marker: &str, data: &[u8]) -> (String, i64) {
        let dirs = zk::CreateMode::Container.with_acls(zk::Acls::anyone_all());
        self.zk.mkdir(dir, &dirs).await.unwrap();
        let opts = zk::CreateMode::EphemeralSequential.with_acls(zk::Acls::anyone_all());
        let prefix = format!("{dir}/_c_{id}-{marker}");
        let (stat, seq) = self.zk.create(&prefix, data, &opts).await.unwrap();
        (format!("{prefix}{seq}"), stat.czxid)
    }

    /// Fails on any lock node left under the root, then deletes the root's (empty) directories.
    async fn assert_clean(&self) {
        let mut stack = vec![self.root.clone()];
        let mut dirs = Vec::new();
        while let Some(dir) = stack.pop() {
            for child in self.children(&dir).await {
                assert!(!child.contains("lock-") && !child.contains("latch-"), "stray lock node {dir}/{child}");
                stack.push(format!("{dir}/{child}"));
            }
            dirs.push(dir);
        }
        for dir in dirs.iter().rev() {
            match self.zk.delete(dir, None).await {
                Ok(()) | Err(zk::Error::NoNode) => {}
                Err(e) => panic!("delete {dir}: {e}"),
            }
        }
    }
}

fn fast() -> LockOptions {
    LockOptions::default().ttl(Duration::from_secs(5))
}

fn is_curator_node(name: &str) -> bool {
    let Some(rest) = name.strip_prefix("_c_") else { return false };
    let Some((id, seq)) = rest.split_once("-lock-") else { return false };
    uuid::Uuid::parse_str(id).is_ok() && id.len() == 36 && seq.len() == 10 && seq.bytes().all(|b| b.is_ascii_digit())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspect_counts_the_nodes_queued_behind_the_holder() {
    let Some((url, raw)) = Raw::open().await else { return };
    let client = Client::connect(&url).await.unwrap();
    let dir = raw.path("waiters");
    let lease = client.lock(&dir, &fast()).await.unwrap();
    assert_eq!(client.inspect(&dir).await.unwrap().waiters, Some(0));
    let other = Client::connect(&url).await.unwrap();
    let waiting = {
        let dir = dir.clone();
        tokio::spawn(async move { other.lock(&dir, &fast()).await })
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while raw.children(&dir).await.len() < 2 {
        assert!(Instant::now() < deadline, "the second contender never queued its node");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(client.inspect(&dir).await.unwrap().waiters, Some(1));
    lease.release().await.unwrap();
    let next = waiting.await.unwrap().unwrap();
    assert_eq!(client.inspect(&dir).await.unwrap().waiters, Some(0));
    next.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_follow_the_curator_layout() {
    let Some((url, raw)) = Raw::open().await else { return };
    let client = Client::connect(&url).await.unwrap();
    assert!(client.capability().session_bound && client.capability().fair && client.capability().fencing);
    let dir = raw.path("layout");
    let lease = client.lock(&dir, &fast()).await.unwrap();

    let children = raw.children(&dir).await;
    assert_eq!(children.len(), 1, "{children:?}");
    assert!(is_curator_node(&children[0]), "not _c_<uuid>-lock-<10 digits>: {}", children[0]);
    let (data, stat) = raw.zk.get_data(&format!("{dir}/{}", children[0])).await.unwrap();
    assert_eq!(data, lease.holder().as_bytes(), "the node holds the holder id");
    assert_eq!(stat.czxid as u64, lease.fence(), "the fence token is the node's czxid");
    assert!(stat.ephemeral_owner != 0, "the node is ephemeral");

    let info = client.inspect(&dir).await.unwrap();
    assert_eq!(info.holder.as_deref(), Some(lease.holder()));
    assert_eq!(info.last_token, Some(lease.fence()));

    let first = lease.fence();
    lease.release().await.unwrap();
    assert!(raw.children(&dir).await.is_empty(), "release deletes the node");
    let again = client.lock(&dir, &fast()).await.unwrap();
    assert!(again.fence() > first, "tokens rise: {} then {}", first, again.fence());
    again.release().await.unwrap();
    client.close().await;
    raw.assert_clean().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_are_served_in_arrival_order() {
    let Some((url, raw)) = Raw::open().await else { return };
    let dir = raw.path("fifo");
    let holder = Client::connect(&url).await.unwrap();
    let first = holder.lock(&dir, &fast()).await.unwrap();

    let order = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for i in 0..5 {
        let client = Client::connect(&url).await.unwrap();
        let (name, order) = (dir.clone(), order.clone());
        tasks.push(tokio::spawn(async move {
            let lease = client.lock(&name, &fast().timeout(BOUND)).await.unwrap();
            order.lock().unwrap().push(i);
            lease.release().await.unwrap();
            client.close().await;
        }));
        // The next client starts once this one's node is queued, so arrival order is known.
        raw.await_children(&dir, i + 2).await;
    }
    first.release().await.unwrap();
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(*order.lock().unwrap(), [0, 1, 2, 3, 4]);
    holder.close().await;
    raw.assert_clean().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hand_made_curator_node_blocks_until_deleted() {
    let Some((url, raw)) = Raw::open().await else { return };
    let dir = raw.path("interop");
    let (curator, czxid) = raw.curator_node(&dir, "x").await;
    let client = Client::connect(&url).await.unwrap();

    assert!(client.try_lock(&dir, &fast()).await.unwrap().is_none(), "the Curator holder comes first");
    let err = client.lock(&dir, &fast().timeout(Duration::from_millis(200))).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Timeout);

    let waiter = {
        let (client, dir) = (client.clone(), dir.clone());
        tokio::spawn(async move { client.lock(&dir, &fast().timeout(BOUND)).await })
    };
    raw.await_children(&dir, 2).await;
    raw.zk.delete(&curator, None).await.unwrap();
    let lease = waiter.await.unwrap().unwrap();
    assert!(lease.fence() > czxid as u64);
    lease.release().await.unwrap();
    client.close().await;
    raw.assert_clean().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn busy_and_cancelled_attempts_leave_no_node() {
    let Some((url, raw)) = Raw::open().await else { return };
    let dir = raw.path("cleanup");
    let (curator, _) = raw.curator_node(&dir, "held").await;
    let client = Client::connect(&url).await.unwrap();

    assert!(client.try_lock(&dir, &fast()).await.unwrap().is_none());
    raw.await_children(&dir, 1).await;

    let waiter = {
        let (client, dir) = (client.clone(), dir.clone());
        tokio::spawn(async move { client.lock(&dir, &fast()).await })
    };
    raw.await_children(&dir, 2).await;
    waiter.abort();
    assert!(waiter.await.unwrap_err().is_cancelled());
    let left = raw.await_children(&dir, 1).await;
    assert_eq!(format!("{dir}/{}", left[0]), curator, "only the Curator node is left");
    assert_eq!(client.local_entries(), 0);

    raw.zk.delete(&curator, None).await.unwrap();
    client.close().await;
    raw.assert_clean().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_session_frees_its_locks() {
    let Some((url, raw)) = Raw::open().await else { return };
    let dir = raw.path("session");
    let a = Client::connect(&url).await.unwrap();
    let b = Client::connect(&url).await.unwrap();
    let held = a.lock(&dir, &fast()).await.unwrap();

    let waiter = {
        let (b, dir) = (b.clone(), dir.clone());
        tokio::spawn(async move { b.lock(&dir, &fast().timeout(BOUND)).await })
    };
    raw.await_children(&dir, 2).await;
    a.close().await;
    let lease = waiter.await.unwrap().unwrap();
    assert!(lease.fence() > held.fence());
    assert_eq!(a.lock(&dir, &fast()).await.unwrap_err().kind(), ErrorKind::Closed);
    lease.release().await.unwrap();
    b.close().await;
    raw.assert_clean().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_node_is_a_lost_lease() {
    let Some((url, raw)) = Raw::open().await else { return };
    let dir = raw.path("lost");
    let client = Client::connect(&url).await.unwrap();
    // A short TTL so the watchdog renews (checks the node) every 100 ms.
    let lease = client.lock(&dir, &LockOptions::default().ttl(Duration::from_millis(300))).await.unwrap();
    assert!(client.force_release(&dir).await.unwrap());
    tokio::time::timeout(BOUND, lease.lost()).await.expect("the watchdog notices the node is gone");
    assert_eq!(lease.renew(None).await.unwrap_err().kind(), ErrorKind::LockLost);
    assert!(!client.force_release(&dir).await.unwrap(), "nothing left to force");
    client.close().await;
    raw.assert_clean().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_whose_acl_refuses_us_is_a_clear_non_retryable_error() {
    let Some((url, raw)) = Raw::open().await else { return };
    let dir = raw.path("read-only");
    raw.zk.mkdir(&raw.root, &zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all())).await.unwrap();
    raw.zk.create(&dir, b"", &zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_read())).await.unwrap();
    let client = Client::connect(&url).await.unwrap();
    let err = tokio::time::timeout(BOUND, client.lock(&dir, &fast())).await.expect("no retrying").unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    assert!(!err.kind().retryable());
    assert!(err.message().contains("refused access"), "{err}");
    client.close().await;
    raw.assert_clean().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fence_register_rejects_older_tokens() {
    let Some((url, raw)) = Raw::open().await else { return };
    let client = Client::connect(&url).await.unwrap();
    let resource = support::unique("zk-fence");
    let fence = client.fence(&resource);
    assert_eq!(fence.read().await.unwrap(), (0, Vec::new()));
    fence.write(5, b"five").await.unwrap();
    fence.write(5, b"five again").await.unwrap();
    assert_eq!(fence.write(4, b"stale").await.unwrap_err().kind(), ErrorKind::Fenced);
    fence.write(7, b"seven").await.unwrap();
    assert_eq!(fence.read().await.unwrap(), (7, b"seven".to_vec()));

    let path = format!("/fencelock/fences/{resource}");
    let (data, _) = raw.zk.get_data(&path).await.unwrap();
    assert_eq!(data, [&7u64.to_be_bytes()[..], b"seven"].concat(), "8-byte big-endian token, then the value");
    raw.zk.delete(&path, None).await.unwrap();
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chroot_is_made_and_used() {
    let Some((url, raw)) = Raw::open().await else { return };
    let client = Client::connect(&format!("{url}{}", raw.root)).await.unwrap();
    let lease = client.lock("inside", &fast()).await.unwrap();
    assert_eq!(raw.children(&raw.path("inside")).await.len(), 1, "the lock lives under the chroot");
    lease.release().await.unwrap();
    client.close().await;
    raw.assert_clean().await;
}

#[tokio::test]
async fn an_unreachable_server_is_unavailable_fast() {
    if support::service_url("FENCELOCK_TEST_ZK").is_none() {
        return;
    }
    let opts = ClientOptions::default().connect_timeout(Duration::from_millis(500));
    let started = Instant::now();
    let err = Client::connect_with("zk://127.0.0.1:1", &opts).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    assert!(started.elapsed() < Duration::from_secs(2), "took {:?}", started.elapsed());
    let err = Client::connect("zk://").await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validity_is_capped_by_the_session_timeout() {
    let Some((url, raw)) = Raw::open().await else { return };
    let client = Client::connect(&url).await.unwrap();
    let dir = raw.path("bound");
    // A partitioned client loses its node when the session expires, so a 60 s TTL must not promise 60 s: the test
    // server (tickTime 2000) grants at most 20 ticks, 40 s.
    let lease = client.lock(&dir, &LockOptions::default().ttl(Duration::from_secs(60))).await.unwrap();
    assert!(lease.remaining() <= Duration::from_secs(40), "remaining {:?}", lease.remaining());
    lease.release().await.unwrap();
    client.close().await;
    raw.assert_clean().await;
}

/// A TCP proxy to the test server that can be cut off: while cut, the bytes of open connections are dropped (neither
/// side hears from the other, as behind a partition) and new connections are closed at once.
struct Partition {
    url: String,
    cut: Arc<AtomicBool>,
    accept: tokio::task::JoinHandle<()>,
}

impl Partition {
    async fn to(url: &str) -> Partition {
        let target = url.trim_start_matches("zk://").split([',', '/']).next().unwrap().to_string();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("zk://{}", listener.local_addr().unwrap());
        let cut = Arc::new(AtomicBool::new(false));
        let accept = tokio::spawn({
            let cut = cut.clone();
            async move {
                while let Ok((inbound, _)) = listener.accept().await {
                    if cut.load(Ordering::SeqCst) {
                        continue;
                    }
                    let Ok(outbound) = TcpStream::connect(&target).await else { continue };
                    let ((ri, wi), (ro, wo)) = (inbound.into_split(), outbound.into_split());
                    tokio::spawn(Self::pipe(ri, wo, cut.clone()));
                    tokio::spawn(Self::pipe(ro, wi, cut.clone()));
                }
            }
        });
        Partition { url, cut, accept }
    }

    async fn pipe(mut from: OwnedReadHalf, mut to: OwnedWriteHalf, cut: Arc<AtomicBool>) {
        let mut buf = vec![0; 64 * 1024];
        while let Ok(n @ 1..) = from.read(&mut buf).await {
            if !cut.load(Ordering::SeqCst) && to.write_all(&buf[..n]).await.is_err() {
                return;
            }
        }
    }

    fn set(&self, cut: bool) {
        self.cut.store(cut, Ordering::SeqCst);
    }
}

impl Drop for Partition {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

/// Seed 7 of the faults suite on ZooKeeper: a release whose delete was in flight when zookeeper-client gave up on the
/// connection ("no response from connection in 4000ms") failed with `Internal`, and the session, reconnected, kept
/// the node: nobody acquired until that client exited. The release must retry once the session answers again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_cut_off_by_a_partition_still_deletes_the_node() {
    let Some((url, raw)) = Raw::open().await else { return };
    let dir = raw.path("partition");
    let partition = Partition::to(&url).await;
    // A 10 s TTL: a 10 s session, and zookeeper-client gives up on a silent connection after 4 s.
    let a = Client::connect(&partition.url).await.unwrap();
    let b = Client::connect(&url).await.unwrap();
    let held = a.lock(&dir, &fast().ttl(Duration::from_secs(10)).watchdog(false)).await.unwrap();

    partition.set(true);
    let release = tokio::spawn(async move { held.release().await });
    // Longer than zookeeper-client's 4 s connection timeout, well within the 10 s session.
    tokio::time::sleep(Duration::from_secs(6)).await;
    partition.set(false);
    let released = tokio::time::timeout(BOUND, release).await.expect("the release finishes").unwrap();
    released.expect("a release cut off by a partition is retried once the session answers");

    let next = b.lock(&dir, &fast().timeout(Duration::from_secs(2))).await.expect("the node is gone");
    next.release().await.unwrap();
    a.close().await;
    b.close().await;
    raw.assert_clean().await;
}

/// Issue 16: the session timeout was twice the request timeout (10 s) whatever TTL a lease asked for, so a holder
/// cut off from the server kept its lock for 10 s. Each TTL now has a session of that timeout: a 4 s lease (the
/// test server's shortest session, 2 ticks) cut off by a partition frees the lock within about 4 s; a 30 s lease
/// of the same client, on its own session, is not touched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partitioned_holder_loses_its_lock_after_its_ttl() {
    let Some((url, raw)) = Raw::open().await else { return };
    let (short, long) = (raw.path("ttl-short"), raw.path("ttl-long"));
    let partition = Partition::to(&url).await;
    let a = Client::connect(&partition.url).await.unwrap();
    let b = Client::connect(&url).await.unwrap();
    let ttl = Duration::from_secs(4);
    let cut_off = a.lock(&short, &LockOptions::default().ttl(ttl).watchdog(false)).await.unwrap();
    assert!(cut_off.remaining() <= ttl, "remaining {:?}", cut_off.remaining());

    partition.set(true);
    let cut = Instant::now();
    // Past 4 s the server expires the session and deletes its node; with a 10 s session this times out.
    let next = b.lock(&short, &fast().timeout(Duration::from_secs(8))).await.expect("the session of the TTL expired");
    assert!(next.fence() > cut_off.fence());
    assert!(cut.elapsed() >= ttl - Duration::from_millis(500), "freed {:?} after the cut", cut.elapsed());
    next.release().await.unwrap();
    partition.set(false);
    let err = cut_off.release().await.unwrap_err();
    assert!(matches!(err.kind(), ErrorKind::LockLost | ErrorKind::NotHeld), "{err}");

    // The lost session is replaced on the next call; a lease of another TTL lives on a session of its own.
    let long_lease = a.lock(&long, &LockOptions::default().ttl(Duration::from_secs(30))).await.unwrap();
    let again = a.lock(&short, &LockOptions::default().ttl(ttl)).await.unwrap();
    assert_eq!(b.try_lock(&long, &fast()).await.unwrap().map(|l| l.fence()), None, "the 30 s lease still holds");
    again.release().await.unwrap();
    long_lease.release().await.unwrap();
    a.close().await;
    b.close().await;
    raw.assert_clean().await;
}

/// A node lives on the session of the TTL it was taken with, and cannot move to another: a renewal with another TTL
/// is refused, leaving the hold as it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewal_cannot_change_the_ttl_of_a_session_bound_hold() {
    let Some((url, raw)) = Raw::open().await else { return };
    let dir = raw.path("renew-ttl");
    let client = Client::connect(&url).await.unwrap();
    let lease = client.lock(&dir, &fast()).await.unwrap();
    let err = lease.renew(Some(Duration::from_secs(20))).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    assert!(err.to_string().contains("5s") && err.to_string().contains("20s"), "{err}");
    lease.renew(None).await.expect("its own TTL renews");
    lease.renew(Some(Duration::from_secs(5))).await.expect("the same TTL renews");
    lease.release().await.unwrap();
    client.close().await;
    raw.assert_clean().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_cut_off_by_a_partition_is_unavailable() {
    let Some((url, raw)) = Raw::open().await else { return };
    let partition = Partition::to(&url).await;
    // An 8 s request timeout: a 16 s session, and zookeeper-client gives up on a silent connection after 6.4 s.
    let opts = ClientOptions::default().request_timeout(Duration::from_secs(8));
    let a = Client::connect_with(&partition.url, &opts).await.unwrap();
    partition.set(true);
    // zookeeper-client fails the request when it gives up on the connection, before our request timeout.
    let err = a.inspect(&raw.path("partition-inspect")).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    partition.set(false);
    a.close().await;
    raw.assert_clean().await;
}

/// `_c_<uuid>-<marker><seq10>`: a protected Curator node of the given marker.
fn is_protected(name: &str, marker: &str) -> bool {
    let Some(rest) = name.strip_prefix("_c_") else { return false };
    let Some((id, seq)) = rest.split_once(&format!("-{marker}")) else { return false };
    uuid::Uuid::parse_str(id).is_ok() && seq.len() == 10 && seq.bytes().all(|b| b.is_ascii_digit())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_write_nodes_follow_curator_and_a_cancelled_reader_leaves_none() {
    let Some((url, raw)) = Raw::open().await else { return };
    let dir = raw.path("rw");
    let client = Client::connect(&url).await.unwrap();
    let rw = client.rw_lock(&dir);
    let write = rw.write(&fast().owner("w")).await.unwrap();
    let nodes = raw.children(&dir).await;
    assert!(nodes.len() == 1 && is_protected(&nodes[0], "__WRIT__"), "{nodes:?}");

    // Another client: this one's local queue would keep its reader from queueing on the server.
    let other = Client::connect(&url).await.unwrap();
    let reader = {
        let rw = other.rw_lock(&dir);
        tokio::spawn(async move { rw.read(&fast().owner("r")).await })
    };
    let nodes = raw.await_children(&dir, 2).await;
    assert!(nodes.iter().any(|n| is_protected(n, "__READ__")), "{nodes:?}");
    reader.abort();
    assert!(reader.await.unwrap_err().is_cancelled());
    raw.await_children(&dir, 1).await;

    // A deleted read node is a lost lease, as for the mutex.
    write.release().await.unwrap();
    let read = rw.read(&LockOptions::default().ttl(Duration::from_millis(300)).owner("r")).await.unwrap();
    let node = raw.children(&dir).await.pop().unwrap();
    raw.zk.delete(&format!("{dir}/{node}"), None).await.unwrap();
    tokio::time::timeout(BOUND, read.lost()).await.expect("the watchdog notices the read node is gone");
    other.close().await;
    client.close().await;
    raw.assert_clean().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permits_are_curator_leases_and_a_cancelled_waiter_leaves_none() {
    let Some((url, raw)) = Raw::open().await else { return };
    let dir = raw.path("sem");
    let client = Client::connect(&url).await.unwrap();
    let sem = client.semaphore(&dir, 1);
    let held = sem.acquire(&fast().owner("a")).await.unwrap();
    assert_eq!(held.slot(), Some(0));
    let leases = raw.children(&format!("{dir}/leases")).await;
    assert!(leases.len() == 1 && is_protected(&leases[0], "lease-"), "{leases:?}");
    assert!(raw.children(&format!("{dir}/locks")).await.is_empty(), "the internal mutex goes at the grant");

    // The waiter holds the internal mutex and a lease beyond N, as Curator's does, until cancelled.
    let waiter = {
        let sem = client.semaphore(&dir, 1);
        tokio::spawn(async move { sem.acquire(&fast().owner("b")).await })
    };
    raw.await_children(&format!("{dir}/leases"), 2).await;
    waiter.abort();
    assert!(waiter.await.unwrap_err().is_cancelled());
    raw.await_children(&format!("{dir}/leases"), 1).await;
    raw.await_children(&format!("{dir}/locks"), 0).await;
    assert_eq!(sem.available().await.unwrap(), 0);
    assert_eq!(client.semaphore(&dir, 2).available().await.unwrap_err().kind(), ErrorKind::InvalidArgument);

    held.release().await.unwrap();
    let permit = sem.acquire(&LockOptions::default().ttl(Duration::from_millis(300)).owner("c")).await.unwrap();
    let lease = raw.children(&format!("{dir}/leases")).await.pop().unwrap();
    raw.zk.delete(&format!("{dir}/leases/{lease}"), None).await.unwrap();
    tokio::time::timeout(BOUND, permit.lost()).await.expect("the watchdog notices the lease is gone");
    client.close().await;
    raw.assert_clean().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readers_looping_on_many_sessions_all_get_through() {
    let Some((url, raw)) = Raw::open().await else { return };
    let dir = raw.path("readers");
    let mut clients = Vec::new();
    for _ in 0..8 {
        clients.push(Client::connect(&url).await.unwrap());
    }
    // Each new run of reads rewrites the epoch node: many sessions starting runs at once contend on its version.
    let loops: Vec<_> = clients
        .iter()
        .enumerate()
        .map(|(i, client)| {
            let rw = client.rw_lock(&dir);
            tokio::spawn(async move {
                for n in 0..150 {
                    let read = rw.read(&fast().owner(format!("r{i}"))).await;
                    let read = read.unwrap_or_else(|e| panic!("reader {i}, hold {n}: {e}"));
                    read.release().await.unwrap();
                }
            })
        })
        .collect();
    for l in loops {
        tokio::time::timeout(BOUND * 6, l).await.expect("the readers finish").unwrap();
    }
    for client in clients {
        client.close().await;
    }
    raw.assert_clean().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn elections_are_curator_leader_latches() {
    let Some((url, raw)) = Raw::open().await else { return };
    let dir = raw.path("election");
    // A LeaderLatch participant made by hand leads first: its id is the value fencelock reports.
    let (latch, czxid) = raw.protected_node(&dir, "x", "latch-", b"curator-participant").await;
    let client = Client::connect(&url).await.unwrap();
    let election = client.election(&dir);
    assert!(election.try_campaign(b"fencelock", &fast()).await.unwrap().is_none(), "the latch comes first");
    let leader = election.leader().await.unwrap().unwrap();
    assert_eq!((leader.value.as_slice(), leader.term), (&b"curator-participant"[..], czxid as u64));

    let waiting = {
        let election = election.clone();
        tokio::spawn(async move { election.campaign(b"fencelock", &fast().timeout(BOUND)).await })
    };
    let children = raw.await_children(&dir, 2).await;
    let ours = children.iter().find(|c| !latch.ends_with(c.as_str())).unwrap().clone();
    assert!(is_protected(&ours, "latch-"), "{ours} is a Curator LeaderLatch node");
    let (data, _) = raw.zk.get_data(&format!("{dir}/{ours}")).await.unwrap();
    assert_eq!(data, b"fencelock", "a latch node's data is the candidate's value");
    raw.zk.delete(&latch, None).await.unwrap();
    let won = waiting.await.unwrap().unwrap();
    assert!(won.term() > czxid as u64);
    won.proclaim(b"proclaimed").await.unwrap();
    assert_eq!(raw.zk.get_data(&format!("{dir}/{ours}")).await.unwrap().0, b"proclaimed");
    won.resign().await.unwrap();
    assert!(election.leader().await.unwrap().is_none());
    client.close().await;
    raw.assert_clean().await;
}
