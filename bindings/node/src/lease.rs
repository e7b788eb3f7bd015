//! `Lease` for JS (every hold, a leadership too): token, renew, release, and the lost callback behind
//! `lease.signal` / `lease.on('lost')`.

use std::fmt;
use std::sync::Arc;

use fencelock::{Lease, LeaseEnd};
use napi::bindgen_prelude::{BigInt, Env, Function, PromiseRaw, Result};
use napi::threadsafe_function::ThreadsafeFunctionCallMode;
use napi_derive::napi;

use crate::error::ErrorFields;
use crate::options::millis;
use crate::runtime::spawn_promise;

/// A held lock.
#[napi]
pub struct NativeLease {
    lease: Arc<Lease>,
}

impl fmt::Debug for NativeLease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NativeLease").field("name", &self.lease.name()).field("fence", &self.lease.fence()).finish()
    }
}

impl NativeLease {
    pub(crate) fn new(lease: Lease) -> Self {
        NativeLease { lease: Arc::new(lease) }
    }

    /// The lease for a call that outlives the JS method (a leadership's `proclaim`).
    pub(crate) fn shared(&self) -> Arc<Lease> {
        self.lease.clone()
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

    /// A semaphore permit's slot, 0…permits−1; null for other holds.
    #[napi(getter)]
    pub fn slot(&self) -> Option<u32> {
        self.lease.slot()
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
        let lease = self.lease.clone();
        spawn_promise(env, async move { lease.release().await })
    }

    /// Calls `callback(error)` once if the lease is lost, with core's `LOCK_LOST` error as fields (at once if it is
    /// already lost). The callback is an unref'd threadsafe function, so a process with nothing else to do may exit
    /// while a lease is held (the watchdog does not keep Node alive); it is dropped when the lease ends otherwise
    /// (released, dropped, or its client closed).
    #[napi]
    pub fn on_lost(&self, callback: Function<ErrorFields, ()>) -> Result<()> {
        let tsfn = callback.build_threadsafe_function().weak::<true>().callee_handled::<false>().build()?;
        let (lost, lease) = (self.lease.lost(), Arc::downgrade(&self.lease));
        fencelock_bridge::spawn(async move {
            if let LeaseEnd::Lost(reason) = lost.await {
                let error = match lease.upgrade().and_then(|l| l.lost_error()) {
                    Some(e) => e,
                    None => fencelock::Error::new(fencelock::ErrorKind::LockLost, reason),
                };
                tsfn.call(ErrorFields::from(&error), ThreadsafeFunctionCallMode::NonBlocking);
            }
        })
        .map_err(crate::error::to_napi)?;
        Ok(())
    }
}
