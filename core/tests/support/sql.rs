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
