//! Every lease fencelockd holds: etcd leases (each owning the backend locks taken with it) and native leases (one
//! backend lock each, renewed by their client). One table, so `--max-leases` bounds both, shutdown releases both, and
//! lease ids never collide. Each lease belongs to the identity that took it: any other caller naming it is
//! PERMISSION_DENIED. Ids are random 63-bit numbers, so a lease cannot be found by counting.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use fencelock::{Client, ErrorKind, Lease, LockOptions, MAX_TTL};
use tokio::sync::watch;
use tokio::time::Instant;
use tonic::{Code, Status};

use crate::identity::Identity;
use crate::status::{from_error, status};

/// One etcd lease: its TTL contract with the client and the backend locks taken with it.
#[derive(Debug)]
pub struct EtcdLease {
    /// The lease id (positive).
    pub id: i64,
    /// Who granted it: the only caller that may use it.
    pub owner: Identity,
    /// The granted TTL.
    pub ttl: Duration,
    /// When it expires unless kept alive; changed only under the registry's table lock.
    deadline: Mutex<Instant>,
    /// Lock name → the backend lease held for it. Checked against `gone` under this lock, so a lock acquired while
    /// the lease expires is either drained by the expiry or released by its acquirer.
    locks: tokio::sync::Mutex<HashMap<String, Held>>,
    /// Set once, when the lease is revoked, expires or the server shuts down.
    gone: watch::Sender<bool>,
}

impl EtcdLease {
    /// The ownership key etcd's lock service hands out: the name, a slash, the lease id in hex.
    pub fn key(&self, name: &str) -> String {
        format!("{name}/{:x}", self.id)
    }

    /// Resolves when the lease is revoked or expires.
    pub fn gone(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut rx = self.gone.subscribe();
        async move {
            let _ = rx.wait_for(|g| *g).await;
        }
    }

    /// Seconds left before expiry (0 once due).
    pub fn remaining(&self) -> Duration {
        self.deadline.lock().expect("deadline lock").saturating_duration_since(Instant::now())
    }

    /// The ownership keys of the locks it holds, and the leader keys of the elections it leads.
    pub async fn keys(&self) -> Vec<String> {
        let mut keys: Vec<String> =
            self.locks.lock().await.keys().map(|n| self.key(n.strip_prefix(ELECTION).unwrap_or(n))).collect();
        keys.sort();
        keys
    }
}

/// Where a leadership sits in a lease's table of holds: beside the locks, under its election's name behind a prefix
/// no lock name starts with (a control character), so a lock and an election of the same name held with the same
/// lease do not collide, though their etcd keys (name/lease) are alike as in etcd.
const ELECTION: &str = "\u{1}election:";

fn election_slot(name: &str) -> String {
    format!("{ELECTION}{name}")
}

/// A backend lock held for an etcd lease; dropping it (Unlock, or the lease's end) stops its loss watcher.
#[derive(Debug)]
struct Held {
    lease: Arc<Lease>,
    _watching: tokio::sync::oneshot::Sender<()>,
}

/// One native lease: a backend lock whose client renews it (no server-side watchdog).
#[derive(Debug)]
pub struct NativeLease {
    /// The handle the client names it by.
    pub id: u64,
    /// Who took it: the only caller that may use it.
    pub owner: Identity,
    /// The backend lease.
    pub lease: Lease,
    /// Set once, when it is released or forgotten after expiring.
    gone: watch::Sender<bool>,
}

impl NativeLease {
    /// Resolves when the lease is released or forgotten.
    pub fn gone(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut rx = self.gone.subscribe();
        async move {
            let _ = rx.wait_for(|g| *g).await;
        }
    }
}

#[derive(Debug, Default)]
struct Tables {
    etcd: HashMap<i64, Arc<EtcdLease>>,
    native: HashMap<u64, Arc<NativeLease>>,
}

impl Tables {
    fn len(&self) -> usize {
        self.etcd.len() + self.native.len()
    }
}

/// What the registry holds at most.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Leases, etcd and native together (`--max-leases`).
    pub max_leases: usize,
    /// Lock calls waiting for their lock (`--max-waiters`).
    pub max_waiters: usize,
}

/// The (identity, lock name) pairs whose highest granted token is remembered for fenced writes; past it the oldest
/// are forgotten (their late fenced writes are then refused, which is safe).
const GRANTS_REMEMBERED: usize = 65_536;

/// The highest fencing token fencelockd granted each identity on each lock name, and when.
#[derive(Debug, Default)]
struct Grants {
    highest: HashMap<(Identity, String), (u64, Instant)>,
}

impl Grants {
    fn record(&mut self, owner: &Identity, name: &str, fence: u64) {
        let entry = self.highest.entry((owner.clone(), name.to_string())).or_insert((0, Instant::now()));
        *entry = (entry.0.max(fence), Instant::now());
        if self.highest.len() > GRANTS_REMEMBERED {
            // Forget the least recently granted quarter at once, so the sort is rare.
            let mut ages: Vec<Instant> = self.highest.values().map(|(_, at)| *at).collect();
            ages.sort_unstable();
            let cut = ages[ages.len() / 4];
            self.highest.retain(|_, (_, at)| *at > cut);
        }
    }

    fn highest(&self, owner: &Identity, name: &str) -> Option<u64> {
        self.highest.get(&(owner.clone(), name.to_string())).map(|(fence, _)| *fence)
    }
}

/// The lease table over one fencelock client.
#[derive(Debug)]
pub struct Registry {
    client: Client,
    limits: Limits,
    tables: Mutex<Tables>,
    grants: Mutex<Grants>,
    shutdown: watch::Sender<bool>,
    waiting: AtomicUsize,
}

/// Counts one Lock call as waiting while it lives.
struct Waiting<'a>(&'a AtomicUsize);

impl<'a> Waiting<'a> {
    /// Counts one more waiter, unless `max` already wait.
    fn enter(count: &'a AtomicUsize, max: usize) -> Result<Self, Status> {
        count.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| (n < max).then_some(n + 1)).map_err(|_| {
            Status::new(
                Code::ResourceExhausted,
                format!(
                    "fencelockd: --max-waiters {max} Lock calls are already waiting; retry later, use TryLock, or \
                     restart fencelockd with a higher bound"
                ),
            )
        })?;
        Ok(Waiting(count))
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The error etcd gives for a lease it does not know.
pub fn lease_not_found() -> Status {
    Status::new(Code::NotFound, "etcdserver: requested lease not found")
}

/// The error for naming a lease another identity holds (which one is not said).
fn not_yours(id: impl std::fmt::LowerHex) -> Status {
    Status::permission_denied(format!("fencelockd: lease {id:x} belongs to another identity"))
}

/// A random id no lease has (the tables are locked by the caller).
fn fresh_id(tables: &Tables) -> u64 {
    loop {
        let id = random_id();
        if !tables.etcd.contains_key(&(id as i64)) && !tables.native.contains_key(&id) {
            return id;
        }
    }
}

fn native_not_held(id: u64) -> Status {
    status(ErrorKind::NotHeld, format!("native lease {id} is not held (released, expired or unknown)"))
}

/// A fresh random lease id: 63 bits, never 0, so it is a positive i64 for etcd and the same number natively.
fn random_id() -> u64 {
    loop {
        let id = rand::random::<u64>() >> 1;
        if id != 0 {
            return id;
        }
    }
}

impl Registry {
    /// A registry taking locks through `client`, within `limits`.
    pub fn new(client: Client, limits: Limits) -> Arc<Registry> {
        Arc::new(Registry {
            client,
            limits,
            tables: Mutex::default(),
            grants: Mutex::default(),
            shutdown: watch::Sender::new(false),
            waiting: AtomicUsize::new(0),
        })
    }

    /// Leases held now, etcd and native together.
    pub fn leases(&self) -> usize {
        self.tables().len()
    }

    /// Lock calls inside the wait for their lock now.
    pub fn waiting_locks(&self) -> usize {
        self.waiting.load(Ordering::SeqCst)
    }

    /// The fencelock client locks go through.
    pub fn client(&self) -> &Client {
        &self.client
    }

    fn tables(&self) -> MutexGuard<'_, Tables> {
        self.tables.lock().expect("lease table lock")
    }

    fn full(&self) -> Status {
        Status::new(
            Code::ResourceExhausted,
            format!(
                "fencelockd: --max-leases {} reached; revoke or release leases, or restart fencelockd with a higher bound",
                self.limits.max_leases
            ),
        )
    }

    /// Resolves when the server starts shutting down.
    pub fn shutting_down(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut rx = self.shutdown.subscribe();
        async move {
            let _ = rx.wait_for(|s| *s).await;
        }
    }

    fn shut(&self) -> Status {
        status(ErrorKind::Unavailable, "fencelockd is shutting down")
    }

    /// Grants `owner` an etcd lease of `ttl_secs`: id `id` if it is free, or a fresh random one if 0.
    pub fn grant(self: &Arc<Self>, ttl_secs: i64, id: i64, owner: Identity) -> Result<Arc<EtcdLease>, Status> {
        if ttl_secs <= 0 || ttl_secs as u64 > MAX_TTL.as_secs() {
            return Err(status(
                ErrorKind::InvalidArgument,
                format!("lease TTL must be 1–{} seconds, got {ttl_secs}", MAX_TTL.as_secs()),
            ));
        }
        if id < 0 {
            return Err(status(ErrorKind::InvalidArgument, format!("lease ID must not be negative, got {id}")));
        }
        if *self.shutdown.borrow() {
            return Err(self.shut());
        }
        let ttl = Duration::from_secs(ttl_secs as u64);
        let mut tables = self.tables();
        if tables.len() >= self.limits.max_leases {
            return Err(self.full());
        }
        let id = if id == 0 { fresh_id(&tables) as i64 } else { id };
        // A chosen id must be free in both tables: native leases share the id space.
        if tables.etcd.contains_key(&id) || tables.native.contains_key(&(id as u64)) {
            return Err(Status::new(Code::FailedPrecondition, "etcdserver: lease already exists"));
        }
        let lease = Arc::new(EtcdLease {
            id,
            owner,
            ttl,
            deadline: Mutex::new(Instant::now() + ttl),
            locks: tokio::sync::Mutex::default(),
            gone: watch::Sender::new(false),
        });
        tables.etcd.insert(id, lease.clone());
        drop(tables);
        tracing::info!(lease = format_args!("{id:x}"), ttl_s = ttl_secs, owner = %lease.owner, "lease granted");
        tokio::spawn(self.clone().reap_etcd(lease.clone()));
        Ok(lease)
    }

    /// Expires `lease` once its deadline passes without a keep-alive.
    async fn reap_etcd(self: Arc<Self>, lease: Arc<EtcdLease>) {
        let gone = lease.gone();
        tokio::pin!(gone);
        loop {
            let due = *lease.deadline.lock().expect("deadline lock");
            tokio::select! {
                _ = &mut gone => return,
                _ = tokio::time::sleep_until(due) => {}
            }
            let expired = {
                let mut tables = self.tables();
                let due = *lease.deadline.lock().expect("deadline lock") <= Instant::now();
                due && tables.etcd.remove(&lease.id).is_some()
            };
            if expired {
                tracing::info!(lease = format_args!("{:x}", lease.id), "lease expired: no keep-alive within its TTL");
                self.end_etcd(&lease).await;
                return;
            }
        }
    }

    /// Marks `lease` gone and releases every lock it holds through the backend.
    async fn end_etcd(&self, lease: &EtcdLease) {
        lease.gone.send_replace(true);
        let locks: Vec<(String, Arc<Lease>)> = lease.locks.lock().await.drain().map(|(n, h)| (n, h.lease)).collect();
        for (name, held) in locks {
            if held.is_lost() {
                continue; // nothing of it is left on the backend to release
            }
            match held.release().await {
                Ok(()) => {
                    tracing::info!(lease = format_args!("{:x}", lease.id), lock = %name, fence = held.fence(), "lock released with its lease")
                }
                Err(e) => {
                    tracing::warn!(lease = format_args!("{:x}", lease.id), lock = %name, error = %e, "lock release with its lease failed; it expires on the backend")
                }
            }
        }
    }

    /// The live etcd lease `id`, if `caller` owns it; `None` if there is none; PERMISSION_DENIED if another
    /// identity owns it.
    pub fn etcd_lease(&self, id: i64, caller: &Identity) -> Result<Option<Arc<EtcdLease>>, Status> {
        match self.tables().etcd.get(&id) {
            Some(lease) if lease.owner != *caller => Err(not_yours(id)),
            found => Ok(found.cloned()),
        }
    }

    /// The ids of `caller`'s live etcd leases.
    pub fn etcd_ids(&self, caller: &Identity) -> Vec<i64> {
        let mut ids: Vec<i64> = self.tables().etcd.values().filter(|l| l.owner == *caller).map(|l| l.id).collect();
        ids.sort_unstable();
        ids
    }

    /// Restarts lease `id`'s TTL; its TTL, or `None` if it no longer exists. An etcd client takes a live lease to
    /// mean its locks are held, so each keep-alive first renews them on the backend: one found lost ends the lease
    /// (the client sees TTL 0) rather than being kept alive while somebody else holds the lock. Another identity's
    /// lease is PERMISSION_DENIED.
    pub async fn keep_alive(&self, id: i64, caller: &Identity) -> Result<Option<Duration>, Status> {
        let Some(lease) = self.etcd_lease(id, caller)? else { return Ok(None) };
        let locks: Vec<(String, Arc<Lease>)> =
            lease.locks.lock().await.iter().map(|(n, h)| (n.clone(), h.lease.clone())).collect();
        let renewals = locks.iter().map(|(_, held)| {
            // A slow backend must not hold the reply past the client's patience; a renewal that does not finish in
            // time leaves the lock as the watchdog knows it (lost only once its validity ran out).
            tokio::time::timeout(lease.ttl / 3, held.renew(None))
        });
        let outcomes = futures::future::join_all(renewals).await;
        let lost = locks.iter().zip(&outcomes).find(|((_, held), outcome)| {
            held.is_lost()
                || matches!(outcome, Ok(Err(e)) if matches!(e.kind(), ErrorKind::LockLost | ErrorKind::NotHeld))
        });
        if let Some(((name, _), _)) = lost {
            self.end_lost(&lease, name).await;
            return Ok(None);
        }
        let tables = self.tables();
        let Some(lease) = tables.etcd.get(&id) else { return Ok(None) };
        *lease.deadline.lock().expect("deadline lock") = Instant::now() + lease.ttl;
        Ok(Some(lease.ttl))
    }

    /// Ends `lease` because its lock on `name` was lost on the backend (expired unrenewed, deleted, or gone with the
    /// server's data), as etcd would end a session whose lease expired: its keep-alives get TTL 0 from now on.
    async fn end_lost(&self, lease: &EtcdLease, name: &str) {
        if self.tables().etcd.remove(&lease.id).is_some() {
            tracing::warn!(lease = format_args!("{:x}", lease.id), lock = %name, "lease ended: its lock was lost on the backend");
            self.end_etcd(lease).await;
        }
    }

    /// Ends `lease` as soon as the core reports its lock `held` lost (the watchdog's renewal refused, or its validity
    /// ran out), so the client learns of the loss at its next keep-alive rather than at Unlock.
    async fn watch_lost(
        self: Arc<Self>,
        lease: Arc<EtcdLease>,
        name: String,
        held: Arc<Lease>,
        unheld: tokio::sync::oneshot::Receiver<()>,
    ) {
        tokio::select! {
            _ = unheld => {}
            fencelock::LeaseEnd::Lost(_) = held.lost() => self.end_lost(&lease, &name).await,
        }
    }

    /// Revokes `caller`'s lease `id` and releases its locks.
    pub async fn revoke(&self, id: i64, caller: &Identity) -> Result<(), Status> {
        let lease = {
            let mut tables = self.tables();
            match tables.etcd.get(&id) {
                None => return Err(lease_not_found()),
                Some(lease) if lease.owner != *caller => return Err(not_yours(id)),
                Some(_) => tables.etcd.remove(&id).ok_or_else(lease_not_found)?,
            }
        };
        tracing::info!(lease = format_args!("{id:x}"), "lease revoked");
        self.end_etcd(&lease).await;
        Ok(())
    }

    /// Takes lock `name` for `caller`'s etcd lease `id`, waiting while someone else holds it; returns the key and the
    /// fence.
    pub async fn lock_for(self: &Arc<Self>, id: i64, name: &str, caller: &Identity) -> Result<(String, u64), Status> {
        let lease = self.etcd_lease(id, caller)?.ok_or_else(lease_not_found)?;
        if let Some(held) = lease.locks.lock().await.get(name) {
            return Ok((lease.key(name), held.lease.fence()));
        }
        // The backend TTL is the lease's, renewed by the watchdog while the lease lives; on a crash of fencelockd the
        // backend lock expires one TTL later, as the etcd lease would have.
        let opts = LockOptions::default().ttl(lease.ttl).owner(format!("etcd-lease-{id:x}"));
        let waiting = Waiting::enter(&self.waiting, self.limits.max_waiters)?;
        let held = tokio::select! {
            r = self.client.lock(name, &opts) => r.map_err(from_error)?,
            _ = lease.gone() => return Err(lease_not_found()),
            _ = self.shutting_down() => return Err(self.shut()),
        };
        drop(waiting);
        let mut locks = lease.locks.lock().await;
        if *lease.gone.borrow() {
            drop(locks);
            let _ = held.release().await;
            return Err(lease_not_found());
        }
        let fence = held.fence();
        self.grants().record(&lease.owner, name, fence);
        if locks.contains_key(name) {
            // A concurrent Lock with the same lease won; ours is a reentrant hold of the same grant.
            drop(locks);
            let _ = held.release().await;
        } else {
            let held = Arc::new(held);
            let (watching, unheld) = tokio::sync::oneshot::channel();
            locks.insert(name.to_string(), Held { lease: held.clone(), _watching: watching });
            tracing::debug!(lease = format_args!("{id:x}"), lock = %name, fence, "lock acquired");
            tokio::spawn(self.clone().watch_lost(lease.clone(), name.to_string(), held, unheld));
        }
        Ok((lease.key(name), fence))
    }

    /// Campaigns in the election `name` with `value` for `caller`'s etcd lease `id`, waiting while another leads;
    /// returns the term. The leadership ends with the lease (revoked, expired, lost on the backend). Campaigning
    /// again with the same lease while it leads keeps the term and proclaims `value`, as etcd does.
    pub async fn campaign_for(
        self: &Arc<Self>,
        id: i64,
        name: &str,
        value: &[u8],
        caller: &Identity,
    ) -> Result<u64, Status> {
        let lease = self.etcd_lease(id, caller)?.ok_or_else(lease_not_found)?;
        let slot = election_slot(name);
        let election = self.client.election(name);
        let existing = lease.locks.lock().await.get(&slot).map(|held| held.lease.clone());
        if let Some(held) = existing {
            election.proclaim(&held, value).await.map_err(from_error)?;
            return Ok(held.fence());
        }
        let opts = LockOptions::default().ttl(lease.ttl).owner(format!("etcd-lease-{id:x}"));
        let waiting = Waiting::enter(&self.waiting, self.limits.max_waiters)?;
        let held = tokio::select! {
            r = election.campaign(value, &opts) => r.map_err(from_error)?.into_lease(),
            _ = lease.gone() => return Err(lease_not_found()),
            _ = self.shutting_down() => return Err(self.shut()),
        };
        drop(waiting);
        let mut locks = lease.locks.lock().await;
        if *lease.gone.borrow() {
            drop(locks);
            let _ = held.release().await;
            return Err(lease_not_found());
        }
        let term = held.fence();
        self.grants().record(&lease.owner, name, term);
        if let Some(won) = locks.get(&slot) {
            // A concurrent Campaign with the same lease won; its leadership is the one.
            let term = won.lease.fence();
            drop(locks);
            let _ = held.release().await;
            return Ok(term);
        }
        let held = Arc::new(held);
        let (watching, unheld) = tokio::sync::oneshot::channel();
        locks.insert(slot.clone(), Held { lease: held.clone(), _watching: watching });
        tracing::debug!(lease = format_args!("{id:x}"), election = %name, term, "leadership won");
        tokio::spawn(self.clone().watch_lost(lease.clone(), slot, held, unheld));
        Ok(term)
    }

    /// The leadership of `caller`'s lease `id` in the election `name`, if it still leads with term `rev` (0: any).
    async fn leadership(&self, name: &str, id: i64, rev: i64, caller: &Identity) -> Result<Arc<Lease>, Status> {
        let not_leader = || Status::failed_precondition("etcdserver: election: not leader");
        let lease = self.etcd_lease(id, caller)?.ok_or_else(not_leader)?;
        let held =
            lease.locks.lock().await.get(&election_slot(name)).map(|h| h.lease.clone()).ok_or_else(not_leader)?;
        if (rev != 0 && i64::try_from(held.fence()).ok() != Some(rev)) || held.is_lost() {
            return Err(not_leader());
        }
        Ok(held)
    }

    /// Replaces the value of `caller`'s leadership (lease `id`, term `rev`) in the election `name`.
    pub async fn proclaim_for(
        &self,
        name: &str,
        id: i64,
        rev: i64,
        value: &[u8],
        caller: &Identity,
    ) -> Result<(), Status> {
        let held = self.leadership(name, id, rev, caller).await?;
        self.client.election(name).proclaim(&held, value).await.map_err(from_error)
    }

    /// Gives up `caller`'s leadership (lease `id`, term `rev`) in the election `name`; the lease lives on.
    pub async fn resign_for(&self, name: &str, id: i64, rev: i64, caller: &Identity) -> Result<(), Status> {
        self.leadership(name, id, rev, caller).await?;
        let lease = self.etcd_lease(id, caller)?.ok_or_else(lease_not_found)?;
        let Some(held) = lease.locks.lock().await.remove(&election_slot(name)) else { return Ok(()) };
        held.lease.release().await.map_err(from_error)?;
        tracing::debug!(lease = format_args!("{id:x}"), election = %name, term = held.lease.fence(), "resigned");
        Ok(())
    }

    /// The etcd lease through which this server holds the leadership of `name` with `term`, if one does.
    pub async fn leader_lease(&self, name: &str, term: u64) -> Option<i64> {
        let leases: Vec<Arc<EtcdLease>> = self.tables().etcd.values().cloned().collect();
        let slot = election_slot(name);
        for lease in leases {
            if lease.locks.lock().await.get(&slot).is_some_and(|h| h.lease.fence() == term) {
                return Some(lease.id);
            }
        }
        None
    }

    /// Releases the lock whose ownership key is `key`, if `caller` owns its lease; returns its fence.
    pub async fn unlock_key(&self, key: &str, caller: &Identity) -> Result<u64, Status> {
        let not_held = || status(ErrorKind::NotHeld, format!("no lock is held under key {key:?}"));
        let (name, id) = key.rsplit_once('/').ok_or_else(not_held)?;
        let id = i64::from_str_radix(id, 16).map_err(|_| not_held())?;
        let lease = self.etcd_lease(id, caller)?.ok_or_else(not_held)?;
        let held = lease.locks.lock().await.remove(name).ok_or_else(not_held)?.lease;
        let fence = held.fence();
        held.release().await.map_err(from_error)?;
        tracing::debug!(lease = format_args!("{id:x}"), lock = %name, fence, "lock released");
        Ok(fence)
    }

    /// Takes a native lease on `name` for `owner` (one attempt if `once`): `None` if `once` found it taken.
    pub async fn lock_native(
        self: &Arc<Self>,
        name: &str,
        ttl: Duration,
        timeout: Option<Duration>,
        once: bool,
        owner: Identity,
    ) -> Result<Option<Arc<NativeLease>>, Status> {
        if self.tables().len() >= self.limits.max_leases {
            return Err(self.full());
        }
        let mut opts = LockOptions::default().ttl(ttl).watchdog(false);
        if let Some(t) = timeout {
            opts = opts.timeout(t);
        }
        let waiting = if once { None } else { Some(Waiting::enter(&self.waiting, self.limits.max_waiters)?) };
        let got = tokio::select! {
            r = async { if once { self.client.try_lock(name, &opts).await } else { self.client.lock(name, &opts).await.map(Some) } } => r.map_err(from_error)?,
            _ = self.shutting_down() => return Err(self.shut()),
        };
        drop(waiting);
        let Some(lease) = got else { return Ok(None) };
        let native = match self.insert_native(lease, owner) {
            Ok(native) => native,
            Err((lease, refused)) => {
                let _ = lease.release().await;
                return Err(refused);
            }
        };
        tracing::debug!(lease = native.id, lock = %name, fence = native.lease.fence(), "native lock acquired");
        tokio::spawn(self.clone().reap_native(native.clone()));
        Ok(Some(native))
    }

    /// Files a fresh native lease under a new id, unless the table filled up or shutdown began meanwhile.
    fn insert_native(&self, lease: Lease, owner: Identity) -> Result<Arc<NativeLease>, (Lease, Status)> {
        let mut tables = self.tables();
        if *self.shutdown.borrow() {
            return Err((lease, self.shut()));
        }
        if tables.len() >= self.limits.max_leases {
            return Err((lease, self.full()));
        }
        let native = Arc::new(NativeLease { id: fresh_id(&tables), owner, lease, gone: watch::Sender::new(false) });
        tables.native.insert(native.id, native.clone());
        drop(tables);
        self.grants().record(&native.owner, native.lease.name(), native.lease.fence());
        Ok(native)
    }

    /// Forgets `native` once the core reports it lost (with no watchdog, when its TTL passes without a renewal; the
    /// backend record expires by itself), so a vanished client's lease does not count against `--max-leases`.
    async fn reap_native(self: Arc<Self>, native: Arc<NativeLease>) {
        tokio::select! {
            _ = native.gone() => return,
            fencelock::LeaseEnd::Lost(_) = native.lease.lost() => {}
        }
        if self.tables().native.remove(&native.id).is_some() {
            tracing::info!(lease = native.id, lock = %native.lease.name(), "native lease lost: not renewed within its TTL");
            native.gone.send_replace(true);
        }
    }

    /// `caller`'s live native lease `id`: NOT_HELD if there is none, PERMISSION_DENIED if another identity's.
    pub fn native(&self, id: u64, caller: &Identity) -> Result<Arc<NativeLease>, Status> {
        match self.tables().native.get(&id) {
            None => Err(native_not_held(id)),
            Some(native) if native.owner != *caller => Err(not_yours(id)),
            Some(native) => Ok(native.clone()),
        }
    }

    /// Releases `caller`'s native lease `id`.
    pub async fn release_native(&self, id: u64, caller: &Identity) -> Result<(), Status> {
        let native = {
            let mut tables = self.tables();
            match tables.native.get(&id) {
                None => return Err(native_not_held(id)),
                Some(native) if native.owner != *caller => return Err(not_yours(id)),
                Some(_) => tables.native.remove(&id).ok_or_else(|| native_not_held(id))?,
            }
        };
        native.gone.send_replace(true);
        native.lease.release().await.map_err(from_error)?;
        tracing::debug!(lease = id, lock = %native.lease.name(), "native lock released");
        Ok(())
    }

    fn grants(&self) -> MutexGuard<'_, Grants> {
        self.grants.lock().expect("grant table lock")
    }

    /// Refuses a fenced write of `token` to the register `resource` by `caller` unless fencelockd granted `caller`
    /// a token at least as high on the lock of that name (native or etcd): every token up to it was really granted
    /// on that name, so no write can carry the register past what the caller held (a forged `u64::MAX` would lock
    /// every later holder out).
    pub fn check_fence(&self, resource: &str, token: u64, caller: &Identity) -> Result<(), Status> {
        match self.grants().highest(caller, resource) {
            Some(highest) if token <= highest => Ok(()),
            _ => Err(Status::permission_denied(format!(
                "fencelockd: fenced write to {resource:?} with token {token}: fencelockd granted this identity no such \
                 token on the lock {resource:?} (a fenced register is written with the token of the lock of its name)"
            ))),
        }
    }

    /// Fails waiting Lock calls and ends keep-alive streams; refuses new leases.
    pub fn begin_shutdown(&self) {
        self.shutdown.send_replace(true);
    }

    /// Shutdown: fails waiting calls, then revokes every lease so its locks are released now rather than expiring
    /// one TTL later (nobody could keep them alive once this process is gone).
    pub async fn shutdown(&self) {
        self.begin_shutdown();
        let (etcd, native) = {
            let mut tables = self.tables();
            (std::mem::take(&mut tables.etcd), std::mem::take(&mut tables.native))
        };
        for lease in etcd.into_values() {
            self.end_etcd(&lease).await;
        }
        for native in native.into_values() {
            native.gone.send_replace(true);
            if let Err(e) = native.lease.release().await {
                tracing::warn!(lease = native.id, error = %e, "native lock release at shutdown failed");
            }
        }
        self.client.close().await;
    }
}
