//! `Lease` for JS: token, renew, release, and the lost callback behind `lease.signal` / `lease.on('lost')`.

use std::fmt;
use std::sync::Arc;

use fencelock::Lease;
use napi::bindgen_prelude::{BigInt, Env, Function, PromiseRaw, Result};
use napi::threadsafe_function::ThreadsafeFunctionCallMode;
use napi_derive::napi;
use tokio::sync::watch;

use crate::options::millis;
use crate::runtime::spawn_promise;

/// A held lock.
#[napi]
pub struct NativeLease {
    lease: Arc<Lease>,
    // Set once released; dropped with this object. Either ends the lost watcher, so it never outlives the lease.
    done: watch::Sender<bool>,
    client_closed: watch::Receiver<bool>,
}

impl fmt::Debug for NativeLease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NativeLease").field("name", &self.lease.name()).field("fence", &self.lease.fence()).finish()
    }
}

impl NativeLease {
    pub(crate) fn new(lease: Lease, client_closed: watch::Receiver<bool>) -> Self {
        NativeLease { lease: Arc::new(lease), done: watch::Sender::new(false), client_closed }
    }
}

#[napi]
impl NativeLease {
    #[napi(getter)]
    pub fn name(&self) -> String {
        self.lease.name().to_string()
    }

    /// The fencing token (readable after release).
    #[napi(getter)]
    pub fn fence(&self) -> BigInt {
        BigInt::from(self.lease.fence())
    }

    /// `<client uuid>:<owner>`, as written into the backend record.
    #[napi(getter)]
    pub fn holder(&self) -> String {
        self.lease.holder().to_string()
    }

    /// Not released, not lost, and within its validity by our clock.
    #[napi]
    pub fn is_valid(&self) -> bool {
        self.lease.is_valid()
    }

    #[napi]
    pub fn is_lost(&self) -> bool {
        self.lease.is_lost()
    }

    /// Milliseconds of validity left unless renewed.
    #[napi]
    pub fn remaining_ms(&self) -> f64 {
        self.lease.remaining().as_secs_f64() * 1000.0
    }

    /// Extends the lease to `ttlMs` from now (its current TTL if absent).
    #[napi]
    pub fn renew<'env>(&self, env: &'env Env, ttl_ms: Option<f64>) -> Result<PromiseRaw<'env, ()>> {
        let ttl = ttl_ms.map(|t| millis("ttlMs", t)).transpose()?;
        let lease = self.lease.clone();
        spawn_promise(env, async move { lease.renew(ttl).await })
    }

    #[napi]
    pub fn release<'env>(&self, env: &'env Env) -> Result<PromiseRaw<'env, ()>> {
        let (lease, done) = (self.lease.clone(), self.done.clone());
        spawn_promise(env, async move {
            let result = lease.release().await;
            done.send_replace(true);
            result
        })
    }

    /// Calls `callback(reason)` once if the lease is lost. The callback is an unref'd threadsafe function, so a
    /// process with nothing else to do may exit while a lease is held (the watchdog does not keep Node alive); it is
    /// dropped when the lease is released, dropped, or its client closed.
    #[napi]
    pub fn on_lost(&self, callback: Function<String, ()>) -> Result<()> {
        let tsfn = callback.build_threadsafe_function().weak::<true>().callee_handled::<false>().build()?;
        let lost = self.lease.lost();
        let mut done = self.done.subscribe();
        let mut closed = self.client_closed.clone();
        let reason = format!(
            "LOCK_LOST: lock {:?}: the lease was lost (expired, taken or not renewed in time)",
            self.lease.name()
        );
        fencelock_bridge::spawn(async move {
            tokio::select! {
                biased;
                () = lost => {
                    tsfn.call(reason, ThreadsafeFunctionCallMode::NonBlocking);
                }
                _ = done.wait_for(|d| *d) => {}
                _ = closed.wait_for(|c| *c) => {}
            }
        })
        .map_err(crate::error::to_napi)?;
        Ok(())
    }
}
