//! Read-write locks in the layout of etcd's `recipes/rwmutex.go` (client/v3/experimental/recipes), so a Go
//! `recipe.RWMutex` on the same prefix and fencelock exclude each other:
//!
//! - A reader creates `<name>/read/<unix nanos>`, a writer `<name>/write/<unix nanos>`, on the client's lease for
//!   the TTL, only if absent (a name already taken gets a later timestamp), as the recipe's `newUniqueEphemeralKey`
//!   does. The value is the holder id; the recipe writes none and reads none. A key is never modified: the recipe
//!   orders keys by mod revision, fencelock by create revision, and the two agree while they are equal.
//! - A reader waits for the last write key created before its own, unless its owner holds a write key (a
//!   downgrade: writers queued behind that key wait for the owner anyway); a writer waits for the last key of
//!   either kind, and then for any grant record (below), the mark of a downgraded reader whose key lies above its
//!   own. A Go recipe writer does not know of records: it may pass a fencelock reader that downgraded. Each watches only that key's delete, then looks
//!   again. A waiting writer's key lies below every later reader's, so a waiting writer blocks new readers.
//! - Tokens. A writer's is the store revision at which it found nothing below its key (its key's create revision
//!   when it gets the lock at once). A run of overlapping read holds shares one epoch, kept in grant records
//!   `fencelock/rwepoch/<name>/<nanos of the read key>` on the reader's lease, deleted with its key. A reader that
//!   may read creates its record in a Txn that also checks that no record appeared since it looked: it copies the
//!   epoch of a record it found (the value), or, finding none, starts an epoch whose token is its record's own create
//!   revision (an empty value). Records lie outside `<name>/`, where the recipe's writers would wait for them.
//!   Tokens rise: holds that exclude each other are parted by a delete, and each token is a revision read or
//!   written after every delete before it. (A grant's token is that revision plus the keyspace's epoch, `epoch.rs`.)
//!
//! An uncontended read is two round trips (queue, record) plus the release; a write one plus the release.

use std::sync::Arc;

use async_trait::async_trait;
use fencelock_proto::etcdserverpb::{RequestOp, TxnResponse};
use fencelock_proto::mvccpb::KeyValue;
use tokio::time::Instant;

use super::attempt::wait_out;
use super::deletes::delete_keys;
use super::rpc::EtcdError;
use super::{EtcdBackend, HoldKey, is_lease_not_found, ops, unique_key};
use crate::backend::{AcquireRequest, Attempt, Busy, Doubt, Grant, HoldKind, Pending, Undo, not_held};
use crate::error::{Error, Result};

/// Where the grant records of read holds live, a namespace apart from lock keys.
const EPOCH_PREFIX: &str = "fencelock/rwepoch/";

/// How often a reader tries its record Txn in one attempt while other readers' records keep appearing.
const RECORD_TRIES: usize = 8;

/// `<name>/read` or `<name>/write`: where keys of `kind` queue.
fn kind_prefix(name: &str, kind: HoldKind) -> String {
    format!("{name}/{}", if kind == HoldKind::Write { "write" } else { "read" })
}

/// The prefix of lock `name`'s grant records.
fn records_of(name: &str) -> String {
    format!("{EPOCH_PREFIX}{name}/")
}

/// The grant record of read key `key` of lock `name`.
pub(super) fn record_of(name: &str, key: &str) -> String {
    format!("{}{}", records_of(name), key.rsplit_once('/').map_or(key, |(_, nanos)| nanos))
}

/// The keys a hold of `grant`'s kind made: its queue key, and a reader's record.
fn hold_keys(name: &str, kind: HoldKind, key: &str) -> Vec<String> {
    match kind {
        HoldKind::Read => vec![key.to_string(), record_of(name, key)],
        _ => vec![key.to_string()],
    }
}

/// The epoch a grant record carries: its value, or its own create revision if empty.
fn epoch_of(kv: &KeyValue) -> Result<i64> {
    if kv.value.is_empty() {
        return Ok(kv.create_revision);
    }
    std::str::from_utf8(&kv.value)
        .ok()
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| Error::internal(format!("grant record {:?} holds no epoch", String::from_utf8_lossy(&kv.key))))
}

/// What one look at the queue found.
struct Look {
    /// The store revision it was made at.
    at: i64,
    /// The key to wait for, if any.
    blocker: Option<Vec<u8>>,
    /// A reader's own record (a grant whose reply was lost), if any.
    own: Option<KeyValue>,
    /// Another reader's record, if any: the epoch of the run now reading.
    other: Option<KeyValue>,
}

/// One read or write acquire on etcd.
pub(super) struct RwAttempt {
    backend: Arc<EtcdBackend>,
    req: AcquireRequest,
    queued: Option<HoldKey>,
    /// The key a busy look found in the way, and the revision of that look.
    blocker: Option<(Vec<u8>, i64)>,
    doubt: Doubt,
    undo: Undo,
}

impl RwAttempt {
    pub(super) fn new(backend: Arc<EtcdBackend>, req: AcquireRequest, undo: Undo) -> Self {
        RwAttempt { backend, req, queued: None, blocker: None, doubt: Doubt::default(), undo }
    }

    /// The reads of one look: the keys that may be in the way of the key made at `rev` (0: the newest key), and for
    /// a reader the grant records.
    fn reads(&self, key: &str, rev: i64) -> Vec<RequestOp> {
        let name = &self.req.name;
        match self.req.kind {
            // A downgraded reader's key may lie above ours: its grant record shows it.
            HoldKind::Write => vec![
                ops::read(ops::last_created(&format!("{name}/"), rev, 2)),
                ops::read(ops::any_under(&records_of(name))),
            ],
            // Every write key below: the owner's own may lie under other writers queued behind it.
            _ => vec![
                ops::read(ops::last_created(&format!("{}/", kind_prefix(name, HoldKind::Write)), rev, 0)),
                ops::read(ops::get(record_of(name, key))),
                ops::read(ops::any_under(&records_of(name))),
            ],
        }
    }

    /// What the reads of a look from the `from`-th operation of `resp` found.
    fn parse(&self, key: &str, mut resp: TxnResponse, from: usize) -> Look {
        let at = ops::revision(resp.header.as_ref());
        let holder = self.req.holder.as_bytes();
        let below = ops::kvs(&mut resp, from);
        let in_way = match self.req.kind {
            HoldKind::Write => {
                let reading = ops::kvs(&mut resp, from + 1).into_iter().next();
                below.into_iter().find(|kv| kv.key != key.as_bytes()).or(reading)
            }
            // A downgrade: the owner holds the write lock, so it may read whoever queued behind its write key.
            _ if below.iter().any(|kv| kv.value == holder) => None,
            _ => below.into_iter().next(),
        };
        let (own, other) = match self.req.kind {
            HoldKind::Write => (None, None),
            _ => {
                let own = ops::kvs(&mut resp, from + 1).into_iter().next();
                (own, ops::kvs(&mut resp, from + 2).into_iter().next())
            }
        };
        Look { at, blocker: in_way.map(|kv| kv.key), own, other }
    }

    /// One look at the queue, creating our key first if it is not known to stand. `None`: look again (our key was
    /// found after a lost reply, or is gone, or its name was taken).
    async fn look(&mut self, lease: i64) -> Result<Option<Look>, EtcdError> {
        let prefix = kind_prefix(&self.req.name, self.req.kind);
        let q = self.queued.get_or_insert_with(|| HoldKey { key: unique_key(&prefix), rev: 0, lease });
        let (key, rev) = (q.key.clone(), q.rev);
        let reads = self.reads(&key, rev);
        let rpc = self.backend.rpc.clone();
        if rev != 0 {
            let resp = rpc.txn(ops::txn(vec![ops::created_at(&key, rev)], reads, Vec::new())).await?;
            if !resp.succeeded {
                // Gone with its lease: queue again under a fresh name.
                self.queued = None;
                return Ok(None);
            }
            return Ok(Some(self.parse(&key, resp, 0)));
        }
        let holder = self.req.holder.clone().into_bytes();
        let create = [vec![ops::put(&key, holder.clone(), lease)], reads].concat();
        let txn = ops::txn(vec![ops::created_at(&key, 0)], create, vec![ops::read(ops::get(key.as_str()))]);
        let mut resp = rpc.txn(txn).await?;
        if resp.succeeded {
            if let Some(q) = self.queued.as_mut() {
                q.rev = ops::revision(resp.header.as_ref());
            }
            return Ok(Some(self.parse(&key, resp, 1)));
        }
        match ops::kvs(&mut resp, 0).into_iter().next() {
            // Ours, made by a request whose reply was lost.
            Some(kv) if kv.lease == lease && kv.value == holder => {
                if let Some(q) = self.queued.as_mut() {
                    q.rev = kv.create_revision;
                }
            }
            // Another client's key of the same nanosecond: try a later one.
            _ => self.queued = None,
        }
        Ok(None)
    }

    /// Creates a reader's grant record with `epoch` (`None`: a new epoch, the record's own revision) if no record
    /// appeared since revision `at`. The token, or `None` if one did.
    async fn record(&self, epoch: Option<i64>, at: i64) -> Result<Option<i64>, EtcdError> {
        let Some(q) = self.queued.as_ref() else { return Ok(None) };
        let name = &self.req.name;
        let value = epoch.map(|e| e.to_string().into_bytes()).unwrap_or_default();
        let txn = ops::txn(
            vec![ops::created_at(&q.key, q.rev), ops::unchanged_since(&records_of(name), at)],
            vec![ops::put(&record_of(name, &q.key), value, q.lease)],
            Vec::new(),
        );
        let resp = self.backend.rpc.txn(txn).await?;
        Ok(resp.succeeded.then(|| epoch.unwrap_or(ops::revision(resp.header.as_ref()))))
    }

    /// One attempt; a lease that expired under us is forgotten and the key queued again on a fresh one, once.
    async fn attempt(&mut self) -> Result<Attempt> {
        let backend = self.backend.clone();
        let mut renewed_lease = false;
        let mut tries = 0;
        loop {
            let session = backend.leases.for_ttl(self.req.ttl).await.map_err(|e| backend.err(e))?;
            if self.queued.as_ref().is_some_and(|q| q.lease != session.id) {
                self.undo_entry(false);
            }
            let look = match self.look(session.id).await {
                Ok(Some(look)) => look,
                Ok(None) => continue,
                Err(e) if is_lease_not_found(&e) && !renewed_lease => {
                    backend.leases.forget(session.id).await;
                    renewed_lease = true;
                    continue;
                }
                Err(e) => return Err(backend.err(e)),
            };
            if let Some(key) = look.blocker {
                self.blocker = Some((key, look.at));
                return Ok(Attempt::Busy(Busy::default()));
            }
            let token = match (self.req.kind, look.own, look.other) {
                (HoldKind::Write, ..) => look.at,
                (_, Some(own), _) => epoch_of(&own)?,
                (_, None, other) => {
                    let epoch = other.as_ref().map(epoch_of).transpose()?;
                    match self.record(epoch, look.at).await.map_err(|e| backend.err(e))? {
                        Some(token) => token,
                        None if tries < RECORD_TRIES => {
                            tries += 1;
                            continue;
                        }
                        // Other readers keep coming: the engine's next attempt looks again at once.
                        None => return Ok(Attempt::Busy(Busy::default())),
                    }
                }
            };
            let key = self.queued.take().map(|q| q.key);
            return Ok(Attempt::Acquired(self.req.grant(session.epoch.token(token), key).at_revision(token)));
        }
    }

    /// Deletes our key (and a reader's record) in the background. An attempt in doubt keeps the local queue place
    /// meanwhile.
    fn undo_entry(&mut self, in_doubt: bool) {
        let Some(q) = self.queued.take() else { return };
        let keys = hold_keys(&self.req.name, self.req.kind, &q.key);
        let (rpc, tasks) = (self.backend.rpc.clone(), self.backend.tasks.clone());
        let task = async move {
            if let Err(e) = delete_keys(rpc, Vec::new(), keys, &tasks).await {
                tracing::warn!(key = %q.key, error = %super::rpc::describe(&e), "could not delete an abandoned queue key yet; retrying");
            }
        };
        if in_doubt { self.undo.in_doubt(task) } else { self.undo.entry(task) }
    }
}

#[async_trait]
impl Pending for RwAttempt {
    async fn try_acquire(&mut self) -> Result<Attempt> {
        self.doubt.clone().settle(self.attempt()).await
    }

    async fn wait(&mut self, _busy: &Busy, deadline: Option<Instant>) -> Result<()> {
        let Some((key, at)) = self.blocker.take() else { return Ok(()) };
        let backend = &self.backend;
        wait_out(backend, &self.req.name, deadline, || backend.watch_delete(&self.req.name, &key, at)).await
    }
}

impl Drop for RwAttempt {
    fn drop(&mut self) {
        self.undo_entry(self.doubt.is_set());
    }
}

/// Releases a read or write hold: deletes its key (and a reader's record) if the key is still the holder's.
pub(super) async fn release(backend: &EtcdBackend, grant: &Grant) -> Result<()> {
    let Some(key) = grant.key.as_deref() else { return Err(not_held(grant, &backend.url)) };
    let keys = hold_keys(&grant.name, grant.kind, key);
    let mine = vec![ops::value_is(key, grant.holder.as_bytes())];
    let deleted = delete_keys(backend.rpc.clone(), mine, keys, &backend.tasks).await.map_err(|e| backend.err(e))?;
    if deleted { Ok(()) } else { Err(not_held(grant, &backend.url)) }
}
