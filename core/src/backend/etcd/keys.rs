//! This client's own lock keys. A key is `<name>/<lease id>`, so two local owners that take the same name one after
//! the other write the same key: the table orders a background delete of the first before the second's write, so a
//! late cleanup never removes a newer entry.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{Mutex as AsyncMutex, OwnedMutexGuard};
use tokio::time::Instant;

use super::ops;
use super::rpc::{EtcdError, Rpc};
use crate::backend::Backoff;
use crate::tasks::Tasks;

/// What this client is doing with one of its keys.
#[derive(Debug)]
enum Use {
    /// A queue entry or a held lock.
    Live,
    /// A delete is in flight; the mutex is locked until it is done.
    Deleting(Arc<AsyncMutex<()>>),
}

/// The table of this client's keys.
#[derive(Debug, Default)]
pub(super) struct Keys(Mutex<HashMap<String, Use>>);

/// A delete of one key, registered in the table; `finish` lets the next user of the key in.
#[derive(Debug)]
pub(super) struct Deletion {
    keys: Arc<Keys>,
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
        let mut map = self.keys.lock();
        if matches!(map.get(&self.key), Some(Use::Deleting(m)) if Arc::ptr_eq(m, &self.mutex)) {
            map.remove(&self.key);
        }
    }
}

impl Keys {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Use>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Marks `key` live, first waiting for any delete of it still in flight.
    pub(super) async fn claim(&self, key: &str) {
        loop {
            let pending = match self.lock().get(key) {
                Some(Use::Deleting(m)) => m.clone(),
                _ => break,
            };
            drop(pending.lock().await);
        }
        self.lock().insert(key.to_string(), Use::Live);
    }

    /// Registers a delete of `key` (synchronously, so it is ordered before any later claim).
    pub(super) fn start_delete(self: &Arc<Self>, key: &str) -> Deletion {
        let (mutex, held) = deleting();
        self.lock().insert(key.to_string(), Use::Deleting(mutex.clone()));
        Deletion { keys: self.clone(), key: key.to_string(), mutex, _held: held }
    }

    /// Registers a delete of `key` unless this client is using it or already deleting it (one lock section, so
    /// no claim can slip between the check and the registration).
    pub(super) fn start_delete_if_unused(self: &Arc<Self>, key: &str) -> Option<Deletion> {
        let mut map = self.lock();
        if map.contains_key(key) {
            return None;
        }
        let (mutex, held) = deleting();
        map.insert(key.to_string(), Use::Deleting(mutex.clone()));
        Some(Deletion { keys: self.clone(), key: key.to_string(), mutex, _held: held })
    }
}

/// A mutex to mark a delete in flight, and its guard, held until the delete is done.
fn deleting() -> (Arc<AsyncMutex<()>>, OwnedMutexGuard<()>) {
    let mutex = Arc::new(AsyncMutex::new(()));
    let held = mutex.clone().try_lock_owned().expect("a new mutex is free");
    (mutex, held)
}

/// A waiter's place in the queue: its key and that key's create revision. Dropped while still queued (a cancelled
/// `lock`, a busy `try_lock`, a timeout), it deletes the key in the background.
pub(super) struct Queued {
    pub(super) key: String,
    pub(super) rev: i64,
    armed: bool,
    keys: Arc<Keys>,
    rpc: Arc<Rpc>,
    tasks: Tasks,
}

impl fmt::Debug for Queued {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Queued").field("key", &self.key).field("rev", &self.rev).finish_non_exhaustive()
    }
}

impl Queued {
    /// An entry for `key`, claimed in the table by the caller.
    pub(super) fn new(key: String, keys: Arc<Keys>, rpc: Arc<Rpc>, tasks: Tasks) -> Self {
        Queued { key, rev: 0, armed: true, keys, rpc, tasks }
    }

    /// The key became the lock: it outlives the queue entry and is deleted by `release`.
    pub(super) fn disarm(&mut self) {
        self.armed = false;
    }
}

impl Drop for Queued {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let deletion = self.keys.start_delete(&self.key);
        let (rpc, key, rev, tasks) = (self.rpc.clone(), self.key.clone(), self.rev, self.tasks.clone());
        let task = async move {
            if let Err(e) = deletion.run(rpc, rev, &tasks).await {
                tracing::warn!(%key, error = %super::rpc::describe(&e), "could not delete an abandoned queue key yet; retrying");
            }
        };
        self.tasks.spawn(task);
    }
}

/// Deletes `key` if it is the one made at `rev` (any version of it when `rev` is 0). Whether it was deleted.
pub(super) async fn delete_own(rpc: &Rpc, key: &str, rev: i64) -> Result<bool, EtcdError> {
    let when = if rev == 0 { Vec::new() } else { vec![ops::created_at(key, rev)] };
    let resp = rpc.txn(ops::txn(when, vec![ops::delete(key)], Vec::new())).await?;
    Ok(resp.succeeded && ops::deleted(&resp))
}
