//! `Native.connect*`, `client*`, `lock`, `tryLock`: the client handle is a boxed `fencelock::Client` (cheap to clone
//! into each task).

use fencelock::Client;
use jni::EnvUnowned;
use jni::objects::{JClass, JObject, JObjectArray, JString};
use jni::sys::{jboolean, jint, jlong};

use crate::callback::Value;
use crate::error::shim;
use crate::handle::{borrow, free, getter, into_handle};
use crate::options::{client_options, lock_options, metrics_names, opt_string, string};
use crate::task::start;

/// Capability bits as Java reads them.
const FENCING: jint = 1;
const NATIVE_WAIT: jint = 2;
const FAIR: jint = 4;
const SESSION_BOUND: jint = 8;
const RW_LOCK: jint = 16;
const SEMAPHORE: jint = 32;
const ELECTION: jint = 64;

/// Connects; `done(clientHandle, …)`. A null URL uses `FENCELOCK_URL`, else the embedded SQLite file.
#[unsafe(no_mangle)]
pub extern "system" fn Java_dev_fencelock_Native_connect<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    url: JString<'l>,
    connect_ms: jlong,
    request_ms: jlong,
    metrics: jboolean,
    all_names: jboolean,
    names: JObjectArray<'l, JString<'l>>,
    completion: JObject<'l>,
) -> jlong {
    shim(&mut env, |env| {
        let url = opt_string(env, &url)?.unwrap_or_else(fencelock::default_url);
        let names = metrics_names(env, all_names, &names)?;
        let opts = client_options(connect_ms, request_ms, metrics, names);
        start(env, &completion, async move {
            let client = Client::connect_with(&url, &opts).await?;
            Ok(Value::Client { handle: into_handle(client) })
        })
    })
}

#[unsafe(no_mangle)]
pub extern "system" fn Java_dev_fencelock_Native_clientFree<'l>(_env: EnvUnowned<'l>, _class: JClass<'l>, h: jlong) {
    free::<Client>(h);
}

/// Releases every lease of the client and closes its connections; `done(0, …)`.
#[unsafe(no_mangle)]
pub extern "system" fn Java_dev_fencelock_Native_clientClose<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    h: jlong,
    completion: JObject<'l>,
) -> jlong {
    shim(&mut env, |env| {
        let client = borrow::<Client>(h)?.clone();
        start(env, &completion, async move {
            client.close().await;
            Ok(Value::Unit)
        })
    })
}

getter!(Java_dev_fencelock_Native_clientId, Client, |c| -> String c.id());

getter!(Java_dev_fencelock_Native_clientUrl, Client, |c| -> String c.url());

#[unsafe(no_mangle)]
pub extern "system" fn Java_dev_fencelock_Native_clientCapability<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    h: jlong,
) -> jint {
    shim(&mut env, |_| {
        let c = borrow::<Client>(h)?.capability();
        let bit = |on: bool, b: jint| if on { b } else { 0 };
        Ok(bit(c.fencing, FENCING)
            | bit(c.native_wait, NATIVE_WAIT)
            | bit(c.fair, FAIR)
            | bit(c.session_bound, SESSION_BOUND)
            | bit(c.rw_lock, RW_LOCK)
            | bit(c.semaphore, SEMAPHORE)
            | bit(c.election, ELECTION))
    })
}

getter!(Java_dev_fencelock_Native_clientLocalEntries, Client, |c| -> jlong { c.local_entries() as jlong });

/// `lock` (`once` false) or `tryLock` (`once` true) of a hold of `kind` (`lock`, `read`, `write` or `permit` of
/// `permits`); `done(leaseHandle or 0 when busy, fence, …)`.
#[unsafe(no_mangle)]
pub extern "system" fn Java_dev_fencelock_Native_lock<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    h: jlong,
    name: JString<'l>,
    kind: JString<'l>,
    permits: jlong,
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
        let name = string(env, &name, "the lock name")?;
        let kind = fencelock_bridge::hold_kind(&name, &string(env, &kind, "the kind of hold")?, permits)?;
        let opts = lock_options(ttl_ms, timeout_ms, watchdog, opt_string(env, &owner)?, fair);
        start(env, &completion, async move {
            Ok(Value::acquired(fencelock_bridge::hold(&client, &name, kind, &opts, once).await?))
        })
    })
}

/// `done(lastToken or -1, remaining ms or -1, holder or null)`.
#[unsafe(no_mangle)]
pub extern "system" fn Java_dev_fencelock_Native_inspect<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    h: jlong,
    name: JString<'l>,
    completion: JObject<'l>,
) -> jlong {
    shim(&mut env, |env| {
        let client = borrow::<Client>(h)?.clone();
        let name = string(env, &name, "the lock name")?;
        start(env, &completion, async move {
            let info = client.inspect(&name).await?;
            Ok(Value::Info {
                last_token: info.last_token,
                remaining_ms: info.remaining.map(|d| d.as_millis() as u64),
                holder: info.holder,
            })
        })
    })
}

/// `done(permits of the semaphore not held now)`.
#[unsafe(no_mangle)]
pub extern "system" fn Java_dev_fencelock_Native_available<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    h: jlong,
    name: JString<'l>,
    permits: jlong,
    completion: JObject<'l>,
) -> jlong {
    shim(&mut env, |env| {
        let client = borrow::<Client>(h)?.clone();
        let name = string(env, &name, "the semaphore name")?;
        start(
            env,
            &completion,
            async move { Ok(Value::Count(fencelock_bridge::available(&client, &name, permits).await?)) },
        )
    })
}

/// `done(1 if there was a record, else 0)`.
#[unsafe(no_mangle)]
pub extern "system" fn Java_dev_fencelock_Native_forceRelease<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    h: jlong,
    name: JString<'l>,
    completion: JObject<'l>,
) -> jlong {
    shim(&mut env, |env| {
        let client = borrow::<Client>(h)?.clone();
        let name = string(env, &name, "the lock name")?;
        start(env, &completion, async move { Ok(Value::Existed(client.force_release(&name).await?)) })
    })
}
