//! One Redlock acquire: a vote of every instance, the count, and the wait for release messages between votes.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use futures::stream::{FuturesUnordered, StreamExt};
use tokio::time::Instant;

use super::round::{Answers, Count, gather};
use super::{RedlockBackend, instance};
use crate::backend::record::Records;
use crate::backend::redis::{PubSub, RedisBackend, Waiter};
use crate::backend::{AcquireRequest, Attempt, Busy, Doubt, Pending, Undo, poll_backoff};
use crate::error::{Error, Result};

/// How long a waiter sleeps when the holder's records have no known expiry before it looks again.
const UNKNOWN_TTL_RECHECK: Duration = Duration::from_millis(100);

/// What one acquire keeps between votes: each instance's subscription, which instances another holder's record was
/// seen on (the only ones whose release messages mean something to us), and whether the last vote split.
pub(super) struct RedlockAttempt {
    backend: Arc<RedlockBackend>,
    req: AcquireRequest,
    subscriptions: Vec<Waiter<PubSub>>,
    held_elsewhere: Vec<bool>,
    split: bool,
    doubt: Doubt,
    undo: Undo,
}

/// What one vote came back with, as far as it was counted.
#[derive(Default)]
struct Votes {
    tokens: Vec<u64>,
    holder_ttls: Vec<Option<Duration>>,
    errors: Vec<Error>,
    /// Per instance: whether our record may be there (it granted, failed, or has not answered yet).
    maybe_ours: Vec<bool>,
    /// Instances whose vote was still out.
    pending: usize,
    /// Per instance: whether the vote was sent (so far).
    sent: Vec<Arc<AtomicBool>>,
}

impl RedlockAttempt {
    pub(super) fn new(backend: Arc<RedlockBackend>, req: AcquireRequest, undo: Undo) -> Self {
        let n = backend.instances.len();
        RedlockAttempt {
            backend,
            req,
            subscriptions: (0..n).map(|_| Waiter::default()).collect(),
            held_elsewhere: vec![false; n],
            split: false,
            doubt: Doubt::default(),
            undo,
        }
    }

    /// Asks every instance at once for the record, until the outcome is decided, noting where another holder's
    /// record was seen.
    async fn vote(&mut self) -> Votes {
        let mut votes_sent = Vec::new();
        // Remember which release messages were seen already, so `wait` returns at once for one that lands meanwhile.
        for waiter in &mut self.subscriptions {
            waiter.mark();
        }
        let mut requests = Vec::new();
        for instance in &self.backend.instances {
            // Set when the request is sent: a vote given up before its turn left nothing to clean up.
            let (req, sent) = (self.req.clone(), Arc::new(AtomicBool::new(false)));
            votes_sent.push(sent.clone());
            let take = move |b: Arc<RedisBackend>| {
                sent.store(true, Ordering::SeqCst);
                async move { b.take(&req, &mut Waiter::default()).await }
            };
            requests.push(instance.call(Some(&self.req.name), take));
        }
        let quorum = self.backend.quorum;
        let answers: Answers<Attempt> = gather(requests, |a| quorum.vote_decided(Count::of(a, is_busy))).await;
        let mut votes = Votes { sent: votes_sent, ..Votes::default() };
        for (answer, elsewhere) in answers.into_iter().zip(self.held_elsewhere.iter_mut()) {
            // A busy reply is the acquire script's own answer: it took nothing; nor did a request never sent.
            *elsewhere = matches!(answer, Some(Ok(Attempt::Busy(_))));
            votes.maybe_ours.push(!*elsewhere && !matches!(&answer, Some(Err(e)) if instance::not_sent(e)));
            match answer {
                Some(Ok(Attempt::Acquired(grant))) => votes.tokens.push(grant.token),
                Some(Ok(Attempt::Busy(busy))) => votes.holder_ttls.push(busy.holder_ttl),
                Some(Err(e)) => votes.errors.push(e),
                None => votes.pending += 1,
            }
        }
        votes
    }

    /// The lock if a majority granted it; otherwise our records go (they would block others until they expire),
    /// in the background, and the attempt is busy if a majority answered.
    async fn count(&self, votes: Votes, started: Instant) -> Result<Attempt> {
        let (backend, req) = (&self.backend, &self.req);
        if votes.tokens.len() >= backend.quorum.majority {
            // Late grants stay: they are ours, renewed and released with the rest (module docs).
            let sealed = backend.seal(req, &votes.tokens, started).await;
            if sealed.is_err() {
                backend.delete_records(req, &votes.maybe_ours, Some(&votes.sent));
            }
            return sealed.map(Attempt::Acquired);
        }
        backend.delete_records(req, &votes.maybe_ours, Some(&votes.sent));
        let answered = votes.tokens.len() + votes.holder_ttls.len();
        if answered < backend.quorum.majority {
            let count = Count {
                done: votes.tokens.len(),
                refused: votes.holder_ttls.len(),
                failed: votes.errors.len(),
                pending: votes.pending,
            };
            return Err(backend.no_majority("granted", count, &votes.errors));
        }
        Ok(Attempt::Busy(Busy { holder_ttl: backend.free_in(votes.holder_ttls, answered) }))
    }

    /// One vote and its count.
    async fn attempt(&mut self) -> Result<Attempt> {
        let started = Instant::now();
        let votes = self.vote().await;
        self.split = !votes.tokens.is_empty();
        self.count(votes, started).await
    }

    /// The connected instances that hold another's record, with their subscriptions: where we were granted, our own
    /// clean-up sent a release message.
    fn listeners(&mut self) -> Vec<(Arc<RedisBackend>, &mut Waiter<PubSub>)> {
        self.backend
            .instances
            .iter()
            .zip(self.subscriptions.iter_mut())
            .zip(&self.held_elsewhere)
            .filter(|(_, elsewhere)| **elsewhere)
            .filter_map(|((instance, sub), _)| Some((instance.connected()?, sub)))
            .collect()
    }
}

#[async_trait]
impl Pending for RedlockAttempt {
    /// A failed count released everywhere it could; what it could not reach, the drop deletes again.
    async fn try_acquire(&mut self) -> Result<Attempt> {
        self.doubt.clone().settle(self.attempt()).await
    }

    async fn wait(&mut self, busy: &Busy, deadline: Option<Instant>) -> Result<()> {
        let (req, split) = (self.req.clone(), self.split);
        let listeners = self.listeners();
        if listeners.is_empty() {
            poll_backoff(busy, deadline).await;
            return Ok(());
        }
        first_release(listeners, &req, busy, deadline).await;
        if split {
            // Contenders of a split vote wake together on each other's clean-up; Redlock's random delay keeps them
            // from splitting again.
            poll_backoff(&Busy::default(), deadline).await;
        }
        Ok(())
    }
}

/// Resolves on the first release message one of `listeners` hears, once enough of the holder's records have
/// expired to free a majority (`busy`), or at `deadline`.
async fn first_release(
    listeners: Vec<(Arc<RedisBackend>, &mut Waiter<PubSub>)>,
    req: &AcquireRequest,
    busy: &Busy,
    deadline: Option<Instant>,
) {
    let mut until = Instant::now() + busy.holder_ttl.unwrap_or(UNKNOWN_TTL_RECHECK);
    if let Some(d) = deadline {
        until = until.min(d);
    }
    let mut woken: FuturesUnordered<_> = listeners
        .into_iter()
        .map(|(b, sub)| async move {
            // An instance that fails here cannot wake us; the others, or the bound, will.
            if b.wait_free(req, busy, sub, deadline).await.is_err() {
                std::future::pending::<()>().await;
            }
        })
        .collect();
    let _ = tokio::time::timeout_at(until, woken.next()).await;
}

/// A busy reply counts as a vote's refusal.
fn is_busy(answer: &Result<Attempt>) -> bool {
    matches!(answer, Ok(Attempt::Busy(_)))
}

impl Drop for RedlockAttempt {
    fn drop(&mut self) {
        if !self.doubt.is_set() {
            return;
        }
        let (backend, req) = (self.backend.clone(), self.req.clone());
        self.undo.abandon(&self.req.name, async move { backend.abandon(&req).await });
    }
}
