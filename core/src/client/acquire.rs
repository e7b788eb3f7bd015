//! One `lock` or `try_lock` call in its steps: enter the local queue, begin the backend's attempt, attempt, and
//! wait for the next turn.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use std::time::Duration;

use tokio::sync::{OwnedMutexGuard, oneshot};
use tokio::time::Instant;

use super::Inner;
use crate::backend::{AcquireRequest, Attempt, Busy, Grant, HoldKind, Pending, Undo};
use crate::error::{Error, ErrorKind, Result};
use crate::lease::{Hold, Lease};
use crate::metrics::Op;
use crate::mutant;
use crate::options::LockOptions;
use crate::reentry::{Claim, table_key};

/// The local queue place of one name: its gate, then its claim (a tuple drops in order, and the claim tidies the
/// slot away only once the gate is gone). No gate for a writer's downgrade: its own write hold keeps the gate.
type QueuePlace = (Option<OwnedMutexGuard<()>>, Claim<Hold>);

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
    kind: HoldKind,
    value: &'a [u8],
    key: String,
    opts: &'a LockOptions,
    once: bool,
    deadline: Option<Instant>,
    // One receiver per undo this call's attempt started, told when the undo is done.
    undos: Arc<Mutex<Vec<oneshot::Receiver<()>>>>,
}

impl<'a> Call<'a> {
    pub(super) fn new(
        inner: &'a Arc<Inner>,
        name: &'a str,
        kind: HoldKind,
        value: &'a [u8],
        opts: &'a LockOptions,
        once: bool,
    ) -> Self {
        // A timeout too long for the clock to represent waits forever rather than overflow.
        let deadline = if once { None } else { opts.timeout.and_then(|t| Instant::now().checked_add(t)) };
        let key = table_key(kind, name);
        Call { inner, name, kind, value, key, opts, once, deadline, undos: Arc::default() }
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
        let claim = self.inner.table.claim(&self.key);
        let gate = match (self.once, self.deadline) {
            (true, _) => match claim.try_enter() {
                Some(g) => g,
                None => return Ok(None),
            },
            (false, Some(d)) => tokio::time::timeout_at(d, claim.enter()).await.map_err(|_| self.timed_out())?,
            (false, None) => claim.enter().await,
        };
        Ok(Some((Some(gate), claim)))
    }

    /// A place beside the local queue, for a writer taking the read lock too: its write hold keeps the gate.
    pub(super) fn beside_local_queue(&self) -> QueuePlace {
        (None, self.inner.table.claim(&self.key))
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
            kind: self.kind,
            value: self.value.to_vec(),
            waits: !self.once,
        };
        let place: SharedPlace = Arc::new(Mutex::new(Some(place)));
        let (lent, cleaner, undos) = (place.clone(), inner.clone(), self.undos.clone());
        let undo = Undo::new(move |task, hold_queue| {
            let held = if hold_queue { lent.lock().unwrap_or_else(|p| p.into_inner()).take() } else { None };
            let (done, undone) = oneshot::channel();
            undos.lock().unwrap_or_else(|p| p.into_inner()).push(undone);
            cleaner.spawn_cleanup(async move {
                task.await;
                drop(held);
                let _ = done.send(());
            });
        });
        (inner.backend.clone().begin(req, undo), place)
    }

    /// Turns a grant into a lease renewed by the watchdog. An exclusive hold keeps the name's gate until released; a
    /// shared one lets the next local contender through now.
    fn hold(&self, grant: Grant, sent: Instant, place: &SharedPlace) -> Lease {
        let (gate, _claim) =
            place.lock().unwrap_or_else(|p| p.into_inner()).take().expect("a call keeps its place until granted");
        tracing::debug!(lock = %self.name, kind = self.kind.label(), token = grant.token, "acquired");
        let shared = self.kind.shared() && !mutant::active("shared_hold_keeps_gate");
        let (kept, passed) = if shared { (None, gate) } else { (gate, None) };
        let (inner, opts) = (self.inner, self.opts);
        let key = self.key.clone();
        let hold =
            Arc::new(Hold::new(inner.link(), grant, key, opts.owner.clone(), opts.ttl, sent, opts.watchdog, kept));
        inner.table.register(&hold);
        drop(passed);
        inner.watchdog.watch(&hold);
        Lease::new(hold)
    }

    /// Waits, up to `bound`, until every undo this call's attempt started is done.
    pub(super) async fn undone(&self, bound: Duration) {
        let undos = std::mem::take(&mut *self.undos.lock().unwrap_or_else(|p| p.into_inner()));
        let _ = tokio::time::timeout(bound, futures::future::join_all(undos)).await;
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
