//! `Native.lease*`: a lease handle is a boxed `JLease`. Its operations run as tasks holding their own `Arc`, so Java
//! may free the handle while a release is still finishing.

use std::sync::Arc;
use std::time::Duration;

use fencelock::Lease;
use jni::EnvUnowned;
use jni::objects::{JClass, JObject};
use jni::sys::{jboolean, jlong};
use tokio::sync::watch;

use crate::callback::{Completion, Value};
use crate::error::shim;
use crate::handle::{borrow, free, getter};
use crate::task::start;

/// A lease as Java holds it.
#[derive(Debug)]
pub(crate) struct JLease {
    lease: Arc<Lease>,
    // Set when the handle is freed: `onLost` waiters stop then, as no loss can be reported any more.
    done: watch::Sender<bool>,
}

impl JLease {
    pub(crate) fn new(lease: Lease) -> Self {
        JLease { lease: Arc::new(lease), done: watch::Sender::new(false) }
    }

    pub(crate) fn lease(&self) -> Arc<Lease> {
        self.lease.clone()
    }
}

impl Drop for JLease {
    fn drop(&mut self) {
        self.done.send_replace(true);
    }
}

#[unsafe(no_mangle)]
pub extern "system" fn Java_dev_fencelock_Native_leaseFree<'l>(_env: EnvUnowned<'l>, _class: JClass<'l>, h: jlong) {
    free::<JLease>(h);
}

getter!(Java_dev_fencelock_Native_leaseFence, JLease, |l| -> jlong { l.lease.fence() as jlong });

getter!(Java_dev_fencelock_Native_leaseHolder, JLease, |l| -> String l.lease.holder());

getter!(Java_dev_fencelock_Native_leaseRemainingMs, JLease, |l| -> jlong { l.lease.remaining().as_millis() as jlong });

getter!(Java_dev_fencelock_Native_leaseIsValid, JLease, |l| -> jboolean { l.lease.is_valid() });

getter!(Java_dev_fencelock_Native_leaseIsLost, JLease, |l| -> jboolean { l.lease.is_lost() });

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
            Ok(Value::default())
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
            Ok(Value::default())
        })
    })
}

/// Calls `completion.done` once when the lease is lost; never if the handle is freed (released) first.
#[unsafe(no_mangle)]
pub extern "system" fn Java_dev_fencelock_Native_leaseOnLost<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    h: jlong,
    completion: JObject<'l>,
) {
    shim(&mut env, |env| {
        let jl = borrow::<JLease>(h)?;
        let lost = jl.lease.lost();
        let mut done = jl.done.subscribe();
        let completion = Completion::new(env, &completion)?;
        fencelock_bridge::spawn(async move {
            tokio::select! {
                biased; // a loss that came before the release still counts
                () = lost => completion.finish(Ok(Value::default())),
                _ = done.wait_for(|d| *d) => {}
            }
        })?;
        Ok(())
    })
}
