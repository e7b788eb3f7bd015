//! `Lease`: one caller's hold on a lock. Reentrant holds of one owner share a `Hold` (one grant, one token, one
//! watchdog entry, one lost signal); the backend record is released when the last of them is.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{OwnedMutexGuard, watch};
use tokio::time::Instant;
use tracing::Instrument;

use crate::backend::{Backoff, Grant, HoldKind, drift};
use crate::error::{Error, ErrorKind, Result};
use crate::handle::ClientHandle;
use crate::metrics::{HoldTimer, Loss, Op};
use crate::mutant;
use crate::options::validate_ttl;
use crate::reentry::{Reentrant, Table};

/// What a hold keeps of its client: the backend and closed flag, and the local table it must leave at the end.
#[derive(Debug, Clone)]
pub(crate) struct Link {
    pub(crate) client: Arc<ClientHandle>,
    pub(crate) table: Arc<Table<Hold>>,
}

/// How long a grant stays ours after the backend last confirmed it: the TTL, but no longer than the backend's own
/// bound (a ZooKeeper session expires after its timeout whatever TTL was asked for), less drift.
fn validity(ttl: Duration, bound: Option<Duration>) -> Duration {
    let ttl = bound.map_or(ttl, |b| ttl.min(b));
    ttl.saturating_sub(drift(ttl))
}

#[derive(Debug)]
struct HoldState {
    count: usize,
    ttl: Duration,
    valid_until: Instant,
    released: bool,
    lost: Option<String>,
}

/// The shared state behind every `Lease` of one grant.
#[derive(Debug)]
pub(crate) struct Hold {
    link: Link,
    pub(crate) grant: Grant,
    // The local table's key (`reentry::table_key`).
    key: String,
    pub(crate) owner: Option<String>,
    pub(crate) watchdog: bool,
    state: Mutex<HoldState>,
    // Renew and release take turns, so no renewal can follow a release (the race of Redisson issue #7272).
    io: tokio::sync::Mutex<()>,
    // `None` while held; how the hold ended once it has (lost, or released first).
    end_tx: watch::Sender<Option<LeaseEnd>>,
    // This client's local queue slot for the name, kept by exclusive holds; dropping it lets the next local owner try
    // the backend.
    gate: Mutex<Option<OwnedMutexGuard<()>>>,
    // Counts the grant active, and its hold time, until released or lost.
    held: HoldTimer,
}

/// What the watchdog should do next for a hold.
pub(crate) enum Due {
    Renew,
    ExpiresAt(Instant),
    Done,
}

impl Hold {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        link: Link,
        grant: Grant,
        key: String,
        owner: Option<String>,
        ttl: Duration,
        requested_at: Instant,
        watchdog: bool,
        gate: Option<OwnedMutexGuard<()>>,
    ) -> Self {
        let bound = link.client.backend.lease_bound(grant.ttl);
        Hold {
            owner,
            watchdog,
            state: Mutex::new(HoldState {
                count: 1,
                ttl,
                valid_until: requested_at + validity(ttl, bound),
                released: false,
                lost: None,
            }),
            io: tokio::sync::Mutex::new(()),
            end_tx: watch::Sender::new(None),
            gate: Mutex::new(gate),
            held: link.client.metrics.start_hold(&grant.name),
            link,
            grant,
            key,
        }
    }

    fn backend(&self) -> &dyn crate::backend::Backend {
        &*self.link.client.backend
    }

    fn state(&self) -> std::sync::MutexGuard<'_, HoldState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// An error of `kind` naming this hold's lock and backend.
    fn error(&self, kind: ErrorKind, message: impl Into<String>) -> Error {
        self.at(Error::new(kind, message))
    }

    /// `e`, naming this hold's lock and backend unless it names its own.
    fn at(&self, e: Error) -> Error {
        e.at(&self.grant.name, self.backend().describe())
    }

    fn lost_reason(&self) -> Option<String> {
        self.state().lost.clone()
    }

    /// Fires the lost signal, once; never after a release.
    pub(crate) fn mark_lost(&self, loss: Loss, reason: impl Into<String>) {
        let mut st = self.state();
        if st.released || st.lost.is_some() {
            return;
        }
        let reason = reason.into();
        self.held.end(Some(loss));
        tracing::warn!(lock = %self.grant.name, %reason, "lease lost");
        st.lost = Some(reason.clone());
        drop(st);
        self.end_tx.send_replace(Some(LeaseEnd::Lost(reason)));
    }

    /// Fires the lost signal if the validity has passed without a renewal: the watchdog's expiry tick, and the
    /// synchronous checks ([`Hold::check_expiry_now`]).
    pub(crate) fn check_expiry(&self) {
        let st = self.state();
        if st.released || st.lost.is_some() || Instant::now() < st.valid_until {
            return;
        }
        drop(st);
        if self.watchdog {
            self.mark_lost(Loss::Unreachable, "no renewal succeeded within the lease's validity");
        } else {
            self.mark_lost(Loss::Expired, "the TTL passed without a renewal (watchdog off)");
        }
    }

    /// [`check_expiry`](Hold::check_expiry) from `is_lost`/`is_valid`, so that a process resumed after a pause past
    /// the TTL learns of the loss before its next write, not only once the runtime has run the watchdog's overdue
    /// timer.
    fn check_expiry_now(&self) {
        if !mutant::active("lost_check_ignores_validity") {
            self.check_expiry();
        }
    }

    pub(crate) fn next_due(&self) -> Due {
        let st = self.state();
        if st.released {
            Due::Done
        } else if !self.watchdog {
            // Even once lost (`check_expiry` may have marked it first): the expiry tick also ends the record.
            Due::ExpiresAt(st.valid_until)
        } else if st.lost.is_some() {
            Due::Done
        } else {
            Due::Renew
        }
    }

    pub(crate) fn ttl(&self) -> Duration {
        self.state().ttl
    }

    /// The watchdog's renewal period: a third of the TTL, or of the backend's lease bound if shorter.
    pub(crate) fn renew_every(&self) -> Duration {
        let ttl = self.ttl();
        self.backend().lease_bound(self.grant.ttl).map_or(ttl, |b| ttl.min(b))
            / if mutant::active("watchdog_renews_at_ttl") { 1 } else { 3 }
    }

    /// How soon a failed renewal is tried again.
    pub(crate) fn retry_every(&self) -> Duration {
        (self.renew_every() / 3).clamp(Duration::from_millis(1), Duration::from_secs(1))
    }

    pub(crate) fn valid_until(&self) -> Instant {
        self.state().valid_until
    }

    fn check_active(&self) -> Result<()> {
        if self.link.client.is_closed() {
            return Err(self.error(ErrorKind::Closed, "the client was closed"));
        }
        let st = self.state();
        if st.released {
            return Err(self.error(ErrorKind::NotHeld, "the lease was released"));
        }
        if let Some(reason) = &st.lost {
            return Err(self.error(ErrorKind::LockLost, reason.clone()));
        }
        Ok(())
    }

    /// Extends the record to `ttl` (the lease's current TTL if `None`).
    pub(crate) async fn renew(&self, ttl: Option<Duration>) -> Result<()> {
        if let Some(t) = ttl {
            validate_ttl(t).map_err(|e| self.at(e))?;
        }
        let _io = self.io.lock().await;
        self.check_active()?;
        let ttl = ttl.unwrap_or_else(|| self.ttl());
        self.check_session_ttl(ttl)?;
        let mut sent = Instant::now();
        let metrics = &self.link.client.metrics;
        let span = tracing::info_span!("fencelock.renew", lock = %self.grant.name, backend = metrics.backend(), outcome = tracing::field::Empty);
        let attempt = || metrics.timed(Op::Renew, self.backend().renew(&self.grant, ttl)).instrument(span.clone());
        let mut result = attempt().await;
        // A quick failure is most often a connection the server dropped (a restart, a failover), which that failure
        // remade: try once more now, not at the next retry, by when the network may be gone too. Renewals repeat
        // safely on every backend.
        if result.as_ref().is_err_and(|e| e.kind() == ErrorKind::Unavailable) && sent.elapsed() < self.retry_every() {
            sent = Instant::now();
            result = attempt().await;
        }
        metrics.renewal(result.is_ok());
        span.record("outcome", if result.is_ok() { "ok" } else { "failed" });
        match result {
            Ok(()) => {
                let mut st = self.state();
                st.ttl = ttl;
                st.valid_until = sent + validity(ttl, self.backend().lease_bound(self.grant.ttl));
                Ok(())
            }
            Err(e) if e.kind() == ErrorKind::LockLost => {
                drop(_io);
                self.mark_lost(Loss::Taken, e.message());
                Err(self.at(e))
            }
            Err(e) => Err(self.at(e)),
        }
    }

    /// A session-bound backend keeps the record on the client's session (etcd lease, ZooKeeper session) of the TTL
    /// it was taken with, which the server alone expires: a renewal with another TTL would report a validity the
    /// server does not give, so it is refused and the hold stays as it was.
    fn check_session_ttl(&self, ttl: Duration) -> Result<()> {
        let taken = self.grant.ttl;
        if ttl == taken || !self.backend().capability().session_bound {
            return Ok(());
        }
        Err(self.error(
            ErrorKind::InvalidArgument,
            format!(
                "cannot renew with a TTL of {ttl:?}: this backend keeps the hold on the client's session of the TTL \
                 it was taken with ({taken:?}); renew without a TTL, or release and lock again with the new one"
            ),
        ))
    }

    /// Drops one reentrant hold; the last one releases the backend record and the local queue slot.
    async fn release_one(&self) -> Result<()> {
        {
            let mut st = self.state();
            if st.count > 1 {
                st.count -= 1;
                return match &st.lost {
                    Some(reason) => Err(self.error(ErrorKind::LockLost, reason.clone())),
                    None => Ok(()),
                };
            }
        }
        let io = self.io.lock().await;
        let lost = {
            let mut st = self.state();
            st.count = 0;
            st.released = true;
            st.lost.clone()
        };
        let result = self.release_record().await;
        drop(io);
        self.end();
        match (lost, result) {
            (Some(reason), _) => Err(self.error(ErrorKind::LockLost, reason)),
            (None, Err(e)) => Err(self.at(e)),
            (None, Ok(())) => Ok(()),
        }
    }

    /// The backend release, retried while the backend is unreachable and the record may still be ours: the
    /// compare-and-delete is idempotent, and one given up on a dropped connection (the first command after a server
    /// restart) would leave the record until its TTL and the caller without the `NotHeld` that tells of a loss.
    async fn release_record(&self) -> Result<()> {
        let mut backoff = Backoff::new(Duration::from_millis(10), Duration::from_millis(500), self.valid_until());
        let metrics = &self.link.client.metrics;
        let span = tracing::info_span!(
            "fencelock.release",
            lock = %self.grant.name,
            backend = metrics.backend(),
            outcome = tracing::field::Empty,
        );
        let result = async {
            loop {
                match metrics.timed(Op::Release, self.backend().release(&self.grant)).await {
                    Err(e) if e.kind() == ErrorKind::Unavailable => {
                        if !backoff.wait().await {
                            return Err(e);
                        }
                    }
                    result => return result,
                }
            }
        }
        .instrument(span.clone())
        .await;
        span.record("outcome", if result.is_ok() { "ok" } else { "failed" });
        result
    }

    /// Deletes the record of a hold whose TTL passed without a renewal, on a session-bound backend: the server keeps
    /// a record while the client's session lives, whatever the TTL, so the client ends it, as a TTL-bound server
    /// would. A client that is paused or cut off cannot, but then its session times out at the TTL on the server.
    /// The lease stays lost and its owner still releases it.
    pub(crate) async fn expire_record(&self) {
        if !self.backend().capability().session_bound {
            return;
        }
        let _io = self.io.lock().await;
        if self.state().released {
            return;
        }
        if let Err(e) = self.backend().release(&self.grant).await {
            tracing::debug!(lock = %self.grant.name, error = %e, "could not delete an expired hold's record");
        }
    }

    /// Lets the next local owner in and forgets this hold; its lost signal ends as released unless it was lost.
    fn end(&self) {
        self.end_tx.send_if_modified(|end| {
            let first = end.is_none();
            if first {
                *end = Some(LeaseEnd::Released);
            }
            first
        });
        self.held.end(None);
        self.gate.lock().unwrap_or_else(|p| p.into_inner()).take();
        self.link.table.unregister(&self.key, self);
    }

    /// Releases the record whatever the hold count (client close).
    pub(crate) async fn release_all(&self) {
        let _io = self.io.lock().await;
        let was_released = std::mem::replace(&mut self.state().released, true);
        if !was_released {
            let _ = self.release_record().await;
        }
        drop(_io);
        self.end();
    }
}

impl Reentrant for Hold {
    fn key(&self) -> &str {
        &self.key
    }

    fn kind(&self) -> HoldKind {
        self.grant.kind
    }

    fn owner(&self) -> Option<&str> {
        self.owner.as_deref()
    }

    fn reenter(&self) -> Option<Result<()>> {
        let mut st = self.state();
        if st.released {
            return None;
        }
        if let Some(reason) = &st.lost {
            return Some(Err(self.error(ErrorKind::LockLost, reason.clone())));
        }
        st.count += 1;
        Some(Ok(()))
    }
}

/// How a lease's lost signal ([`Lease::lost`]) resolves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeaseEnd {
    /// The lock was lost while held (expired, taken, or not renewed in time); the reason says which. Only fenced
    /// writes are safe now.
    Lost(String),
    /// The lease was released (or its client closed, or the `Lease` dropped) before any loss: none can follow.
    Released,
}

/// A held lock. Release it with [`Lease::release`]; dropping an unreleased `Lease` releases it in the background.
#[derive(Debug)]
pub struct Lease {
    hold: Arc<Hold>,
    // Set once this lease is released (or dropped), ending its own lost signals even while a reentrant sibling holds.
    released: watch::Sender<bool>,
}

impl Lease {
    pub(crate) fn new(hold: Arc<Hold>) -> Self {
        Lease { hold, released: watch::Sender::new(false) }
    }

    /// The lock name.
    pub fn name(&self) -> &str {
        &self.hold.grant.name
    }

    /// The backend's grant behind this lease.
    pub(crate) fn grant(&self) -> &Grant {
        &self.hold.grant
    }

    /// `NotHeld` once this lease was released.
    pub(crate) fn check_unreleased(&self) -> Result<()> {
        if *self.released.borrow() {
            return Err(self.hold.error(ErrorKind::NotHeld, "the lease was released"));
        }
        Ok(())
    }

    /// The fencing token of this grant: strictly larger than every earlier grant's on this lock and backend.
    /// Readable after release.
    pub fn fence(&self) -> u64 {
        self.hold.grant.token
    }

    /// The holder id written into the backend record (`<client uuid>:<owner>`).
    pub fn holder(&self) -> &str {
        &self.hold.grant.holder
    }

    /// What kind of hold this is: a mutex's, a read or write hold of a read-write lock, or a semaphore permit.
    pub fn kind(&self) -> HoldKind {
        self.hold.grant.kind
    }

    /// The semaphore slot (0…permits−1) a permit occupies; its [`fence`](Lease::fence) is that slot's token. `None`
    /// for other kinds.
    pub fn slot(&self) -> Option<u32> {
        self.hold.grant.slot
    }

    /// Whether the lease is still ours by our own clock: not released, not lost, validity not passed. A validity
    /// found passed fires the lost signal ([`is_lost`](Lease::is_lost)).
    pub fn is_valid(&self) -> bool {
        self.hold.check_expiry_now();
        !*self.released.borrow() && self.hold.check_active().is_ok() && self.remaining() > Duration::ZERO
    }

    /// Time left before the lease's validity ends, unless renewed.
    pub fn remaining(&self) -> Duration {
        self.hold.valid_until().saturating_duration_since(Instant::now())
    }

    /// Whether the lost signal has fired. It fires here if the validity has passed without a renewal (a pause or a
    /// stalled runtime delayed the watchdog's own check), so a check just before a write never answers `false`
    /// for a lease that our own clock says has ended.
    pub fn is_lost(&self) -> bool {
        self.hold.check_expiry_now();
        matches!(*self.hold.end_tx.borrow(), Some(LeaseEnd::Lost(_)))
    }

    /// Why the lease was lost (`None` while it is not): the text of [`LeaseEnd::Lost`].
    pub fn lost_reason(&self) -> Option<String> {
        self.hold.lost_reason()
    }

    /// The `LockLost` error of this lease once lost, naming its lock and backend; `None` while it is not.
    pub fn lost_error(&self) -> Option<Error> {
        self.hold.lost_reason().map(|reason| self.hold.error(ErrorKind::LockLost, reason))
    }

    /// Resolves once, when the lease ends: [`LeaseEnd::Lost`] with the reason if the lock is lost while held, else
    /// [`LeaseEnd::Released`] when this lease is released or dropped, or its client closed. A loss that came before
    /// the release wins. The future owns what it needs, so a watcher never outlives the lease.
    pub fn lost(&self) -> impl Future<Output = LeaseEnd> + Send + 'static {
        let (mut hold, mut mine) = (self.hold.end_tx.subscribe(), self.released.subscribe());
        async move {
            loop {
                if let Some(end) = hold.borrow_and_update().clone() {
                    return end;
                }
                if *mine.borrow_and_update() {
                    return LeaseEnd::Released;
                }
                // A closed channel means the hold or this lease is gone: it ended without a loss.
                let open = tokio::select! {
                    r = hold.changed() => r.is_ok(),
                    r = mine.changed() => r.is_ok(),
                };
                if !open {
                    return hold.borrow().clone().unwrap_or(LeaseEnd::Released);
                }
            }
        }
    }

    /// Extends the lease to `ttl` from now (its current TTL if `None`). `LockLost` if it is no longer ours.
    pub async fn renew(&self, ttl: Option<Duration>) -> Result<()> {
        self.check_unreleased()?;
        self.hold.renew(ttl).await
    }

    /// Releases this hold. `NotHeld` if this lease was already released; `LockLost` if the lock was lost while held
    /// (the critical section was not protected); `Closed` if its client was closed (which released it).
    pub async fn release(&self) -> Result<()> {
        if self.released.send_replace(true) {
            return Err(self.hold.error(ErrorKind::NotHeld, "already released"));
        }
        // `close` released every hold; the backend, whose connections are gone, has nothing to add.
        if self.hold.link.client.is_closed() {
            return Err(self.hold.error(ErrorKind::Closed, "the client was closed"));
        }
        // A caller that stops waiting (a timeout, a cancelled RPC) must not leave the release half done: the name's
        // local gate would stay taken, and every later lock of it through this client would wait forever.
        let mut unfinished = Unfinished(Some(self.hold.clone()));
        let result = self.hold.release_one().await;
        unfinished.0 = None;
        result
    }
}

/// Finishes a release whose future was dropped at an await point, in the background as `Drop for Lease` would.
/// `release_one` may run again from the start: each await in it comes before the state it changes is final, and the
/// backend release is idempotent.
struct Unfinished(Option<Arc<Hold>>);

impl Drop for Unfinished {
    fn drop(&mut self) {
        if let Some(hold) = self.0.take() {
            let task = hold.clone();
            hold.link.client.tasks.spawn(async move {
                let _ = task.release_one().await;
            });
        }
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        if self.released.send_replace(true) {
            return;
        }
        let hold = self.hold.clone();
        self.hold.link.client.tasks.spawn(async move {
            let _ = hold.release_one().await;
        });
    }
}
