//! Starting an operation: it runs as a task on the bridge's runtime and reports to a `Completion`; Java gets an
//! abort handle, so cancelling the `CompletableFuture` (or interrupting a blocked caller) drops the core future,
//! which is cancel-safe: a cancelled acquire leaves no lock and no queue entry behind.

use std::future::Future;

use jni::Env;
use jni::objects::JObject;
use jni::sys::jlong;
use tokio::task::AbortHandle;

use crate::callback::{Completion, Value};
use crate::error::Fail;
use crate::handle::{free, into_handle};

/// Spawns `fut`; its result goes to `completion`. Returns the task's abort handle (freed by `taskFree`).
pub(crate) fn start<F>(env: &Env<'_>, completion: &JObject<'_>, fut: F) -> Result<jlong, Fail>
where
    F: Future<Output = fencelock::Result<Value>> + Send + 'static,
{
    let completion = Completion::new(env, completion)?;
    let task = fencelock_bridge::spawn(async move {
        let result = fut.await;
        completion.finish(result);
    })?;
    Ok(into_handle(task.abort_handle()))
}

#[unsafe(no_mangle)]
pub extern "system" fn Java_dev_fencelock_Native_taskCancel<'l>(
    mut env: jni::EnvUnowned<'l>,
    _class: jni::objects::JClass<'l>,
    task: jlong,
) {
    crate::error::shim(&mut env, |_| {
        crate::handle::borrow::<AbortHandle>(task)?.abort();
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub extern "system" fn Java_dev_fencelock_Native_taskFree<'l>(
    _env: jni::EnvUnowned<'l>,
    _class: jni::objects::JClass<'l>,
    task: jlong,
) {
    free::<AbortHandle>(task);
}
