//! The SQLite mutex's waiter queue and wake-ups: first come, first served across clients (each with its own
//! connection, as separate processes have), no barging by a releaser, the `fair(false)` choice, dead and cancelled
//! waiters, and a waiter woken by another process's commit through the file's change counter.

mod support;

use std::time::Duration;

use fencelock::{Client, ErrorKind, Lease, LockOptions};
use tokio::task::JoinHandle;
use tokio::time::Instant;

const BOUND: Duration = Duration::from_secs(10);

fn fresh_db() -> (std::path::PathBuf, String) {
    let dir = std::env::temp_dir().join(support::unique("fencelock-sqlite-queue"));
    std::fs::create_dir_all(&dir).unwrap();
    let url = format!("sqlite:{}", dir.join("locks.db").display());
    (dir, url)
}

fn unix_micros() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_micros() as i64
}

async fn clients(url: &str, n: usize) -> Vec<Client> {
    let mut out = Vec::new();
    for _ in 0..n {
        out.push(Client::connect(url).await.unwrap());
    }
    out
}

/// Waits, within [`BOUND`], until `n` waiters have a live place in `name`'s queue.
async fn until_waiting(c: &Client, name: &str, n: u64) {
    let deadline = Instant::now() + BOUND;
    while c.inspect(name).await.unwrap().waiters != Some(n) {
        assert!(Instant::now() < deadline, "{name}: never {n} waiter(s) in the queue");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

fn spawn_lock(c: &Client, name: &'static str, opts: LockOptions) -> JoinHandle<fencelock::Result<Lease>> {
    let c = c.clone();
    tokio::spawn(async move { c.lock(name, &opts).await })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_are_served_in_arrival_order() {
    let (dir, url) = fresh_db();
    let cs = clients(&url, 3).await;
    let (a, b, c) = (&cs[0], &cs[1], &cs[2]);
    let opts = LockOptions::default().timeout(BOUND);
    let held = a.lock("L", &opts).await.unwrap();
    let first = spawn_lock(b, "L", opts.clone());
    until_waiting(a, "L", 1).await;
    let second = spawn_lock(c, "L", opts.clone());
    until_waiting(a, "L", 2).await;
    held.release().await.unwrap();
    let b_lease = first.await.unwrap().unwrap();
    assert!(!second.is_finished(), "the later waiter went first");
    let b_token = b_lease.fence();
    b_lease.release().await.unwrap();
    let c_lease = second.await.unwrap().unwrap();
    assert!(c_lease.fence() > b_token);
    c_lease.release().await.unwrap();
    assert_eq!(a.inspect("L").await.unwrap().waiters, Some(0), "granted waiters leave the queue");
    std::fs::remove_dir_all(dir).unwrap();
}

/// A place in the queue, as another process's waiter has it (written by hand, so nothing here races for the lock).
fn queue_place(dir: &std::path::Path, holder: &str, ticket: i64, lives: Duration) {
    let raw = rusqlite::Connection::open(dir.join("locks.db")).unwrap();
    raw.execute(
        "INSERT INTO fencelock_waiters (name, holder, ticket, expires_at) VALUES ('L', ?1, ?2, ?3)",
        rusqlite::params![holder, ticket, unix_micros() + lives.as_micros() as i64],
    )
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_releaser_waits_its_turn_unless_it_asks_for_a_free_for_all() {
    let (dir, url) = fresh_db();
    let c = Client::connect(&url).await.unwrap();
    let held = c.lock("L", &LockOptions::default()).await.unwrap();
    queue_place(&dir, "other:waiter", 1, Duration::from_secs(60));
    held.release().await.unwrap();
    assert!(c.try_lock("L", &LockOptions::default()).await.unwrap().is_none(), "the releaser took the lock back");
    let barged = c.try_lock("L", &LockOptions::default().fair(false)).await.unwrap();
    barged.expect("fair(false) takes a free lock whoever waits").release().await.unwrap();
    assert_eq!(c.inspect("L").await.unwrap().waiters, Some(1), "a try_lock takes no place");
    std::fs::remove_dir_all(dir).unwrap();
}

/// A waiter that died (here: a place written by hand, as a killed process leaves it) holds up a free lock only
/// until its place expires.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_waiters_place_expires() {
    let (dir, url) = fresh_db();
    let c = Client::connect(&url).await.unwrap();
    c.lock("L", &LockOptions::default()).await.unwrap().release().await.unwrap();
    queue_place(&dir, "dead:owner", 1, Duration::from_millis(300));
    assert!(c.try_lock("L", &LockOptions::default()).await.unwrap().is_none(), "a live place counts");
    let lease = c.lock("L", &LockOptions::default().timeout(BOUND)).await.unwrap();
    assert_eq!(c.inspect("L").await.unwrap().waiters, Some(0), "the dead place no longer counts");
    lease.release().await.unwrap();
    std::fs::remove_dir_all(dir).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_that_gives_up_leaves_the_queue() {
    let (dir, url) = fresh_db();
    let cs = clients(&url, 2).await;
    let held = cs[0].lock("L", &LockOptions::default()).await.unwrap();
    let short = LockOptions::default().timeout(Duration::from_millis(200));
    let err = cs[1].lock("L", &short).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Timeout);
    until_waiting(&cs[0], "L", 0).await;
    held.release().await.unwrap();
    let again = cs[0].try_lock("L", &LockOptions::default()).await.unwrap();
    again.expect("no place left behind holds the lock up").release().await.unwrap();

    // Cancelled: the acquire's future is dropped while it waits.
    let held = cs[0].lock("L", &LockOptions::default()).await.unwrap();
    let waiter = spawn_lock(&cs[1], "L", LockOptions::default());
    until_waiting(&cs[0], "L", 1).await;
    waiter.abort();
    until_waiting(&cs[0], "L", 0).await;
    held.release().await.unwrap();
    std::fs::remove_dir_all(dir).unwrap();
}

/// Another process frees the lock (a raw connection, which this process's wake-ups know nothing of): the waiter is
/// woken by the file's change counter. Its timeout is shorter than its longest sleep without a wake-up (the 700 ms
/// refresh of its place), so without the watcher it times out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_is_woken_by_a_commit_from_another_process() {
    let (dir, url) = fresh_db();
    let cs = clients(&url, 2).await;
    let _held = cs[0].lock("L", &LockOptions::default().ttl(Duration::from_secs(60))).await.unwrap();
    let waiter = spawn_lock(&cs[1], "L", LockOptions::default().timeout(Duration::from_millis(600)));
    until_waiting(&cs[0], "L", 1).await;
    let raw = rusqlite::Connection::open(dir.join("locks.db")).unwrap();
    raw.execute("UPDATE fencelock_locks SET holder = NULL, count = 0, expires_at = 0 WHERE name = 'L'", []).unwrap();
    let lease = waiter.await.unwrap().expect("woken by the other connection's commit");
    lease.release().await.unwrap();
    std::fs::remove_dir_all(dir).unwrap();
}
