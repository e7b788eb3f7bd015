//! `Native.fenceWrite` / `fenceRead`: fenced registers through the client handle.

use fencelock::Client;
use jni::EnvUnowned;
use jni::objects::{JByteArray, JClass, JObject, JString};
use jni::sys::jlong;

use crate::callback::Value;
use crate::error::shim;
use crate::handle::borrow;
use crate::options::string;
use crate::task::start;

/// Stores `value` if `token` ≥ the highest accepted; `done(0, …)`, or `fail(FENCED, …)`.
#[unsafe(no_mangle)]
pub extern "system" fn Java_dev_fencelock_Native_fenceWrite<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    h: jlong,
    resource: JString<'l>,
    token: jlong,
    value: JByteArray<'l>,
    completion: JObject<'l>,
) -> jlong {
    shim(&mut env, |env| {
        let fence = borrow::<Client>(h)?.fence(&string(env, &resource, "the resource name")?);
        let value = if value.is_null() { Vec::new() } else { env.convert_byte_array(&value)? };
        start(env, &completion, async move {
            fence.write(token as u64, &value).await?;
            Ok(Value::Unit)
        })
    })
}

/// `done(token, 0, null, value)`: the highest accepted token and its value (`0`, empty if never written).
#[unsafe(no_mangle)]
pub extern "system" fn Java_dev_fencelock_Native_fenceRead<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    h: jlong,
    resource: JString<'l>,
    completion: JObject<'l>,
) -> jlong {
    shim(&mut env, |env| {
        let fence = borrow::<Client>(h)?.fence(&string(env, &resource, "the resource name")?);
        start(env, &completion, async move {
            let (token, value) = fence.read().await?;
            Ok(Value::Fence { token, value })
        })
    })
}
