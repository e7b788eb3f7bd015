//! The raw per-backend interface. A backend knows nothing of watchdogs, deadlines, reentrancy or the local
//! queue: the public layer (`Client`, `Lease`) builds those on top of these few calls.

use std::any::Any;
use std::fmt;
use std::time::Duration;

use async_trait::async_trait;
use tokio::time::Instant;

use crate::error::{Error, ErrorKind, Result};

pub(crate) mod etcd;
pub(crate) mod memory;
pub(crate) mod postgres;
pub(crate) mod redis;
pub(crate) mod redis_cluster;
pub(crate) mod redlock;
pub(crate) mod sqlite;
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
    #[allow(dead_code, reason = "read by the queueing backends (etcd, ZooKeeper)")]
    pub key: Option<String>,
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

/// Backend state that lives across the attempts of one acquire (a queue entry, a subscription). Dropping it must
/// undo it: that is what makes a dropped `lock()` future leave nothing behind.
pub struct Ticket(pub Box<dyn Any + Send + Sync>);

impl fmt::Debug for Ticket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Ticket")
    }
}

impl Ticket {
    /// Wraps backend state.
    pub fn new<T: Any + Send + Sync>(state: T) -> Self {
        Ticket(Box::new(state))
    }

    /// The backend state, if it is a `T`.
    pub fn get_mut<T: Any + Send + Sync>(&mut self) -> Option<&mut T> {
        self.0.downcast_mut()
    }
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
}

/// One lock store. Every method is a few round trips at most and is safe to cancel.
#[async_trait]
pub trait Backend: Send + Sync + fmt::Debug + 'static {
    /// What this backend can do.
    fn capability(&self) -> Capability;

    /// The backend as a URL without secrets, for messages.
    fn describe(&self) -> &str;

    /// One attempt to take the record. A queueing backend keeps its queue entry in `ticket` across attempts.
    async fn try_acquire(&self, req: &AcquireRequest, ticket: &mut Option<Ticket>) -> Result<Attempt>;

    /// Resolves when the lock is probably free, or at `deadline`. The default polls with jittered backoff,
    /// bounded by the holder's remaining TTL; backends with notifications override it.
    async fn wait(
        &self,
        req: &AcquireRequest,
        busy: &Busy,
        ticket: &mut Option<Ticket>,
        deadline: Option<Instant>,
    ) -> Result<()> {
        let _ = (req, ticket);
        poll_backoff(busy, deadline).await;
        Ok(())
    }

    /// The longest a grant can stay ours without the backend confirming it, whatever TTL was asked for (a
    /// ZooKeeper session's timeout). Validity and the watchdog's period are capped by it.
    fn lease_bound(&self) -> Option<Duration> {
        None
    }

    /// Extends the record to `ttl` from now. `LockLost` if it is no longer ours.
    async fn renew(&self, grant: &Grant, ttl: Duration) -> Result<()>;

    /// Deletes the record if it is still ours, waking waiters. `NotHeld` if it is not.
    async fn release(&self, grant: &Grant) -> Result<()>;

    /// Deletes whatever record `req.holder` may have made for `req.name` (an acquire dropped in flight).
    async fn abandon(&self, req: &AcquireRequest) -> Result<()>;

    /// Deletes the record whoever holds it (an operator's tool; the fence counter is kept).
    async fn force_release(&self, name: &str) -> Result<bool>;

    /// Reads who holds `name`.
    async fn inspect(&self, name: &str) -> Result<LockInfo>;

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

/// Whole milliseconds of a TTL, at least 1 (backends speak milliseconds).
pub(crate) fn ttl_ms(ttl: Duration) -> u64 {
    (ttl.as_millis() as u64).max(1)
}

/// The `Fenced` error every backend reports.
pub(crate) fn fenced(resource: &str, backend: &str, token: u64, highest: u64) -> Error {
    Error::new(
        ErrorKind::Fenced,
        format!("fence {resource:?}: token {token} is older than the accepted token {highest}"),
    )
    .with_backend(backend)
}

/// The `NotHeld` error every backend reports.
pub(crate) fn not_held(grant: &Grant, backend: &str) -> Error {
    Error::new(ErrorKind::NotHeld, format!("not held by {}", grant.holder)).at(&grant.name, backend)
}

/// The `LockLost` error every backend's renew reports.
pub(crate) fn lock_lost(grant: &Grant, backend: &str) -> Error {
    Error::new(ErrorKind::LockLost, "the record expired or was taken").at(&grant.name, backend)
}
