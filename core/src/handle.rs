//! `ClientHandle`: the part of a client that its leases and fences keep — the backend, whether the client was
//! closed, and its background tasks. Narrower than the client, so neither reaches into the client's state.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::backend::Backend;
use crate::error::{Error, ErrorKind, Result};
use crate::metrics::Recorder;
use crate::tasks::Tasks;

pub(crate) struct ClientHandle {
    pub(crate) backend: Arc<dyn Backend>,
    pub(crate) tasks: Tasks,
    pub(crate) metrics: Arc<Recorder>,
    closed: AtomicBool,
}

/// The backend as `describe()` shows it, never its own `Debug`: drivers' options and connections may hold the
/// password or the raw URL.
impl std::fmt::Debug for ClientHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientHandle")
            .field("backend", &self.backend.describe())
            .field("closed", &self.closed.load(std::sync::atomic::Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl ClientHandle {
    pub(crate) fn new(backend: Arc<dyn Backend>, tasks: Tasks, metrics: Arc<Recorder>) -> Self {
        ClientHandle { backend, tasks, metrics, closed: AtomicBool::new(false) }
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    /// Marks the client closed; whether it already was.
    pub(crate) fn close(&self) -> bool {
        self.closed.swap(true, Ordering::SeqCst)
    }

    /// `Closed` once the client was closed.
    pub(crate) fn check_open(&self) -> Result<()> {
        if self.is_closed() {
            return Err(Error::new(ErrorKind::Closed, "the client was closed").with_backend(self.backend.describe()));
        }
        Ok(())
    }
}
