//! One runtime per process: napi-rs runs its promises' futures on a runtime it owns (TOOLCHAIN.md gotcha 5), so the
//! bridge builds the shared runtime and hands it over, keeping only a handle. Core, the bridge and napi then share it.

use napi::bindgen_prelude::{Env, Result};
use std::future::Future;

use crate::error::to_napi;

#[napi_derive::module_init]
fn install() {
    // Err or None (another binding in this process built it first): napi keeps its own runtime for polling, and
    // fencelock's work still runs on the bridge's, since every operation is spawned there (`spawn_promise`).
    if let Ok(Some(rt)) = fencelock_bridge::build_for_host() {
        napi::bindgen_prelude::create_custom_tokio_runtime(rt);
    }
}

/// Runs `fut` on the shared runtime and returns a Promise of its output. The future is spawned before this returns,
/// so callers can keep its abort handle (see `cancel.rs`).
pub(crate) fn spawn_task<T, F>(fut: F) -> Result<tokio::task::JoinHandle<fencelock::Result<T>>>
where
    T: Send + 'static,
    F: Future<Output = fencelock::Result<T>> + Send + 'static,
{
    fencelock_bridge::spawn(fut).map_err(to_napi)
}

/// A Promise settled by `fut`, which runs on the shared runtime.
pub(crate) fn spawn_promise<'env, T, F>(env: &'env Env, fut: F) -> Result<napi::bindgen_prelude::PromiseRaw<'env, T>>
where
    T: napi::bindgen_prelude::ToNapiValue + Send + 'static,
    F: Future<Output = fencelock::Result<T>> + Send + 'static,
{
    let task = spawn_task(fut)?;
    env.spawn_future(async move { crate::error::joined(task.await, "the operation") })
}
