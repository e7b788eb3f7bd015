//! `Fence`: a register on the resource side that rejects stale tokens, stored in the same backend as the locks
//! (in its own namespace). A holder that paused past its lease and lost the lock cannot overwrite a newer holder.

use std::sync::Arc;

use tracing::Instrument;

use crate::error::{ErrorKind, Result};
use crate::handle::ClientHandle;
use crate::metrics::Op;
use crate::options::validate_name;

/// A fenced register named by a resource.
#[derive(Debug, Clone)]
pub struct Fence {
    client: Arc<ClientHandle>,
    resource: String,
}

impl Fence {
    pub(crate) fn new(client: Arc<ClientHandle>, resource: &str) -> Self {
        Fence { client, resource: resource.to_string() }
    }

    /// The resource name.
    pub fn resource(&self) -> &str {
        &self.resource
    }

    /// Stores `value` if `token` ≥ the highest token accepted so far (atomically raising it); `Fenced` if older.
    pub async fn write(&self, token: u64, value: &[u8]) -> Result<()> {
        self.client.check_open()?;
        validate_name(&self.resource)?;
        let metrics = &self.client.metrics;
        let span = tracing::info_span!(
            "fencelock.fence_write",
            resource = %self.resource,
            token,
            backend = metrics.backend(),
            outcome = tracing::field::Empty,
        );
        let result = metrics
            .timed(Op::FenceWrite, self.client.backend.fence_write(&self.resource, token, value))
            .instrument(span.clone())
            .await;
        metrics.fence_write(&result);
        span.record(
            "outcome",
            match &result {
                Ok(()) => "ok",
                Err(e) if e.kind() == ErrorKind::Fenced => "refused",
                Err(_) => "error",
            },
        );
        result
    }

    /// The highest accepted token and its value; `(0, [])` if never written.
    pub async fn read(&self) -> Result<(u64, Vec<u8>)> {
        self.client.check_open()?;
        validate_name(&self.resource)?;
        self.client.metrics.timed(Op::FenceRead, self.client.backend.fence_read(&self.resource)).await
    }
}
