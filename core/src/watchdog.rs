//! One renewal loop per client for every backend. Holds are kept in a schedule ordered by due time, so 10,000
//! leases cost one sleeping task, not 10,000 timers; due renewals run concurrently.
//!
//! A hold with the watchdog on is renewed every ttl/3. It is lost — the signal fires once and renewals stop — when a
//! renewal finds the record gone, or when no renewal succeeds before its validity (ttl − elapsed − drift) ends.
//! A hold with the watchdog off is only watched for the end of its validity; on a session-bound backend its record
//! is then deleted, as a TTL-bound backend's server would have expired it.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, Weak};

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::error::ErrorKind;
use crate::lease::{Due, Hold};
use crate::metrics::Loss;

/// The sending side of a client's watchdog task; the task ends when the client and all its leases are gone.
#[derive(Debug, Default)]
pub(crate) struct Watchdog {
    tx: Mutex<Option<mpsc::UnboundedSender<Weak<Hold>>>>,
}

impl Watchdog {
    /// Starts watching `hold`; its first renewal is due ttl/3 from now.
    pub(crate) fn watch(&self, hold: &Arc<Hold>) {
        let mut tx = self.tx.lock().unwrap_or_else(|p| p.into_inner());
        let weak = Arc::downgrade(hold);
        // The task may be gone with a runtime that shut down; start a new one on the current runtime.
        let weak = match tx.as_ref() {
            Some(t) => match t.send(weak) {
                Ok(()) => return,
                Err(mpsc::error::SendError(w)) => w,
            },
            None => weak,
        };
        let (new_tx, rx) = mpsc::unbounded_channel();
        let _ = new_tx.send(weak);
        tokio::spawn(run(rx));
        *tx = Some(new_tx);
    }
}

fn first_due(hold: &Hold) -> Option<Instant> {
    match hold.next_due() {
        Due::Renew => Some(Instant::now() + hold.renew_every()),
        Due::ExpiresAt(t) => Some(t),
        Due::Done => None,
    }
}

async fn run(mut rx: mpsc::UnboundedReceiver<Weak<Hold>>) {
    let mut schedule: BTreeMap<(Instant, u64), Weak<Hold>> = BTreeMap::new();
    let mut seq = 0u64;
    let mut inflight = FuturesUnordered::new();
    let mut open = true;
    loop {
        let next = schedule.first_key_value().map(|((t, _), _)| *t);
        tokio::select! {
            msg = rx.recv(), if open => match msg {
                Some(weak) => {
                    if let Some(due) = weak.upgrade().as_deref().and_then(first_due) {
                        seq += 1;
                        schedule.insert((due, seq), weak);
                    }
                }
                None => open = false,
            },
            _ = tokio::time::sleep_until(next.unwrap_or_else(Instant::now)), if next.is_some() => {
                let now = Instant::now();
                while let Some(entry) = schedule.first_entry() {
                    if entry.key().0 > now {
                        break;
                    }
                    let weak = entry.remove();
                    if let Some(hold) = weak.upgrade() {
                        inflight.push(async move { (tick(&hold).await, weak) });
                    }
                }
            },
            Some((due, weak)) = inflight.next(), if !inflight.is_empty() => {
                if let Some(due) = due {
                    seq += 1;
                    schedule.insert((due, seq), weak);
                }
            },
            else => break,
        }
    }
}

/// One step for one hold: renew it (or check its expiry) and say when it is due again.
async fn tick(hold: &Arc<Hold>) -> Option<Instant> {
    let valid_until = hold.valid_until();
    match hold.next_due() {
        Due::Done => None,
        Due::ExpiresAt(t) if Instant::now() >= t => {
            hold.check_expiry();
            hold.expire_record().await;
            None
        }
        Due::ExpiresAt(t) => Some(t),
        Due::Renew => match tokio::time::timeout_at(valid_until, hold.renew(None)).await {
            Ok(Ok(())) => Some(Instant::now() + hold.renew_every()),
            Ok(Err(e)) if matches!(e.kind(), ErrorKind::LockLost | ErrorKind::NotHeld | ErrorKind::Closed) => None,
            Ok(Err(e)) if Instant::now() < valid_until => {
                // A transient failure: try again soon, but never past validity.
                tracing::debug!(lock = %hold.grant.name, error = %e, "renewal failed; retrying");
                Some((Instant::now() + hold.retry_every()).min(valid_until))
            }
            Ok(Err(e)) => {
                hold.mark_lost(Loss::Unreachable, format!("no renewal succeeded within the lease's validity: {e}"));
                None
            }
            Err(_) => {
                hold.mark_lost(Loss::Unreachable, "no renewal succeeded within the lease's validity");
                None
            }
        },
    }
}
