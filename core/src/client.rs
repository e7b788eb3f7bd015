//! `Client`: connects to one backend and hands out leases. It adds what backends lack: acquire deadlines and the
//! wait loop, the local queue and reentrancy, the watchdog, and cancel safety.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use tracing::Instrument;

use self::acquire::{Call, Turn};
use crate::backend::{Backend, Capability, HoldKind, LockInfo, open};
use crate::error::{Error, ErrorKind, Result};
use crate::fence::Fence;
use crate::handle::ClientHandle;
use crate::lease::{Hold, Lease, Link};
use crate::metrics::{MetricsSnapshot, Op, Outcome, Recorder};
use crate::mutant;
use crate::options::{ClientOptions, LockOptions, validate_name};
use crate::reentry::{Table, table_key};
use crate::tasks::Tasks;
use crate::url::default_url;
use crate::watchdog::Watchdog;

/// Most permits a semaphore may have: every slot is a record of its own on the backend.
pub const MAX_PERMITS: u32 = 65_536;

/// A client's state. Leases and fences keep only its `ClientHandle` (and leases the table they leave).
struct Inner {
    backend: Arc<dyn Backend>,
    client: Arc<ClientHandle>,
    table: Arc<Table<Hold>>,
    opts: ClientOptions,
    id: String,
    watchdog: Watchdog,
    next_anon: AtomicU64,
}

impl Inner {
    /// Runs cleanup `task` in the background; `close` waits for it.
    fn spawn_cleanup(&self, task: impl Future<Output = ()> + Send + 'static) {
        self.client.tasks.spawn(task);
    }

    fn check_open(&self) -> Result<()> {
        self.client.check_open()
    }

    /// What a new hold keeps of this client.
    fn link(&self) -> Link {
        Link { client: self.client.clone(), table: self.table.clone() }
    }
}

/// A connection to one lock backend. Cheap to clone; clones share leases and connections.
#[derive(Debug, Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

/// The backend as `describe()` shows it (no secrets), never the backend's own `Debug`.
impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client").field("id", &self.id).field("url", &self.backend.describe()).finish_non_exhaustive()
    }
}

impl Client {
    /// Connects to the backend `url` names (see the crate docs for the schemes).
    pub async fn connect(url: &str) -> Result<Client> {
        Client::connect_with(url, &ClientOptions::default()).await
    }

    /// Connects to `FENCELOCK_URL`, else the embedded SQLite file `fencelock.db` in the working directory.
    pub async fn connect_default() -> Result<Client> {
        Client::connect(&default_url()).await
    }

    /// Connects with explicit options.
    pub async fn connect_with(url: &str, opts: &ClientOptions) -> Result<Client> {
        opts.validate()?;
        let tasks = Tasks::new();
        let backend = open(url, opts, &tasks).await?;
        Ok(Client::over(backend, opts, tasks))
    }

    /// A client of `backend`, already open, whose background work `tasks` counts.
    fn over(backend: Arc<dyn Backend>, opts: &ClientOptions, tasks: Tasks) -> Client {
        let metrics = Arc::new(Recorder::new(opts.metrics, backend.describe(), &opts.metrics_names));
        let id = uuid::Uuid::new_v4().to_string();
        #[cfg(feature = "otel")]
        if opts.metrics {
            crate::otel::register(&id, &metrics);
        }
        Client {
            inner: Arc::new(Inner {
                client: Arc::new(ClientHandle::new(backend.clone(), tasks, metrics)),
                backend,
                table: Arc::default(),
                opts: opts.clone(),
                id,
                watchdog: Watchdog::default(),
                next_anon: AtomicU64::new(1),
            }),
        }
    }

    /// This client's id, the first half of every holder id it writes.
    pub fn id(&self) -> &str {
        &self.inner.id
    }

    /// The backend URL, without secrets.
    pub fn url(&self) -> &str {
        self.inner.backend.describe()
    }

    /// What the backend can do.
    pub fn capability(&self) -> Capability {
        self.inner.backend.capability()
    }

    /// Takes `name`, waiting up to `opts.timeout` (forever by default). `Timeout` if it stays taken.
    pub async fn lock(&self, name: &str, opts: &LockOptions) -> Result<Lease> {
        self.hold(name, HoldKind::Exclusive, opts).await
    }

    /// One attempt: the lease, or `None` if someone else holds `name`.
    pub async fn try_lock(&self, name: &str, opts: &LockOptions) -> Result<Option<Lease>> {
        self.acquire(name, HoldKind::Exclusive, opts, true).await
    }

    /// A hold of `kind` on `name`, waiting up to `opts.timeout`.
    pub(crate) async fn hold(&self, name: &str, kind: HoldKind, opts: &LockOptions) -> Result<Lease> {
        let lease = self.acquire(name, kind, opts, false).await?;
        Ok(lease.expect("a waiting acquire returns a lease or an error"))
    }

    /// Validates, then runs the acquire under its metrics timer and span (a dropped call counts as cancelled).
    pub(crate) async fn acquire(
        &self,
        name: &str,
        kind: HoldKind,
        opts: &LockOptions,
        once: bool,
    ) -> Result<Option<Lease>> {
        self.acquire_with(name, kind, &[], opts, once).await
    }

    /// [`acquire`](Client::acquire) with the value a `Leader` hold carries. A backend whose records keep no values
    /// takes a leadership as a mutex: the election keeps the value beside it.
    pub(crate) async fn acquire_with(
        &self,
        name: &str,
        kind: HoldKind,
        value: &[u8],
        opts: &LockOptions,
        once: bool,
    ) -> Result<Option<Lease>> {
        self.inner.check_open()?;
        opts.validate(name)?;
        self.check_kind(name, kind)?;
        self.check_order(name, opts)?;
        let kind = match kind {
            HoldKind::Leader if !self.inner.backend.keeps_leader_values() => HoldKind::Exclusive,
            kind => kind,
        };
        let metrics = &self.inner.client.metrics;
        let timer = metrics.start_acquire(name);
        let span = tracing::info_span!(
            "fencelock.acquire",
            lock = %name,
            backend = metrics.backend(),
            outcome = tracing::field::Empty,
            token = tracing::field::Empty,
        );
        let result = self.acquire_valid(name, kind, value, opts, once).instrument(span.clone()).await;
        let outcome = Outcome::of(&result);
        span.record("outcome", outcome.label());
        if let Ok(Some(lease)) = &result {
            span.record("token", lease.fence());
        }
        timer.finish(outcome);
        result
    }

    /// Refuses `fair(true)` where waiters are not served in arrival order and no call can ask for it. Asking a
    /// fair backend for a free-for-all is fine: arrival order is one of its outcomes.
    fn check_order(&self, name: &str, opts: &LockOptions) -> Result<()> {
        let backend = &self.inner.backend;
        if opts.fair != Some(true) || backend.capability().fair || backend.fair_choice() {
            return Ok(());
        }
        Err(Error::new(ErrorKind::Unsupported, "fair(true): this backend does not serve waiters in arrival order")
            .at(name, backend.describe()))
    }

    /// Refuses a kind of hold the backend lacks, and a semaphore of no permits or too many.
    fn check_kind(&self, name: &str, kind: HoldKind) -> Result<()> {
        let backend = &self.inner.backend;
        let (cap, what) = match kind {
            HoldKind::Exclusive => return Ok(()),
            HoldKind::Leader => (backend.capability().election, "elections"),
            HoldKind::Read | HoldKind::Write => (backend.capability().rw_lock, "read-write locks"),
            HoldKind::Permit { permits } => {
                if !(1..=MAX_PERMITS).contains(&permits) {
                    return Err(Error::new(
                        ErrorKind::InvalidArgument,
                        format!("a semaphore has 1 to {MAX_PERMITS} permits, not {permits}"),
                    )
                    .with_lock(name));
                }
                (backend.capability().semaphore, "semaphores")
            }
        };
        if cap {
            return Ok(());
        }
        let message = match backend.why_unsupported(kind) {
            Some(why) => format!("this backend has no {what}: {why}"),
            None => format!("this backend has no {what}"),
        };
        Err(Error::new(ErrorKind::Unsupported, message).at(name, backend.describe()))
    }

    async fn acquire_valid(
        &self,
        name: &str,
        kind: HoldKind,
        value: &[u8],
        opts: &LockOptions,
        once: bool,
    ) -> Result<Option<Lease>> {
        let mut downgrade = false;
        if let Some(owner) = opts.owner.as_deref() {
            let key = table_key(kind, name);
            if let Some(hold) = self.inner.table.reenter(&key, owner, kind) {
                return Ok(Some(Lease::new(hold?)));
            }
            let held = self.inner.table.kinds_held(&key, owner);
            if kind == HoldKind::Write && held.contains(&HoldKind::Read) && !mutant::active("upgrade_allowed") {
                return Err(Error::new(
                    ErrorKind::InvalidArgument,
                    "upgrade refused: this owner holds the read lock; release it before taking the write lock",
                )
                .at(name, self.inner.backend.describe()));
            }
            // A lock and a leadership of one name are one record: the owner's own hold would block it for ever.
            let other = match kind {
                HoldKind::Leader => Some(HoldKind::Exclusive),
                HoldKind::Exclusive => Some(HoldKind::Leader),
                _ => None,
            };
            if other.is_some_and(|k| held.contains(&k)) {
                return Err(Error::new(
                    ErrorKind::InvalidArgument,
                    "this owner holds the lock of this name as the other of a lock and a leadership: they are one record",
                )
                .at(name, self.inner.backend.describe()));
            }
            downgrade = kind == HoldKind::Read && held.contains(&HoldKind::Write);
        }
        let call = Call::new(&self.inner, name, kind, value, opts, once);
        let place = if downgrade {
            call.beside_local_queue()
        } else {
            let Some(place) = call.enter_local_queue().await? else { return Ok(None) };
            place
        };
        let (mut pending, place) = call.begin(place);
        let outcome: Result<Option<Lease>> = async {
            loop {
                match call.attempt(&mut *pending, &place).await? {
                    Turn::Held(lease) => return Ok(Some(lease)),
                    Turn::Busy(_) if once => return Ok(None),
                    Turn::Busy(busy) => call.wait_turn(&mut *pending, &busy).await?,
                }
            }
        }
        .await;
        // A call that gave up (busy, timed out) returns once what it left on the server is undone: the next caller,
        // in any client, must not find a queue entry or a waiting writer's mark of a call that has ended. A call
        // cancelled by its caller leaves the undo to the background.
        if matches!(&outcome, Ok(None)) || outcome.as_ref().is_err_and(|e| e.kind() == ErrorKind::Timeout) {
            drop(pending);
            call.undone(self.inner.opts.request_timeout).await;
        }
        outcome
    }

    /// The backend, for the primitives built on the engine.
    pub(crate) fn backend(&self) -> &Arc<dyn Backend> {
        &self.inner.backend
    }

    /// `Closed` once this client is closed.
    pub(crate) fn check_open(&self) -> Result<()> {
        self.inner.check_open()
    }

    /// `Unsupported` where the backend has no elections.
    pub(crate) fn check_election(&self, name: &str) -> Result<()> {
        self.check_kind(name, HoldKind::Leader)
    }

    /// The fenced register `resource`, stored in this client's backend.
    pub fn fence(&self, resource: &str) -> Fence {
        Fence::new(self.inner.client.clone(), resource)
    }

    /// Permits of semaphore `name` not held now (see [`Semaphore::available`](crate::Semaphore::available)).
    pub(crate) async fn available(&self, name: &str, permits: u32) -> Result<u32> {
        self.inner.check_open()?;
        self.check_kind(name, HoldKind::Permit { permits })?;
        self.inner.backend.available(name, permits).await.map_err(|e| e.at(name, self.inner.backend.describe()))
    }

    /// Who holds `name`, for how long, and the last token handed out.
    pub async fn inspect(&self, name: &str) -> Result<LockInfo> {
        self.inner.check_open()?;
        validate_name(name)?;
        self.inner.client.metrics.timed(Op::Inspect, self.inner.backend.inspect(name)).await
    }

    /// Deletes the lock record whoever holds it (an operator's tool, like Redisson's `forceUnlock`). The holder's
    /// lease is lost at its next renewal. The fence counter is kept, so tokens still rise.
    pub async fn force_release(&self, name: &str) -> Result<bool> {
        self.inner.check_open()?;
        validate_name(name)?;
        self.inner.client.metrics.timed(Op::ForceRelease, self.inner.backend.force_release(name)).await
    }

    /// This client's metrics now: acquire waits by outcome, hold times, active leases, renewals, losses by reason,
    /// fenced writes, waiting calls and backend round trips (see [`MetricsSnapshot`]).
    pub fn metrics(&self) -> MetricsSnapshot {
        self.inner.client.metrics.snapshot()
    }

    /// Number of lock names this client holds or queues for locally (0 when idle: nothing leaks).
    pub fn local_entries(&self) -> usize {
        self.inner.table.len()
    }

    /// Releases every lease this client holds, waits (up to the request timeout) for background cleanups of
    /// cancelled acquires, dropped leases and abandoned queue entries, and closes its connections. Later calls fail
    /// with `Closed`.
    pub async fn close(&self) {
        if self.inner.client.close() {
            return;
        }
        for hold in self.inner.table.holds() {
            hold.release_all().await;
        }
        self.inner.client.tasks.drained(self.inner.opts.request_timeout).await;
        self.inner.backend.close().await;
    }
}

mod acquire;
#[cfg(test)]
mod tests;
