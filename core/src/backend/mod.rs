//! The raw per-backend interface. A backend knows nothing of watchdogs, deadlines, reentrancy or the local
//! queue: the public layer (`Client`, `Lease`) builds those on top of these few calls.
//!
//! # The cancel protocol
//!
//! One `lock` or `try_lock` call is one [`Pending`] attempt, made by [`Backend::begin`] once the call holds its name's
//! local queue place, and dropped when the call ends — with a lease, busy, timed out, failed or cancelled (its future
//! dropped at any await). Dropping it is the only way anything undoes what the call left on the server:
//!
//! - **What it may leave.** A queue entry (an etcd key, a ZooKeeper node), a subscription (Redis, PostgreSQL), and,
//!   while a request's outcome is unknown, the holder's record itself: a request cut short or failed after it may
//!   have reached the server ([`Doubt`]) may have taken the lock for nobody. A request the backend refused up front
//!   (`InvalidArgument`, `Unsupported`, `Closed`) left nothing.
//! - **Who undoes it.** The attempt's own `Drop`: a subscription unlistens, a queue entry not granted is deleted, and
//!   an attempt in doubt deletes whatever record its holder may have made. Async work goes to [`Undo`], which the
//!   client hands to `begin`: it runs in the background, and `Client::close` waits for it.
//! - **When.** At once on drop, never later: no table of late deletes decides anything afterwards.
//! - **Ordering.** An undo in doubt runs before the next call of this client on the name, which carries the same
//!   holder id when the owner is the same, and on most backends the same record, which the undo would delete:
//!   [`Undo::in_doubt`] keeps the call's local queue place until the undo is done. And every undo reaches the server
//!   after the request it undoes, on the same ordered channel: SQLite's FIFO connection mutex (the abandon runs after
//!   the upsert), one Redis or PostgreSQL connection, one ZooKeeper session. etcd deletes a queue key at its create
//!   revision when that is known, and registers each delete of its own keys at once (`etcd/deletes.rs`), so a later
//!   write of the same key — `<name>/<lease>`, shared by this client's calls with one TTL — waits for it.
//! - **A grant.** `Acquired` ends the attempt's duty: the record then belongs to the lease, which releases it.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use futures::future::BoxFuture;
use tokio::time::Instant;

use crate::error::{Error, ErrorKind, Result};
use crate::mutant;

pub(crate) use crate::redact::redact;
pub(crate) use backoff::Backoff;
pub(crate) use fence_register::{decode_register, encode_register};
pub(crate) use hosts::{Host, bad_port, parse_hosts};
pub(crate) use schemes::open;

mod backoff;
pub(crate) mod etcd;
mod fence_register;
mod hosts;
pub(crate) mod memory;
pub(crate) mod record;
pub(crate) mod redis;
pub(crate) mod redis_cluster;
pub(crate) mod redlock;
mod schemes;
pub(crate) mod sql;
pub(crate) mod tls;
mod waiters;
pub(crate) mod zookeeper;

/// What a backend can do; callers and tests branch on these flags, not on backend names.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Capability {
    /// Grants carry fencing tokens that rise per lock name.
    pub fencing: bool,
    /// Waiters are woken by the backend (pub/sub, watch, LISTEN) rather than by polling.
    pub native_wait: bool,
    /// Waiters across clients are served in arrival order.
    pub fair: bool,
    /// Leases are bound to a session (ZooKeeper) rather than to a per-lock TTL.
    pub session_bound: bool,
    /// Read-write locks ([`HoldKind::Read`], [`HoldKind::Write`]).
    pub rw_lock: bool,
    /// Semaphores with leased permits ([`HoldKind::Permit`]).
    pub semaphore: bool,
    /// Leader elections ([`HoldKind::Leader`]).
    pub election: bool,
}

impl Capability {
    /// What etcd and ZooKeeper can do: everything, with holds bound to a session.
    pub(crate) const SESSION_BOUND: Capability = Capability {
        fencing: true,
        native_wait: true,
        fair: true,
        session_bound: true,
        rw_lock: true,
        semaphore: true,
        election: true,
    };
}

/// The kind of hold one acquire asks for: all a mutex, a read-write lock and a semaphore differ in (DESIGN.md §4b).
/// Everything else — the wait loop, the local queue, reentrancy, the watchdog, the lost signal and the cancel path —
/// is the same for every kind.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HoldKind {
    /// A mutex: one holder at a time.
    Exclusive,
    /// The read side of a read-write lock: shared with other readers, never with a writer. Readers whose holds
    /// overlap share one token (an epoch); the first reader of a new epoch draws a fresh one from the lock's counter.
    Read,
    /// The write side of a read-write lock: alone. A waiting writer blocks new readers.
    Write,
    /// One of `permits` slots of a semaphore; the grant names its slot, and the token is that slot's own counter.
    Permit {
        /// How many holds the semaphore allows at once; every client on the name must ask with the same number.
        permits: u32,
    },
    /// An election's leadership: a mutex whose record carries the leader's value, and whose token is its term.
    Leader,
}

impl HoldKind {
    /// Whether holds of this kind can be had by several owners at once, so the local queue lets the next local
    /// contender through as soon as one is granted, instead of at its release.
    pub(crate) fn shared(self) -> bool {
        matches!(self, HoldKind::Read | HoldKind::Permit { .. })
    }

    /// The family of records the kind lives in: a mutex's, a read-write lock's or a semaphore's. Holds of one
    /// family and name share the local queue and the reentrancy table's entry. An election is a mutex with a value
    /// (etcd's two recipes even share their keys), so it is of the mutex's family.
    pub(crate) fn family(self) -> &'static str {
        match self {
            HoldKind::Exclusive | HoldKind::Leader => "lock",
            HoldKind::Read | HoldKind::Write => "rwlock",
            HoldKind::Permit { .. } => "semaphore",
        }
    }

    /// The kind's word in messages and metrics.
    pub fn label(self) -> &'static str {
        match self {
            HoldKind::Exclusive => "lock",
            HoldKind::Read => "read",
            HoldKind::Write => "write",
            HoldKind::Permit { .. } => "permit",
            HoldKind::Leader => "leader",
        }
    }
}

/// One request for a lock record, as the backend sees it.
#[derive(Debug, Clone)]
pub struct AcquireRequest {
    /// The lock name.
    pub name: String,
    /// `<client uuid>:<owner>`: unique to one client and owner.
    pub holder: String,
    /// Time to live of the record.
    pub ttl: Duration,
    /// The caller's choice of wait order (`LockOptions::fair`); `None`: the backend's default.
    pub fair: Option<bool>,
    /// What kind of hold is asked for. A backend only sees kinds its `Capability` claims, and `Leader` only if it
    /// keeps values in its records ([`Backend::keeps_leader_values`]).
    pub kind: HoldKind,
    /// The candidate's value, for a `Leader` hold; empty for other kinds.
    pub value: Vec<u8>,
    /// Whether the call waits when the lock is busy (`false` for a `try_lock`), so a backend with a waiter queue
    /// only queues calls that will wait.
    pub waits: bool,
}

impl AcquireRequest {
    /// The grant of this request with `token`, and the backend's own `key` for the record if it has one.
    pub fn grant(&self, token: u64, key: Option<String>) -> Grant {
        let (name, holder) = (self.name.clone(), self.holder.clone());
        Grant { name, holder, token, key, kind: self.kind, slot: None, ttl: self.ttl, revision: 0 }
    }
}

/// A lock record this client holds.
#[derive(Debug, Clone)]
pub struct Grant {
    /// The lock name.
    pub name: String,
    /// `<client uuid>:<owner>` as written into the record.
    pub holder: String,
    /// The fencing token of this grant.
    pub token: u64,
    /// The backend's own key for the record when it is not derivable from the name (etcd key, ZooKeeper node).
    pub key: Option<String>,
    /// The kind of hold, as requested.
    pub kind: HoldKind,
    /// The semaphore slot a permit occupies (0…permits−1); `None` for other kinds.
    pub slot: Option<u32>,
    /// The TTL the grant was taken with. A session-bound backend keeps the record on its session of this TTL, so
    /// a renewal may not change it there.
    pub ttl: Duration,
    /// The backend's own version of the record where the token is derived from it rather than equal to it (etcd:
    /// the key's create revision, the token being the keyspace's epoch plus it); 0 elsewhere.
    pub revision: i64,
}

impl Grant {
    /// This grant, its record at `revision`.
    pub fn at_revision(mut self, revision: i64) -> Grant {
        self.revision = revision;
        self
    }

    /// This grant in semaphore slot `slot`.
    pub fn in_slot(mut self, slot: u32) -> Grant {
        self.slot = Some(slot);
        self
    }
}

/// The outcome of one acquire attempt.
#[derive(Debug)]
pub enum Attempt {
    /// The record is ours.
    Acquired(Grant),
    /// Someone else holds it.
    Busy(Busy),
}

/// What a busy attempt learned about the holder.
#[derive(Debug, Clone, Default)]
pub struct Busy {
    /// How long the holder's record still lives, if known: the longest a missed wake-up can cost.
    pub holder_ttl: Option<Duration>,
}

impl Busy {
    /// How long a notified waiter sleeps at most: until the holder's record expires (a missed notification costs no
    /// more), or 100 ms if that is unknown, and never past `deadline`.
    pub(crate) fn wait_until(&self, deadline: Option<Instant>) -> Instant {
        let until = Instant::now() + self.holder_ttl.unwrap_or(Duration::from_millis(100));
        deadline.map_or(until, |d| until.min(d))
    }
}

/// One acquire in flight (see the module docs for the protocol): it lives across the attempts and waits of one
/// `lock`/`try_lock` call, and its `Drop` undoes whatever the call leaves on the server.
#[async_trait]
pub trait Pending: Send {
    /// One attempt to take the record.
    async fn try_acquire(&mut self) -> Result<Attempt>;

    /// Resolves when the lock is probably free, or at `deadline`.
    async fn wait(&mut self, busy: &Busy, deadline: Option<Instant>) -> Result<()>;
}

/// The client's part in an undo: runs it in the background where `close` waits for it, lending it the call's local
/// queue place when asked.
pub struct Undo {
    run: Box<dyn Fn(BoxFuture<'static, ()>, bool) + Send + Sync>,
}

impl fmt::Debug for Undo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Undo")
    }
}

impl Undo {
    /// `run(task, hold_queue)` spawns `task`, keeping the local queue place until it is done if `hold_queue`.
    pub(crate) fn new(run: impl Fn(BoxFuture<'static, ()>, bool) + Send + Sync + 'static) -> Self {
        Undo { run: Box::new(run) }
    }

    /// Undoes a queue entry whose key or node no later call can write again before it is gone.
    pub(crate) fn entry(&self, task: impl Future<Output = ()> + Send + 'static) {
        (self.run)(Box::pin(task), false);
    }

    /// Deletes the record an attempt in doubt on `name` may have made, with `abandon`; a failure leaves it to expire.
    pub(crate) fn abandon(&self, name: &str, abandon: impl Future<Output = Result<()>> + Send + 'static) {
        let name = name.to_string();
        self.in_doubt(async move {
            if let Err(e) = abandon.await {
                tracing::warn!(lock = %name, error = %e, "could not clean up a cancelled acquire; it expires after its TTL");
            }
        });
    }

    /// Undoes an attempt in doubt, keeping the local queue place until it is done.
    pub(crate) fn in_doubt(&self, task: impl Future<Output = ()> + Send + 'static) {
        if mutant::active("abort_leaves_record") {
            return;
        }
        (self.run)(Box::pin(task), true);
    }
}

/// Whether an attempt's outcome is unknown: set while its request is in flight, and kept if the request failed
/// after it may have reached the server. Clones share the flag, so an attempt can settle a request that borrows it.
#[derive(Debug, Default, Clone)]
pub(crate) struct Doubt(Arc<AtomicBool>);

impl Doubt {
    /// Runs one request of an attempt, noting whether its outcome is known.
    pub(crate) async fn settle<T>(self, request: impl Future<Output = Result<T>>) -> Result<T> {
        self.0.store(true, Ordering::SeqCst);
        let outcome = request.await;
        // Refused before it reached the backend: nothing to undo.
        let unknown = outcome.as_ref().is_err_and(|e| {
            !matches!(e.kind(), ErrorKind::InvalidArgument | ErrorKind::Unsupported | ErrorKind::Closed)
        });
        self.0.store(unknown, Ordering::SeqCst);
        outcome
    }

    /// Whether the last request may have left a record nobody knows of.
    pub(crate) fn is_set(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

/// An election's leader as the backend stores it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leader {
    /// The value it campaigned with, or last proclaimed.
    pub value: Vec<u8>,
    /// Its term: the fencing token of its leadership, rising with every new leader.
    pub term: u64,
}

/// What `inspect` finds about a lock.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockInfo {
    /// The current holder (`<client uuid>:<owner>`), if held.
    pub holder: Option<String>,
    /// Remaining time to live of the holder's record.
    pub remaining: Option<Duration>,
    /// The last fencing token handed out for this name, if any.
    pub last_token: Option<u64>,
    /// Contenders waiting for it, where the backend counts them in one cheap read; `None`: it cannot say. Redis
    /// counts the clients subscribed to the lock's release channel (one per client however many of its calls
    /// wait); etcd and ZooKeeper the queued keys or nodes behind the holder.
    pub waiters: Option<u64>,
}

/// One lock store. Every method is a few round trips at most and is safe to cancel.
#[async_trait]
pub trait Backend: Send + Sync + fmt::Debug + 'static {
    /// What this backend can do.
    fn capability(&self) -> Capability;

    /// The backend as a URL without secrets, for messages.
    fn describe(&self) -> &str;

    /// Whether `AcquireRequest::fair` picks the wait order per call (Redis); elsewhere the order is the backend's
    /// own, and asking for arrival order from a backend without it is `Unsupported`.
    fn fair_choice(&self) -> bool {
        false
    }

    /// Starts one acquire of `req`; `undo` runs what the attempt's drop leaves to do.
    fn begin(self: Arc<Self>, req: AcquireRequest, undo: Undo) -> Box<dyn Pending>;

    /// The longest a grant taken with `ttl` can stay ours without the backend confirming it (the timeout the
    /// ZooKeeper server negotiated for the session of that TTL). Validity and the watchdog's period are capped by it.
    fn lease_bound(&self, ttl: Duration) -> Option<Duration> {
        let _ = ttl;
        None
    }

    /// Extends the record to `ttl` from now. `LockLost` if it is no longer ours.
    async fn renew(&self, grant: &Grant, ttl: Duration) -> Result<()>;

    /// Deletes the record if it is still ours, waking waiters. `NotHeld` if it is not.
    async fn release(&self, grant: &Grant) -> Result<()>;

    /// Deletes the record whoever holds it (an operator's tool; the fence counter is kept).
    async fn force_release(&self, name: &str) -> Result<bool>;

    /// Reads who holds `name`.
    async fn inspect(&self, name: &str) -> Result<LockInfo>;

    /// Permits of semaphore `name` not held now, out of `permits`. `InvalidArgument` if the semaphore's clients
    /// agreed on another number. Only called where `Capability::semaphore` is set.
    async fn available(&self, name: &str, permits: u32) -> Result<u32> {
        let _ = (name, permits);
        Err(Error::new(ErrorKind::Unsupported, "this backend has no semaphores").with_backend(self.describe()))
    }

    /// Why this backend has no holds of `kind`, where there is more to say than that it lacks them (Redlock's
    /// semaphore). Only asked when `Capability` does not claim the kind.
    fn why_unsupported(&self, kind: HoldKind) -> Option<&'static str> {
        let _ = kind;
        None
    }

    /// Whether this backend's records carry an election's value (the anchors' layouts: etcd's `concurrency.Election`
    /// key value, Curator `LeaderLatch` node data). It then sees [`HoldKind::Leader`] holds and answers `leader` and
    /// `proclaim`; elsewhere the election is a mutex and its value a fence register beside it (`election.rs`).
    fn keeps_leader_values(&self) -> bool {
        false
    }

    /// The leader of election `name`, if any. Only called where `keeps_leader_values`.
    async fn leader(&self, name: &str) -> Result<Option<Leader>> {
        let _ = name;
        Err(Error::internal("leader: this backend keeps no leader values"))
    }

    /// Replaces the value of a leadership this client holds. `LockLost` if it is no longer the leader. Only called
    /// where `keeps_leader_values`.
    async fn proclaim(&self, grant: &Grant, value: &[u8]) -> Result<()> {
        let _ = (grant, value);
        Err(Error::internal("proclaim: this backend keeps no leader values"))
    }

    /// Stores `value` under `resource` if `token` ≥ the highest token accepted there, raising it. `Fenced` if not.
    async fn fence_write(&self, resource: &str, token: u64, value: &[u8]) -> Result<()>;

    /// The highest accepted token and its value; `(0, [])` if never written.
    async fn fence_read(&self, resource: &str) -> Result<(u64, Vec<u8>)>;

    /// Closes connections. Later calls fail with `Closed`.
    async fn close(&self) {}
}

/// Sleeps a jittered 1–8 ms, growing with nothing but capped by the holder's TTL and the deadline. Short on purpose:
/// a polling backend's hand-off latency is this interval.
pub(crate) async fn poll_backoff(busy: &Busy, deadline: Option<Instant>) {
    let jitter = Duration::from_micros(rand::random_range(1_000..8_000));
    let mut nap = busy.holder_ttl.map_or(jitter, |t| t.min(jitter));
    if let Some(d) = deadline {
        nap = nap.min(d.saturating_duration_since(Instant::now()));
    }
    tokio::time::sleep(nap).await;
}

/// Microseconds since the Unix epoch on this host: the seed of a fence counter that is missing.
pub(crate) fn unix_micros() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_micros() as u64).unwrap_or(0)
}

/// The port of a Redis host that names none.
pub(crate) const REDIS_PORT: u16 = 6379;

/// Clock drift allowed for when computing validity (the Redlock rule: 1 % of the TTL plus 2 ms).
pub(crate) fn drift(ttl: Duration) -> Duration {
    ttl / 100 + Duration::from_millis(2)
}

/// Whole milliseconds of a TTL, at least 1 (backends speak milliseconds).
pub(crate) fn ttl_ms(ttl: Duration) -> u64 {
    (ttl.as_millis() as u64).max(1)
}

/// The `Fenced` error every backend reports.
pub(crate) fn fenced(resource: &str, backend: &str, token: u64, highest: u64) -> Error {
    Error::new(
        ErrorKind::Fenced,
        format!(
            "fence {resource:?}: token {token} is below {highest}, the lowest the register takes now (its highest \
             accepted token, or the start of its store: registers refuse tokens from before a loss of data)"
        ),
    )
    .with_backend(backend)
}

/// The `NotHeld` error every backend reports.
pub(crate) fn not_held(grant: &Grant, backend: &str) -> Error {
    Error::new(ErrorKind::NotHeld, format!("not held by {}", grant.holder)).at(&grant.name, backend)
}

/// The `InvalidArgument` error of a semaphore whose clients disagree on its number of permits.
pub(crate) fn permits_mismatch(name: &str, backend: &str, asked: u32, stored: u32) -> Error {
    Error::new(
        ErrorKind::InvalidArgument,
        format!(
            "semaphore has {stored} permits, but this call asked for {asked}: every client must use the same number"
        ),
    )
    .at(name, backend)
}

/// The `LockLost` error every backend's renew reports.
pub(crate) fn lock_lost(grant: &Grant, backend: &str) -> Error {
    Error::new(ErrorKind::LockLost, "the record expired or was taken").at(&grant.name, backend)
}
