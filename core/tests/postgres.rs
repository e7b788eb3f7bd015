//! The PostgreSQL backend against a real server (`FENCELOCK_TEST_POSTGRES`, started by scripts/services.sh). Each
//! test makes a database of its own, so it starts from an empty schema, and drops it afterwards.

mod support;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fencelock::{Client, ClientOptions, ErrorKind, LockOptions};
use tokio::time::Instant;

/// A database made for one test: created empty, checked for held rows by `finish`, dropped on drop.
struct TestDb {
    base: String,
    name: String,
    url: String,
}

/// `url` pointing at database `db`.
fn with_dbname(url: &str, db: &str) -> String {
    let (base, query) = url.split_once('?').map_or((url, String::new()), |(b, q)| (b, format!("?{q}")));
    let authority = base.find("://").map_or(0, |i| i + 3);
    let end = base[authority..].find('/').map_or(base.len(), |i| authority + i);
    format!("{}/{db}{query}", &base[..end])
}

/// A plain SQL connection, for creating databases and looking at tables directly.
async fn sql(url: &str) -> tokio_postgres::Client {
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(conn);
    client
}

impl TestDb {
    /// `None` (the test is skipped) when no server is configured.
    async fn create() -> Option<TestDb> {
        let base = support::service_url("FENCELOCK_TEST_POSTGRES")?;
        let name = format!("fencelock_t_{}", uuid::Uuid::new_v4().simple());
        sql(&base).await.batch_execute(&format!("CREATE DATABASE {name}")).await.unwrap();
        Some(TestDb { url: with_dbname(&base, &name), base, name })
    }

    async fn sql(&self) -> tokio_postgres::Client {
        sql(&self.url).await
    }

    /// Checks that no lock row is left held: every test releases what it takes.
    async fn finish(self) {
        let held: i64 = self
            .sql()
            .await
            .query_one("SELECT count(*) FROM fencelock_locks WHERE holder IS NOT NULL", &[])
            .await
            .unwrap()
            .get(0);
        assert_eq!(held, 0, "rows still held in {}", self.name);
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        // A runtime of its own on a thread of its own: this also runs while a failed test unwinds.
        let (base, name) = (self.base.clone(), self.name.clone());
        let dropped = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            rt.block_on(async { sql(&base).await.batch_execute(&format!("DROP DATABASE {name} WITH (FORCE)")).await })
        });
        if let Err(e) = dropped.join().unwrap() {
            eprintln!("could not drop test database {}: {e}", self.name);
        }
    }
}

/// The pid of the connection LISTENing for `lock`, other than `not`, once there is one. The channel is computed
/// here with SQL (`'fencelock_' || md5(name)`), which also checks the documented formula.
async fn listener_pid(sql: &tokio_postgres::Client, lock: &str, not: Option<i32>) -> i32 {
    listening(sql, lock.as_bytes(), not).await
}

/// The pid of the connection LISTENing on `'fencelock_' || md5(key)`, other than `not`, once there is one.
async fn listening(sql: &tokio_postgres::Client, key: &[u8], not: Option<i32>) -> i32 {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let row = sql
            .query_opt(
                "SELECT pid FROM pg_stat_activity
                 WHERE datname = current_database() AND query = 'LISTEN fencelock_' || md5($1::bytea) AND pid <> $2",
                &[&key, &not.unwrap_or(0)],
            )
            .await
            .unwrap();
        if let Some(row) = row {
            return row.get(0);
        }
        assert!(Instant::now() < deadline, "no connection started listening for {:?}", String::from_utf8_lossy(key));
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

fn host_micros() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_micros() as u64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_clients_create_the_schema_at_once() {
    let Some(db) = TestDb::create().await else {
        return;
    };
    support::sql::eight_clients_create_the_schema_at_once(&db.url).await;
    db.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_wakes_a_waiter_long_before_the_ttl() {
    let Some(db) = TestDb::create().await else {
        return;
    };
    let (holder, waiter) = (Client::connect(&db.url).await.unwrap(), Client::connect(&db.url).await.unwrap());
    let ttl = LockOptions::default().ttl(Duration::from_secs(30));
    let first = holder.lock("handoff", &ttl).await.unwrap();
    let waiting = tokio::spawn(async move {
        let lease = waiter.lock("handoff", &LockOptions::default().timeout(Duration::from_secs(20))).await;
        (lease, Instant::now(), waiter)
    });
    listener_pid(&db.sql().await, "handoff", None).await;

    let released = Instant::now();
    first.release().await.unwrap();
    let (second, acquired, waiter) = waiting.await.unwrap();
    let second = second.unwrap();
    // The holder's TTL was 30 s: only the notification explains a hand-off this fast.
    assert!(acquired - released < Duration::from_secs(2), "hand-off took {:?}", acquired - released);
    assert!(second.fence() > first.fence());
    second.release().await.unwrap();
    waiter.close().await;
    holder.close().await;
    db.finish().await;
}

/// A raw connection LISTENing on lock `name`'s channel: the payloads of its notifications, in commit order.
async fn notifications(
    url: &str,
    name: &str,
) -> (tokio_postgres::Client, tokio::sync::mpsc::UnboundedReceiver<String>) {
    let (client, mut conn) = tokio_postgres::connect(url, tokio_postgres::NoTls).await.unwrap();
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Some(Ok(message)) = std::future::poll_fn(|cx| conn.poll_message(cx)).await {
            if let tokio_postgres::AsyncMessage::Notification(n) = message {
                let _ = tx.send(n.payload().to_string());
            }
        }
    });
    let listen: String = client.query_one("SELECT 'LISTEN fencelock_' || md5($1)", &[&name]).await.unwrap().get(0);
    client.batch_execute(&listen).await.unwrap();
    (client, rx)
}

/// The payload of the next notification, which a `marker` sent after the step under test bounds: notifications
/// arrive in commit order, so a release that notified shows up before the marker.
async fn next_before(
    raw: &tokio_postgres::Client,
    rx: &mut tokio::sync::mpsc::UnboundedReceiver<String>,
    name: &str,
) -> String {
    raw.execute("SELECT pg_notify('fencelock_' || md5($1), 'marker')", &[&name]).await.unwrap();
    tokio::time::timeout(Duration::from_secs(10), rx.recv()).await.expect("a notification").unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_notifies_only_when_someone_waits() {
    let Some(db) = TestDb::create().await else {
        return;
    };
    let (a, b) = (Client::connect(&db.url).await.unwrap(), Client::connect(&db.url).await.unwrap());
    let (raw, mut rx) = notifications(&db.url, "hint").await;
    let opts = LockOptions::default().ttl(Duration::from_secs(30));
    // Uncontended, and contended only by a try_lock, which does not wait: no NOTIFY.
    let first = a.lock("hint", &opts).await.unwrap();
    assert!(b.try_lock("hint", &opts).await.unwrap().is_none());
    first.release().await.unwrap();
    assert_eq!(next_before(&raw, &mut rx, "hint").await, "marker", "a release nobody waited for notified");
    // A waiting acquire raises the hint: the release notifies it.
    let second = a.lock("hint", &opts).await.unwrap();
    let waiting = tokio::spawn(async move {
        let lease = b.lock("hint", &LockOptions::default().timeout(Duration::from_secs(20))).await.unwrap();
        lease.release().await.unwrap();
        b
    });
    listener_pid(&db.sql().await, "hint", Some(raw_pid(&raw).await)).await;
    second.release().await.unwrap();
    let b = waiting.await.unwrap();
    assert_eq!(next_before(&raw, &mut rx, "hint").await, "", "the release a waiter waited for sent no NOTIFY");
    a.close().await;
    b.close().await;
    db.finish().await;
}

/// The backend pid of `client`'s connection.
async fn raw_pid(client: &tokio_postgres::Client) -> i32 {
    client.query_one("SELECT pg_backend_pid()", &[]).await.unwrap().get(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_survives_losing_its_listening_connection() {
    let Some(db) = TestDb::create().await else {
        return;
    };
    let (holder, waiter) = (Client::connect(&db.url).await.unwrap(), Client::connect(&db.url).await.unwrap());
    let first = holder.lock("relisten", &LockOptions::default().ttl(Duration::from_secs(30))).await.unwrap();
    let waiting = tokio::spawn(async move {
        let lease = waiter.lock("relisten", &LockOptions::default().timeout(Duration::from_secs(20))).await;
        (lease, waiter)
    });
    let sql = db.sql().await;
    let old = listener_pid(&sql, "relisten", None).await;
    let killed: bool = sql.query_one("SELECT pg_terminate_backend($1, 5000)", &[&old]).await.unwrap().get(0);
    assert!(killed);
    // The waiter notices, re-checks the lock and listens again on a new connection.
    listener_pid(&sql, "relisten", Some(old)).await;

    first.release().await.unwrap();
    let (second, waiter) = waiting.await.unwrap();
    second.unwrap().release().await.unwrap();
    waiter.close().await;
    holder.close().await;
    db.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn times_come_from_the_server_clock() {
    let Some(db) = TestDb::create().await else {
        return;
    };
    // A server whose clock runs an hour ahead of this host: an unqualified clock_timestamp() finds the skewed one.
    db.sql()
        .await
        .batch_execute(&format!(
            "CREATE SCHEMA skew;
             CREATE FUNCTION skew.clock_timestamp() RETURNS timestamptz LANGUAGE sql
                 AS $$ SELECT pg_catalog.clock_timestamp() + interval '1 hour' $$;
             ALTER DATABASE {} SET search_path = skew, pg_catalog, public;",
            db.name
        ))
        .await
        .unwrap();
    let client = Client::connect(&db.url).await.unwrap();
    let hour = 3_600_000_000;
    let lease = client.lock("clock", &LockOptions::default().ttl(Duration::from_secs(60))).await.unwrap();
    // A new counter is seeded from the server's clock, not the host's.
    assert!(lease.fence() > host_micros() + hour - 60_000_000, "token {} not from the server clock", lease.fence());
    let expires: i64 = db.sql().await.query_one("SELECT expires_at FROM fencelock_locks", &[]).await.unwrap().get(0);
    assert!(expires as u64 > host_micros() + hour, "expiry {expires} not from the server clock");
    // By the server's clock the lease has its full TTL left; by the host's it would have an hour more.
    let left = client.inspect("clock").await.unwrap().remaining.unwrap();
    assert!(left > Duration::from_secs(50) && left <= Duration::from_secs(60), "remaining {left:?}");
    lease.release().await.unwrap();
    client.close().await;
    db.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_connection_is_made_again_on_the_next_call() {
    let Some(db) = TestDb::create().await else {
        return;
    };
    let client = Client::connect(&db.url).await.unwrap();
    let before = client.try_lock("reconnect", &LockOptions::default()).await.unwrap().unwrap();
    before.release().await.unwrap();
    db.sql()
        .await
        .execute(
            "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity
             WHERE datname = current_database() AND pid <> pg_backend_pid()",
            &[],
        )
        .await
        .unwrap();
    // The first call may still meet the dead connection; the one after it connects afresh.
    if let Err(e) = client.inspect("reconnect").await {
        assert_eq!(e.kind(), ErrorKind::Unavailable, "{e}");
    }
    let after = client.try_lock("reconnect", &LockOptions::default()).await.unwrap().unwrap();
    assert!(after.fence() > before.fence());
    after.release().await.unwrap();
    client.close().await;
    db.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_schemes_share_the_table() {
    let Some(db) = TestDb::create().await else {
        return;
    };
    support::sql::both_schemes_share_the_table(&db.url.replacen("postgres://", "postgresql://", 1), &db.url).await;
    db.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_register_refuses_tokens_from_before_its_tables_were_lost() {
    let Some(db) = TestDb::create().await else {
        return;
    };
    support::sql::a_register_refuses_tokens_from_before_a_loss(&db.url, async || {
        let drop = "DROP TABLE fencelock_locks, fencelock_fences, fencelock_epoch";
        db.sql().await.batch_execute(drop).await.unwrap();
    })
    .await;
    db.finish().await;
}

/// Errors that need no server: they name the host, never the password, and come within the connect timeout.
#[tokio::test]
async fn bad_urls_and_dead_servers_give_clear_errors() {
    let opts = ClientOptions::default().connect_timeout(Duration::from_millis(500));
    for url in ["postgres://u:sekrit@127.0.0.1:1/db", "postgresql://u@127.0.0.1:1/db?password=sekrit"] {
        let err = Client::connect_with(url, &opts).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
        assert!(err.message().contains("127.0.0.1:1") && !err.message().contains("sekrit"), "{err}");
    }

    // A server that accepts connections and never answers: the connect timeout bounds the wait.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("postgres://u@{}/db", silent.local_addr().unwrap());
    let started = Instant::now();
    let err = Client::connect_with(&url, &opts).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    assert!(started.elapsed() < Duration::from_secs(3), "took {:?}", started.elapsed());

    let err = Client::connect_with("postgres://h:notaport/db", &opts).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    // TLS is built in: sslmode=require gets as far as the (dead) server.
    let err = Client::connect_with("postgres://u@127.0.0.1:1/db?sslmode=require", &opts).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
}

#[test]
fn database_names_are_replaced() {
    assert_eq!(with_dbname("postgres://u@h:1/a?x=y", "b"), "postgres://u@h:1/b?x=y");
    assert_eq!(with_dbname("postgres://h:1", "b"), "postgres://h:1/b");
}

/// The read-write lock and semaphore tests every SQL store runs (`support/sql.rs`), each on a new database.
macro_rules! hold_tests {
    ($($test:ident),*) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $test() {
            let Some(db) = TestDb::create().await else {
                return;
            };
            support::sql::$test(&db.url).await;
            db.finish_holds().await;
        }
    )*};
}

support::sql::each_hold_test!(hold_tests);

impl TestDb {
    /// Checks that no live read, write, mark or permit row is left, then what `finish` checks.
    async fn finish_holds(self) {
        let now = "(extract(epoch FROM clock_timestamp()) * 1000000)::bigint";
        let sql = self.sql().await;
        let live = format!(
            "SELECT (SELECT count(*) FROM fencelock_rwholds WHERE expires_at > {now})
                  + (SELECT count(*) FROM fencelock_slots WHERE holder IS NOT NULL AND expires_at > {now})"
        );
        let held: i64 = sql.query_one(&live, &[]).await.unwrap().get(0);
        assert_eq!(held, 0, "holds still live in {}", self.name);
        self.finish().await;
    }
}

/// The pid of the connection LISTENing for holds of `family` on `name`, by the documented formula
/// `'fencelock_' || md5(<family> NUL <name>)`.
async fn hold_listener(sql: &tokio_postgres::Client, family: &str, name: &str) -> i32 {
    listening(sql, format!("{family}\0{name}").as_bytes(), None).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn releasing_a_read_or_a_permit_wakes_the_waiter_long_before_the_ttl() {
    let Some(db) = TestDb::create().await else {
        return;
    };
    let holder = Client::connect(&db.url).await.unwrap();
    // Two waiting clients: a listening connection shows only its last LISTEN.
    let (waiter, other) = (Client::connect(&db.url).await.unwrap(), Client::connect(&db.url).await.unwrap());
    let long = LockOptions::default().ttl(Duration::from_secs(30)).timeout(Duration::from_secs(20));
    let read = holder.rw_lock("wake").read(&long).await.unwrap();
    let permit = holder.semaphore("wake", 1).acquire(&long).await.unwrap();
    let (w, l) = (waiter.clone(), long.clone());
    let writer = tokio::spawn(async move { (w.rw_lock("wake").write(&l).await, Instant::now()) });
    let (w, l) = (other.clone(), long.clone());
    let second = tokio::spawn(async move { (w.semaphore("wake", 1).acquire(&l).await, Instant::now()) });
    let sql = db.sql().await;
    hold_listener(&sql, "rwlock", "wake").await;
    let released = Instant::now();
    read.release().await.unwrap();
    let (write, at) = writer.await.unwrap();
    // Every hold lived 30 s: only the notification explains a hand-off this fast.
    assert!(at - released < Duration::from_secs(2), "read → write hand-off took {:?}", at - released);
    write.unwrap().release().await.unwrap();
    hold_listener(&sql, "semaphore", "wake").await;
    let released = Instant::now();
    permit.release().await.unwrap();
    let (next, at) = second.await.unwrap();
    assert!(at - released < Duration::from_secs(2), "permit hand-off took {:?}", at - released);
    next.unwrap().release().await.unwrap();
    for client in [holder, waiter, other] {
        client.close().await;
    }
    db.finish_holds().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_of_the_old_schema_gains_the_hold_tables() {
    let Some(db) = TestDb::create().await else {
        return;
    };
    let sql = db.sql().await;
    support::sql::an_old_schema_gains_the_hold_tables(&db.url, async |ddl| sql.batch_execute(ddl).await.unwrap()).await;
    db.finish_holds().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_writers_mark_expires() {
    let Some(db) = TestDb::create().await else {
        return;
    };
    let sql = db.sql().await;
    support::sql::a_dead_writers_mark_expires(&db.url, async |q| sql.batch_execute(q).await.unwrap()).await;
    db.finish_holds().await;
}
