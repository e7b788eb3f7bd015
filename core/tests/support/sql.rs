//! What every SQL store (SQLite, PostgreSQL, MySQL) must show alike, each test run on a fresh, empty database at `url`.

use fencelock::{Client, ErrorKind, LockOptions};

/// Eight clients connecting at once to an empty database all make (or find) the tables, then exclude each other.
pub async fn eight_clients_create_the_schema_at_once(url: &str) {
    let clients = futures::future::try_join_all((0..8).map(|_| Client::connect(url))).await.unwrap();
    let opts = LockOptions::default();
    let attempts = clients.iter().map(|c| c.try_lock("shared", &opts));
    let leases: Vec<_> = futures::future::try_join_all(attempts).await.unwrap().into_iter().flatten().collect();
    assert_eq!(leases.len(), 1, "exactly one of eight clients takes the lock");
    leases[0].release().await.unwrap();
    for c in clients {
        c.close().await;
    }
}

/// Two spellings of one database's URL (`postgresql://` and `postgres://`, `mariadb://` and `mysql://`) share the
/// lock table.
pub async fn both_schemes_share_the_table(one: &str, other: &str) {
    let (a, b) = (Client::connect(one).await.unwrap(), Client::connect(other).await.unwrap());
    let lease = a.try_lock("scheme", &LockOptions::default()).await.unwrap().unwrap();
    assert!(b.try_lock("scheme", &LockOptions::default()).await.unwrap().is_none());
    assert_eq!(b.inspect("scheme").await.unwrap().holder.as_deref(), Some(lease.holder()));
    lease.release().await.unwrap();
    a.close().await;
    b.close().await;
}

/// A register refuses a token from before its tables were lost: `lose` deletes them (and their epoch), and the next
/// client makes them anew. Without the epoch, the empty register would take the paused holder's old token.
pub async fn a_register_refuses_tokens_from_before_a_loss(url: &str, lose: impl AsyncFnOnce()) {
    let before = Client::connect(url).await.unwrap();
    let lease = before.lock("job", &LockOptions::default()).await.unwrap();
    let old = lease.fence();
    before.fence("out").write(old, b"before").await.unwrap();
    lease.release().await.unwrap();
    before.close().await;

    lose().await;
    let after = Client::connect(url).await.unwrap();
    // A holder paused across the loss writes with its old token.
    let err = after.fence("out").write(old, b"stale").await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Fenced, "{err}");
    // A grant made after the loss is above the epoch and is taken, and taken again (the same write is no refusal).
    let lease = after.lock("job", &LockOptions::default()).await.unwrap();
    after.fence("out").write(lease.fence(), b"after").await.unwrap();
    after.fence("out").write(lease.fence(), b"after").await.unwrap();
    assert_eq!(after.fence("out").read().await.unwrap(), (lease.fence(), b"after".to_vec()));
    lease.release().await.unwrap();
    after.close().await;
}

/// Calls `$m!(tests…)` with the name of every hold test below, so each store runs them all.
#[allow(unused_macros)]
macro_rules! each_hold_test {
    ($m:ident) => {
        $m!(
            readers_share_and_a_writer_excludes,
            a_waiting_writer_blocks_other_clients_readers,
            slot_tokens_rise_per_slot,
            a_crashed_permit_frees_at_its_ttl,
            a_permits_mismatch_names_both_numbers,
            cancelled_hold_acquires_leave_nothing
        );
    };
}
#[allow(unused_imports)]
pub(crate) use each_hold_test;

/// The tables a version without read-write locks and semaphores made, in PostgreSQL's types, with a used mutex row
/// and an epoch.
const OLD_SCHEMA: &str = "
    CREATE TABLE fencelock_locks (name TEXT PRIMARY KEY, holder TEXT, count INTEGER NOT NULL DEFAULT 0,
        expires_at BIGINT NOT NULL DEFAULT 0, fence BIGINT NOT NULL);
    CREATE TABLE fencelock_fences (resource TEXT PRIMARY KEY, token BIGINT NOT NULL, value BYTEA NOT NULL);
    CREATE TABLE fencelock_epoch (id INTEGER PRIMARY KEY, us BIGINT NOT NULL);
    INSERT INTO fencelock_epoch VALUES (1, 1000);
    INSERT INTO fencelock_locks VALUES ('old', NULL, 0, 0, 4242);";

/// A database of the old schema, made by `make(ddl)`, keeps its mutex counters, and its first client makes the
/// new tables: read-write locks and semaphores work, and their tokens pass the old epoch of its registers.
pub async fn an_old_schema_gains_the_hold_tables(url: &str, make: impl AsyncFnOnce(&str)) {
    make(OLD_SCHEMA).await;
    let client = Client::connect(url).await.unwrap();
    let opts = LockOptions::default();
    let lease = client.try_lock("old", &opts).await.unwrap().unwrap();
    assert_eq!(lease.fence(), 4243, "the old counter continues");
    let read = client.rw_lock("old").try_read(&opts).await.unwrap().expect("a read beside the mutex");
    let permit = client.semaphore("old", 2).try_acquire(&opts).await.unwrap().expect("a permit");
    client.fence("out").write(read.fence(), b"r").await.unwrap();
    client.fence("out").write(permit.fence(), b"p").await.unwrap();
    for l in [lease, read, permit] {
        l.release().await.unwrap();
    }
    client.close().await;
}

/// How long a hold test waits for a state another client reaches.
const BOUND: std::time::Duration = std::time::Duration::from_secs(10);

/// Tries `attempt` until it finds the lock busy (`None`), releasing what it takes meanwhile.
async fn until_busy<F: AsyncFn() -> Option<fencelock::Lease>>(what: &str, attempt: F) {
    let deadline = tokio::time::Instant::now() + BOUND;
    while let Some(lease) = attempt().await {
        lease.release().await.unwrap();
        assert!(tokio::time::Instant::now() < deadline, "{what} never became busy");
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

/// Readers of several clients share the lock and one token; a writer waits for them and draws a larger token,
/// and no reader gets in while it writes.
pub async fn readers_share_and_a_writer_excludes(url: &str) {
    let (a, b, c) =
        (Client::connect(url).await.unwrap(), Client::connect(url).await.unwrap(), Client::connect(url).await.unwrap());
    let opts = LockOptions::default();
    let r1 = a.rw_lock("rw").read(&opts).await.unwrap();
    let r2 = b.rw_lock("rw").try_read(&opts).await.unwrap().expect("a second reader shares the lock");
    assert_eq!(r1.fence(), r2.fence(), "overlapping readers share their epoch's token");
    assert!(c.rw_lock("rw").try_write(&opts).await.unwrap().is_none(), "a writer beside readers");
    r1.release().await.unwrap();
    assert!(c.rw_lock("rw").try_write(&opts).await.unwrap().is_none(), "a writer beside a reader");
    r2.release().await.unwrap();
    let w = c.rw_lock("rw").try_write(&opts).await.unwrap().expect("the last reader left");
    assert!(w.fence() > r1.fence());
    assert!(a.rw_lock("rw").try_read(&opts).await.unwrap().is_none(), "a reader beside a writer");
    assert!(b.rw_lock("rw").try_write(&opts).await.unwrap().is_none(), "two writers");
    w.release().await.unwrap();
    // A new run of reads is a new epoch, above the write's.
    let r3 = a.rw_lock("rw").try_read(&opts).await.unwrap().unwrap();
    let r4 = b.rw_lock("rw").try_read(&opts).await.unwrap().unwrap();
    assert!(r3.fence() > w.fence());
    assert_eq!(r3.fence(), r4.fence());
    r3.release().await.unwrap();
    r4.release().await.unwrap();
    // A mutex of the same name is another record: its counter is not the read-write lock's.
    let m = a.try_lock("rw", &opts).await.unwrap().expect("the mutex \"rw\" is free");
    let w2 = c.rw_lock("rw").try_write(&opts).await.unwrap().expect("the read-write lock is not the mutex");
    assert!(w2.fence() > r3.fence());
    w2.release().await.unwrap();
    m.release().await.unwrap();
    for client in [a, b, c] {
        client.close().await;
    }
}

/// A writer of one client waiting for another client's reader keeps a third client's new readers out, gets the
/// lock when the reader leaves, and a writer that timed out leaves no mark behind.
pub async fn a_waiting_writer_blocks_other_clients_readers(url: &str) {
    let (a, b, c) =
        (Client::connect(url).await.unwrap(), Client::connect(url).await.unwrap(), Client::connect(url).await.unwrap());
    let opts = LockOptions::default();
    let read = a.rw_lock("pref").read(&opts).await.unwrap();
    let writer = {
        let b = b.clone();
        tokio::spawn(async move { b.rw_lock("pref").write(&LockOptions::default().timeout(BOUND)).await })
    };
    until_busy("a reader behind a waiting writer", async || c.rw_lock("pref").try_read(&opts).await.unwrap()).await;
    read.release().await.unwrap();
    let w = tokio::time::timeout(BOUND, writer).await.expect("the writer follows the reader").unwrap().unwrap();
    assert!(w.fence() > read.fence());
    w.release().await.unwrap();
    // A writer that gives up takes its mark with it: readers get in at once.
    let read = a.rw_lock("pref").read(&opts).await.unwrap();
    let gave_up = b.rw_lock("pref").write(&LockOptions::default().timeout(std::time::Duration::from_millis(300))).await;
    assert_eq!(gave_up.unwrap_err().kind(), ErrorKind::Timeout);
    let joined = c.rw_lock("pref").try_read(&opts).await.unwrap().expect("a timed-out writer left its mark");
    assert_eq!(joined.fence(), read.fence());
    joined.release().await.unwrap();
    read.release().await.unwrap();
    for client in [a, b, c] {
        client.close().await;
    }
}

/// Each permit has its own slot, and a slot's token rises with every grant of it, whatever the other slots do
/// and across the semaphore standing empty.
pub async fn slot_tokens_rise_per_slot(url: &str) {
    let (a, b) = (Client::connect(url).await.unwrap(), Client::connect(url).await.unwrap());
    let opts = LockOptions::default();
    let (sa, sb) = (a.semaphore("sem", 2), b.semaphore("sem", 2));
    assert_eq!(sa.available().await.unwrap(), 2);
    let p1 = sa.acquire(&opts).await.unwrap();
    let p2 = sb.acquire(&opts).await.unwrap();
    assert_ne!(p1.slot(), p2.slot());
    assert!(p1.slot().unwrap() < 2 && p2.slot().unwrap() < 2);
    assert!(sa.try_acquire(&opts).await.unwrap().is_none(), "a third permit of two");
    assert_eq!(sb.available().await.unwrap(), 0);
    p1.release().await.unwrap();
    let p3 = sb.try_acquire(&opts).await.unwrap().expect("the freed slot");
    assert_eq!((p3.slot(), p3.fence() > p1.fence()), (p1.slot(), true));
    p2.release().await.unwrap();
    p3.release().await.unwrap();
    assert_eq!(sa.available().await.unwrap(), 2);
    // Empty again; the slots' counters stay in their rows.
    let (q1, q2) = (sa.acquire(&opts).await.unwrap(), sb.acquire(&opts).await.unwrap());
    let last = |slot| if slot == p3.slot() { p3.fence() } else { p2.fence() };
    assert!(q1.fence() > last(q1.slot()) && q2.fence() > last(q2.slot()), "a slot's token went back");
    q1.release().await.unwrap();
    q2.release().await.unwrap();
    a.close().await;
    b.close().await;
}

/// A permit whose holder stops renewing (a crash: the lease forgotten, no watchdog) frees its slot at its TTL and
/// not before; its renew then reports `LockLost`.
pub async fn a_crashed_permit_frees_at_its_ttl(url: &str) {
    let (a, b) = (Client::connect(url).await.unwrap(), Client::connect(url).await.unwrap());
    let ttl = std::time::Duration::from_millis(800);
    let crashed = a.semaphore("crash", 1).acquire(&LockOptions::default().ttl(ttl).watchdog(false)).await.unwrap();
    let start = tokio::time::Instant::now();
    let (slot, token) = (crashed.slot(), crashed.fence());
    let fresh = b.semaphore("crash", 1).acquire(&LockOptions::default().timeout(BOUND)).await.unwrap();
    // The TTL less the allowed drift (1 % + 2 ms), counted from after the grant.
    assert!(
        start.elapsed() >= ttl - ttl / 100 - std::time::Duration::from_millis(2),
        "freed after {:?}",
        start.elapsed()
    );
    assert_eq!((fresh.slot(), fresh.fence() > token), (slot, true));
    assert_eq!(crashed.renew(None).await.unwrap_err().kind(), ErrorKind::LockLost);
    fresh.release().await.unwrap();
    a.close().await;
    b.close().await;
}

/// Clients that disagree on the number of permits get `InvalidArgument` naming both numbers while a permit is
/// held; a semaphore nobody holds takes the new number.
pub async fn a_permits_mismatch_names_both_numbers(url: &str) {
    let (a, b) = (Client::connect(url).await.unwrap(), Client::connect(url).await.unwrap());
    let opts = LockOptions::default();
    let held = a.semaphore("n", 2).acquire(&opts).await.unwrap();
    let err = b.semaphore("n", 3).try_acquire(&opts).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    let text = err.to_string();
    assert!(text.contains('2') && text.contains('3'), "{text}");
    assert_eq!(b.semaphore("n", 3).available().await.unwrap_err().kind(), ErrorKind::InvalidArgument);
    assert_eq!(b.semaphore("n", 2).available().await.unwrap(), 1);
    held.release().await.unwrap();
    let three = b.semaphore("n", 3).try_acquire(&opts).await.unwrap().expect("nobody held: the number may change");
    assert_eq!(a.semaphore("n", 2).try_acquire(&opts).await.unwrap_err().kind(), ErrorKind::InvalidArgument);
    three.release().await.unwrap();
    a.close().await;
    b.close().await;
}

/// Read, write and permit acquires dropped in flight, or timed out, leave no hold and no mark behind.
pub async fn cancelled_hold_acquires_leave_nothing(url: &str) {
    let (a, checker) = (Client::connect(url).await.unwrap(), Client::connect(url).await.unwrap());
    let opts = LockOptions::default();
    let mut in_flight = 0;
    for i in 0..30 {
        let (rw, sem) = (a.rw_lock("gone"), a.semaphore("gone", 1));
        let mut acquire: std::pin::Pin<Box<dyn Future<Output = fencelock::Result<fencelock::Lease>> + Send>> =
            match i % 3 {
                0 => Box::pin(async move { rw.read(&LockOptions::default()).await }),
                1 => Box::pin(async move { rw.write(&LockOptions::default()).await }),
                _ => Box::pin(async move { sem.acquire(&LockOptions::default()).await }),
            };
        let busy = keep_busy(url);
        match futures::poll!(&mut acquire) {
            std::task::Poll::Pending => in_flight += 1,
            std::task::Poll::Ready(lease) => lease.unwrap().release().await.unwrap(),
        }
        drop(acquire);
        drop(busy);
        // Behind a statement still in flight on `a`'s connection (SQLite runs them in order): it has made its record.
        a.fence("barrier").read().await.unwrap();
        let deadline = tokio::time::Instant::now() + BOUND;
        loop {
            let write = checker.rw_lock("gone").try_write(&opts).await.unwrap();
            let free = checker.semaphore("gone", 1).available().await.unwrap() == 1;
            let clean = write.is_some() && free && a.local_entries() == 0;
            if let Some(w) = write {
                w.release().await.unwrap();
            }
            if clean {
                break;
            }
            assert!(tokio::time::Instant::now() < deadline, "a dropped acquire left a hold behind");
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
    }
    assert!(in_flight > 0, "no acquire was dropped in flight, so nothing was tested");
    // Timed out behind a holder: the permit and the write leave nothing either.
    let (w, p) = (
        checker.rw_lock("gone").write(&opts).await.unwrap(),
        checker.semaphore("gone", 1).acquire(&opts).await.unwrap(),
    );
    let short = LockOptions::default().timeout(std::time::Duration::from_millis(200));
    assert_eq!(a.rw_lock("gone").read(&short).await.unwrap_err().kind(), ErrorKind::Timeout);
    assert_eq!(a.semaphore("gone", 1).acquire(&short).await.unwrap_err().kind(), ErrorKind::Timeout);
    w.release().await.unwrap();
    p.release().await.unwrap();
    assert_eq!(checker.semaphore("gone", 1).available().await.unwrap(), 1);
    checker.rw_lock("gone").try_write(&opts).await.unwrap().expect("nothing left").release().await.unwrap();
    a.close().await;
    checker.close().await;
}

/// A waiting writer that died (its client gone without abandoning) leaves its mark in the documented layout
/// (`fencelock_rwholds` mode 2, living to `expires_at`): new readers wait for it, and get in once it expires.
/// `exec` runs SQL on the database directly, after the tables were made.
pub async fn a_dead_writers_mark_expires(url: &str, exec: impl AsyncFn(&str)) {
    let client = Client::connect(url).await.unwrap();
    let host_us = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_micros() as i64;
    let lives = std::time::Duration::from_millis(600);
    exec(&format!(
        "INSERT INTO fencelock_rwlocks (name, fence, epoch) VALUES ('dead', 0, 0);
         INSERT INTO fencelock_rwholds (name, holder, mode, expires_at, token) VALUES ('dead', 'gone:w', 2, {}, 0)",
        host_us + lives.as_micros() as i64
    ))
    .await;
    let start = tokio::time::Instant::now();
    assert!(
        client.rw_lock("dead").try_read(&LockOptions::default()).await.unwrap().is_none(),
        "a reader passed a mark"
    );
    let read = client.rw_lock("dead").read(&LockOptions::default().timeout(BOUND)).await.unwrap();
    // Less a little: the mark's expiry was set from the host clock before `start`.
    assert!(start.elapsed() >= lives - std::time::Duration::from_millis(100), "in after {:?}", start.elapsed());
    read.release().await.unwrap();
    client.close().await;
}

/// For a `sqlite:` URL, a second connection that holds the file's write lock while it lives: SQLite's statements run
/// inline unless the file is busy, so only then does an acquire suspend in its statement, to finish on a blocking
/// thread after its future is dropped (the case a cancel test is after). `None` for servers, whose statements always
/// suspend.
pub fn keep_busy(url: &str) -> Option<rusqlite::Connection> {
    let path = url.strip_prefix("sqlite:")?;
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.execute_batch("BEGIN IMMEDIATE").unwrap();
    Some(conn)
}
