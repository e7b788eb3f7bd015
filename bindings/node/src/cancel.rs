//! AbortSignal support: a waiting `lock` runs as a task on the runtime whose abort handle is kept under an id the
//! JS side chose; `cancel(id)` aborts it. Core is cancel-safe, so dropping the acquire leaves no lock behind.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use napi_derive::napi;
use tokio::task::AbortHandle;

static PENDING: Mutex<Option<HashMap<u32, AbortHandle>>> = Mutex::new(None);

fn pending() -> MutexGuard<'static, Option<HashMap<u32, AbortHandle>>> {
    PENDING.lock().unwrap_or_else(|p| p.into_inner())
}

/// Keeps a task cancellable under `id` until dropped.
#[derive(Debug)]
pub(crate) struct Registered(Option<u32>);

pub(crate) fn register(id: Option<u32>, handle: AbortHandle) -> Registered {
    if let Some(id) = id {
        pending().get_or_insert_default().insert(id, handle);
    }
    Registered(id)
}

impl Drop for Registered {
    fn drop(&mut self) {
        if let Some(id) = self.0 {
            pending().get_or_insert_default().remove(&id);
        }
    }
}

/// Aborts the pending operation registered under `id`; false if it already finished.
#[napi]
pub fn cancel(id: u32) -> bool {
    let handle = pending().get_or_insert_default().remove(&id);
    handle.map(|h| h.abort()).is_some()
}
