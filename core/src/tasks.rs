//! Background work a client waits for before it closes: the cleanup of a cancelled acquire or a dropped lease, a
//! backend's late delete of a queue entry. One place spawns and counts it, so `Client::close` can await all of it.

use std::sync::Arc;
use std::time::Duration;

use tokio::runtime::Handle;
use tokio::sync::watch;

/// A client's background tasks. Cheap to clone; clones count into the same total.
#[derive(Debug, Clone)]
pub(crate) struct Tasks {
    // The runtime the client was made on, for drops outside any runtime (a binding's thread).
    handle: Option<Handle>,
    pending: Arc<watch::Sender<usize>>,
}

impl Tasks {
    /// Tasks of a client made now, on the current runtime if there is one.
    pub(crate) fn new() -> Self {
        Tasks { handle: Handle::try_current().ok(), pending: Arc::new(watch::Sender::new(0)) }
    }

    /// Runs `task` in the background, on the caller's runtime, else the client's. Without either it cannot run: what
    /// it would have undone expires with its TTL or session.
    pub(crate) fn spawn(&self, task: impl Future<Output = ()> + Send + 'static) {
        let Some(h) = Handle::try_current().ok().or_else(|| self.handle.clone()) else {
            tracing::warn!("no runtime to clean up on; the record expires after its TTL");
            return;
        };
        let pending = self.pending.clone();
        pending.send_modify(|n| *n += 1);
        h.spawn(async move {
            task.await;
            pending.send_modify(|n| *n -= 1);
        });
    }

    /// Waits until every task spawned so far has ended, or `timeout` has passed.
    pub(crate) async fn drained(&self, timeout: Duration) {
        let mut pending = self.pending.subscribe();
        let _ = tokio::time::timeout(timeout, pending.wait_for(|n| *n == 0)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn drained_waits_for_every_task() {
        let tasks = Tasks::new();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = done.clone();
        tasks.clone().spawn(async move {
            let _ = rx.await;
            flag.store(true, std::sync::atomic::Ordering::SeqCst);
        });
        tokio::time::timeout(Duration::from_millis(20), tasks.drained(Duration::from_secs(5))).await.unwrap_err();
        tx.send(()).unwrap();
        tasks.drained(Duration::from_secs(5)).await;
        assert!(done.load(std::sync::atomic::Ordering::SeqCst));
    }
}
