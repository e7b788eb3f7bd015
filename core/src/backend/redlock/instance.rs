//! One Redis instance of a Redlock set: its connection, made in the background, and requests under its timeout.

use std::fmt;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::{BoxFuture, FutureExt, Shared};

use crate::backend::redact;
use crate::backend::redis::{RedisBackend, Security};
use crate::error::{Error, Result};
use crate::options::ClientOptions;

/// A connection attempt that any number of requests can await.
type Dial = Shared<BoxFuture<'static, Result<Arc<RedisBackend>>>>;

/// The latest connection attempt to an instance, and why the one before failed.
struct Dialing {
    attempt: Dial,
    failed: Option<Error>,
}

/// One Redis instance of the set. Until its first connection is made, a failed attempt is followed by another in the
/// background and requests fail at once with the last error; once connected, its `ConnectionManager` reconnects by
/// itself, and a request waits for that at most the instance timeout.
pub(super) struct Instance {
    url: String,
    security: Security,
    opts: ClientOptions,
    timeout: Duration,
    dialing: Mutex<Dialing>,
}

impl fmt::Debug for Instance {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Instance").field("url", &redact(&self.url)).field("timeout", &self.timeout).finish()
    }
}

impl Instance {
    pub(super) fn new(url: String, security: Security, opts: ClientOptions, timeout: Duration) -> Self {
        let attempt = start_dial(url.clone(), security.clone(), opts.clone());
        Instance { url, security, opts, timeout, dialing: Mutex::new(Dialing { attempt, failed: None }) }
    }

    fn dialing(&self) -> std::sync::MutexGuard<'_, Dialing> {
        self.dialing.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The connection: made, being made for the first time, or — for an instance known to be down — the last error,
    /// while another attempt starts in the background.
    pub(super) async fn connection(&self) -> Result<Arc<RedisBackend>> {
        let attempt = {
            let mut dialing = self.dialing();
            if let Some(Err(e)) = dialing.attempt.peek() {
                dialing.failed = Some(e.clone());
                dialing.attempt = start_dial(self.url.clone(), self.security.clone(), self.opts.clone());
            }
            match (dialing.attempt.peek(), &dialing.failed) {
                (Some(result), _) => return result.clone(),
                (None, Some(e)) => return Err(e.clone()),
                (None, None) => dialing.attempt.clone(),
            }
        };
        attempt.await
    }

    /// The connection if it is made already.
    pub(super) fn connected(&self) -> Option<Arc<RedisBackend>> {
        self.dialing().attempt.peek().and_then(|r| r.as_ref().ok().cloned())
    }

    /// Runs `op` on this instance within the instance timeout.
    pub(super) async fn call<T, Fut>(&self, op: impl FnOnce(Arc<RedisBackend>) -> Fut) -> Result<T>
    where
        Fut: Future<Output = Result<T>>,
    {
        let work = async { op(self.connection().await?).await };
        tokio::time::timeout(self.timeout, work).await.unwrap_or_else(|_| {
            Err(Error::unavailable(format!("{}: no answer within {:?}", redact(&self.url), self.timeout)))
        })
    }
}

/// Starts connecting. A task of its own drives the attempt, so it goes on when every request has stopped waiting for
/// it, and its result is there for the next request to find.
fn start_dial(url: String, security: Security, opts: ClientOptions) -> Dial {
    let attempt =
        async move { RedisBackend::connect_instance(&url, &security, &opts).await.map(Arc::new) }.boxed().shared();
    tokio::spawn(attempt.clone());
    attempt
}
