//! One `lock` or `try_lock` call in its steps: enter the local queue, begin the backend's attempt, attempt, and
//! wait for the next turn.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use tokio::sync::OwnedMutexGuard;
use tokio::time::Instant;

use super::Inner;
use crate::backend::{AcquireRequest, Attempt, Busy, Grant, Pending, Undo};
use crate::error::{Error, ErrorKind, Result};
use crate::lease::{Hold, Lease};
use crate::metrics::Op;
use crate::options::LockOptions;
use crate::reentry::Claim;

/// The local queue place of one name: its gate, then its claim (a tuple drops in order, and the claim tidies the
/// slot away only once the gate is gone).
type QueuePlace = (OwnedMutexGuard<()>, Claim<Hold>);

/// A queue place shared by a call and its attempt's undo: whichever takes it first keeps it.
pub(super) type SharedPlace = Arc<Mutex<Option<QueuePlace>>>;

/// How one attempt came out.
pub(super) enum Turn {
    /// The lock is ours.
    Held(Lease),
    /// Someone else holds it.
    Busy(Busy),
}

/// One `lock` or `try_lock` call, in the steps it takes.
pub(super) struct Call<'a> {
    inner: &'a Arc<Inner>,
    name: &'a str,
    opts: &'a LockOptions,
    once: bool,
    deadline: Option<Instant>,
}

impl<'a> Call<'a> {
    pub(super) fn new(inner: &'a Arc<Inner>, name: &'a str, opts: &'a LockOptions, once: bool) -> Self {
        // A timeout too long for the clock to represent waits forever rather than overflow.
        let deadline = if once { None } else { opts.timeout.and_then(|t| Instant::now().checked_add(t)) };
        Call { inner, name, opts, once, deadline }
    }

    /// `e` as an error of this lock on this backend.
    fn at(&self, e: Error) -> Error {
        e.at(self.name, self.inner.backend.describe())
    }

    fn timed_out(&self) -> Error {
        let waited = self.opts.timeout.unwrap_or_default();
        self.at(Error::new(ErrorKind::Timeout, format!("still held by another after {waited:?}")))
    }

    /// The local queue: at most one contender per name per client reaches the backend. `None` for a `try_lock` that
    /// finds another local owner ahead.
    pub(super) async fn enter_local_queue(&self) -> Result<Option<QueuePlace>> {
        let claim = self.inner.table.claim(self.name);
        let gate = match (self.once, self.deadline) {
            (true, _) => match claim.try_enter() {
                Some(g) => g,
                None => return Ok(None),
            },
            (false, Some(d)) => tokio::time::timeout_at(d, claim.enter()).await.map_err(|_| self.timed_out())?,
            (false, None) => claim.enter().await,
        };
        Ok(Some((gate, claim)))
    }

    /// The backend's attempt for this call. Its undo of an attempt in doubt keeps the queue place until done: a later
    /// call of this client on the name carries the same holder on most backends, and an undo running after it would
    /// delete its fresh record.
    pub(super) fn begin(&self, place: QueuePlace) -> (Box<dyn Pending>, SharedPlace) {
        let inner = self.inner;
        let owner = self
            .opts
            .owner
            .clone()
            .unwrap_or_else(|| format!("call-{}", inner.next_anon.fetch_add(1, Ordering::Relaxed)));
        let req = AcquireRequest {
            name: self.name.to_string(),
            holder: format!("{}:{owner}", inner.id),
            ttl: self.opts.ttl,
            fair: self.opts.fair,
        };
        let place: SharedPlace = Arc::new(Mutex::new(Some(place)));
        let (lent, cleaner) = (place.clone(), inner.clone());
        let undo = Undo::new(move |task, hold_queue| {
            let held = if hold_queue { lent.lock().unwrap_or_else(|p| p.into_inner()).take() } else { None };
            cleaner.spawn_cleanup(async move {
                task.await;
                drop(held);
            });
        });
        (inner.backend.clone().begin(req, undo), place)
    }

    /// Turns a grant into a lease that holds the name's gate and is renewed by the watchdog.
    fn hold(&self, grant: Grant, sent: Instant, place: &SharedPlace) -> Lease {
        let (gate, _claim) =
            place.lock().unwrap_or_else(|p| p.into_inner()).take().expect("a call keeps its place until granted");
        tracing::debug!(lock = %self.name, token = grant.token, "acquired");
        let (inner, opts) = (self.inner, self.opts);
        let hold = Arc::new(Hold::new(inner.link(), grant, opts.owner.clone(), opts.ttl, sent, opts.watchdog, gate));
        inner.table.register(&hold);
        inner.watchdog.watch(&hold);
        Lease::new(hold)
    }

    /// One attempt at the backend: a grant becomes a lease.
    pub(super) async fn attempt(&self, pending: &mut dyn Pending, place: &SharedPlace) -> Result<Turn> {
        self.inner.check_open()?;
        let sent = Instant::now();
        let attempt = self.inner.client.metrics.timed(Op::Acquire, pending.try_acquire()).await;
        Ok(match attempt.map_err(|e| self.at(e))? {
            Attempt::Acquired(grant) => Turn::Held(self.hold(grant, sent, place)),
            Attempt::Busy(busy) => Turn::Busy(busy),
        })
    }

    /// After a busy attempt: waits until the lock is probably free; `Timeout` once the deadline has passed.
    pub(super) async fn wait_turn(&self, pending: &mut dyn Pending, busy: &Busy) -> Result<()> {
        if self.deadline.is_some_and(|d| Instant::now() >= d) {
            return Err(self.timed_out());
        }
        pending.wait(busy, self.deadline).await.map_err(|e| self.at(e))
    }
}
