//! The embedded SQLite backend: many clients creating one new file at once, and the table layout other tools read.

mod support;

use std::time::Duration;

use fencelock::{Client, LockOptions};

fn fresh_db() -> (std::path::PathBuf, String) {
    let dir = std::env::temp_dir().join(support::unique("fencelock-sqlite"));
    std::fs::create_dir_all(&dir).unwrap();
    let url = format!("sqlite:{}", dir.join("locks.db").display());
    (dir, url)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_clients_create_a_new_file_at_once() {
    let (dir, url) = fresh_db();
    let opens: Vec<_> = (0..8)
        .map(|_| {
            let url = url.clone();
            tokio::spawn(async move { Client::connect(&url).await })
        })
        .collect();
    let mut clients = Vec::new();
    for o in opens {
        clients.push(o.await.unwrap().expect("every concurrent open succeeds"));
    }
    // All of them then contend on one name: exactly one wins each round.
    let (mut tokens, opts) = (Vec::new(), LockOptions::default());
    for _ in 0..3 {
        let attempts = clients.iter().map(|c| c.try_lock("L", &opts));
        let leases: Vec<_> = futures::future::join_all(attempts).await.into_iter().map(|r| r.unwrap()).collect();
        let won: Vec<_> = leases.into_iter().flatten().collect();
        assert_eq!(won.len(), 1, "exactly one winner per round");
        tokens.push(won[0].fence());
        won[0].release().await.unwrap();
    }
    assert!(tokens.windows(2).all(|w| w[0] < w[1]));
    std::fs::remove_dir_all(dir).unwrap();
}

#[tokio::test]
async fn the_row_is_kept_after_release_so_tokens_never_reset() {
    let (dir, url) = fresh_db();
    let client = Client::connect(&url).await.unwrap();
    let first = client.lock("L", &LockOptions::default().ttl(Duration::from_secs(5))).await.unwrap();
    first.release().await.unwrap();
    let info = client.inspect("L").await.unwrap();
    assert_eq!((info.holder, info.last_token), (None, Some(first.fence())));
    // Reopening the file (another process later) continues the counter.
    drop(client);
    let again = Client::connect(&url).await.unwrap();
    let second = again.lock("L", &LockOptions::default()).await.unwrap();
    assert_eq!(second.fence(), first.fence() + 1);
    second.release().await.unwrap();
    std::fs::remove_dir_all(dir).unwrap();
}

/// Cancel safety where it can bite: a SQLite attempt that finds the file busy goes on on a blocking thread and
/// finishes after its future is dropped, so only the abandon removes the record it makes. (Statements on a free file
/// run inline and never suspend, as the memory backend's attempts.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acquire_dropped_in_flight_leaves_no_record() {
    let (dir, url) = fresh_db();
    let (a, checker) = (Client::connect(&url).await.unwrap(), Client::connect(&url).await.unwrap());
    let (mut in_flight, opts) = (0, LockOptions::default());
    for _ in 0..20 {
        let mut acquire = Box::pin(a.lock("L", &opts));
        let busy = support::sql::keep_busy(&url);
        match futures::poll!(&mut acquire) {
            // Suspended in the attempt's statement: dropping it now is the case under test.
            std::task::Poll::Pending => in_flight += 1,
            std::task::Poll::Ready(lease) => lease.unwrap().release().await.unwrap(),
        }
        drop(acquire);
        drop(busy);
        // Behind the statement in flight on `a`'s connection (statements run in order): it has made its record.
        a.fence("barrier").read().await.unwrap();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while checker.inspect("L").await.unwrap().holder.is_some() || a.local_entries() != 0 {
            assert!(tokio::time::Instant::now() < deadline, "a dropped acquire left the lock held");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    assert!(in_flight > 0, "no acquire was dropped in flight, so nothing was tested");
    std::fs::remove_dir_all(dir).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recreated_file_refuses_tokens_from_before() {
    let (dir, url) = fresh_db();
    // The file is lost (deleted with its WAL), and the next client makes it anew.
    support::sql::a_register_refuses_tokens_from_before_a_loss(&url, async || {
        std::fs::remove_dir_all(&dir).unwrap();
        std::fs::create_dir_all(&dir).unwrap();
    })
    .await;
    std::fs::remove_dir_all(dir).unwrap();
}

/// The read-write lock and semaphore tests every SQL store runs (`support/sql.rs`), each on a new file.
macro_rules! hold_tests {
    ($($test:ident),*) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $test() {
            let (dir, url) = fresh_db();
            support::sql::$test(&url).await;
            std::fs::remove_dir_all(dir).unwrap();
        }
    )*};
}

support::sql::each_hold_test!(hold_tests);

/// A file made by a version without read-write locks and semaphores gains their tables on the first connect.
#[tokio::test]
async fn a_file_of_the_old_schema_gains_the_hold_tables() {
    let (dir, url) = fresh_db();
    let path = dir.join("locks.db");
    support::sql::an_old_schema_gains_the_hold_tables(&url, async |ddl| {
        rusqlite::Connection::open(&path)
            .unwrap()
            .execute_batch(&ddl.replace("BIGINT", "INTEGER").replace("BYTEA", "BLOB"))
            .unwrap();
    })
    .await;
    std::fs::remove_dir_all(dir).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_writers_mark_expires() {
    let (dir, url) = fresh_db();
    let path = dir.join("locks.db");
    support::sql::a_dead_writers_mark_expires(&url, async |sql| {
        rusqlite::Connection::open(&path).unwrap().execute_batch(sql).unwrap();
    })
    .await;
    std::fs::remove_dir_all(dir).unwrap();
}
