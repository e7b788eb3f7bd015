//! `Client`: connects to one backend and hands out leases. It adds what backends lack: acquire deadlines and the
//! wait loop, the local queue and reentrancy, the watchdog, and cancel safety.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use tokio::runtime::Handle;
use tokio::sync::{OwnedMutexGuard, watch};
use tokio::time::Instant;

use crate::backend::{AcquireRequest, Attempt, Backend, Capability, LockInfo};
use crate::error::{Error, ErrorKind, Result};
use crate::fence::Fence;
use crate::lease::{Hold, Lease};
use crate::mutant;
use crate::options::{ClientOptions, LockOptions, validate_name};
use crate::reentry::{Claim, Table};
use crate::url::{default_url, open};
use crate::watchdog::Watchdog;

/// State shared by a client, its leases and its fences.
#[derive(Debug)]
pub(crate) struct Inner {
    pub(crate) backend: Arc<dyn Backend>,
    pub(crate) table: Arc<Table>,
    pub(crate) handle: Option<Handle>,
    // Background cleanups in flight (cancelled acquires, dropped leases), so `close` can wait for them.
    pending: Arc<watch::Sender<usize>>,
    opts: ClientOptions,
    id: String,
    watchdog: Watchdog,
    closed: AtomicBool,
    next_anon: AtomicU64,
}

impl Inner {
    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    /// Runs cleanup `task` in the background (on the caller's runtime, else the client's); `close` waits for it.
    pub(crate) fn spawn_cleanup(&self, task: impl Future<Output = ()> + Send + 'static) {
        let Some(h) = Handle::try_current().ok().or_else(|| self.handle.clone()) else {
            tracing::warn!("no runtime to clean up on; the record expires after its TTL");
            return;
        };
        let pending = self.pending.clone();
        pending.send_modify(|n| *n += 1);
        h.spawn(async move {
            task.await;
            pending.send_modify(|n| *n -= 1);
        });
    }

    pub(crate) fn check_open(&self) -> Result<()> {
        if self.is_closed() {
            return Err(Error::new(ErrorKind::Closed, "the client was closed").with_backend(self.backend.describe()));
        }
        Ok(())
    }
}

/// A connection to one lock backend. Cheap to clone; clones share leases and connections.
#[derive(Debug, Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

/// Releases whatever an acquire dropped in flight may have created on the backend.
struct AbandonGuard<'a> {
    inner: &'a Arc<Inner>,
    req: &'a AcquireRequest,
    /// The local queue place, held by the abandon until it is done: a later acquire by this client on the same name
    /// carries the same holder on most backends, and an abandon running after it would delete its fresh record.
    queue: Option<(OwnedMutexGuard<()>, Claim)>,
}

impl AbandonGuard<'_> {
    /// The attempt had a definite outcome: nothing to undo.
    fn disarm(mut self) -> (OwnedMutexGuard<()>, Claim) {
        self.queue.take().expect("armed guard")
    }
}

impl Drop for AbandonGuard<'_> {
    fn drop(&mut self) {
        let Some(queue) = self.queue.take() else { return };
        if mutant::active("abort_leaves_record") {
            return;
        }
        let (backend, req) = (self.inner.backend.clone(), self.req.clone());
        self.inner.spawn_cleanup(async move {
            if let Err(e) = backend.abandon(&req).await {
                tracing::warn!(lock = %req.name, error = %e, "could not clean up a cancelled acquire; it expires after its TTL");
            }
            drop(queue); // the gate first, then the claim, which tidies the queue slot away
        });
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
        let backend = open(url, opts).await?;
        Ok(Client {
            inner: Arc::new(Inner {
                backend,
                table: Arc::default(),
                handle: Handle::try_current().ok(),
                pending: Arc::new(watch::Sender::new(0)),
                opts: opts.clone(),
                id: uuid::Uuid::new_v4().to_string(),
                watchdog: Watchdog::default(),
                closed: AtomicBool::new(false),
                next_anon: AtomicU64::new(1),
            }),
        })
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
        let lease = self.acquire(name, opts, false).await?;
        Ok(lease.expect("a waiting acquire returns a lease or an error"))
    }

    /// One attempt: the lease, or `None` if someone else holds `name`.
    pub async fn try_lock(&self, name: &str, opts: &LockOptions) -> Result<Option<Lease>> {
        self.acquire(name, opts, true).await
    }

    async fn acquire(&self, name: &str, opts: &LockOptions, once: bool) -> Result<Option<Lease>> {
        let inner = &self.inner;
        inner.check_open()?;
        opts.validate(name)?;
        let at = |e: Error| e.at(name, inner.backend.describe());
        let deadline = if once { None } else { opts.timeout.map(|t| Instant::now() + t) };
        let timed_out = || {
            at(Error::new(
                ErrorKind::Timeout,
                format!("still held by another after {:?}", opts.timeout.unwrap_or_default()),
            ))
        };

        if let Some(hold) = opts.owner.as_deref().and_then(|owner| inner.table.reenter(name, owner)) {
            return Ok(Some(Lease::new(hold?)));
        }

        // The local queue: at most one contender per name per client reaches the backend.
        let claim = inner.table.claim(name);
        let gate = match (once, deadline) {
            (true, _) => match claim.try_enter() {
                Some(g) => g,
                None => return Ok(None),
            },
            (false, Some(d)) => tokio::time::timeout_at(d, claim.enter()).await.map_err(|_| timed_out())?,
            (false, None) => claim.enter().await,
        };

        let owner =
            opts.owner.clone().unwrap_or_else(|| format!("call-{}", inner.next_anon.fetch_add(1, Ordering::Relaxed)));
        let req = AcquireRequest { name: name.to_string(), holder: format!("{}:{owner}", inner.id), ttl: opts.ttl };
        let mut ticket = None;
        // The gate before the claim: a tuple drops in order, and the claim tidies the slot only once the gate is gone.
        let mut queue = (gate, claim);
        loop {
            inner.check_open()?;
            let sent = Instant::now();
            let guard = AbandonGuard { inner, req: &req, queue: Some(queue) };
            let attempt = match inner.backend.try_acquire(&req, &mut ticket).await {
                Ok(attempt) => attempt,
                // Refused before it reached the backend: nothing to undo, and the queue place goes at once.
                Err(e)
                    if matches!(e.kind(), ErrorKind::InvalidArgument | ErrorKind::Unsupported | ErrorKind::Closed) =>
                {
                    drop(guard.disarm());
                    return Err(at(e));
                }
                Err(e) => return Err(at(e)), // the outcome is unknown: the guard's abandon undoes it
            };
            queue = guard.disarm();
            match attempt {
                Attempt::Acquired(grant) => {
                    let (gate, _claim) = queue;
                    tracing::debug!(lock = %name, token = grant.token, "acquired");
                    let hold = Arc::new(Hold::new(
                        inner.clone(),
                        grant,
                        opts.owner.clone(),
                        opts.ttl,
                        sent,
                        opts.watchdog,
                        gate,
                    ));
                    inner.table.register(&hold);
                    inner.watchdog.watch(&hold);
                    return Ok(Some(Lease::new(hold)));
                }
                Attempt::Busy(_) if once => return Ok(None),
                Attempt::Busy(_) if deadline.is_some_and(|d| Instant::now() >= d) => return Err(timed_out()),
                Attempt::Busy(busy) => {
                    inner.backend.wait(&req, &busy, &mut ticket, deadline).await.map_err(at)?;
                }
            }
        }
    }

    /// The fenced register `resource`, stored in this client's backend.
    pub fn fence(&self, resource: &str) -> Fence {
        Fence::new(self.inner.clone(), resource)
    }

    /// Who holds `name`, for how long, and the last token handed out.
    pub async fn inspect(&self, name: &str) -> Result<LockInfo> {
        self.inner.check_open()?;
        validate_name(name)?;
        self.inner.backend.inspect(name).await
    }

    /// Deletes the lock record whoever holds it (an operator's tool, like Redisson's `forceUnlock`). The holder's
    /// lease is lost at its next renewal. The fence counter is kept, so tokens still rise.
    pub async fn force_release(&self, name: &str) -> Result<bool> {
        self.inner.check_open()?;
        validate_name(name)?;
        self.inner.backend.force_release(name).await
    }

    /// Number of lock names this client holds or queues for locally (0 when idle: nothing leaks).
    pub fn local_entries(&self) -> usize {
        self.inner.table.len()
    }

    /// Releases every lease this client holds, waits (up to the request timeout) for background cleanups of
    /// cancelled acquires and dropped leases, and closes its connections. Later calls fail with `Closed`.
    pub async fn close(&self) {
        if self.inner.closed.swap(true, Ordering::SeqCst) {
            return;
        }
        for hold in self.inner.table.holds() {
            hold.release_all().await;
        }
        let mut pending = self.inner.pending.subscribe();
        let _ = tokio::time::timeout(self.inner.opts.request_timeout, pending.wait_for(|n| *n == 0)).await;
        self.inner.backend.close().await;
    }
}
