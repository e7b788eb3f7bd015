//! The order of one instance's requests on one lock record. A round returns once a majority has answered, so the
//! request of a slow instance may still be on its way when the next round on the same record starts: the clean-up
//! of a failed acquire, the lease's release. Each request on a record therefore runs as a task of its own that first
//! waits for the one before it on that record: a release can never overtake the acquire it undoes, on this
//! connection or on the retry a `NOSCRIPT` reply causes. Requests on different records do not wait for each other.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::{BoxFuture, FutureExt, Shared};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// Resolves when a request has finished.
type Tail = Shared<BoxFuture<'static, ()>>;

/// The last request on each record of one instance, while one is unfinished.
#[derive(Default)]
pub(super) struct Chains {
    tails: Mutex<HashMap<String, (u64, Tail)>>,
    issued: AtomicU64,
}

impl Chains {
    fn tails(&self) -> std::sync::MutexGuard<'_, HashMap<String, (u64, Tail)>> {
        self.tails.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs `work` as a task of its own once every earlier request on `record` has finished. The task goes on if
    /// the handle is dropped: that is how a slow instance finishes in the background. With `patience`, a request
    /// whose turn has not come within it is not sent, and answers `given_up()` at once; the requests after it still
    /// wait for the ones before it, so the order holds.
    pub(super) fn run<T: Send + 'static>(
        self: &Arc<Self>,
        record: &str,
        patience: Option<Duration>,
        given_up: impl FnOnce() -> T + Send + 'static,
        work: impl Future<Output = T> + Send + 'static,
    ) -> JoinHandle<T> {
        let (finished, on_finish) = oneshot::channel::<()>();
        let tail: Tail = async move {
            let _ = on_finish.await;
        }
        .boxed()
        .shared();
        let id = self.issued.fetch_add(1, Ordering::Relaxed);
        let before = self.tails().insert(record.to_string(), (id, tail)).map(|(_, t)| t);
        let (chains, record) = (self.clone(), record.to_string());
        let done = move || {
            drop(finished);
            let mut tails = chains.tails();
            if tails.get(&record).is_some_and(|(last, _)| *last == id) {
                tails.remove(&record);
            }
        };
        tokio::spawn(async move {
            if let Some(before) = before {
                match patience {
                    Some(patience) => {
                        if tokio::time::timeout(patience, before.clone()).await.is_err() {
                            tokio::spawn(async move {
                                before.await;
                                done();
                            });
                            return given_up();
                        }
                    }
                    None => before.await,
                }
            }
            let out = work.await;
            done();
            out
        })
    }

    /// Resolves when every request made so far has finished.
    pub(super) async fn idle(&self) {
        let tails: Vec<Tail> = self.tails().values().map(|(_, t)| t.clone()).collect();
        futures::future::join_all(tails).await;
    }
}
