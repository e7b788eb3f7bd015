//! The undo of an attempt that queued and was not granted: its node goes, by path if its create was answered, else
//! by its `_c_<uuid>` prefix. A node this cannot reach goes with the session in any case.

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::time::Instant;
use zookeeper_client as zk;

use super::shared::Shared;
use crate::backend::Backoff;
use crate::error::ErrorKind;

/// First and longest pause between attempts to delete a node while the server does not answer.
const RETRY_FIRST: Duration = Duration::from_millis(50);
const RETRY_MAX: Duration = Duration::from_secs(1);

/// An attempt's node to delete.
pub(super) struct Leftover {
    pub(super) dir: String,
    pub(super) uuid: String,
    /// The delete of the node by path, already sent if its name is known: later requests of this session then find
    /// the node gone.
    pub(super) sent: Option<BoxFuture<'static, Result<(), zk::Error>>>,
}

/// Deletes `leftover`, retrying the search by prefix until it succeeds or the session timeout passes; by then the
/// session either answers again or has expired, taking the node with it.
pub(super) async fn delete(shared: Arc<Shared>, leftover: Leftover) {
    if let Some(sent) = leftover.sent {
        match sent.await {
            Ok(()) | Err(zk::Error::NoNode) | Err(zk::Error::ClientClosed) => return,
            Err(_) => {}
        }
    }
    let mut backoff = Backoff::new(RETRY_FIRST, RETRY_MAX, Instant::now() + shared.session.timeout);
    while let Err(e) = shared.delete_by_prefix(&leftover.dir, &leftover.uuid).await {
        if e.kind() == ErrorKind::Closed || !backoff.wait().await {
            tracing::warn!(dir = %leftover.dir, error = %e, "could not delete an abandoned lock node; it goes with the session");
            return;
        }
    }
}
