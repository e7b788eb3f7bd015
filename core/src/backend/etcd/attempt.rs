//! One etcd acquire: a queue key on the client's lease for the TTL, the Txn that places it, and the watch of its
//! predecessor. Dropped before the key became the lock, the attempt deletes the key.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tokio::time::Instant;

use super::epoch::Epoch;
use super::rpc::EtcdError;
use super::{EtcdBackend, is_lease_not_found, key_of, ops, prefix_of};
use crate::backend::{AcquireRequest, Attempt, Backoff, Busy, Doubt, Pending, Undo};
use crate::error::{Error, ErrorKind, Result};

/// First and longest pause between tries of a waiter's watch while etcd does not answer.
const RETRY_FIRST: Duration = Duration::from_millis(50);
const RETRY_LONGEST: Duration = Duration::from_millis(500);

/// A waiter's place in the queue: its key and that key's create revision (0 until an answer told it).
#[derive(Debug)]
struct QueueKey {
    key: String,
    rev: i64,
}

/// One acquire on etcd.
pub(super) struct EtcdAttempt {
    backend: Arc<EtcdBackend>,
    req: AcquireRequest,
    queued: Option<QueueKey>,
    doubt: Doubt,
    undo: Undo,
}

impl EtcdAttempt {
    pub(super) fn new(backend: Arc<EtcdBackend>, req: AcquireRequest, undo: Undo) -> Self {
        EtcdAttempt { backend, req, queued: None, doubt: Doubt::default(), undo }
    }

    /// Makes `key` our queue key. A new lease means a new key: the old one (gone with its lease) is deleted.
    async fn queue_under(&mut self, key: String) {
        if self.queued.as_ref().is_some_and(|q| q.key == key) {
            return;
        }
        self.undo_entry(false);
        self.backend.deletes.settled(&key).await;
        self.queued = Some(QueueKey { key, rev: 0 });
    }

    /// Our key's and the owner's create revision: a read while our key is known to stand, else the Txn that
    /// creates it.
    async fn standing(&mut self, lease: i64) -> Result<(i64, i64), EtcdError> {
        let queued = self.queued.as_mut().expect("queued before it stands");
        let known = match queued.rev {
            0 => None,
            rev => self.backend.recheck(&self.req.name, &queued.key, rev).await?.map(|owner| (rev, owner)),
        };
        let (mine, owner) = match known {
            Some(revs) => revs,
            None => self.backend.enqueue(&self.req.name, &queued.key, &self.req.value, lease).await?,
        };
        queued.rev = mine;
        Ok((mine, owner))
    }

    /// Held if our key is the first created under the name; it then belongs to the lease, not to this attempt.
    fn outcome(&mut self, mine: i64, owner: i64, epoch: Epoch) -> Attempt {
        if mine == 0 || owner != mine {
            return Attempt::Busy(Busy::default());
        }
        let key = self.queued.take().map(|q| q.key);
        Attempt::Acquired(self.req.grant(epoch.token(mine), key).at_revision(mine))
    }

    /// One attempt; a lease that expired under us (keepalives cut off) is forgotten and the key queued again on a
    /// fresh one, once.
    async fn attempt(&mut self) -> Result<Attempt> {
        let backend = self.backend.clone();
        let mut renewed_lease = false;
        loop {
            let session = backend.leases.for_ttl(self.req.ttl).await.map_err(|e| backend.err(e))?;
            self.queue_under(key_of(&self.req.name, session.id)).await;
            match self.standing(session.id).await {
                Ok((mine, owner)) => return Ok(self.outcome(mine, owner, session.epoch)),
                Err(e) if is_lease_not_found(&e) && !renewed_lease => {
                    backend.leases.forget(session.id).await;
                    renewed_lease = true;
                }
                Err(e) => return Err(backend.err(e)),
            }
        }
    }

    /// Deletes our queue key in the background, registered in the key table at once, so a later write of the same
    /// key waits for it. An attempt in doubt keeps the local queue place meanwhile.
    fn undo_entry(&mut self, in_doubt: bool) {
        let Some(QueueKey { key, rev }) = self.queued.take() else { return };
        let (deletion, rpc) = (self.backend.deletes.start(&key), self.backend.rpc.clone());
        let tasks = self.backend.tasks.clone();
        let task = async move {
            if let Err(e) = deletion.run(rpc, rev, &tasks).await {
                tracing::warn!(%key, error = %super::rpc::describe(&e), "could not delete an abandoned queue key yet; retrying");
            }
        };
        if in_doubt { self.undo.in_doubt(task) } else { self.undo.entry(task) }
    }
}

#[async_trait]
impl Pending for EtcdAttempt {
    async fn try_acquire(&mut self) -> Result<Attempt> {
        self.doubt.clone().settle(self.attempt()).await
    }

    async fn wait(&mut self, _busy: &Busy, deadline: Option<Instant>) -> Result<()> {
        let Some(rev) = self.queued.as_ref().map(|q| q.rev) else {
            return Err(Error::internal("etcd wait: no queue entry"));
        };
        let backend = &self.backend;
        let prefix = prefix_of(&self.req.name);
        let watch_predecessor = || async {
            let feed = backend.deletes_under(&prefix).await?;
            let found = backend.rpc.range(ops::created_before(&prefix, rev)).await.map_err(|e| backend.err(e))?;
            let at = ops::revision(found.header.as_ref());
            let Some(predecessor) = found.kvs.into_iter().next() else {
                return Ok(());
            };
            backend.deleted(feed, &predecessor.key, at).await
        };
        wait_out(backend, &self.req.name, deadline, watch_predecessor).await
    }
}

/// Runs `watch` until it ends or `deadline` passes (a wake-up either way). A waiter rides out a leader election
/// (every member refuses for a moment) for up to one request timeout from the first refusal of a run; its key lives
/// on the client's lease meanwhile. A watch that lasted two request timeouts had been answered, so a refusal after it
/// starts a new run: the allowance is for the outage, not for the wait.
pub(super) async fn wait_out<F, Fut>(
    backend: &EtcdBackend,
    name: &str,
    deadline: Option<Instant>,
    mut watch: F,
) -> Result<()>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<()>>,
{
    let waiting = async {
        let mut outage: Option<Backoff> = None;
        loop {
            let began = Instant::now();
            let e = match watch().await {
                Err(e) if e.kind() == ErrorKind::Unavailable => e,
                outcome => return outcome,
            };
            if began.elapsed() >= 2 * backend.request_timeout {
                outage = None;
            }
            let backoff = outage.get_or_insert_with(|| {
                Backoff::new(RETRY_FIRST, RETRY_LONGEST, Instant::now() + backend.request_timeout)
            });
            if !backoff.wait().await {
                return Err(e);
            }
            tracing::debug!(lock = %name, error = %e, "etcd unavailable while waiting; retrying");
        }
    };
    match deadline {
        Some(d) => tokio::time::timeout_at(d, waiting).await.unwrap_or(Ok(())),
        None => waiting.await,
    }
}

impl Drop for EtcdAttempt {
    fn drop(&mut self) {
        self.undo_entry(self.doubt.is_set());
    }
}
