//! The MySQL / MariaDB backend against a real server (`FENCELOCK_TEST_MYSQL`, MariaDB started by
//! scripts/services.sh). Each test makes a database of its own, so it starts from an empty schema, and drops it
//! afterwards.

mod support;

use std::time::Duration;

use fencelock::{Client, ClientOptions, ErrorKind, LockOptions};
use mysql_async::prelude::Queryable;
use tokio::time::Instant;

/// A database made for one test: created empty, checked for held rows by `finish`, dropped by `finish`.
struct TestDb {
    admin: mysql_async::Conn,
    name: String,
    url: String,
}

/// `url` pointing at database `db`.
fn with_dbname(url: &str, db: &str) -> String {
    let authority = url.find("://").map_or(0, |i| i + 3);
    let end = url[authority..].find(['/', '?']).map_or(url.len(), |i| authority + i);
    format!("{}/{db}", &url[..end])
}

/// A plain SQL connection over TCP, for creating databases and looking at tables directly.
async fn sql(url: &str) -> mysql_async::Conn {
    let opts = mysql_async::OptsBuilder::from_opts(mysql_async::Opts::from_url(url).unwrap()).prefer_socket(false);
    mysql_async::Conn::new(opts).await.unwrap()
}

impl TestDb {
    /// `None` (the test is skipped) when no server is configured.
    async fn create() -> Option<TestDb> {
        let base = support::service_url("FENCELOCK_TEST_MYSQL")?;
        let name = format!("fencelock_t_{}", uuid::Uuid::new_v4().simple());
        let mut admin = sql(&base).await;
        admin.query_drop(format!("CREATE DATABASE {name}")).await.unwrap();
        Some(TestDb { admin, url: with_dbname(&base, &name), name })
    }

    async fn query<T: mysql_async::prelude::FromRow + Send + 'static>(&mut self, q: &str) -> Vec<T> {
        self.admin.query(format!("/* {} */ {q}", self.name).replace("$db", &self.name)).await.unwrap()
    }

    /// Checks that no lock row is left held (every test releases what it takes), then drops the database.
    async fn finish(mut self) {
        let held: Vec<i64> = self.query("SELECT COUNT(*) FROM $db.fencelock_locks WHERE holder IS NOT NULL").await;
        self.query::<i64>("DROP DATABASE $db").await;
        assert_eq!(held, [0], "rows still held in {}", self.name);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_clients_create_the_schema_at_once() {
    let Some(mut db) = TestDb::create().await else {
        return;
    };
    support::sql::eight_clients_create_the_schema_at_once(&db.url).await;
    assert_eq!(db.query::<i64>("SELECT COUNT(*) FROM $db.fencelock_epoch").await, [1]);
    db.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_compare_byte_for_byte() {
    let Some(db) = TestDb::create().await else {
        return;
    };
    // A text column's default collation would make these one lock: case folded, trailing spaces padded.
    let client = Client::connect(&db.url).await.unwrap();
    let names = ["Orders", "orders", "orders ", "ørders"];
    let mut leases = Vec::new();
    for name in names {
        let lease = client.try_lock(name, &LockOptions::default()).await.unwrap();
        leases.push(lease.unwrap_or_else(|| panic!("{name:?} was taken by another name's lease")));
    }
    for lease in leases {
        lease.release().await.unwrap();
    }
    client.close().await;
    db.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_connection_is_made_again_on_the_next_call() {
    let Some(mut db) = TestDb::create().await else {
        return;
    };
    let client = Client::connect(&db.url).await.unwrap();
    let held = client.lock("reconnect", &LockOptions::default()).await.unwrap();
    let ids: Vec<u64> = db.query("SELECT id FROM information_schema.processlist WHERE db = '$db'").await;
    assert!(!ids.is_empty(), "the client has no connection to kill");
    for id in ids {
        // One that ended meanwhile is "Unknown thread id".
        let _ = db.admin.query_drop(format!("KILL CONNECTION {id}")).await;
    }
    // The first call may still meet a dead connection; the one after it connects afresh, and the grant survived.
    if let Err(e) = held.renew(Some(Duration::from_secs(30))).await {
        assert_eq!(e.kind(), ErrorKind::Unavailable, "{e}");
    }
    held.renew(Some(Duration::from_secs(30))).await.unwrap();
    held.release().await.unwrap();
    let after = client.try_lock("reconnect", &LockOptions::default()).await.unwrap().unwrap();
    assert!(after.fence() > held.fence());
    after.release().await.unwrap();
    client.close().await;
    db.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_schemes_share_the_table() {
    let Some(db) = TestDb::create().await else {
        return;
    };
    support::sql::both_schemes_share_the_table(&db.url.replacen("mysql://", "mariadb://", 1), &db.url).await;
    db.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_register_refuses_tokens_from_before_its_tables_were_lost() {
    let Some(mut db) = TestDb::create().await else {
        return;
    };
    let url = db.url.clone();
    support::sql::a_register_refuses_tokens_from_before_a_loss(&url, async || {
        db.query::<i64>("DROP TABLE $db.fencelock_locks, $db.fencelock_fences, $db.fencelock_epoch").await;
    })
    .await;
    db.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credentials_are_checked_and_never_shown() {
    let Some(mut db) = TestDb::create().await else {
        return;
    };
    let user = format!("u{}", &db.name[12..24]);
    db.query::<i64>(&format!("CREATE USER '{user}'@'%' IDENTIFIED BY 'right-pw'")).await;
    // Rows only: a user who may not create tables connects once someone else made them.
    db.query::<i64>(&format!("GRANT SELECT, INSERT, UPDATE ON $db.* TO '{user}'@'%'")).await;
    let host = db.url.split("@").nth(1).unwrap().to_string();
    let opts = ClientOptions::default().connect_timeout(Duration::from_secs(5));

    let err = Client::connect_with(&format!("mysql://{user}:wrong-pw@{host}"), &opts).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    assert!(!err.retryable(), "a refused password is not worth retrying: {err}");
    assert!(err.message().contains("authentication failed") && !err.message().contains("wrong-pw"), "{err}");

    let err = Client::connect_with(&format!("mysql://{user}:right-pw@{host}"), &opts).await.unwrap_err();
    assert!(err.message().contains("fencelock tables") && !err.message().contains("right-pw"), "{err}");
    Client::connect(&db.url).await.unwrap().close().await; // root makes the tables
    let limited = Client::connect_with(&format!("mysql://{user}:right-pw@{host}"), &opts).await.unwrap();
    assert!(!limited.url().contains("right-pw"), "{}", limited.url());
    let lease = limited.lock("limited", &LockOptions::default()).await.unwrap();
    lease.release().await.unwrap();
    limited.close().await;
    db.query::<i64>(&format!("DROP USER '{user}'@'%'")).await;
    db.finish().await;
}

/// Errors that need no server: they name the host, never the password, and come within the connect timeout.
#[tokio::test]
async fn bad_urls_and_dead_servers_give_clear_errors() {
    let opts = ClientOptions::default().connect_timeout(Duration::from_millis(500));
    let err = Client::connect_with("mysql://u:sekrit@127.0.0.1:1/db", &opts).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    assert!(err.message().contains("127.0.0.1:1") && !err.message().contains("sekrit"), "{err}");

    // A server that accepts connections and never answers: the connect timeout bounds the wait.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("mysql://u@{}/db", silent.local_addr().unwrap());
    let started = Instant::now();
    let err = Client::connect_with(&url, &opts).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    assert!(started.elapsed() < Duration::from_secs(3), "took {:?}", started.elapsed());

    for (url, kind, says) in [
        ("mysql://h:notaport/db", ErrorKind::InvalidArgument, "mysql://h:notaport/db"),
        ("mysql://u:sekrit@127.0.0.1:1", ErrorKind::InvalidArgument, "names no database"),
        ("mariadb://u@127.0.0.1:1/db?nonsense=1", ErrorKind::InvalidArgument, "nonsense"),
        ("mysql://u:sekrit@127.0.0.1:1/db?ssl-mode=PREFERRED", ErrorKind::InvalidArgument, "plaintext"),
    ] {
        let err = Client::connect_with(url, &opts).await.unwrap_err();
        assert_eq!(err.kind(), kind, "{url}: {err}");
        assert!(err.message().contains(says) && !err.message().contains("sekrit"), "{url}: {err}");
    }
}

#[test]
fn database_names_are_replaced() {
    assert_eq!(with_dbname("mysql://u@h:1/a", "b"), "mysql://u@h:1/b");
    assert_eq!(with_dbname("mysql://h:1", "b"), "mysql://h:1/b");
}

/// `FENCELOCK_TEST_MYSQL_TLS` names a user the server admits over TLS only; the CA files come with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_is_used_checked_and_required() {
    let Some(tls) = support::service_url("FENCELOCK_TEST_MYSQL_TLS") else {
        return;
    };
    let ca = std::env::var("FENCELOCK_TEST_CA").expect("FENCELOCK_TEST_CA with FENCELOCK_TEST_MYSQL_TLS");
    let wrong = std::env::var("FENCELOCK_TEST_WRONG_CA").expect("FENCELOCK_TEST_WRONG_CA");
    let opts = ClientOptions::default().connect_timeout(Duration::from_secs(5));

    // Plaintext: the server refuses the user, and that is no reason to retry.
    let err = Client::connect_with(&tls, &opts).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    assert!(err.message().contains("authentication failed") && !err.message().contains("tls-pw"), "{err}");

    // Each checking mode with the right CA connects, locks and fences over TLS.
    for mode in ["VERIFY_IDENTITY", "VERIFY_CA", "REQUIRED"] {
        let url = format!("{tls}?ssl-mode={mode}&ca={ca}");
        let client = Client::connect_with(&url, &opts).await.unwrap_or_else(|e| panic!("{mode}: {e}"));
        let name = format!("tls-{mode}-{}", uuid::Uuid::new_v4().simple());
        let lease = client.lock(&name, &LockOptions::default()).await.unwrap();
        client.fence(&name).write(lease.fence(), b"over tls").await.unwrap();
        lease.release().await.unwrap();
        client.close().await;
    }
    // REQUIRED without a CA encrypts without checking the certificate, as MySQL's clients do.
    let client = Client::connect_with(&format!("{tls}?ssl-mode=REQUIRED"), &opts).await.unwrap();
    client.close().await;

    // A CA that did not sign the server's certificate: refused, clearly and for good.
    for mode in ["VERIFY_IDENTITY", "VERIFY_CA"] {
        let err = Client::connect_with(&format!("{tls}?ssl-mode={mode}&ca={wrong}"), &opts).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{mode}: {err}");
        assert!(err.message().contains("TLS") && !err.message().contains("tls-pw"), "{mode}: {err}");
    }
    // The right CA, another name: localhost is the same server, but its certificate names 127.0.0.1 only.
    let other_name = tls.replacen("127.0.0.1", "localhost", 1);
    let err = Client::connect_with(&format!("{other_name}?ssl-mode=VERIFY_IDENTITY&ca={ca}"), &opts).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    // VERIFY_CA should not look at the name, but the driver cannot skip that check: the error says so.
    let err = Client::connect_with(&format!("{other_name}?ssl-mode=VERIFY_CA&ca={ca}"), &opts).await.unwrap_err();
    assert!(err.message().contains("cannot skip"), "{err}");
}

/// `FENCELOCK_TEST_MYSQL_X509` names a user made `REQUIRE X509`: admitted only with a client certificate the
/// server's CA signed, given as `cert=` and `key=`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_certificate_is_presented_when_required() {
    let Some(x509) = support::service_url("FENCELOCK_TEST_MYSQL_X509") else {
        return;
    };
    let var = |name: &str| std::env::var(name).unwrap_or_else(|_| panic!("{name} with FENCELOCK_TEST_MYSQL_X509"));
    let (ca, cert, key) =
        (var("FENCELOCK_TEST_CA"), var("FENCELOCK_TEST_CLIENT_CERT"), var("FENCELOCK_TEST_CLIENT_KEY"));
    let (rogue_cert, rogue_key) = (var("FENCELOCK_TEST_ROGUE_CERT"), var("FENCELOCK_TEST_ROGUE_KEY"));
    let opts = ClientOptions::default().connect_timeout(Duration::from_secs(5));

    let url = format!("{x509}?ca={ca}&cert={cert}&key={key}");
    let client = Client::connect_with(&url, &opts).await.unwrap_or_else(|e| panic!("with the certificate: {e}"));
    let name = format!("x509-{}", uuid::Uuid::new_v4().simple());
    let lease = client.lock(&name, &LockOptions::default()).await.unwrap();
    client.fence(&name).write(lease.fence(), b"with a certificate").await.unwrap();
    lease.release().await.unwrap();
    client.close().await;

    // TLS without a certificate, and with one the wrong CA signed: refused for good, the password unsaid.
    for (what, url) in [
        ("no certificate", format!("{x509}?ca={ca}")),
        ("a rogue certificate", format!("{x509}?ca={ca}&cert={rogue_cert}&key={rogue_key}")),
    ] {
        let err = Client::connect_with(&url, &opts).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{what}: {err}");
        assert!(!err.retryable() && !err.message().contains("x509-pw"), "{what}: {err}");
    }
}
