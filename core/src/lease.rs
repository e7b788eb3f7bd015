//! `Lease`: one caller's hold on a lock. Reentrant holds of one owner share a `Hold` (one grant, one token, one
//! watchdog entry, one lost signal); the backend record is released when the last of them is.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{OwnedMutexGuard, watch};
use tokio::time::Instant;

use crate::backend::{Backoff, Grant, drift};
use crate::error::{Error, ErrorKind, Result};
use crate::handle::ClientHandle;
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
    pub(crate) owner: Option<String>,
    pub(crate) watchdog: bool,
    state: Mutex<HoldState>,
    // Renew and release take turns, so no renewal can follow a release (the race of Redisson issue #7272).
    io: tokio::sync::Mutex<()>,
    lost_tx: watch::Sender<bool>,
    // This client's local queue slot for the name; dropping it lets the next local owner try the backend.
    gate: Mutex<Option<OwnedMutexGuard<()>>>,
}

/// What the watchdog should do next for a hold.
pub(crate) enum Due {
    Renew,
    ExpiresAt(Instant),
    Done,
}

impl Hold {
    pub(crate) fn new(
        link: Link,
        grant: Grant,
        owner: Option<String>,
        ttl: Duration,
        requested_at: Instant,
        watchdog: bool,
        gate: OwnedMutexGuard<()>,
    ) -> Self {
        let bound = link.client.backend.lease_bound();
        Hold {
            link,
            grant,
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
            lost_tx: watch::Sender::new(false),
            gate: Mutex::new(Some(gate)),
        }
    }

    fn backend(&self) -> &dyn crate::backend::Backend {
        &*self.link.client.backend
    }

    fn state(&self) -> std::sync::MutexGuard<'_, HoldState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn describe(&self) -> String {
        format!("lock {:?} on {}", self.grant.name, self.backend().describe())
    }

    /// Fires the lost signal, once; never after a release.
    pub(crate) fn mark_lost(&self, reason: impl Into<String>) {
        let mut st = self.state();
        if st.released || st.lost.is_some() {
            return;
        }
        let reason = reason.into();
        tracing::warn!(lock = %self.grant.name, %reason, "lease lost");
        st.lost = Some(reason);
        drop(st);
        self.lost_tx.send_replace(true);
    }

    pub(crate) fn next_due(&self) -> Due {
        let st = self.state();
        if st.released || st.lost.is_some() {
            Due::Done
        } else if self.watchdog {
            Due::Renew
        } else {
            Due::ExpiresAt(st.valid_until)
        }
    }

    pub(crate) fn ttl(&self) -> Duration {
        self.state().ttl
    }

    /// The watchdog's renewal period: a third of the TTL, or of the backend's lease bound if shorter.
    pub(crate) fn renew_every(&self) -> Duration {
        let ttl = self.ttl();
        self.backend().lease_bound().map_or(ttl, |b| ttl.min(b))
            / if mutant::active("watchdog_renews_at_ttl") { 1 } else { 3 }
    }

    pub(crate) fn valid_until(&self) -> Instant {
        self.state().valid_until
    }

    fn check_active(&self) -> Result<()> {
        if self.link.client.is_closed() {
            return Err(Error::new(ErrorKind::Closed, format!("{}: the client was closed", self.describe())));
        }
        let st = self.state();
        if st.released {
            return Err(Error::new(ErrorKind::NotHeld, format!("{}: the lease was released", self.describe())));
        }
        if let Some(reason) = &st.lost {
            return Err(Error::new(ErrorKind::LockLost, format!("{}: {reason}", self.describe())));
        }
        Ok(())
    }

    /// Extends the record to `ttl` (the lease's current TTL if `None`).
    pub(crate) async fn renew(&self, ttl: Option<Duration>) -> Result<()> {
        if let Some(t) = ttl {
            validate_ttl(t).map_err(|e| e.context(self.describe()))?;
        }
        let _io = self.io.lock().await;
        self.check_active()?;
        let ttl = ttl.unwrap_or_else(|| self.ttl());
        let sent = Instant::now();
        match self.backend().renew(&self.grant, ttl).await {
            Ok(()) => {
                let mut st = self.state();
                st.ttl = ttl;
                st.valid_until = sent + validity(ttl, self.backend().lease_bound());
                Ok(())
            }
            Err(e) if e.kind() == ErrorKind::LockLost => {
                drop(_io);
                // Later errors prefix the reason with this lease's context; strip the backend's copy of it.
                let context = format!("{}: ", self.describe());
                self.mark_lost(e.message().strip_prefix(&context).unwrap_or(e.message()).to_string());
                Err(e)
            }
            Err(e) => Err(e.context(self.describe())),
        }
    }

    /// Drops one reentrant hold; the last one releases the backend record and the local queue slot.
    async fn release_one(&self) -> Result<()> {
        {
            let mut st = self.state();
            if st.count > 1 {
                st.count -= 1;
                return match &st.lost {
                    Some(reason) => Err(Error::new(ErrorKind::LockLost, format!("{}: {reason}", self.describe()))),
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
            (Some(reason), _) => Err(Error::new(ErrorKind::LockLost, format!("{}: {reason}", self.describe()))),
            (None, Err(e)) => Err(e.context(self.describe())),
            (None, Ok(())) => Ok(()),
        }
    }

    /// The backend release, retried while the backend is unreachable and the record may still be ours: the
    /// compare-and-delete is idempotent, and one given up on a dropped connection (the first command after a server
    /// restart) would leave the record until its TTL and the caller without the `NotHeld` that tells of a loss.
    async fn release_record(&self) -> Result<()> {
        let mut backoff = Backoff::new(Duration::from_millis(10), Duration::from_millis(500), self.valid_until());
        loop {
            match self.backend().release(&self.grant).await {
                Err(e) if e.kind() == ErrorKind::Unavailable => {
                    if !backoff.wait().await {
                        return Err(e);
                    }
                }
                result => return result,
            }
        }
    }

    /// Lets the next local owner in and forgets this hold.
    fn end(&self) {
        self.gate.lock().unwrap_or_else(|p| p.into_inner()).take();
        self.link.table.unregister(&self.grant.name, self);
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
    fn name(&self) -> &str {
        &self.grant.name
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
            return Some(Err(Error::new(ErrorKind::LockLost, format!("{}: {reason}", self.describe()))));
        }
        st.count += 1;
        Some(Ok(()))
    }
}

/// A held lock. Release it with [`Lease::release`]; dropping an unreleased `Lease` releases it in the background.
#[derive(Debug)]
pub struct Lease {
    hold: Arc<Hold>,
    released: AtomicBool,
}

impl Lease {
    pub(crate) fn new(hold: Arc<Hold>) -> Self {
        Lease { hold, released: AtomicBool::new(false) }
    }

    /// The lock name.
    pub fn name(&self) -> &str {
        &self.hold.grant.name
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

    /// Whether the lease is still ours by our own clock: not released, not lost, validity not passed.
    pub fn is_valid(&self) -> bool {
        !self.released.load(Ordering::SeqCst) && self.hold.check_active().is_ok() && self.remaining() > Duration::ZERO
    }

    /// Time left before the lease's validity ends, unless renewed.
    pub fn remaining(&self) -> Duration {
        self.hold.valid_until().saturating_duration_since(Instant::now())
    }

    /// Whether the lost signal has fired.
    pub fn is_lost(&self) -> bool {
        *self.hold.lost_tx.borrow()
    }

    /// Resolves when the lease is lost (never, if it is released first). The future owns what it needs.
    pub fn lost(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut rx = self.hold.lost_tx.subscribe();
        async move {
            // The sender lives as long as the hold; if it goes, the lease is gone and no loss can follow.
            if rx.wait_for(|lost| *lost).await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }

    /// Extends the lease to `ttl` from now (its current TTL if `None`). `LockLost` if it is no longer ours.
    pub async fn renew(&self, ttl: Option<Duration>) -> Result<()> {
        if self.released.load(Ordering::SeqCst) {
            return Err(Error::new(ErrorKind::NotHeld, format!("{}: the lease was released", self.hold.describe())));
        }
        self.hold.renew(ttl).await
    }

    /// Releases this hold. `NotHeld` if this lease was already released; `LockLost` if the lock was lost while held
    /// (the critical section was not protected); `Closed` if its client was closed (which released it).
    pub async fn release(&self) -> Result<()> {
        if self.released.swap(true, Ordering::SeqCst) {
            return Err(Error::new(ErrorKind::NotHeld, format!("{}: already released", self.hold.describe())));
        }
        // `close` released every hold; the backend, whose connections are gone, has nothing to add.
        if self.hold.link.client.is_closed() {
            return Err(Error::new(ErrorKind::Closed, format!("{}: the client was closed", self.hold.describe())));
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
        if self.released.swap(true, Ordering::SeqCst) {
            return;
        }
        let hold = self.hold.clone();
        self.hold.link.client.tasks.spawn(async move {
            let _ = hold.release_one().await;
        });
    }
}
