//! One Redis instance of a Redlock set: its connection, whether it is up, and its requests, each a task of its own
//! (so that a round can return on a majority and leave this instance to finish in the background).
//!
//! An instance is being dialled for the first time, up, or down. A request that gets no answer within the instance
//! timeout or loses its connection marks the instance down. While down, a request fails at once, counting as a
//! refusal of its round rather than costing the timeout every time, and a probe in the background asks the instance
//! for a trivial script, with pauses that double from [`PROBE_FIRST`] to [`PROBE_LONGEST`]. A clean-up meant for a
//! down instance (the release of a lease, the undoing of an acquire) waits for it, up to [`MAX_DEFERRED`] of them: a
//! hung instance runs the requests queued in its socket once it resumes, and the acquire among them would otherwise
//! leave a record until its TTL ran out. A clean-up under way when the instance stops answering is kept the same
//! way: what was sent may never run in full. When a probe is answered, the deferred clean-ups run, in order, and only
//! then is the instance up again, so none of them can reach it after a request made since.

use std::collections::VecDeque;
use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use futures::future::{BoxFuture, FutureExt, Shared};
use redis::Script;
use tokio::task::JoinHandle;

use super::chain::Chains;
use crate::backend::redact;
use crate::backend::redis::{RedisBackend, Security};
use crate::error::{Error, ErrorKind, Result};
use crate::options::ClientOptions;

/// The first pause before a down instance is probed.
const PROBE_FIRST: Duration = Duration::from_millis(10);

/// The longest pause between probes of a down instance.
const PROBE_LONGEST: Duration = Duration::from_secs(1);

/// Clean-ups kept for a down instance; later ones are dropped, and their records expire by their TTL.
const MAX_DEFERRED: usize = 10_000;

/// The end of the error of a clean-up kept for a down instance's return.
const KEPT: &str = "(down; the clean-up runs when it answers again)";

/// Whether a clean-up failed only because it was kept for the instance's return.
pub(super) fn kept(e: &Error) -> bool {
    e.message().ends_with(KEPT)
}

/// The end of the error of a request that was not sent because earlier ones on its record took too long.
const NOT_SENT: &str = "(not sent: earlier requests on this lock are still under way)";

/// Whether a request failed without being sent.
pub(super) fn not_sent(e: &Error) -> bool {
    e.message().ends_with(NOT_SENT)
}

/// A connection attempt that any number of requests can await.
type Dial = Shared<BoxFuture<'static, Result<Arc<RedisBackend>>>>;

/// A clean-up that can be run again if the instance fails it.
type Cleanup = Arc<dyn Fn(Arc<RedisBackend>) -> BoxFuture<'static, Result<()>> + Send + Sync>;

/// Where an instance is.
enum Link {
    /// Its first connection is being made.
    Dialing(Dial),
    /// It answers.
    Up(Arc<RedisBackend>),
    /// It failed: `why`; the probe's connection, if one is made, and the clean-ups it has to run first.
    Down { conn: Option<Arc<RedisBackend>>, why: Error, deferred: VecDeque<Cleanup> },
}

/// What an instance's requests, dial and probe share.
struct State {
    url: String,
    shown: String,
    security: Security,
    opts: ClientOptions,
    timeout: Duration,
    link: Mutex<Link>,
    chains: Arc<Chains>,
    ping: Script,
    closed: AtomicBool,
}

/// One Redis instance of the set.
pub(super) struct Instance(Arc<State>);

impl fmt::Debug for Instance {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Instance").field("url", &self.0.shown).field("timeout", &self.0.timeout).finish()
    }
}

impl Instance {
    /// The instance at `url`, dialled in the background from now on.
    pub(super) fn new(url: String, security: Security, opts: ClientOptions, timeout: Duration) -> Self {
        let dial = dial(url.clone(), security.clone(), opts.clone());
        let state = Arc::new(State {
            shown: redact(&url),
            url,
            security,
            opts,
            timeout,
            link: Mutex::new(Link::Dialing(dial.clone())),
            chains: Arc::default(),
            ping: Script::new("return 1"),
            closed: AtomicBool::new(false),
        });
        let weak = Arc::downgrade(&state);
        tokio::spawn(async move {
            let outcome = dial.await;
            if let Some(state) = weak.upgrade() {
                state.dialled(outcome);
            }
        });
        Instance(state)
    }

    /// The connection: made, being made for the first time, or the error that put the instance down.
    pub(super) async fn connection(&self) -> Result<Arc<RedisBackend>> {
        let dial = match &*self.0.link() {
            Link::Dialing(dial) => dial.clone(),
            Link::Up(conn) => return Ok(conn.clone()),
            Link::Down { why, .. } => return Err(self.0.down(why)),
        };
        dial.await
    }

    /// The connection if the instance is up.
    pub(super) fn connected(&self) -> Option<Arc<RedisBackend>> {
        match &*self.0.link() {
            Link::Up(conn) => Some(conn.clone()),
            _ => None,
        }
    }

    /// Runs `op` on this instance within the instance timeout, as a task of its own; after every earlier request on
    /// `record` if one is named.
    pub(super) fn call<T, F, Fut>(&self, record: Option<&str>, op: F) -> JoinHandle<Result<T>>
    where
        T: Send + 'static,
        F: FnOnce(Arc<RedisBackend>) -> Fut + Send + 'static,
        Fut: Future<Output = Result<T>> + Send + 'static,
    {
        let state = self.0.clone();
        let work = async move {
            let conn = state.usable().await?;
            state.run(&conn, op(conn.clone())).await
        };
        let (shown, timeout) = (self.0.shown.clone(), self.0.timeout);
        let given_up = move || Err(Error::unavailable(format!("{shown}: no turn within {timeout:?} {NOT_SENT}")));
        match record {
            Some(record) => self.0.chains.run(record, Some(timeout), given_up, work),
            None => tokio::spawn(work),
        }
    }

    /// Like [`call`](Self::call) for a clean-up of `record`, which a down instance keeps until it is back.
    pub(super) fn cleanup<F, Fut>(&self, record: &str, op: F) -> JoinHandle<Result<()>>
    where
        F: Fn(Arc<RedisBackend>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<()>> + Send + 'static,
    {
        let state = self.0.clone();
        let op: Cleanup = Arc::new(move |b| op(b).boxed());
        // Without patience a clean-up waits for its turn however long that takes; this is never called.
        let never = || Err(Error::internal("a clean-up gave up its turn"));
        self.0.chains.run(record, None, never, async move {
            let conn = match state.usable().await {
                Ok(conn) => conn,
                Err(e) => match state.defer(op.clone()) {
                    Some(kept) => return Err(kept),
                    // Back meanwhile: run it now.
                    None => match state.usable().await {
                        Ok(conn) => conn,
                        Err(_) => return Err(e),
                    },
                },
            };
            match state.run(&conn, op(conn.clone())).await {
                // Hung mid-request (now down): the request may never run in full (a `NOSCRIPT` reply's retry went
                // with it), so it is kept like the others; run again, it finds its work done or does it.
                Err(e) if e.kind() == ErrorKind::Unavailable => Err(state.defer(op).unwrap_or(e)),
                done => done,
            }
        })
    }

    /// Waits for the requests in flight (each bounded by the timeout) and stops probing.
    pub(super) async fn close(&self) {
        self.0.closed.store(true, Ordering::SeqCst);
        self.0.chains.idle().await;
        if let Some(conn) = self.connected() {
            crate::backend::Backend::close(&*conn).await;
        }
    }
}

impl State {
    fn link(&self) -> std::sync::MutexGuard<'_, Link> {
        self.link.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The error of a request to a down instance, of the kind of the failure that put it down (a refused
    /// credential stays `InvalidArgument`).
    fn down(&self, why: &Error) -> Error {
        // `why` names the instance already.
        let message = format!("{} (down since; probing it in the background)", why.message());
        Error::new(why.kind(), message)
    }

    /// The connection for one request, or the reason there is none: a first dial is waited for up to the timeout.
    async fn usable(&self) -> Result<Arc<RedisBackend>> {
        let dial = match &*self.link() {
            Link::Up(conn) => return Ok(conn.clone()),
            Link::Down { why, .. } => return Err(self.down(why)),
            Link::Dialing(dial) => dial.clone(),
        };
        tokio::time::timeout(self.timeout, dial).await.unwrap_or_else(|_| {
            Err(Error::unavailable(format!("{}: not connected within {:?}", self.shown, self.timeout)))
        })
    }

    /// Runs one request under the timeout; a failure to answer puts the instance down.
    async fn run<T>(self: &Arc<Self>, conn: &Arc<RedisBackend>, request: impl Future<Output = Result<T>>) -> Result<T> {
        let outcome = tokio::time::timeout(self.timeout, request).await.unwrap_or_else(|_| {
            Err(Error::unavailable(format!("{}: no answer within {:?}", self.shown, self.timeout)))
        });
        if let Err(e) = &outcome {
            self.failed(conn, e);
        }
        outcome
    }

    /// Keeps `op` for when the instance is back; `None` if it is up after all (the request then failed on its
    /// own) or too many are kept already.
    fn defer(&self, op: Cleanup) -> Option<Error> {
        let mut link = self.link();
        let Link::Down { why, deferred, .. } = &mut *link else { return None };
        if deferred.len() >= MAX_DEFERRED {
            return None;
        }
        deferred.push_back(op);
        Some(Error::unavailable(format!("{} {KEPT}", why.message())))
    }

    /// The end of the first dial.
    fn dialled(self: &Arc<Self>, outcome: Result<Arc<RedisBackend>>) {
        let mut link = self.link();
        if !matches!(*link, Link::Dialing(_)) {
            return;
        }
        *link = match outcome {
            Ok(conn) => Link::Up(conn),
            Err(why) => {
                self.start_probe();
                Link::Down { conn: None, why, deferred: VecDeque::new() }
            }
        };
    }

    /// Puts the instance down if `e` says it did not answer on `conn` (not if it answered with a refusal).
    fn failed(self: &Arc<Self>, conn: &Arc<RedisBackend>, e: &Error) {
        if e.kind() != ErrorKind::Unavailable {
            return;
        }
        let mut link = self.link();
        if !matches!(&*link, Link::Up(up) if Arc::ptr_eq(up, conn)) {
            return;
        }
        tracing::warn!(instance = %self.shown, error = %e, "Redlock instance down; probing it in the background");
        *link = Link::Down { conn: Some(conn.clone()), why: e.clone(), deferred: VecDeque::new() };
        self.start_probe();
    }

    fn start_probe(self: &Arc<Self>) {
        let weak = Arc::downgrade(self);
        tokio::spawn(probe(weak));
    }

    /// One probe of a down instance: connected and answering, it runs the deferred clean-ups and is up again.
    async fn rejoin(&self) -> bool {
        let conn = match &*self.link() {
            Link::Down { conn, .. } => conn.clone(),
            _ => return true,
        };
        let conn = match conn {
            Some(conn) => conn,
            None => match dial(self.url.clone(), self.security.clone(), self.opts.clone()).await {
                Ok(conn) => conn,
                Err(e) => return self.still_down(e, false),
            },
        };
        let ping = self.ping.prepare_invoke();
        match tokio::time::timeout(self.timeout, conn.invoke::<i64>(&ping)).await {
            Ok(Ok(_)) => {}
            // A hung server keeps the connection; one that failed it gets a fresh one next time.
            Ok(Err(e)) => return self.still_down(e, true),
            Err(_) => {
                let e = Error::unavailable(format!("{}: no answer within {:?}", self.shown, self.timeout));
                return self.still_down(e, false);
            }
        }
        loop {
            let cleanup = {
                let mut link = self.link();
                let Link::Down { deferred, .. } = &mut *link else { return true };
                match deferred.front() {
                    Some(cleanup) => cleanup.clone(),
                    None => {
                        tracing::info!(instance = %self.shown, "Redlock instance answers again");
                        *link = Link::Up(conn);
                        return true;
                    }
                }
            };
            match tokio::time::timeout(self.timeout, cleanup(conn.clone())).await {
                Ok(Err(e)) if e.kind() == ErrorKind::Unavailable => return self.still_down(e, false),
                Err(_) => {
                    let e = Error::unavailable(format!("{}: no answer within {:?}", self.shown, self.timeout));
                    return self.still_down(e, false);
                }
                // Done, or refused for good (a record that is no longer ours): either way it is over.
                Ok(_) => {
                    if let Link::Down { deferred, .. } = &mut *self.link() {
                        deferred.pop_front();
                    }
                }
            }
        }
    }

    /// Notes why a probe failed, dropping the connection if `redial`; says `false` (not back).
    fn still_down(&self, e: Error, redial: bool) -> bool {
        if let Link::Down { conn, why, .. } = &mut *self.link() {
            *why = e;
            if redial {
                *conn = None;
            }
        }
        false
    }
}

/// Probes until the instance answers, the backend is dropped, or it is closed.
async fn probe(state: Weak<State>) {
    let mut pause = PROBE_FIRST;
    loop {
        // Jitter keeps the probes of many clients from arriving together.
        let jitter = rand::random_range(0.5..1.0);
        tokio::time::sleep(pause.mul_f64(jitter)).await;
        pause = (pause * 2).min(PROBE_LONGEST);
        let Some(state) = state.upgrade() else { return };
        if state.closed.load(Ordering::SeqCst) || state.rejoin().await {
            return;
        }
    }
}

/// Starts connecting. A task of its own drives the attempt, so it goes on when every request has stopped waiting for
/// it, and its result is there for the next request to find.
fn dial(url: String, security: Security, opts: ClientOptions) -> Dial {
    let attempt =
        async move { RedisBackend::connect_instance(&url, &security, &opts).await.map(Arc::new) }.boxed().shared();
    tokio::spawn(attempt.clone());
    attempt
}
