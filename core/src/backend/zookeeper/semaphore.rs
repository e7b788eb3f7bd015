//! Semaphores on Curator's `InterProcessSemaphoreV2` layout, so Curator clients and fencelock count each other's
//! leases on the same path:
//!
//! - An acquire takes the internal mutex `<dir>/locks` (an `InterProcessMutex`, `entry.rs`), creates its lease
//!   `<dir>/leases/_c_<uuid>-lease-<seq10>` (EPHEMERAL_SEQUENTIAL, data = the holder id) and holds a permit once the
//!   leases number at most N; until then it waits, keeping the mutex and its lease as Curator does, woken by a
//!   watch on the leases' children. Leases are only added under the mutex, so at most N are held.
//! - fencelock's own side nodes, outside `<dir>` (where Curator would count them): `/fencelock/sempermits/<dir>`
//!   holds N in decimal, compared by every attempt and written by a grant (a call with another N is
//!   `InvalidArgument` while other leases stand; Curator clients keep N to themselves and are not checked); slot
//!   `k` is the EPHEMERAL node `/fencelock/semslots/<dir>/<k>` (data = the lease node's name), taken under the
//!   mutex as the lowest free k < N. A slot's token is its node's czxid, which rises each time the slot is taken.
//!   Curator holders take no slot, so fencelock's holders always find one.
//! - The mutex goes at the grant. A release deletes the slot node, then the lease.
//!
//! An uncontended acquire is six round trips (mutex, permits, lease, slots, slot, mutex release) plus the release.

use std::sync::Arc;

use async_trait::async_trait;
use tokio::time::Instant;
use zookeeper_client as zk;

use super::cleanup::{Leftover, delete};
use super::entry::QueueEntry;
use super::layout::{LEASE_NAME, PROTECTED, lock_dir, semaphore_dirs};
use super::shared::{Shared, until_fired};
use super::{FENCELOCK_ROOT, TRIES, is_connection_loss};
use crate::backend::{AcquireRequest, Attempt, Busy, Doubt, Grant, HoldKind, Pending, Undo, permits_mismatch};
use crate::error::Result;

fn permits_path(dir: &str) -> String {
    format!("{FENCELOCK_ROOT}/sempermits{dir}")
}

fn slots_dir(dir: &str) -> String {
    format!("{FENCELOCK_ROOT}/semslots{dir}")
}

/// The slot node of `grant`, a permit.
pub(super) fn slot_path(grant: &Grant) -> Option<String> {
    let dir = lock_dir(&grant.name).ok()?;
    Some(format!("{}/{}", slots_dir(&dir), grant.slot?))
}

/// The N other clients of semaphore `dir` use, if any wrote it.
async fn stored_permits(s: &Shared, zk: &zk::Client, dir: &str) -> Result<Option<u32>, zk::Error> {
    match s.rpc(zk.get_data(&permits_path(dir))).await {
        Ok((data, _)) => Ok(String::from_utf8_lossy(&data).trim().parse().ok()),
        Err(zk::Error::NoNode) => Ok(None),
        Err(e) => Err(e),
    }
}

/// The leases of semaphore `dir`, all its children as Curator counts them; none if the directory is missing.
async fn leases(s: &Shared, zk: &zk::Client, dir: &str) -> Result<Vec<String>, zk::Error> {
    match s.rpc(zk.list_children(&semaphore_dirs(dir).1)).await {
        Err(zk::Error::NoNode) => Ok(Vec::new()),
        listed => listed,
    }
}

/// One permit acquire on ZooKeeper.
pub(super) struct SemAttempt {
    shared: Arc<Shared>,
    req: AcquireRequest,
    permits: u32,
    dir: Result<String>,
    /// The internal mutex's queue entry, and its node once held.
    mutex: QueueEntry,
    mutex_node: Option<String>,
    uuid: String,
    /// Our lease node's name once its create was answered; `sent`: a create may have reached the server.
    lease: Option<String>,
    sent: bool,
    slot: Option<String>,
    granted: bool,
    doubt: Doubt,
    undo: Undo,
}

impl SemAttempt {
    pub(super) fn new(shared: Arc<Shared>, req: AcquireRequest, permits: u32, undo: Undo) -> Self {
        let dir = lock_dir(&req.name);
        let locks = dir.as_ref().map(|d| semaphore_dirs(d).0).unwrap_or_default();
        let inner = AcquireRequest { name: locks, kind: HoldKind::Exclusive, ..req.clone() };
        SemAttempt {
            mutex: QueueEntry::new(shared.clone(), inner, None),
            shared,
            req,
            permits,
            dir,
            mutex_node: None,
            uuid: uuid::Uuid::new_v4().to_string(),
            lease: None,
            sent: false,
            slot: None,
            granted: false,
            doubt: Doubt::default(),
            undo,
        }
    }

    fn dir(&self) -> &str {
        self.dir.as_deref().unwrap_or_default()
    }

    fn leases_dir(&self) -> String {
        semaphore_dirs(self.dir()).1
    }

    /// Our lease, made (with the leases directory) if need be, found again by its prefix after a lost reply; then
    /// the leases.
    async fn lease(&mut self, zk: &zk::Client) -> Result<Vec<String>, zk::Error> {
        let s = self.shared.clone();
        let dir = self.leases_dir();
        let prefix = format!("{PROTECTED}{}-", self.uuid);
        for _ in 0..TRIES {
            if self.lease.is_none() && self.sent {
                let children = leases(&s, zk, self.dir()).await?;
                self.lease = children.iter().find(|c| c.starts_with(&prefix)).cloned();
            }
            if let Some(lease) = &self.lease {
                let children = leases(&s, zk, self.dir()).await?;
                if children.contains(lease) {
                    return Ok(children);
                }
                // Gone (an operator's force_release, a new session): make another.
                (self.lease, self.sent) = (None, false);
            }
            self.sent = true;
            let path = format!("{dir}/{prefix}{LEASE_NAME}");
            match s.rpc(zk.create(&path, self.req.holder.as_bytes(), &s.session.modes().ephemeral_sequential)).await {
                Ok((_, seq)) => self.lease = Some(format!("{prefix}{LEASE_NAME}{seq}")),
                Err(zk::Error::NoNode) => {
                    self.sent = false;
                    s.make_dirs(zk, &dir).await?;
                }
                Err(e) => {
                    self.sent = is_connection_loss(&e);
                    return Err(e);
                }
            }
        }
        Err(zk::Error::ConnectionLoss)
    }

    /// The lowest free slot below N, taken: its number and token. `None` if all are taken.
    async fn take_slot(&mut self, zk: &zk::Client) -> Result<Option<(u32, u64)>, zk::Error> {
        let s = self.shared.clone();
        let dir = slots_dir(self.dir());
        let lease = self.lease.clone().unwrap_or_default();
        for _ in 0..TRIES {
            let taken = match s.rpc(zk.list_children(&dir)).await {
                Ok(taken) => taken,
                Err(zk::Error::NoNode) => {
                    s.make_dirs(zk, &dir).await?;
                    continue;
                }
                Err(e) => return Err(e),
            };
            let Some(k) = (0..self.permits).find(|k| !taken.contains(&k.to_string())) else { return Ok(None) };
            let path = format!("{dir}/{k}");
            match s.rpc(zk.create(&path, lease.as_bytes(), &s.session.modes().ephemeral)).await {
                Ok((stat, _)) => {
                    self.slot = Some(path);
                    return Ok(Some((k, stat.czxid as u64)));
                }
                // Taken meanwhile (only a holder's release frees slots, and takers hold the mutex): look again.
                Err(zk::Error::NodeExists | zk::Error::NoNode) => continue,
                Err(e) => return Err(e),
            }
        }
        Ok(None)
    }

    async fn attempt(&mut self) -> Result<Attempt> {
        let s = self.shared.clone();
        if let Err(e) = &self.dir {
            return Err(e.clone());
        }
        if self.mutex_node.is_none() {
            match self.mutex.try_acquire().await? {
                Attempt::Busy(busy) => return Ok(Attempt::Busy(busy)),
                Attempt::Acquired(grant) => self.mutex_node = grant.key,
            }
        }
        let zk = s.client().await?;
        let stored = stored_permits(&s, &zk, self.dir()).await.map_err(|e| s.err(e))?;
        let children = self.lease(&zk).await.map_err(|e| s.err(e))?;
        if let Some(stored) = stored.filter(|n| *n != self.permits)
            && children.len() > 1
        {
            return Err(permits_mismatch(&self.req.name, &s.url, self.permits, stored));
        }
        if children.len() > self.permits as usize {
            return Ok(Attempt::Busy(Busy::default()));
        }
        if stored != Some(self.permits) {
            let (path, n) = (permits_path(self.dir()), self.permits.to_string());
            let written = match s.rpc(zk.set_data(&path, n.as_bytes(), None)).await {
                Err(zk::Error::NoNode) => {
                    let parent = path.rsplit_once('/').map_or(FENCELOCK_ROOT, |(p, _)| p).to_string();
                    s.make_dirs(&zk, &parent).await.map_err(|e| s.err(e))?;
                    s.rpc(zk.create(&path, n.as_bytes(), &s.session.modes().persistent)).await.map(drop)
                }
                done => done.map(drop),
            };
            written.or_else(|e| if e == zk::Error::NodeExists { Ok(()) } else { Err(e) }).map_err(|e| s.err(e))?;
        }
        let Some((slot, token)) = self.take_slot(&zk).await.map_err(|e| s.err(e))? else {
            return Ok(Attempt::Busy(Busy::default()));
        };
        if let Some(node) = &self.mutex_node {
            match s.rpc(zk.delete(node, None)).await {
                Ok(()) | Err(zk::Error::NoNode) => self.mutex_node = None,
                Err(e) => return Err(s.err(e)),
            }
        }
        self.granted = true;
        let lease = format!("{}/{}", self.leases_dir(), self.lease.clone().unwrap_or_default());
        Ok(Attempt::Acquired(self.req.grant(token, Some(lease)).in_slot(slot)))
    }
}

#[async_trait]
impl Pending for SemAttempt {
    async fn try_acquire(&mut self) -> Result<Attempt> {
        self.doubt.clone().settle(self.attempt()).await
    }

    async fn wait(&mut self, busy: &Busy, deadline: Option<Instant>) -> Result<()> {
        if self.mutex_node.is_none() {
            return self.mutex.wait(busy, deadline).await;
        }
        let s = &self.shared;
        let watcher = {
            let zk = s.client().await?;
            match s.rpc(zk.list_and_watch_children(&self.leases_dir())).await {
                Ok((children, _)) if children.len() <= self.permits as usize => return Ok(()),
                Ok((_, watcher)) => watcher,
                Err(zk::Error::NoNode) => return Ok(()),
                Err(e) => return Err(s.err(e)),
            }
        };
        until_fired(watcher, deadline).await;
        Ok(())
    }
}

impl Drop for SemAttempt {
    fn drop(&mut self) {
        if self.granted {
            return;
        }
        let queued = self.mutex.leftover();
        let in_doubt = self.doubt.is_set() || queued.as_ref().is_some_and(|(_, d)| *d);
        let (slot, mutex) = (self.slot.take(), self.mutex_node.take());
        let lease_node = self.lease.take().map(|l| format!("{}/{l}", self.leases_dir()));
        let lease = self.sent.then(|| Leftover { dir: self.leases_dir(), uuid: self.uuid.clone(), sent: None });
        if slot.is_none() && mutex.is_none() && lease.is_none() && queued.is_none() {
            return;
        }
        let Some(zk) = self.shared.session.current() else { return };
        let shared = self.shared.clone();
        // Slot first, then the lease (a lease without a slot only delays a taker), then the mutex.
        let task = async move {
            if let Some((leftover, _)) = queued {
                delete(shared.clone(), leftover).await;
            }
            if let Some(slot) = slot {
                let _ = shared.rpc(zk.delete(&slot, None)).await;
            }
            if let Some(mut leftover) = lease {
                leftover.sent = lease_node.map(|node| {
                    let zk = zk.clone();
                    Box::pin(async move { zk.delete(&node, None).await }) as _
                });
                delete(shared.clone(), leftover).await;
            }
            if let Some(mutex) = mutex {
                let _ = shared.rpc(zk.delete(&mutex, None)).await;
            }
        };
        if in_doubt { self.undo.in_doubt(task) } else { self.undo.entry(task) }
    }
}

/// Before a permit's lease goes: its slot node, if it still names the lease.
pub(super) async fn release_slot(s: &Shared, zk: &zk::Client, grant: &Grant) -> Result<()> {
    let (Some(path), Some(lease)) = (slot_path(grant), grant.key.as_deref()) else { return Ok(()) };
    let name = lease.rsplit_once('/').map_or(lease, |(_, n)| n);
    match s.rpc(zk.get_data(&path)).await {
        Ok((data, stat)) if data == name.as_bytes() => match s.rpc(zk.delete(&path, Some(stat.version))).await {
            Ok(()) | Err(zk::Error::NoNode | zk::Error::BadVersion) => Ok(()),
            Err(e) => Err(s.err(e)),
        },
        Ok(_) | Err(zk::Error::NoNode) => Ok(()),
        Err(e) => Err(s.err(e)),
    }
}

/// Permits of semaphore `name` not held now, out of `permits`: Curator's count of the leases.
pub(super) async fn available(s: &Shared, name: &str, permits: u32) -> Result<u32> {
    let dir = lock_dir(name)?;
    let zk = s.client().await?;
    let stored = stored_permits(s, &zk, &dir).await.map_err(|e| s.err(e))?;
    let held = leases(s, &zk, &dir).await.map_err(|e| s.err(e))?.len();
    match stored {
        Some(stored) if stored != permits && held > 0 => Err(permits_mismatch(name, &s.url, permits, stored)),
        _ => Ok(permits.saturating_sub(u32::try_from(held).unwrap_or(u32::MAX))),
    }
}
