//! This client's deletes of its own lock keys in flight. A key is `<name>/<lease id>`, so two local owners that take
//! the same name one after the other write the same key: a delete of the first (a release or an attempt's undo,
//! retried in the background while etcd does not answer) is ordered before the second's write, so a late delete
//! never removes a newer entry, and a new entry never adopts a key about to go.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{Mutex as AsyncMutex, OwnedMutexGuard};
use tokio::time::Instant;

use super::ops;
use super::rpc::{EtcdError, Rpc};
use crate::backend::Backoff;
use crate::tasks::Tasks;

/// The keys with a delete in flight, each with a mutex locked until it is done.
#[derive(Debug, Default)]
pub(super) struct Deletes(Mutex<HashMap<String, Arc<AsyncMutex<()>>>>);

/// A delete of one key, registered in the table; `finish` lets the next user of the key in.
#[derive(Debug)]
pub(super) struct Deletion {
    deletes: Arc<Deletes>,
    key: String,
    mutex: Arc<AsyncMutex<()>>,
    _held: OwnedMutexGuard<()>,
}

/// First and longest pause between attempts to delete a key while etcd does not answer, and how long to go on.
const RETRY_FIRST: Duration = Duration::from_millis(50);
const RETRY_MAX: Duration = Duration::from_secs(2);
const RETRY_FOR: Duration = Duration::from_secs(60);

impl Deletion {
    /// Deletes the key if it is the one made at `rev` (any version of it when `rev` is 0: the reply that would have
    /// told us the revision was lost). Whether it was deleted. On failure the attempts go on in the background for up
    /// to `RETRY_FOR`, as the key's lease is kept alive: a key left behind would block the lock until this client
    /// closes.
    pub(super) async fn run(self, rpc: Arc<Rpc>, rev: i64, tasks: &Tasks) -> Result<bool, EtcdError> {
        match delete_own(&rpc, &self.key, rev).await {
            Ok(deleted) => {
                self.finish();
                Ok(deleted)
            }
            Err(e) => {
                tasks.spawn(self.retry(rpc, rev));
                Err(e)
            }
        }
    }

    async fn retry(self, rpc: Arc<Rpc>, rev: i64) {
        let mut backoff = Backoff::new(RETRY_FIRST, RETRY_MAX, Instant::now() + RETRY_FOR);
        loop {
            if !backoff.wait().await {
                tracing::warn!(key = %self.key, "gave up deleting an abandoned queue key; it goes with its lease");
                break;
            }
            if delete_own(&rpc, &self.key, rev).await.is_ok() {
                break;
            }
        }
        self.finish();
    }

    fn finish(self) {
        let mut map = self.deletes.lock();
        if map.get(&self.key).is_some_and(|m| Arc::ptr_eq(m, &self.mutex)) {
            map.remove(&self.key);
        }
    }
}

impl Deletes {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<AsyncMutex<()>>>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Waits until no delete of `key` is in flight.
    pub(super) async fn settled(&self, key: &str) {
        loop {
            let Some(pending) = self.lock().get(key).cloned() else { return };
            drop(pending.lock().await);
        }
    }

    /// Registers a delete of `key` (synchronously, so it is ordered before any later write).
    pub(super) fn start(self: &Arc<Self>, key: &str) -> Deletion {
        let (mutex, held) = deleting();
        self.lock().insert(key.to_string(), mutex.clone());
        Deletion { deletes: self.clone(), key: key.to_string(), mutex, _held: held }
    }
}

/// A mutex to mark a delete in flight, and its guard, held until the delete is done.
fn deleting() -> (Arc<AsyncMutex<()>>, OwnedMutexGuard<()>) {
    let mutex = Arc::new(AsyncMutex::new(()));
    let held = mutex.clone().try_lock_owned().expect("a new mutex is free");
    (mutex, held)
}

/// Deletes `key` if it is the one made at `rev` (any version of it when `rev` is 0). Whether it was deleted.
pub(super) async fn delete_own(rpc: &Rpc, key: &str, rev: i64) -> Result<bool, EtcdError> {
    let when = if rev == 0 { Vec::new() } else { vec![ops::created_at(key, rev)] };
    let resp = rpc.txn(ops::txn(when, vec![ops::delete(key)], Vec::new())).await?;
    Ok(resp.succeeded && ops::deleted(&resp))
}

/// Deletes `keys` in one Txn if `when` holds: whether it did. Keys of read-write locks and semaphores are this
/// attempt's own (unique names, or a slot guarded by its create revision), so no later write waits for the delete;
/// on failure it goes on in the background for up to `RETRY_FOR`, as the keys' lease is kept alive.
pub(super) async fn delete_keys(
    rpc: Arc<Rpc>,
    when: Vec<ops::Compare>,
    keys: Vec<String>,
    tasks: &Tasks,
) -> Result<bool, EtcdError> {
    let txn = ops::txn(when, keys.iter().map(|k| ops::delete(k)).collect(), Vec::new());
    match rpc.txn(txn.clone()).await {
        Ok(resp) => Ok(resp.succeeded && ops::deleted(&resp)),
        Err(e) => {
            tasks.spawn(async move {
                let mut backoff = Backoff::new(RETRY_FIRST, RETRY_MAX, Instant::now() + RETRY_FOR);
                while backoff.wait().await {
                    if rpc.txn(txn.clone()).await.is_ok() {
                        return;
                    }
                }
                tracing::warn!(?keys, "gave up deleting lock keys; they go with their lease");
            });
            Err(e)
        }
    }
}
