//! The fair, wake-one waiter queue on Redis, in Redisson RFairLock's layout (see [`scripts`] for the keys and why
//! deadlines use the server's clock). A fair acquire takes the lock only when nobody is queued ahead; a waiter
//! queues once, on its first wait, and listens on its own channel, which a release publishes to only when it is the
//! head. It listens on the lock's shared channel too, where Redisson RLock and free-for-all releases announce
//! themselves (those wake every waiter, as they always did).
//!
//! Both orders share the lock hash, so fair and free-for-all acquires of one name exclude each other, as do Redisson
//! RLock and RFairLock clients. A free-for-all acquire ignores the queue (Redisson's RLock does too), and while the
//! queue is not empty, releases wake its head rather than the free-for-all's waiters, which then wake by their
//! bound, the holder's TTL.
//!
//! The attempt's drop leaves the queue (see the cancel protocol in `backend/mod.rs`): an attempt that queued, or
//! whose request is in doubt, removes its entry (and, in doubt, the record it may have taken, before the next call
//! of this client on the name), and wakes the next head if the lock is free.

mod scripts;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use redis::Script;
use tokio::time::Instant;

use super::{Deployment, RedisLock};
use crate::backend::waiters::Subscription;
use crate::backend::{AcquireRequest, Attempt, Busy, Doubt, Pending, Undo, ttl_ms};
use crate::error::{Error, Result};

pub(super) use scripts::release as release_lua;

/// Whether a URL that says nothing queues waiters fairly. Measured: the fair scripts cost the uncontended cycle
/// no round trip and no measurable time (README, bench figure 1), and they hand off in fewer round trips.
pub(super) const DEFAULT: bool = true;

/// Takes `fair=true|false` (also `1|0`) out of a URL's decoded query pairs: `None` if absent. `shown` is the URL
/// without secrets, for messages.
pub(crate) fn take(pairs: &mut Vec<(String, String)>, shown: &str) -> Result<Option<bool>> {
    let mut fair = None;
    let mut error = None;
    pairs.retain(|(name, value)| {
        if name != "fair" {
            return true;
        }
        let this = match value.as_str() {
            "true" | "1" => Some(true),
            "false" | "0" => Some(false),
            _ => None,
        };
        match (this, fair) {
            (None, _) => error = Some(format!("fair={value:?} is neither true nor false")),
            (Some(v), Some(was)) if v != was => error = Some("fair= is given twice, differently".to_string()),
            (Some(v), _) => fair = Some(v),
        }
        false
    });
    match error {
        Some(why) => Err(Error::invalid(format!("URL {shown:?}: {why}"))),
        None => Ok(fair),
    }
}

/// The fair queue's scripts for one deployment's publish command.
#[derive(Debug)]
pub(super) struct Scripts {
    acquire: Script,
    leave: Script,
}

impl Scripts {
    pub(super) fn publishing_with(publish: &str) -> Self {
        Scripts { acquire: Script::new(&scripts::acquire()), leave: Script::new(&scripts::leave(publish)) }
    }
}

/// The queue's keys of lock `name` on this deployment: Redisson RFairLock's list and timeout zset, and our
/// deadline zset (see [`scripts`]).
pub(super) fn queue_keys<D: Deployment>(name: &str) -> [String; 3] {
    [
        D::prefixed("redisson_lock_queue", name),
        D::prefixed("redisson_lock_timeout", name),
        D::prefixed("fencelock_queue_deadline", name),
    ]
}

/// The five keys every queue script takes: lock, shared channel, then the queue's (the acquire passes the token
/// counter instead of the channel).
fn keys<'s, D: Deployment>(script: &'s Script, name: &str, second: String) -> redis::ScriptInvocation<'s> {
    let mut call = script.key(name);
    call.key(second);
    for key in queue_keys::<D>(name) {
        call.key(key);
    }
    call
}

/// The shortest queue place: below it, a waiter with a tiny TTL would refresh in a busy loop.
const MIN_PLACE: Duration = Duration::from_secs(1);

/// How long a waiter's queue place lives without a refresh: its own TTL (so a crashed waiter costs what a crashed
/// holder does), at least [`MIN_PLACE`]; it refreshes it every third of that by attempting again.
fn place(req: &AcquireRequest) -> Duration {
    req.ttl.max(MIN_PLACE)
}

/// A waiter's subscriptions: its own channel, then the lock's shared one.
type Subs<L> = (Subscription<L>, Subscription<L>);

/// One fair acquire: queued from its first wait until it is granted or dropped.
pub(super) struct FairAttempt<D: Deployment> {
    lock: Arc<RedisLock<D>>,
    req: AcquireRequest,
    /// Its own channel and the lock's shared one, once it waits.
    subs: Option<Subs<D::PubSub>>,
    /// Whether the server may hold a queue entry of this attempt.
    queued: bool,
    doubt: Doubt,
    undo: Undo,
}

impl<D: Deployment> FairAttempt<D> {
    pub(super) fn begin(lock: Arc<RedisLock<D>>, req: AcquireRequest, undo: Undo) -> Box<dyn Pending> {
        Box::new(FairAttempt { lock, req, subs: None, queued: false, doubt: Doubt::default(), undo })
    }

    /// This waiter's own channel: Redisson's `<shared channel>:<uuid>:<thread id>`, with our holder id.
    fn own_channel(&self) -> String {
        format!("{}:{}", D::channel(&self.req.name), self.req.holder)
    }

    async fn subscribe(&self) -> Result<Subs<D::PubSub>> {
        let lock = &self.lock;
        let pubsub = lock.pubsub().await?;
        let (own, shared) = futures::future::join(
            lock.channels.subscribe(pubsub, self.own_channel()),
            lock.channels.subscribe(pubsub, D::channel(&self.req.name)),
        )
        .await;
        Ok((own.map_err(|e| lock.err(e))?, shared.map_err(|e| lock.err(e))?))
    }
}

#[async_trait]
impl<D: Deployment> Pending for FairAttempt<D> {
    async fn try_acquire(&mut self) -> Result<Attempt> {
        D::check_name(&self.req.name)?;
        // A waiter queues (and refreshes its place) from its first wait on; a try_lock never queues.
        let enqueue = self.subs.is_some();
        if let Some((own, shared)) = &mut self.subs {
            own.mark();
            shared.mark();
        }
        let place = place(&self.req);
        let (name, holder) = (&self.req.name, &self.req.holder);
        let mut keys = vec![name.clone(), D::token_key(name)];
        keys.extend(queue_keys::<D>(name));
        let place_ms = if enqueue { ttl_ms(place) } else { 0 };
        let args = [ttl_ms(self.req.ttl).to_string(), holder.clone(), place_ms.to_string()].map(String::into_bytes);
        self.queued |= enqueue;
        let acquire = self.lock.acquire_synced(&self.req, &self.lock.scripts.fair.acquire, &keys, &args);
        let reply = self.doubt.clone().settle(acquire).await?;
        let (ok, n, at) = match reply[..] {
            [ok, n] => (ok, n, -1),
            [ok, n, at] => (ok, n, at),
            _ => return Err(Error::internal(format!("{}: unexpected reply {reply:?}", self.lock.url))),
        };
        if ok == 1 {
            self.queued = false;
            let req = &self.req;
            return Ok(Attempt::Acquired(req.grant(n as u64, None)));
        }
        tracing::trace!(lock = %self.req.name, place = at, "queued");
        // Wait no longer than the holder (or the head, while the lock is free) can keep it, nor past a refresh.
        let refresh = place / 3;
        let holder_ttl = (n >= 0).then(|| Duration::from_millis(n as u64).min(refresh)).or(Some(refresh));
        Ok(Attempt::Busy(Busy { holder_ttl }))
    }

    async fn wait(&mut self, busy: &Busy, deadline: Option<Instant>) -> Result<()> {
        match &self.subs {
            // Queues at the next attempt: look again at once, as a release may have gone to nobody meanwhile.
            None => self.subs = Some(self.subscribe().await?),
            Some((own, shared)) => {
                let until = busy.wait_until(deadline);
                futures::future::select(Box::pin(own.wait_until(until)), Box::pin(shared.wait_until(until))).await;
            }
        }
        Ok(())
    }
}

impl<D: Deployment> Drop for FairAttempt<D> {
    fn drop(&mut self) {
        let doubt = self.doubt.is_set();
        if !self.queued && !doubt {
            return;
        }
        let (lock, req) = (self.lock.clone(), self.req.clone());
        let leave = async move {
            let mut leave = keys::<D>(&lock.scripts.fair.leave, &req.name, D::channel(&req.name));
            leave.arg(&req.holder).arg(u8::from(doubt));
            lock.invoke::<i64>(&leave).await.map(drop)
        };
        if doubt {
            // It may have taken the record, which the next call of the same owner would share: it waits for this.
            self.undo.abandon(&self.req.name, leave);
            return;
        }
        // Only a queue entry: the next call need not wait for it (a try_lock right after a timed-out lock would
        // find its own local place taken). A later call of the same owner that queues before this lands loses its
        // place and queues again at its next refresh; nothing else depends on the order.
        let name = self.req.name.clone();
        self.undo.entry(async move {
            if let Err(e) = leave.await {
                tracing::warn!(lock = %name, error = %e, "could not leave the fair queue; the entry expires with its deadline");
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;

    fn pairs(q: &str) -> Vec<(String, String)> {
        url::form_urlencoded::parse(q.as_bytes()).into_owned().collect()
    }

    #[test]
    fn the_url_parameter_is_taken_out() {
        for (q, want, left) in [
            ("fair=true&ca=x", Some(true), 1),
            ("fair=0", Some(false), 0),
            ("fair=1&fair=true", Some(true), 0),
            ("protocol=resp3", None, 1),
        ] {
            let mut p = pairs(q);
            assert_eq!(take(&mut p, "redis://h").unwrap(), want, "{q}");
            assert_eq!(p.len(), left, "{q}");
        }
        for (q, says) in [("fair=yes", "fair=\"yes\" is neither"), ("fair=true&fair=false", "twice")] {
            let err = take(&mut pairs(q), "redis://h").unwrap_err();
            assert_eq!(err.kind(), ErrorKind::InvalidArgument);
            assert!(err.message().contains(says) && err.message().contains("redis://h"), "{err}");
        }
    }
}
