//! `redlock://h1:6379,h2:6379,h3:6379[,…]`: the Redlock algorithm over N independent Redis instances. Each instance
//! holds the same records as `redis://` (Redisson RLock layout) and runs the single-Redis scripts through a
//! [`RedisBackend`] of its own; this file adds only the majority rules, the validity check and the token round.
//!
//! Every round goes to all instances at once and is over as soon as the answers still missing cannot change its
//! outcome (`round.rs`: the same outcome waiting for all would give). The slower instances finish in the background:
//! each request is a task of its own, and the next request on the same record of that instance runs after it
//! (`chain.rs`), so a release never overtakes the acquire it follows. Each instance gets a short timeout
//! (`instance_timeout_ms`, default 50 ms, never more than the client's request timeout); one that does not answer in
//! time, or loses its connection, is marked down, and until a probe in the background finds it back, requests to it
//! fail at once and count against their round (`instance.rs`): a dead instance costs its timeout once, not on every
//! request. Connections are made in the background, so `connect` succeeds while a minority is down.
//!
//! | operation | waits for | done when | otherwise |
//! |---|---|---|---|
//! | acquire | a majority granted; or, once that cannot happen, a majority answered or that cannot happen either | a majority granted within validity = ttl − elapsed − drift, and a majority's counter holds the token (raised where needed) | records deleted everywhere; `Busy` if a majority answered, else `Unavailable` |
//! | renew | a majority extended, too many refused for a majority, or neither can change | a majority extended the record | `LockLost` if too many found it gone for any majority to hold it, else `Unavailable` |
//! | release | as renew | a majority deleted our record | `NotHeld` if too many said it was not ours for a majority to have held it, else `Unavailable` |
//! | fence write, counter raise | as renew | a majority accepted the token | `Fenced` if too many refused for a majority to accept, else `Unavailable` |
//! | fence read | a majority answered | the highest token among them | `Unavailable` |
//! | inspect, force release | every instance, or its timeout: the holder a majority agrees on may be in the last answer | the holder a majority agrees on | `Unavailable` without a majority of answers |
//!
//! Why returning before the slower instances is safe:
//! - **A granted acquire.** Validity counts from before the vote, and every granting instance set its record's
//!   expiry after that, so ttl − elapsed − drift bounds the time a majority holds it whatever the others do. A late
//!   grant is our record on one more instance: the renewals extend it and the release deletes it (after it, by the
//!   chain), and until then it only tells other contenders, truly, that the lock is held. Its counter increment can
//!   only raise later tokens.
//! - **A failed acquire** (busy, no majority, validity spent, counter round failed) deletes its record on every
//!   instance that did not answer busy, the late ones included: each delete runs after that instance's vote, and a
//!   down instance's when it is back. The attempt does not wait for the deletes: its next vote on an instance runs
//!   after them, and another client's vote at worst finds our record on a minority, one refusal in a split vote.
//! - **Renew.** The lease is valid while a majority's records live; a late extension lengthens a minority's record,
//!   which gives no one else a majority and is deleted by the release.
//! - **Release.** Once a majority deleted our record no majority holds it; the rest are deleted in the background.
//!   A release that ends `Unavailable` is retried by the lease; the instances that deleted the record the first time,
//!   or kept the delete for their return, then say "not ours", and the retry counts that as theirs done (it is this
//!   lease's own delete), where a plain count would report `NotHeld` for a lease that was never lost.
//! - **Fenced write and read.** A write accepted by a majority is seen by every later read of a majority, since any
//!   two majorities share an instance; a write still under way to a minority is like a failed write (below).
//!
//! Waiters listen for release messages on every instance where another's record was seen, for at most the time
//! until enough of those records expire to free a majority; after a split vote they add Redlock's random delay.
//!
//! Like any quorum register without read repair, a fenced write that failed may still have reached a minority and be
//! seen by later reads; a write that succeeded is seen by every later read.
//!
//! URL: `redlock://[user:password@]host:port,host:port,…[/db][?instance_timeout_ms=N][&tls=true][&ca=…&cert=…&key=…]`,
//! at least three distinct instances. The credentials, database and TLS settings apply to every instance: one
//! `ca=` file may hold the roots of several CAs, and instances that differ in these belong to different
//! deployments, which a Redlock set should not mix. A Redis Cluster is `redis+cluster://`
//! (`super::redis_cluster`), not Redlock.

mod attempt;
mod chain;
mod config;
mod instance;
mod round;

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use futures::future::join_all;
use futures::stream::{FuturesUnordered, StreamExt};
use redis::Script;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use self::attempt::RedlockAttempt;
use self::config::parse;
use self::instance::Instance;
use self::round::{Answers, Count, Quorum, gather};
use super::record::Records;
use super::redis::{RedisBackend, token_key};
use super::{AcquireRequest, Backend, Capability, Grant, HoldKind, LockInfo, Pending, Undo, lock_lost, not_held};
use super::{drift, redact};
use crate::error::{Error, ErrorKind, Result};
use crate::options::ClientOptions;

/// Raises the fence counter to at least the token just granted; never lowers it.
/// KEYS: token counter. ARGV: token. Returns 1.
///
/// Why tokens never go backwards (DESIGN.md §3). Grant G1 returns token T1 only after a majority R1 of instances
/// holds a counter ≥ T1: the granting instances whose own token was T1, plus those this script reached (the round is
/// skipped when the former are a majority already, as they are in steady state). A later grant G2 is issued by a
/// majority M2, and T2 is the largest of M2's freshly incremented counters. Then T2 > T1 if either holds:
/// - instances keep their data: R1 and M2 intersect, and that instance increments a counter ≥ T1;
/// - server clocks do not step back: a counter lost with its data is re-seeded from the instance's clock in µs
///   (the acquire script), which exceeds every earlier token, since each token is at most a seed plus the grants
///   since, and grants come less than once per µs. With several instances this also needs their clocks roughly
///   in step, as NTP keeps them.
///
/// Without this round, an instance of M2 could hold only its own smaller token and T2 ≤ T1 would be possible.
/// Caveat: a Redisson RFencedLock client that is the first to touch a counter lost with its data restarts it at 1;
/// only fencelock seeds it.
const RAISE_COUNTER: &str = r"
local cur = tonumber(redis.call('get', KEYS[1]) or '0')
if cur < tonumber(ARGV[1]) then
  redis.call('set', KEYS[1], ARGV[1])
end
return 1
";

/// Opens a `redlock://` backend.
pub(crate) async fn connect(url: &str, opts: &ClientOptions) -> Result<Arc<dyn Backend>> {
    Ok(Arc::new(RedlockBackend::connect(url, opts).await?))
}

/// The Redlock backend.
#[derive(Debug)]
pub(crate) struct RedlockBackend {
    instances: Vec<Instance>,
    quorum: Quorum,
    raise: Script,
    url: String,
    /// Per (name, holder) whose release ended `Unavailable`: the instances that deleted the record then, or kept the
    /// delete for their return. The lease retries such a release, and those instances then truly say "not ours".
    releasing: Mutex<HashMap<(String, String), Vec<bool>>>,
}

/// Releases remembered for a retry, at most; past it they are forgotten (a retry then may report `NotHeld`).
const MAX_RELEASING: usize = 10_000;

/// A definite no from an instance: the record is not ours, or the token is stale.
fn refuses(e: &Error) -> bool {
    matches!(e.kind(), ErrorKind::LockLost | ErrorKind::NotHeld | ErrorKind::Fenced)
}

fn is_refusal<T>(answer: &Result<T>) -> bool {
    answer.as_ref().is_err_and(refuses)
}

impl RedlockBackend {
    async fn connect(url: &str, opts: &ClientOptions) -> Result<Self> {
        let config = parse(url)?;
        config::check_distinct(url, &config.hosts, opts.connect_timeout).await?;
        let timeout = config.instance_timeout.min(opts.request_timeout);
        let instance_opts = opts.clone().request_timeout(timeout);
        let backend = RedlockBackend {
            quorum: Quorum::of(config.instances.len()),
            instances: config
                .instances
                .into_iter()
                .map(|u| Instance::new(u, config.security.clone(), instance_opts.clone(), timeout))
                .collect(),
            raise: Script::new(RAISE_COUNTER),
            url: redact(url),
            releasing: Mutex::default(),
        };
        backend.await_majority(opts.connect_timeout).await?;
        Ok(backend)
    }

    /// Waits until a majority of instances is connected; `Unavailable` once that cannot happen or `limit` passes.
    async fn await_majority(&self, limit: Duration) -> Result<()> {
        let mut dials: FuturesUnordered<_> = self.instances.iter().map(Instance::connection).collect();
        let (mut up, mut errors) = (0, Vec::new());
        let count = async {
            while let Some(result) = dials.next().await {
                match result {
                    Ok(_) => up += 1,
                    Err(e) => errors.push(e),
                }
                if up >= self.quorum.majority || errors.len() > self.quorum.minority() {
                    break;
                }
            }
        };
        if tokio::time::timeout(limit, count).await.is_err() {
            errors.push(Error::unavailable(format!("the others did not connect within {limit:?}")));
        }
        match up >= self.quorum.majority {
            true => Ok(()),
            false => Err(self.no_majority("connected", Count { done: up, ..Count::default() }, &errors)),
        }
    }

    /// Sends `op` to every instance, after the earlier requests on `record` there if one is named, and gathers the
    /// answers until `decided`.
    async fn round<T, F, Fut>(&self, record: Option<&str>, op: F, decided: impl Fn(Count) -> bool) -> Answers<T>
    where
        T: Send + 'static,
        F: FnOnce(Arc<RedisBackend>) -> Fut + Clone + Send + 'static,
        Fut: Future<Output = Result<T>> + Send + 'static,
    {
        let requests = self.instances.iter().map(|i| i.call(record, op.clone())).collect();
        gather(requests, |answers| decided(Count::of(answers, is_refusal))).await
    }

    /// `Unavailable`, saying how many instances did what and what the others said; `InvalidArgument` instead when
    /// the instances that refused the configuration (a credential, a certificate) are enough to deny any majority,
    /// since no retry fixes that.
    fn no_majority(&self, did: &str, count: Count, errors: &[Error]) -> Error {
        let why: Vec<String> = errors.iter().map(ToString::to_string).collect();
        let misconfigured = errors.iter().filter(|e| e.kind() == ErrorKind::InvalidArgument).count();
        let kind = match misconfigured > self.quorum.minority() {
            true => ErrorKind::InvalidArgument,
            false => ErrorKind::Unavailable,
        };
        let waiting = match count.pending {
            0 => String::new(),
            n => format!(", {n} not answered yet"),
        };
        Error::new(
            kind,
            format!(
                "{}: {} of {} instances {did}, {} needed ({} refused, {} failed: {}{waiting})",
                self.url,
                count.done,
                self.quorum.instances,
                self.quorum.majority,
                count.refused,
                errors.len(),
                why.join("; ")
            ),
        )
    }

    /// The rule of renew, release and fenced writes: done if a majority did it; refused, with `refusal` made from
    /// the first refusal, once too many refused for any majority to have done it; else `Unavailable`.
    fn majority(&self, did: &str, answers: Answers<()>, refusal: impl FnOnce(Error) -> Error) -> Result<()> {
        let count = Count::of(&answers, is_refusal);
        let (refused, errors): (Vec<Error>, Vec<Error>) =
            answers.into_iter().flatten().filter_map(Result::err).partition(refuses);
        if count.done >= self.quorum.majority {
            Ok(())
        } else if let Some(first) = refused.into_iter().next().filter(|_| count.refused > self.quorum.minority()) {
            Err(refusal(first))
        } else {
            Err(self.no_majority(did, count, &errors))
        }
    }

    /// The answers of a round that only reads, if a majority gave one.
    fn majority_answers<T>(&self, did: &str, answers: Answers<T>) -> Result<Vec<T>> {
        let count = Count::of(&answers, |_| false);
        let (mut done, mut errors) = (Vec::new(), Vec::new());
        for answer in answers.into_iter().flatten() {
            match answer {
                Ok(a) => done.push(a),
                Err(e) => errors.push(e),
            }
        }
        if done.len() >= self.quorum.majority { Ok(done) } else { Err(self.no_majority(did, count, &errors)) }
    }

    /// Raises the counter of every instance to `token` (see [`RAISE_COUNTER`] for why); needs a majority.
    async fn raise_counters(&self, name: &str, token: u64) -> Result<()> {
        let (key, script) = (token_key(name), self.raise.clone());
        let raise = move |b: Arc<RedisBackend>| async move {
            let mut invocation = script.key(&key);
            invocation.arg(token);
            b.invoke::<i64>(&invocation).await.map(drop)
        };
        let answers = self.round(None, raise, |c| self.quorum.majority_decided(c)).await;
        self.majority("raised the token counter", answers, |e| e)
    }

    /// Turns a majority of grants into the lock: the token is their maximum, held by a counter on a majority (raised
    /// there if need be), and some validity must be left after both rounds.
    async fn seal(&self, req: &AcquireRequest, tokens: &[u64], started: Instant) -> Result<Grant> {
        let token = tokens.iter().copied().max().unwrap_or_default();
        if tokens.iter().filter(|&&t| t == token).count() < self.quorum.majority {
            self.raise_counters(&req.name, token).await?;
        }
        let validity = req.ttl.saturating_sub(started.elapsed()).saturating_sub(drift(req.ttl));
        if validity.is_zero() {
            return Err(Error::unavailable(format!(
                "{}: granted on {} of {} instances, but that took {:?} of the {:?} TTL",
                self.url,
                tokens.len(),
                self.quorum.instances,
                started.elapsed(),
                req.ttl
            )));
        }
        Ok(req.grant(token, None))
    }

    /// Deletes `req.holder`'s record on the instances `where_` says may have one, each after the requests on it
    /// there and a down one when it is back; the deletes go on in the background. With `sent`, an instance whose
    /// vote turns out never to have been sent is not asked.
    fn delete_records(
        &self,
        req: &AcquireRequest,
        where_: &[bool],
        sent: Option<&[Arc<AtomicBool>]>,
    ) -> Vec<JoinHandle<Result<()>>> {
        let mut deletes = Vec::new();
        for (i, instance) in self.instances.iter().enumerate().filter(|(i, _)| where_[*i]) {
            let (mine, sent) = (req.clone(), sent.map(|s| s[i].clone()));
            deletes.push(instance.cleanup(&req.name, move |b| {
                let (mine, sent) = (mine.clone(), sent.clone());
                async move {
                    // Runs after the vote (the chain), so by now `sent` is final.
                    if sent.is_some_and(|s| !s.load(Ordering::SeqCst)) {
                        return Ok(());
                    }
                    b.abandon(&mine).await
                }
            }));
        }
        deletes
    }

    /// Deletes `req.holder`'s record everywhere (an attempt in doubt); done once a majority answered.
    async fn abandon(&self, req: &AcquireRequest) -> Result<()> {
        let requests = self.delete_records(req, &vec![true; self.instances.len()], None);
        let answers = gather(requests, |a| self.quorum.read_decided(Count::of(a, |_| false))).await;
        self.majority_answers("answered", answers).map(drop)
    }

    /// How long until others' records have expired on enough of the `answered` instances for a majority to be
    /// free: the longest a missed wake-up can cost. `None` if an expiry that matters is unknown.
    fn free_in(&self, holder_ttls: Vec<Option<Duration>>, answered: usize) -> Option<Duration> {
        let must_expire = (holder_ttls.len() + self.quorum.majority).checked_sub(answered).filter(|&k| k > 0)?;
        let mut ttls: Vec<Duration> = holder_ttls.into_iter().map(|t| t.unwrap_or(Duration::MAX)).collect();
        ttls.sort();
        ttls.get(must_expire - 1).copied().filter(|&t| t != Duration::MAX)
    }

    /// The holder of the lock and when it frees: a holder needs records on a majority, and the lock is held until
    /// all but a minority of them expire.
    fn majority_holder(&self, infos: &[LockInfo]) -> (Option<String>, Option<Duration>) {
        let majority = self.quorum.majority;
        for candidate in infos.iter().filter_map(|i| i.holder.as_ref()) {
            let mut remaining: Vec<Option<Duration>> =
                infos.iter().filter(|i| i.holder.as_ref() == Some(candidate)).map(|i| i.remaining).collect();
            if remaining.len() >= majority {
                remaining.sort_by(|a, b| b.cmp(a));
                return (Some(candidate.clone()), remaining[majority - 1]);
            }
        }
        (None, None)
    }
}

/// Why Redlock has no semaphores: a mutex's majority argument — two majorities share an instance, which grants
/// one holder — does not carry over to counts.
const WHY_NO_SEMAPHORE: &str = "a semaphore's majority argument fails on Redlock: N independent instances cannot agree \
     on a count without a shared order (with 2 permits and 3 instances, three clients can each hold a permit on a \
     majority at once)";

/// Why Redlock has no read-write locks: the same, for a run of readers and its epoch token.
const WHY_NO_RW_LOCK: &str = "a read-write lock's majority argument fails on Redlock: N independent instances cannot \
     agree on who reads and on one epoch token per run of readers without a shared order";

#[async_trait]
impl Backend for RedlockBackend {
    fn capability(&self) -> Capability {
        Capability {
            fencing: true,
            native_wait: true,
            fair: false,
            session_bound: false,
            rw_lock: false,
            semaphore: false,
            election: true,
        }
    }

    fn describe(&self) -> &str {
        &self.url
    }

    fn why_unsupported(&self, kind: HoldKind) -> Option<&'static str> {
        match kind {
            HoldKind::Permit { .. } => Some(WHY_NO_SEMAPHORE),
            HoldKind::Read | HoldKind::Write => Some(WHY_NO_RW_LOCK),
            _ => None,
        }
    }

    fn begin(self: Arc<Self>, req: AcquireRequest, undo: Undo) -> Box<dyn Pending> {
        Box::new(RedlockAttempt::new(self, req, undo))
    }

    async fn renew(&self, grant: &Grant, ttl: Duration) -> Result<()> {
        let g = grant.clone();
        let renew = move |b: Arc<RedisBackend>| async move { b.renew(&g, ttl).await };
        let answers = self.round(Some(&grant.name), renew, |c| self.quorum.majority_decided(c)).await;
        self.majority("renewed", answers, |_| lock_lost(grant, &self.url))
    }

    async fn release(&self, grant: &Grant) -> Result<()> {
        let key = (grant.name.clone(), grant.holder.clone());
        let releasing = || self.releasing.lock().unwrap_or_else(|p| p.into_inner());
        let earlier = releasing().remove(&key).unwrap_or_else(|| vec![false; self.instances.len()]);
        let requests = self
            .instances
            .iter()
            .map(|instance| {
                let g = grant.clone();
                instance.cleanup(&grant.name, move |b| {
                    let g = g.clone();
                    async move { b.release(&g).await }
                })
            })
            .collect();
        // Our own earlier delete is no refusal.
        let ours = |answers: &mut Answers<()>| {
            for (answer, before) in answers.iter_mut().zip(&earlier) {
                if *before && matches!(answer, Some(Err(e)) if e.kind() == ErrorKind::NotHeld) {
                    *answer = Some(Ok(()));
                }
            }
        };
        let mut answers = gather(requests, |a| {
            let mut a = a.clone();
            ours(&mut a);
            self.quorum.majority_decided(Count::of(&a, is_refusal))
        })
        .await;
        ours(&mut answers);
        let deleted: Vec<bool> = answers
            .iter()
            .zip(&earlier)
            .map(|(a, before)| *before || matches!(a, Some(Ok(()))) || matches!(a, Some(Err(e)) if instance::kept(e)))
            .collect();
        let result = self.majority("released", answers, |_| not_held(grant, &self.url));
        if result.as_ref().is_err_and(|e| e.kind() == ErrorKind::Unavailable) {
            let mut releasing = releasing();
            if releasing.len() >= MAX_RELEASING {
                releasing.clear();
            }
            releasing.insert(key, deleted);
        }
        result
    }

    async fn force_release(&self, name: &str) -> Result<bool> {
        let n = name.to_string();
        let force = move |b: Arc<RedisBackend>| async move { b.force_release(&n).await };
        let answers = self.round(Some(name), force, |c| c.pending == 0).await;
        Ok(self.majority_answers("answered", answers)?.contains(&true))
    }

    async fn inspect(&self, name: &str) -> Result<LockInfo> {
        let n = name.to_string();
        let inspect = move |b: Arc<RedisBackend>| async move { b.inspect(&n).await };
        let answers = self.round(None, inspect, |c| c.pending == 0).await;
        let infos = self.majority_answers("answered", answers)?;
        let (holder, remaining) = self.majority_holder(&infos);
        // Each instance counts its own subscribers; which of them is right is no majority question.
        Ok(LockInfo { holder, remaining, last_token: infos.iter().filter_map(|i| i.last_token).max(), waiters: None })
    }

    async fn fence_write(&self, resource: &str, token: u64, value: &[u8]) -> Result<()> {
        let (r, v) = (resource.to_string(), value.to_vec());
        let write = move |b: Arc<RedisBackend>| async move { b.fence_write(&r, token, &v).await };
        let answers = self.round(None, write, |c| self.quorum.majority_decided(c)).await;
        self.majority("accepted the write", answers, |e| e)
    }

    async fn fence_read(&self, resource: &str) -> Result<(u64, Vec<u8>)> {
        let r = resource.to_string();
        let read = move |b: Arc<RedisBackend>| async move { b.fence_read(&r).await };
        let answers = self.round(None, read, |c| self.quorum.read_decided(c)).await;
        let answers = self.majority_answers("answered", answers)?;
        Ok(answers.into_iter().max_by_key(|(token, _)| *token).unwrap_or_default())
    }

    async fn close(&self) {
        join_all(self.instances.iter().map(Instance::close)).await;
    }
}
