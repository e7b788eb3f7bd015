//! The blocking fast path for platform threads (acquires, campaigns, release): the core future runs on the calling
//! Java thread (`block_on`), which saves the two thread hops of the task path per call. It waits in 50 ms slices and
//! checks `Thread.isInterrupted()` between them, so an interrupt still cancels a waiting acquire (dropping the
//! cancel-safe core future). Virtual threads take the task path instead: blocking them in native code would pin
//! their carrier.

use fencelock::{Client, Lease};
use jni::objects::{JByteArray, JClass, JString};
use jni::sys::{jboolean, jint, jlong};
use jni::{Env, EnvUnowned, jni_sig, jni_str};

use crate::error::{Fail, shim};
use crate::handle::{borrow, into_handle};
use crate::lease::JLease;
use crate::options::{lock_options, opt_string, string};

fn interrupted(env: &mut Env<'_>) -> Result<bool, Fail> {
    let thread = env
        .call_static_method(
            jni_str!("java/lang/Thread"),
            jni_str!("currentThread"),
            jni_sig!("()Ljava/lang/Thread;"),
            &[],
        )?
        .l()?;
    Ok(env.call_method(&thread, jni_str!("isInterrupted"), jni_sig!("()Z"), &[])?.z()?)
}

/// Runs `fut` on this thread (the bridge's sliced wait); with `interruptible`, an interrupt drops it and fails with
/// `Cancelled`.
fn wait<F: Future<Output = fencelock::Result<T>>, T>(
    env: &mut Env<'_>,
    interruptible: bool,
    fut: F,
) -> Result<T, Fail> {
    let mut failed = None;
    let result = fencelock_bridge::block_interruptibly(fut, || {
        interruptible
            && interrupted(env).unwrap_or_else(|e| {
                failed = Some(e);
                true
            })
    });
    if let Some(e) = failed {
        return Err(e);
    }
    Ok(result?)
}

/// Waits for the acquire or campaign `fut` of `name` here: the lease handle, or 0 when it found the name taken. An
/// error names the lock and the backend.
fn acquire_here<F: Future<Output = fencelock::Result<Option<Lease>>>>(
    env: &mut Env<'_>,
    interruptible: bool,
    client: &Client,
    name: &str,
    fut: F,
) -> Result<jlong, Fail> {
    let lease = wait(env, interruptible, fut).map_err(|f| match f {
        Fail::Lock(e) => Fail::Lock(e.with_lock(name).with_backend(client.url())),
        jni => jni,
    })?;
    Ok(lease.map_or(0, |l| into_handle(JLease::new(l))))
}

/// `lock`/`tryLock` of a hold of `kind` (see `Native_lock`) on the calling thread: the lease handle, or 0 when
/// `once` found it busy.
#[unsafe(no_mangle)]
pub extern "system" fn Java_dev_fencelock_Native_lockBlocking<'l>(
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
    interruptible: jboolean,
) -> jlong {
    shim(&mut env, |env| {
        let client: Client = borrow::<Client>(h)?.clone();
        let name = string(env, &name, "the lock name")?;
        let kind = fencelock_bridge::hold_kind(&name, &string(env, &kind, "the kind of hold")?, permits)?;
        let opts = lock_options(ttl_ms, timeout_ms, watchdog, opt_string(env, &owner)?, fair);
        acquire_here(env, interruptible, &client, &name, fencelock_bridge::hold(&client, &name, kind, &opts, once))
    })
}

/// `campaign`/`tryCampaign` (see `Native_campaign`) on the calling thread: the leadership's lease handle, or 0 when
/// `once` found another leading.
#[unsafe(no_mangle)]
pub extern "system" fn Java_dev_fencelock_Native_campaignBlocking<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    h: jlong,
    name: JString<'l>,
    value: JByteArray<'l>,
    ttl_ms: jlong,
    timeout_ms: jlong,
    watchdog: jboolean,
    owner: JString<'l>,
    fair: jint,
    once: jboolean,
    interruptible: jboolean,
) -> jlong {
    shim(&mut env, |env| {
        let client: Client = borrow::<Client>(h)?.clone();
        let name = string(env, &name, "the election name")?;
        let value = crate::election::value(env, &value)?;
        let opts = lock_options(ttl_ms, timeout_ms, watchdog, opt_string(env, &owner)?, fair);
        let campaign = fencelock_bridge::campaign(&client, &name, &value, &opts, once);
        acquire_here(env, interruptible, &client, &name, campaign)
    })
}

/// Releases this hold on the calling thread (not interruptible: it is one round trip, bounded by the request timeout).
#[unsafe(no_mangle)]
pub extern "system" fn Java_dev_fencelock_Native_leaseReleaseBlocking<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    h: jlong,
) {
    shim(&mut env, |env| {
        let lease = borrow::<JLease>(h)?.lease();
        wait(env, false, async move { lease.release().await })
    })
}
