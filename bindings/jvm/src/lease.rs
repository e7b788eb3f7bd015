//! `Native.lease*`: a lease handle is a boxed `JLease`. Its operations run as tasks holding their own `Arc`, so Java
//! may free the handle while a release is still finishing.

use std::sync::Arc;
use std::time::Duration;

use fencelock::{Lease, LeaseEnd};
use jni::EnvUnowned;
use jni::objects::{JClass, JObject};
use jni::sys::{jboolean, jlong};

use crate::callback::{Completion, Value};
use crate::error::shim;
use crate::handle::{borrow, free, getter};
use crate::task::start;

/// A lease as Java holds it.
#[derive(Debug)]
pub(crate) struct JLease {
    lease: Arc<Lease>,
}

impl JLease {
    pub(crate) fn new(lease: Lease) -> Self {
        JLease { lease: Arc::new(lease) }
    }

    pub(crate) fn lease(&self) -> Arc<Lease> {
        self.lease.clone()
    }
}

#[unsafe(no_mangle)]
pub extern "system" fn Java_dev_fencelock_Native_leaseFree<'l>(_env: EnvUnowned<'l>, _class: JClass<'l>, h: jlong) {
    free::<JLease>(h);
}

getter!(Java_dev_fencelock_Native_leaseFence, JLease, |l| -> jlong { l.lease.fence() as jlong });

getter!(Java_dev_fencelock_Native_leaseSlot, JLease, |l| -> jlong { l.lease.slot().map_or(-1, jlong::from) });

getter!(Java_dev_fencelock_Native_leaseHolder, JLease, |l| -> String l.lease.holder());

getter!(Java_dev_fencelock_Native_leaseRemainingMs, JLease, |l| -> jlong { l.lease.remaining().as_millis() as jlong });

getter!(Java_dev_fencelock_Native_leaseIsValid, JLease, |l| -> jboolean { l.lease.is_valid() });

getter!(Java_dev_fencelock_Native_leaseIsLost, JLease, |l| -> jboolean { l.lease.is_lost() });

getter!(Java_dev_fencelock_Native_leaseLostReason, JLease, |l| -> String l.lease.lost_reason().unwrap_or_default());

/// Extends the lease to `ttl_ms` (its current TTL if negative); `done(0, …)`.
#[unsafe(no_mangle)]
pub extern "system" fn Java_dev_fencelock_Native_leaseRenew<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    h: jlong,
    ttl_ms: jlong,
    completion: JObject<'l>,
) -> jlong {
    shim(&mut env, |env| {
        let lease = borrow::<JLease>(h)?.lease.clone();
        let ttl = (ttl_ms >= 0).then(|| Duration::from_millis(ttl_ms as u64));
        start(env, &completion, async move {
            lease.renew(ttl).await?;
            Ok(Value::Unit)
        })
    })
}

/// Releases this hold; `done(0, …)`.
#[unsafe(no_mangle)]
pub extern "system" fn Java_dev_fencelock_Native_leaseRelease<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    h: jlong,
    completion: JObject<'l>,
) -> jlong {
    shim(&mut env, |env| {
        let lease = borrow::<JLease>(h)?.lease.clone();
        start(env, &completion, async move {
            lease.release().await?;
            Ok(Value::Unit)
        })
    })
}

/// Calls `completion.done(0, 0, reason, null)` once when the lease is lost; never if it is released or the handle
/// freed first (core's lost signal ends then, and the completion is dropped).
#[unsafe(no_mangle)]
pub extern "system" fn Java_dev_fencelock_Native_leaseOnLost<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    h: jlong,
    completion: JObject<'l>,
) {
    shim(&mut env, |env| {
        let lost = borrow::<JLease>(h)?.lease.lost();
        let completion = Completion::new(env, &completion)?;
        fencelock_bridge::spawn(async move {
            if let LeaseEnd::Lost(reason) = lost.await {
                completion.finish(Ok(Value::Lost { reason }));
            }
        })?;
        Ok(())
    })
}
