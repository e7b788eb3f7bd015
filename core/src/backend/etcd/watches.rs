//! One watch per lock name and client, shared by the client's waiters on it and kept a while after the last one
//! leaves, so a waiter finds a watch that is already synced.
//!
//! Why: etcd serves a watch registered at a revision past its start ("unsynced") from a loop that runs every
//! 100 ms, and a write that lands while a new watch registers leaves it unsynced even when it starts at now (etcd
//! reads the start revision before it takes the store's lock). Under contention every waiter opening its own
//! watch met that for ~3 % of hand-offs, each costing up to 100 ms. A watch that lives across waits is caught up
//! once, in its first 100 ms, and delivers promptly from then on.
//!
//! The watch covers the name's prefix and passes on the key and revision of every delete. A waiter subscribes
//! before it reads what it waits for, so every delete after that read reaches it. When the stream ends, its
//! subscribers see the end (an `Unavailable` for the waiter, which watches again) and the next subscriber opens a
//! new watch, on the next endpoint if this one broke.

use std::collections::HashMap;
use std::sync::{Arc, Weak};
use std::time::Duration;

use fencelock_proto::etcdserverpb::WatchCreateRequest;
use fencelock_proto::mvccpb::event::EventType;
use fencelock_proto::prefix_end;
use tokio::sync::{Mutex, broadcast};
use tokio::task::JoinHandle;

use super::rpc::{EtcdError, Rpc, WatchStream};

/// How long a watch outlives its last subscriber: long enough for a client that locks again at once to find it.
const LINGER: Duration = Duration::from_secs(5);

/// Deletes a subscriber may fall behind by before it is woken to look again (a spurious wake-up, never a miss).
const BACKLOG: usize = 256;

/// A delete under the watched prefix: the key and the revision it was deleted at.
#[derive(Debug, Clone)]
pub(super) struct Deleted {
    pub(super) key: Vec<u8>,
    pub(super) rev: i64,
}

/// A subscriber's end of a shared watch: its deletes, then `Closed` when the watch ends.
pub(super) type Feed = broadcast::Receiver<Deleted>;

/// One shared watch: its feed and the task that reads its stream.
#[derive(Debug)]
struct Shared {
    feed: broadcast::Sender<Deleted>,
    task: JoinHandle<()>,
}

/// The client's shared watches, by prefix.
#[derive(Debug, Default)]
pub(super) struct Watches {
    map: Mutex<HashMap<String, Shared>>,
}

impl Watches {
    /// A feed of the deletes under `prefix` from now on, on the prefix's shared watch (opened if none runs).
    pub(super) async fn subscribe(self: &Arc<Self>, rpc: &Arc<Rpc>, prefix: &str) -> Result<Feed, EtcdError> {
        let mut map = self.map.lock().await;
        if let Some(shared) = map.get(prefix).filter(|s| !s.task.is_finished()) {
            return Ok(shared.feed.subscribe());
        }
        let create = WatchCreateRequest {
            key: prefix.as_bytes().to_vec(),
            range_end: prefix_end(prefix.as_bytes()),
            ..Default::default()
        };
        let (endpoint, mut stream) = rpc.watch_with(create).await?;
        // The first reply says the watch is registered: deletes from then on are in the stream.
        match stream.message().await {
            Ok(Some(resp)) if !resp.canceled => {}
            Ok(Some(resp)) => return Err(EtcdError::unavailable(format!("watch refused: {}", resp.cancel_reason))),
            Ok(None) => return Err(EtcdError::unavailable("the watch stream ended")),
            Err(e) => {
                rpc.demote(endpoint);
                return Err(e);
            }
        }
        let (feed, first) = broadcast::channel(BACKLOG);
        let task = tokio::spawn(relay(Arc::downgrade(self), rpc.clone(), endpoint, stream, feed.clone()));
        map.insert(prefix.to_string(), Shared { feed, task });
        Ok(first)
    }

    /// Ends every shared watch (the client is closing).
    pub(super) async fn close(&self) {
        for (_, shared) in self.map.lock().await.drain() {
            shared.task.abort();
        }
    }
}

/// Passes the stream's deletes on until the stream ends, or nobody has listened for [`LINGER`].
async fn relay(
    watches: Weak<Watches>,
    rpc: Arc<Rpc>,
    endpoint: usize,
    mut stream: WatchStream,
    feed: broadcast::Sender<Deleted>,
) {
    let mut idle = Box::pin(tokio::time::sleep(LINGER));
    loop {
        tokio::select! {
            message = stream.message() => match message {
                Ok(Some(resp)) if !resp.canceled => {
                    for e in resp.events.into_iter().filter(|e| e.r#type == EventType::Delete as i32) {
                        if let Some(kv) = e.kv {
                            let _ = feed.send(Deleted { key: kv.key, rev: kv.mod_revision });
                        }
                    }
                }
                Ok(_) => break,
                Err(_) => {
                    // A broken stream: the next watch prefers another endpoint.
                    rpc.demote(endpoint);
                    break;
                }
            },
            () = &mut idle => {
                // Under the map's lock, so that no subscriber joins between the count and the removal.
                let Some(watches) = watches.upgrade() else { return };
                let mut map = watches.map.lock().await;
                if feed.receiver_count() == 0 {
                    map.retain(|_, s| !s.feed.same_channel(&feed));
                    return;
                }
                drop(map);
                idle.as_mut().reset(tokio::time::Instant::now() + LINGER);
            }
        }
    }
    if let Some(watches) = watches.upgrade() {
        watches.map.lock().await.retain(|_, s| !s.feed.same_channel(&feed));
    }
}
