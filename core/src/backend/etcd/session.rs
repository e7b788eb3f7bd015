//! Liveness: one etcd lease per client and TTL (etcd's `concurrency.KeptLease`), kept alive by a KeepAlive stream
//! while the client lives. Every lock key of that TTL is attached to it, so an acquire never pays for a lease grant
//! once the lease exists, and a crashed process frees its locks within the TTL.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use tokio::sync::{Mutex, Notify, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::epoch::{self, Epoch};
use super::rpc::{EtcdError, KeepAlive, Rpc, describe};
use crate::backend::Backoff;
use fencelock_proto::etcdserverpb::LeaseKeepAliveRequest;

/// What the keepalive task reports and listens to.
#[derive(Debug)]
struct Beat {
    /// Send time of the newest keepalive the server acknowledged; `None` once the lease is gone.
    acked: watch::Sender<Option<Instant>>,
    /// Asks the task for a keepalive now (a renewal wants proof the lease is alive).
    poke: Notify,
}

/// One granted lease and its keepalive task; dropping it stops the keepalives.
pub(super) struct KeptLease {
    pub(super) id: i64,
    /// The keyspace's epoch, read after the grant: the base of every token made on this lease (see `epoch.rs`).
    pub(super) epoch: Epoch,
    beat: Arc<Beat>,
    task: JoinHandle<()>,
}

impl fmt::Debug for KeptLease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeptLease").field("id", &format_args!("{:x}", self.id)).finish_non_exhaustive()
    }
}

impl Drop for KeptLease {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// How a renewal's keepalive came out.
pub(super) enum Refresh {
    /// The server acknowledged a keepalive sent after the renewal began.
    Alive,
    /// The lease expired or was revoked: every key on it is gone.
    Gone,
    /// No acknowledgement in time.
    Silent,
}

impl KeptLease {
    /// Whether the server has reported the lease gone.
    pub(super) fn is_gone(&self) -> bool {
        self.beat.acked.borrow().is_none()
    }

    /// Sends a keepalive now and waits for its acknowledgement, up to `timeout`. Concurrent callers share the
    /// keepalives: each waits for one sent after it asked.
    pub(super) async fn refresh(&self, timeout: Duration) -> Refresh {
        let asked = Instant::now();
        let mut rx = self.beat.acked.subscribe();
        self.beat.poke.notify_one();
        match tokio::time::timeout(timeout, rx.wait_for(|a| a.is_none_or(|t| t >= asked))).await {
            Ok(Ok(seen)) if seen.is_some() => Refresh::Alive,
            Ok(_) => Refresh::Gone,
            Err(_) => Refresh::Silent,
        }
    }
}

/// The sessions of one client, by TTL in whole seconds.
pub(super) struct KeptLeases {
    rpc: Arc<Rpc>,
    // An async mutex: two first acquires with the same TTL must not both grant a lease.
    map: Mutex<HashMap<i64, Arc<KeptLease>>>,
}

impl fmt::Debug for KeptLeases {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeptLeases").finish_non_exhaustive()
    }
}

/// etcd leases count whole seconds; round up so a lease never lives shorter than asked.
fn ttl_secs(ttl: Duration) -> i64 {
    (ttl.as_millis().div_ceil(1000) as i64).max(1)
}

impl KeptLeases {
    pub(super) fn new(rpc: Arc<Rpc>) -> Self {
        KeptLeases { rpc, map: Mutex::default() }
    }

    /// The live session for `ttl`, granting a lease and starting its keepalives if there is none.
    pub(super) async fn for_ttl(&self, ttl: Duration) -> Result<Arc<KeptLease>, EtcdError> {
        let secs = ttl_secs(ttl);
        let mut map = self.map.lock().await;
        if let Some(s) = map.get(&secs).filter(|s| !s.is_gone()) {
            return Ok(s.clone());
        }
        let sent = Instant::now();
        let granted = self.rpc.grant(secs).await?;
        // After the grant: a lease does not outlive a loss of the data, so the epoch read is of the lease's life.
        let epoch = epoch::ensure(&self.rpc).await?;
        // The server may raise a TTL below its minimum; keepalives follow what it granted.
        let period = Duration::from_secs(granted.ttl.max(1) as u64) / 3;
        let beat = Arc::new(Beat { acked: watch::Sender::new(Some(sent)), poke: Notify::new() });
        let task = tokio::spawn(keep_alive(self.rpc.clone(), granted.id, period, beat.clone()));
        let session = Arc::new(KeptLease { id: granted.id, epoch, beat, task });
        map.insert(secs, session.clone());
        Ok(session)
    }

    /// The session whose lease is `id`, if this client still keeps it alive.
    pub(super) async fn by_id(&self, id: i64) -> Option<Arc<KeptLease>> {
        self.map.lock().await.values().find(|s| s.id == id).cloned()
    }

    /// Forgets a lease the server no longer knows, so the next acquire grants a fresh one.
    pub(super) async fn forget(&self, id: i64) {
        self.map.lock().await.retain(|_, s| s.id != id);
    }

    /// Stops every keepalive and revokes the leases, deleting their keys at once rather than after the TTL.
    pub(super) async fn revoke_all(&self) {
        let sessions: Vec<_> = self.map.lock().await.drain().map(|(_, s)| s).collect();
        for s in sessions {
            s.task.abort();
            if let Err(e) = self.rpc.revoke(s.id).await {
                tracing::debug!(lease = %format_args!("{:x}", s.id), error = %describe(&e), "lease revoke failed; it expires after its TTL");
            }
        }
    }
}

/// Keeps lease `id` alive: a keepalive every `period` (a third of the TTL) or when poked, reopening the stream
/// after errors, until the server says the lease is gone or a TTL passed since the last acknowledgement (by then the
/// server has expired it). The lease is cluster-wide, so a keepalive through any member keeps it: a broken stream
/// demotes its endpoint and reopens on the next.
async fn keep_alive(rpc: Arc<Rpc>, id: i64, period: Duration, beat: Arc<Beat>) {
    let retry = (period / 10).clamp(Duration::from_millis(50), Duration::from_secs(1));
    loop {
        let expired_at = beat.acked.borrow().unwrap_or_else(Instant::now) + period * 3;
        let Some((endpoint, stream, sent)) = open_stream(&rpc, id, Backoff::new(retry, retry, expired_at)).await else {
            break;
        };
        // Opening the stream sent one keepalive and consumed its acknowledgement.
        beat.acked.send_replace(Some(sent));
        match beat_on(stream, id, sent + period, period, &beat).await {
            Ended::LeaseGone => break,
            Ended::Broken => rpc.demote(endpoint),
        }
    }
    beat.acked.send_replace(None);
}

/// How one keepalive stream ended.
enum Ended {
    /// The server answered that the lease is gone.
    LeaseGone,
    /// The stream broke; another can be opened.
    Broken,
}

/// A keepalive stream for lease `id`, its endpoint and when it was asked for, retrying at `backoff`'s pace while
/// opening fails; `None` once the server says the lease is gone, or `backoff` gives up (the lease has expired).
async fn open_stream(rpc: &Rpc, id: i64, mut backoff: Backoff) -> Option<(usize, KeepAlive, Instant)> {
    loop {
        let sent = Instant::now();
        match rpc.keep_alive(id).await {
            Ok((endpoint, Some(stream))) => return Some((endpoint, stream, sent)),
            Ok((_, None)) => return None,
            Err(e) => {
                tracing::debug!(lease = %format_args!("{id:x}"), error = %describe(&e), "keepalive stream failed; reopening");
                if !backoff.wait().await {
                    tracing::debug!(lease = %format_args!("{id:x}"), "no keepalive answered within the TTL; the lease is gone");
                    return None;
                }
            }
        }
    }
}

/// Sends a keepalive at `next` and every `period` after, or when poked, and reports each acknowledgement's send
/// time, until the stream ends.
async fn beat_on(stream: KeepAlive, id: i64, mut next: Instant, period: Duration, beat: &Beat) -> Ended {
    let KeepAlive { mut send, mut replies } = stream;
    let mut unanswered = VecDeque::new();
    loop {
        tokio::select! {
            _ = tokio::time::sleep_until(next) => {}
            _ = beat.poke.notified() => {}
            reply = replies.next() => match reply {
                Some(Ok(r)) if r.ttl > 0 => {
                    if let Some(t) = unanswered.pop_front() {
                        beat.acked.send_replace(Some(t));
                    }
                    continue;
                }
                Some(Ok(_)) => return Ended::LeaseGone,
                None | Some(Err(_)) => return Ended::Broken,
            },
        }
        let now = Instant::now();
        // A full channel holds a keepalive not yet sent: the poke or beat is already on its way.
        match send.try_send(LeaseKeepAliveRequest { id }) {
            Ok(()) => unanswered.push_back(now),
            Err(e) if e.is_full() => {}
            Err(_) => return Ended::Broken,
        }
        next = now + period;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::etcd::rpc::Settings;

    // With every endpoint refusing, the keepalive task must give the lease up once a TTL passed since the last
    // acknowledgement (the server has expired it by then), rather than retry until the client closes.
    #[tokio::test]
    async fn keepalives_stop_once_the_lease_must_have_expired() {
        let refused = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", refused.local_addr().unwrap());
        drop(refused); // nothing listens there now: every connect is refused at once
        let ms = Duration::from_millis;
        let settings = Settings { connect_timeout: ms(200), request_timeout: ms(200), user: None, tls: None };
        let rpc = Arc::new(Rpc::new(vec![url], settings).unwrap());
        let beat = Arc::new(Beat { acked: watch::Sender::new(Some(Instant::now())), poke: Notify::new() });
        let period = ms(100); // a 300 ms lease
        let ended = tokio::time::timeout(Duration::from_secs(10), keep_alive(rpc, 7, period, beat.clone())).await;
        assert!(ended.is_ok(), "the keepalive task still retried 10 s after a 300 ms lease's last acknowledgement");
        assert!(beat.acked.borrow().is_none(), "the kept lease reads as gone");
    }
}
