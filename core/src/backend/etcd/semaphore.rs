//! Semaphores with leased permits, in a layout of fencelock's own (etcd has no semaphore recipe). For semaphore
//! `<name>` of N permits:
//!
//! - `fencelock/sempermits/<name>` holds N in decimal, without a lease: written by the first holder, compared by
//!   every grant. A call with another N is `InvalidArgument` while anyone holds; once nobody does, the next grant may
//!   write a new N.
//! - `<name>/sem/wait/<unix nanos>`: one waiter key per acquire, on the client's lease for the TTL, value the
//!   holder id, created only if absent. Waiters queue by create revision.
//! - `<name>/sem/slot/<k>`, k in 0…N−1: a permit, on the holder's lease, value the holder id. A waiter with `r`
//!   waiters ahead may take the r-th free slot (so waiters ahead are served first and concurrent takers pick
//!   different slots) in one Txn: create the slot if absent, delete its waiter key, compare N. The slot's token is
//!   the keyspace's epoch (`epoch.rs`) plus its key's create revision, which rises every time the slot changes hands.
//! - A waiter watches `<name>/sem/` from its look on, counting what brings it nearer (a slot freed, a waiter ahead
//!   gone without taking one), and looks again only when enough did: a freed slot wakes one waiter, not all.
//!
//! An uncontended acquire is two round trips (queue, take) plus the release.

use std::collections::HashSet;
use std::sync::Arc;

use async_trait::async_trait;
use fencelock_proto::etcdserverpb::{RequestOp, TxnResponse, WatchCreateRequest};
use fencelock_proto::mvccpb::KeyValue;
use fencelock_proto::mvccpb::event::EventType;
use fencelock_proto::prefix_end;
use tokio::time::Instant;

use super::attempt::wait_out;
use super::deletes::{delete_keys, delete_own};
use super::epoch::Epoch;
use super::rpc::EtcdError;
use super::{EtcdBackend, HoldKey, is_lease_not_found, ops, unique_key};
use crate::backend::{AcquireRequest, Attempt, Busy, Doubt, Grant, Pending, Undo, not_held, permits_mismatch};
use crate::error::{Error, Result};

/// How often a waiter tries its take Txn in one attempt while others take the slots it saw free.
const TAKE_TRIES: usize = 8;

fn root(name: &str) -> String {
    format!("{name}/sem/")
}

/// Where the numbers of permits live, a namespace apart from lock keys: a key without a lease under `<name>/`
/// would stand in the queue of a mutex of the same name for ever.
const PERMITS_PREFIX: &str = "fencelock/sempermits/";

fn config_key(name: &str) -> String {
    format!("{PERMITS_PREFIX}{name}")
}

fn waiters_of(name: &str) -> String {
    format!("{name}/sem/wait/")
}

fn slots_of(name: &str) -> String {
    format!("{name}/sem/slot/")
}

fn slot_key(name: &str, slot: u32) -> String {
    format!("{}{slot}", slots_of(name))
}

/// The slot a slot key names.
fn slot_in(key: &[u8], slots: &str) -> Option<u32> {
    std::str::from_utf8(key).ok()?.strip_prefix(slots)?.parse().ok()
}

/// The number of permits and the mod revision of the config key, if it exists.
fn config_in(kv: Option<KeyValue>, name: &str) -> Result<Option<(u32, i64)>> {
    let Some(kv) = kv else { return Ok(None) };
    let n = std::str::from_utf8(&kv.value).ok().and_then(|v| v.parse().ok());
    let n = n.ok_or_else(|| Error::internal(format!("{}: not a number of permits", config_key(name))))?;
    Ok(Some((n, kv.mod_revision)))
}

/// What one look found.
struct Look {
    at: i64,
    config: Option<(u32, i64)>,
    slots: Vec<KeyValue>,
    /// Waiters queued before ours.
    ahead: i64,
}

/// One permit acquire on etcd.
pub(super) struct SemAttempt {
    backend: Arc<EtcdBackend>,
    req: AcquireRequest,
    permits: u32,
    waiter: Option<HoldKey>,
    /// The first create revision this attempt's waiter key had: a slot of our holder created later is this
    /// attempt's, taken by a Txn whose reply was lost.
    floor: i64,
    /// How many steps nearer (slots freed, waiters ahead gone) a busy look needs before the next, and its revision.
    need: i64,
    at: i64,
    doubt: Doubt,
    undo: Undo,
}

impl SemAttempt {
    pub(super) fn new(backend: Arc<EtcdBackend>, req: AcquireRequest, permits: u32, undo: Undo) -> Self {
        let doubt = Doubt::default();
        SemAttempt { backend, req, permits, waiter: None, floor: 0, need: 0, at: 0, doubt, undo }
    }

    fn reads(&self, rev: i64) -> Vec<RequestOp> {
        let name = &self.req.name;
        vec![
            ops::read(ops::get(config_key(name))),
            ops::read(ops::under(&slots_of(name))),
            // The keys, not a count: etcd counts a range before it filters it by revision.
            ops::read(ops::keys_before(&waiters_of(name), rev)),
        ]
    }

    fn parse(&self, mut resp: TxnResponse, from: usize, mine_counted: bool) -> Result<Look> {
        let config = config_in(ops::kvs(&mut resp, from).into_iter().next(), &self.req.name)?;
        let slots = ops::kvs(&mut resp, from + 1);
        let ahead = (ops::kvs(&mut resp, from + 2).len() as i64 - i64::from(mine_counted)).max(0);
        Ok(Look { at: ops::revision(resp.header.as_ref()), config, slots, ahead })
    }

    /// One look, creating our waiter key first if it is not known to stand: the reply, where its reads begin, and
    /// whether they counted our own key. `None`: look again.
    async fn look(&mut self, lease: i64) -> Result<Option<(TxnResponse, usize, bool)>, EtcdError> {
        let prefix = waiters_of(&self.req.name);
        let q =
            self.waiter.get_or_insert_with(|| HoldKey { key: unique_key(prefix.trim_end_matches('/')), rev: 0, lease });
        let (key, rev) = (q.key.clone(), q.rev);
        let rpc = self.backend.rpc.clone();
        if rev != 0 {
            let resp = rpc.txn(ops::txn(vec![ops::created_at(&key, rev)], self.reads(rev), Vec::new())).await?;
            if !resp.succeeded {
                // Gone with its lease: queue again under a fresh name.
                self.waiter = None;
                return Ok(None);
            }
            return Ok(Some((resp, 0, false)));
        }
        let holder = self.req.holder.clone().into_bytes();
        let create = [vec![ops::put(&key, holder.clone(), lease)], self.reads(0)].concat();
        let txn = ops::txn(vec![ops::created_at(&key, 0)], create, vec![ops::read(ops::get(key.as_str()))]);
        let mut resp = rpc.txn(txn).await?;
        let found = match resp.succeeded {
            true => Some(ops::revision(resp.header.as_ref())),
            // Ours, made by a request whose reply was lost; else another client's key of the same nanosecond.
            false => ops::kvs(&mut resp, 0)
                .into_iter()
                .next()
                .filter(|kv| kv.lease == lease && kv.value == holder)
                .map(|kv| kv.create_revision),
        };
        match (found, self.waiter.as_mut()) {
            (Some(rev), Some(q)) => {
                q.rev = rev;
                if self.floor == 0 {
                    self.floor = rev;
                }
            }
            _ => self.waiter = None,
        }
        Ok(resp.succeeded.then_some((resp, 1, true)))
    }

    /// Takes `slot` if it is still free, our waiter key still stands and N still holds. The grant, or `None`.
    async fn take(&mut self, slot: u32, look: &Look, rewrite: bool, epoch: Epoch) -> Result<Option<Grant>> {
        let Some(q) = self.waiter.as_ref() else { return Ok(None) };
        let name = &self.req.name;
        let (key, config) = (slot_key(name, slot), config_key(name));
        let permits = self.permits.to_string().into_bytes();
        let mut when = vec![ops::created_at(&q.key, q.rev), ops::created_at(&key, 0)];
        let mut then = vec![ops::put(&key, self.req.holder.clone().into_bytes(), q.lease), ops::delete(&q.key)];
        match look.config {
            Some((_, seen)) if rewrite => {
                when.extend([ops::modified_at(&config, seen), ops::none_under(&slots_of(name))]);
                then.push(ops::put(&config, permits, 0));
            }
            Some(_) => when.push(ops::value_is(&config, &permits)),
            None => {
                when.push(ops::created_at(&config, 0));
                then.push(ops::put(&config, permits, 0));
            }
        }
        let resp = self.backend.rpc.txn(ops::txn(when, then, Vec::new())).await.map_err(|e| self.backend.err(e))?;
        if !resp.succeeded {
            return Ok(None);
        }
        self.waiter = None;
        let rev = ops::revision(resp.header.as_ref());
        Ok(Some(self.req.grant(epoch.token(rev), Some(key)).at_revision(rev).in_slot(slot)))
    }

    /// A slot this attempt took by a Txn whose reply was lost.
    fn taken(&self, look: &Look, lease: i64) -> Option<(u32, i64)> {
        let slots = slots_of(&self.req.name);
        let holder = self.req.holder.as_bytes();
        look.slots.iter().find_map(|kv| {
            let ours = self.floor > 0 && kv.lease == lease && kv.value == holder && kv.create_revision > self.floor;
            ours.then(|| slot_in(&kv.key, &slots).map(|s| (s, kv.create_revision))).flatten()
        })
    }

    async fn attempt(&mut self) -> Result<Attempt> {
        let backend = self.backend.clone();
        let (mut renewed_lease, mut tries) = (false, 0);
        loop {
            let session = backend.leases.for_ttl(self.req.ttl).await.map_err(|e| backend.err(e))?;
            if self.waiter.as_ref().is_some_and(|q| q.lease != session.id) {
                self.undo_entry(false);
            }
            let look = match self.look(session.id).await {
                Ok(Some((resp, from, mine_counted))) => self.parse(resp, from, mine_counted)?,
                Ok(None) => continue,
                Err(e) if is_lease_not_found(&e) && !renewed_lease => {
                    backend.leases.forget(session.id).await;
                    renewed_lease = true;
                    continue;
                }
                Err(e) => return Err(backend.err(e)),
            };
            let rewrite = match look.config {
                Some((n, _)) if n != self.permits && !look.slots.is_empty() => {
                    return Err(permits_mismatch(&self.req.name, &backend.url, self.permits, n));
                }
                Some((n, _)) => n != self.permits,
                None => false,
            };
            if let Some((slot, rev)) = self.taken(&look, session.id) {
                self.undo_entry(false);
                let grant = self.req.grant(session.epoch.token(rev), Some(slot_key(&self.req.name, slot)));
                return Ok(Attempt::Acquired(grant.at_revision(rev).in_slot(slot)));
            }
            let slots = slots_of(&self.req.name);
            let held: HashSet<u32> = look.slots.iter().filter_map(|kv| slot_in(&kv.key, &slots)).collect();
            let free: Vec<u32> = (0..self.permits).filter(|s| !held.contains(s)).collect();
            let rank = look.ahead as usize;
            if rank >= free.len() {
                (self.need, self.at) = ((rank - free.len() + 1) as i64, look.at);
                return Ok(Attempt::Busy(Busy::default()));
            }
            match self.take(free[rank], &look, rewrite, session.epoch).await? {
                Some(grant) => return Ok(Attempt::Acquired(grant)),
                None if tries < TAKE_TRIES => tries += 1,
                // Others keep taking the slots we saw free: the engine's next attempt looks again at once.
                None => {
                    self.need = 0;
                    return Ok(Attempt::Busy(Busy::default()));
                }
            }
        }
    }

    /// Deletes our waiter key in the background, and, for an attempt in doubt, any slot it may have taken.
    fn undo_entry(&mut self, in_doubt: bool) {
        let waiter = self.waiter.take();
        if waiter.is_none() && !in_doubt {
            return;
        }
        let (rpc, tasks) = (self.backend.rpc.clone(), self.backend.tasks.clone());
        let (slots, holder, floor) = (slots_of(&self.req.name), self.req.holder.clone().into_bytes(), self.floor);
        let task = async move {
            if let Some(q) = waiter
                && let Err(e) = delete_keys(rpc.clone(), Vec::new(), vec![q.key.clone()], &tasks).await
            {
                tracing::warn!(key = %q.key, error = %super::rpc::describe(&e), "could not delete an abandoned waiter key yet; retrying");
            }
            if !in_doubt || floor == 0 {
                return;
            }
            let Ok(found) = rpc.range(ops::under(&slots)).await else { return };
            for kv in found.kvs.iter().filter(|kv| kv.value == holder && kv.create_revision > floor) {
                let _ = delete_own(&rpc, &String::from_utf8_lossy(&kv.key), kv.create_revision).await;
            }
        };
        if in_doubt { self.undo.in_doubt(task) } else { self.undo.entry(task) }
    }

    /// Watches `<name>/sem/` from the busy look on until enough brought us nearer, or the watch ends.
    async fn watch_turn(&self) -> Result<()> {
        let (root, slots, waiters) = (root(&self.req.name), slots_of(&self.req.name), waiters_of(&self.req.name));
        let mine = self.waiter.as_ref().map_or(0, |q| q.rev);
        let create = WatchCreateRequest {
            key: root.clone().into_bytes(),
            range_end: prefix_end(root.as_bytes()),
            start_revision: self.at + 1,
            prev_kv: true,
            ..Default::default()
        };
        let rpc = &self.backend.rpc;
        let (endpoint, mut stream) = rpc.watch_with(create).await.map_err(|e| self.backend.err(e))?;
        let mut need = self.need;
        loop {
            let resp = match stream.message().await {
                Ok(Some(resp)) if !resp.canceled => resp,
                Ok(Some(_)) => return Ok(()),
                Ok(None) => return Err(self.backend.broken_watch(endpoint, None)),
                Err(e) => return Err(self.backend.broken_watch(endpoint, Some(e))),
            };
            for event in &resp.events {
                let Some(kv) = event.kv.as_ref() else { continue };
                let key = String::from_utf8_lossy(&kv.key);
                let deleted = event.r#type == EventType::Delete as i32;
                if key.starts_with(&slots) {
                    // A slot freed brings us nearer; one taken (created) takes us back.
                    need += if deleted {
                        -1
                    } else if kv.create_revision == kv.mod_revision {
                        1
                    } else {
                        0
                    };
                } else if key.starts_with(&waiters) {
                    let before = event.prev_kv.as_ref().is_none_or(|p| p.create_revision < mine);
                    need -= i64::from(deleted && before);
                }
            }
            if need <= 0 {
                return Ok(());
            }
        }
    }
}

#[async_trait]
impl Pending for SemAttempt {
    async fn try_acquire(&mut self) -> Result<Attempt> {
        self.doubt.clone().settle(self.attempt()).await
    }

    async fn wait(&mut self, _busy: &Busy, deadline: Option<Instant>) -> Result<()> {
        if self.need <= 0 {
            return Ok(());
        }
        wait_out(&self.backend, &self.req.name, deadline, || self.watch_turn()).await
    }
}

impl Drop for SemAttempt {
    fn drop(&mut self) {
        self.undo_entry(self.doubt.is_set());
    }
}

/// Releases a permit: deletes its slot key if it is still the one made at the grant.
pub(super) async fn release(backend: &EtcdBackend, grant: &Grant) -> Result<()> {
    let Some(key) = grant.key.clone() else { return Err(not_held(grant, &backend.url)) };
    let mine = vec![ops::created_at(&key, grant.revision)];
    let deleted =
        delete_keys(backend.rpc.clone(), mine, vec![key], &backend.tasks).await.map_err(|e| backend.err(e))?;
    if deleted { Ok(()) } else { Err(not_held(grant, &backend.url)) }
}

/// Permits of semaphore `name` not held now, out of `permits`.
pub(super) async fn available(backend: &EtcdBackend, name: &str, permits: u32) -> Result<u32> {
    let reads = vec![ops::read(ops::get(config_key(name))), ops::read(ops::count(&slots_of(name)))];
    let mut resp = backend.rpc.txn(ops::txn(Vec::new(), reads, Vec::new())).await.map_err(|e| backend.err(e))?;
    let held = ops::counted(&resp, 1);
    match config_in(ops::kvs(&mut resp, 0).into_iter().next(), name)? {
        Some((n, _)) if n != permits && held > 0 => Err(permits_mismatch(name, &backend.url, permits, n)),
        _ => Ok(permits.saturating_sub(held.clamp(0, i64::from(u32::MAX)) as u32)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slot_keys_name_their_slot() {
        let slots = slots_of("a/b");
        assert_eq!(slot_key("a/b", 7), "a/b/sem/slot/7");
        assert_eq!(slot_in(b"a/b/sem/slot/7", &slots), Some(7));
        assert_eq!(slot_in(b"a/b/sem/slot/x", &slots), None);
        assert_eq!(slot_in(b"a/b/sem/wait/7", &slots), None);
    }
}
