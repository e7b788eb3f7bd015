//! `ClientHandle`: the part of a client that its leases and fences keep — the backend, whether the client was
//! closed, and its background tasks. Narrower than the client, so neither reaches into the client's state.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::backend::Backend;
use crate::error::{Error, ErrorKind, Result};
use crate::tasks::Tasks;

#[derive(Debug)]
pub(crate) struct ClientHandle {
    pub(crate) backend: Arc<dyn Backend>,
    pub(crate) tasks: Tasks,
    closed: AtomicBool,
}

impl ClientHandle {
    pub(crate) fn new(backend: Arc<dyn Backend>, tasks: Tasks) -> Self {
        ClientHandle { backend, tasks, closed: AtomicBool::new(false) }
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
