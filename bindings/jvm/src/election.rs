//! `Native.campaign`, `proclaim`, `leader`, `observer*`: elections (DESIGN.md §4b) as thin calls of the bridge's
//! helpers. A leadership is an ordinary lease handle (`JLease`): its fence is the term and `leaseRelease` resigns. An
//! observer handle is a boxed `Arc<Observer>`; each `observerNext` is a task holding its own `Arc`, so Java may free
//! the handle while one is being cancelled.

use std::sync::Arc;

use fencelock::Client;
use fencelock_bridge::Observer;
use jni::objects::{JByteArray, JClass, JObject, JString};
use jni::sys::{jboolean, jint, jlong};
use jni::{Env, EnvUnowned};

use crate::callback::Value;
use crate::error::{Fail, shim};
use crate::handle::{borrow, free, into_handle};
use crate::lease::JLease;
use crate::options::{lock_options, opt_string, string};
use crate::task::start;

/// A candidate's or leader's value; null is refused (the Java layer checks, this is the safety net). Its size is
/// core's to check, so the limit and its message are the same in every language.
pub(crate) fn value(env: &Env<'_>, value: &JByteArray<'_>) -> Result<Vec<u8>, Fail> {
    if value.is_null() {
        return Err(Fail::Lock(fencelock::Error::new(
            fencelock::ErrorKind::InvalidArgument,
            "the election value must not be null",
        )));
    }
    Ok(env.convert_byte_array(value)?)
}

/// `campaign` (`once` false) or `tryCampaign` (`once` true) in the election `name` with `value`; `done(leaseHandle
/// or 0 while another leads, term, …)`.
#[unsafe(no_mangle)]
pub extern "system" fn Java_dev_fencelock_Native_campaign<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    h: jlong,
    name: JString<'l>,
    value_bytes: JByteArray<'l>,
    ttl_ms: jlong,
    timeout_ms: jlong,
    watchdog: jboolean,
    owner: JString<'l>,
    fair: jint,
    once: jboolean,
    completion: JObject<'l>,
) -> jlong {
    shim(&mut env, |env| {
        let client = borrow::<Client>(h)?.clone();
        let name = string(env, &name, "the election name")?;
        let value = value(env, &value_bytes)?;
        let opts = lock_options(ttl_ms, timeout_ms, watchdog, opt_string(env, &owner)?, fair);
        start(env, &completion, async move {
            Ok(Value::acquired(fencelock_bridge::campaign(&client, &name, &value, &opts, once).await?))
        })
    })
}

/// Replaces the value of the leadership `lease` of the election `name`, keeping its term; `done(0, …)`.
#[unsafe(no_mangle)]
pub extern "system" fn Java_dev_fencelock_Native_proclaim<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    h: jlong,
    name: JString<'l>,
    lease: jlong,
    value_bytes: JByteArray<'l>,
    completion: JObject<'l>,
) -> jlong {
    shim(&mut env, |env| {
        let client = borrow::<Client>(h)?.clone();
        let lease = borrow::<JLease>(lease)?.lease();
        let name = string(env, &name, "the election name")?;
        let value = value(env, &value_bytes)?;
        start(env, &completion, async move {
            fencelock_bridge::proclaim(&client, &name, &lease, &value).await?;
            Ok(Value::Unit)
        })
    })
}

/// `done(1, term, null, value)` for the current leader of `name`, `done(0, …)` when nobody leads.
#[unsafe(no_mangle)]
pub extern "system" fn Java_dev_fencelock_Native_leader<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    h: jlong,
    name: JString<'l>,
    completion: JObject<'l>,
) -> jlong {
    shim(&mut env, |env| {
        let client = borrow::<Client>(h)?.clone();
        let name = string(env, &name, "the election name")?;
        start(env, &completion, async move { Ok(Value::Leader(fencelock_bridge::leader(&client, &name).await?)) })
    })
}

/// A new observer of the election `name` (nothing is read until `observerNext`).
#[unsafe(no_mangle)]
pub extern "system" fn Java_dev_fencelock_Native_observerNew<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    h: jlong,
    name: JString<'l>,
) -> jlong {
    shim(&mut env, |env| {
        let client = borrow::<Client>(h)?;
        let name = string(env, &name, "the election name")?;
        Ok(into_handle(Arc::new(Observer::new(client, &name))))
    })
}

/// The observer's next change, as `leader` reports it. Aborting the task while it waits consumes nothing: the
/// observer's stream keeps its place for the next call.
#[unsafe(no_mangle)]
pub extern "system" fn Java_dev_fencelock_Native_observerNext<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    h: jlong,
    completion: JObject<'l>,
) -> jlong {
    shim(&mut env, |env| {
        let observer = borrow::<Arc<Observer>>(h)?.clone();
        start(env, &completion, async move { Ok(Value::Leader(observer.next().await?)) })
    })
}

#[unsafe(no_mangle)]
pub extern "system" fn Java_dev_fencelock_Native_observerFree<'l>(_env: EnvUnowned<'l>, _class: JClass<'l>, h: jlong) {
    // Its stream holds a client clone and timers: dropped inside the runtime, whatever their destructors spawn has
    // one to run on (this may be the client's last clone when the Cleaner freed the client first).
    match fencelock_bridge::handle() {
        Ok(rt) => {
            let _entered = rt.enter();
            free::<Arc<Observer>>(h);
        }
        Err(_) => free::<Arc<Observer>>(h),
    }
}
