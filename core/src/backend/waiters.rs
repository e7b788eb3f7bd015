//! Waiters woken by server notifications (Redis pub/sub, PostgreSQL LISTEN/NOTIFY): one registry of channels per
//! client connection, subscribed while at least one waiter wants a channel. Waiters compare generations, so a
//! notification that lands between an attempt and the wait is not missed.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::{Mutex as AsyncMutex, Notify};
use tokio::time::Instant;

use crate::error::Result;

/// A connection that can start and stop listening on a channel.
pub(crate) trait Listen: Clone + Send + Sync + 'static {
    type Error;
    /// Starts delivering the channel's notifications to [`Channels::wake`].
    fn listen(&self, channel: &str) -> impl Future<Output = Result<(), Self::Error>> + Send;
    /// Stops it; best effort (a closed connection listens to nothing anyway).
    fn unlisten(&self, channel: &str) -> impl Future<Output = ()> + Send;
    /// Whether the connection still delivers notifications (one that reconnects by itself always does).
    fn is_live(&self) -> bool {
        true
    }
}

/// Notifications seen on one channel.
#[derive(Debug, Default)]
struct Channel {
    generation: AtomicU64,
    notify: Notify,
}

impl Channel {
    fn wake(&self) {
        self.generation.fetch_add(1, Ordering::SeqCst);
        self.notify.notify_waiters();
    }
}

/// Who waits on one channel, and whether the connection listens on it.
#[derive(Debug, Default)]
struct ChannelUse {
    waiters: usize,
    listening: bool,
    channel: Arc<Channel>,
}

/// The channels one connection's waiters wait on.
#[derive(Debug, Default)]
pub(crate) struct Channels {
    map: Mutex<HashMap<String, ChannelUse>>,
    // Serialises listen/unlisten so a late unlisten never undoes a newer listen.
    order: AsyncMutex<()>,
}

impl Channels {
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<String, ChannelUse>> {
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A notification arrived on `channel`.
    pub(crate) fn wake(&self, channel: &str) {
        if let Some(e) = self.map().get(channel) {
            e.channel.wake();
        }
    }

    /// Notifications may have been lost (a reconnect): every waiter re-checks.
    pub(crate) fn wake_all(&self) {
        self.map().values().for_each(|e| e.channel.wake());
    }

    /// Registers a waiter on `channel`, listening on `conn` unless it already does.
    pub(crate) async fn subscribe<L: Listen>(
        self: &Arc<Self>,
        conn: &L,
        channel: String,
    ) -> Result<Subscription<L>, L::Error> {
        let chan = {
            let mut map = self.map();
            let e = map.entry(channel.clone()).or_default();
            e.waiters += 1;
            e.channel.clone()
        };
        // Made before the await, so a failed or cancelled listen still gives the waiter count back.
        let sub = Subscription { channels: self.clone(), conn: conn.clone(), name: channel, seen: 0, chan };
        let _order = self.order.lock().await;
        if !self.map().get(&sub.name).is_some_and(|e| e.listening) {
            sub.conn.listen(&sub.name).await?;
            if let Some(e) = self.map().get_mut(&sub.name) {
                e.listening = true;
            }
        }
        let mut sub = sub;
        sub.mark();
        Ok(sub)
    }
}

/// One waiter's interest in a channel, kept by its acquire's attempt; dropping the last one unlistens.
#[derive(Debug)]
pub(crate) struct Subscription<L: Listen> {
    channels: Arc<Channels>,
    conn: L,
    name: String,
    chan: Arc<Channel>,
    seen: u64,
}

impl<L: Listen> Subscription<L> {
    /// Notes the notifications seen so far: call it right before an attempt.
    pub(crate) fn mark(&mut self) {
        self.seen = self.chan.generation.load(Ordering::SeqCst);
    }

    /// Resolves on the first notification since [`mark`](Self::mark), or at `until`.
    pub(crate) async fn wait_until(&self, until: Instant) {
        let notified = self.chan.notify.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        if self.chan.generation.load(Ordering::SeqCst) != self.seen {
            return;
        }
        let _ = tokio::time::timeout_at(until, notified).await;
    }
}

/// Waits on `waiter`'s channel for a notification, or until `until`. A waiter not listening yet (or whose connection
/// died) subscribes first, then looks once, as a release since the attempt notified no one it could hear: `free`
/// says whether the lock is free now.
pub(crate) async fn wait_notified<L: Listen>(
    waiter: &mut Option<Subscription<L>>,
    until: Instant,
    subscribe: impl Future<Output = Result<Subscription<L>>>,
    free: impl Future<Output = Result<bool>>,
) -> Result<()> {
    if !waiter.as_ref().is_some_and(|sub| sub.conn.is_live()) {
        *waiter = None;
        *waiter = Some(subscribe.await?);
        if free.await? {
            return Ok(());
        }
    }
    if let Some(sub) = waiter {
        sub.wait_until(until).await;
    }
    Ok(())
}

impl<L: Listen> Drop for Subscription<L> {
    fn drop(&mut self) {
        let last = {
            let mut map = self.channels.map();
            let left = map.get_mut(&self.name).map(|e| {
                e.waiters -= 1;
                e.waiters
            });
            if left == Some(0) {
                map.remove(&self.name);
            }
            left == Some(0)
        };
        let Ok(handle) = tokio::runtime::Handle::try_current() else { return };
        if !last {
            return;
        }
        let (channels, conn, name) = (self.channels.clone(), self.conn.clone(), std::mem::take(&mut self.name));
        handle.spawn(async move {
            let _order = channels.order.lock().await;
            if !channels.map().contains_key(&name) {
                conn.unlisten(&name).await;
            }
        });
    }
}
