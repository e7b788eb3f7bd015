//! `redlock://h1:6379,h2:6379,h3:6379[,…]`: the Redlock algorithm over N independent Redis instances. Each instance
//! holds the same records as `redis://` (Redisson RLock layout) and runs the single-Redis scripts through a
//! [`RedisBackend`] of its own; this file adds only the majority rules, the validity check and the token round.
//!
//! Every round goes to all instances at once, and each instance gets a short timeout (`instance_timeout_ms`, default
//! 50 ms, never more than the client's request timeout): a dead instance costs a round that much, not redis-rs's
//! reconnect loop. Connections are made in the background and remade after a failure, so `connect` succeeds while a
//! minority is down and an instance that comes back rejoins by itself.
//!
//! | operation | done when | otherwise |
//! |---|---|---|
//! | acquire | a majority granted within validity = ttl − elapsed − drift, and a majority's counter holds the token (raised where needed) | release everywhere; `Busy` if a majority answered, else `Unavailable` |
//! | renew | a majority extended the record | `LockLost` if too many found it gone for any majority to hold it, else `Unavailable` |
//! | release | a majority deleted our record | `NotHeld` if too many said it was not ours for a majority to have held it, else `Unavailable` |
//! | fence write | a majority accepted the token | `Fenced` if too many refused for a majority to accept, else `Unavailable` |
//! | fence read, inspect | a majority answered: the highest token, the holder a majority agrees on | `Unavailable` |
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
mod config;
mod instance;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures::future::join_all;
use futures::stream::{FuturesUnordered, StreamExt};
use redis::Script;
use tokio::time::Instant;

use self::attempt::RedlockAttempt;
use self::config::parse;
use self::instance::Instance;
use super::record::Records;
use super::redis::{RedisBackend, token_key};
use super::{AcquireRequest, Backend, Capability, Grant, LockInfo, Pending, Undo, lock_lost, not_held};
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
    quorum: usize,
    raise: Script,
    url: String,
}

impl RedlockBackend {
    async fn connect(url: &str, opts: &ClientOptions) -> Result<Self> {
        let config = parse(url)?;
        config::check_distinct(url, &config.hosts, opts.connect_timeout).await?;
        let timeout = config.instance_timeout.min(opts.request_timeout);
        let instance_opts = opts.clone().request_timeout(timeout);
        let backend = RedlockBackend {
            quorum: config.instances.len() / 2 + 1,
            instances: config
                .instances
                .into_iter()
                .map(|u| Instance::new(u, config.security.clone(), instance_opts.clone(), timeout))
                .collect(),
            raise: Script::new(RAISE_COUNTER),
            url: redact(url),
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
                if up >= self.quorum || errors.len() > self.instances.len() - self.quorum {
                    break;
                }
            }
        };
        if tokio::time::timeout(limit, count).await.is_err() {
            errors.push(Error::unavailable(format!("the others did not connect within {limit:?}")));
        }
        if up >= self.quorum { Ok(()) } else { Err(self.no_majority("connected", up, 0, &errors)) }
    }

    /// Runs `op` on every instance at once; one result per instance, in URL order.
    async fn on_all<T, F, Fut>(&self, op: F) -> Vec<Result<T>>
    where
        F: Fn(Arc<RedisBackend>) -> Fut,
        Fut: Future<Output = Result<T>>,
    {
        join_all(self.instances.iter().map(|i| i.call(&op))).await
    }

    /// `Unavailable`, saying how many instances did what and what the others said; `InvalidArgument` instead when
    /// the instances that refused the configuration (a credential, a certificate) are enough to deny any majority,
    /// since no retry fixes that.
    fn no_majority(&self, did: &str, yes: usize, refused: usize, errors: &[Error]) -> Error {
        let why: Vec<String> = errors.iter().map(ToString::to_string).collect();
        let misconfigured = errors.iter().filter(|e| e.kind() == ErrorKind::InvalidArgument).count();
        let kind = match misconfigured > self.instances.len() - self.quorum {
            true => ErrorKind::InvalidArgument,
            false => ErrorKind::Unavailable,
        };
        Error::new(
            kind,
            format!(
                "{}: {yes} of {} instances {did}, {} needed ({refused} refused, {} failed: {})",
                self.url,
                self.instances.len(),
                self.quorum,
                errors.len(),
                why.join("; ")
            ),
        )
    }

    /// The rule of renew, release and fenced writes: done if a majority did it; refused, with `refusal` made from
    /// the first refusal, once too many refused for any majority to have done it; else `Unavailable`.
    fn majority(&self, did: &str, results: Vec<Result<()>>, refusal: impl FnOnce(Error) -> Error) -> Result<()> {
        let (mut yes, mut refused, mut errors) = (0, Vec::new(), Vec::new());
        for result in results {
            match result {
                Ok(()) => yes += 1,
                Err(e) if matches!(e.kind(), ErrorKind::LockLost | ErrorKind::NotHeld | ErrorKind::Fenced) => {
                    refused.push(e)
                }
                Err(e) => errors.push(e),
            }
        }
        if yes >= self.quorum {
            Ok(())
        } else if refused.len() > self.instances.len() - self.quorum {
            Err(refusal(refused.swap_remove(0)))
        } else {
            Err(self.no_majority(did, yes, refused.len(), &errors))
        }
    }

    /// The answers of a round that only reads, if a majority gave one.
    fn majority_answers<T>(&self, did: &str, results: Vec<Result<T>>) -> Result<Vec<T>> {
        let (mut answers, mut errors) = (Vec::new(), Vec::new());
        for result in results {
            match result {
                Ok(answer) => answers.push(answer),
                Err(e) => errors.push(e),
            }
        }
        if answers.len() >= self.quorum { Ok(answers) } else { Err(self.no_majority(did, answers.len(), 0, &errors)) }
    }

    /// Raises the counter of every instance to `token` (see [`RAISE_COUNTER`] for why); needs a majority.
    async fn raise_counters(&self, name: &str, token: u64) -> Result<()> {
        let key = token_key(name);
        let raise = |b: Arc<RedisBackend>| {
            let mut invocation = self.raise.key(&key);
            invocation.arg(token);
            async move { b.invoke::<i64>(&invocation).await.map(drop) }
        };
        let results = self.on_all(raise).await;
        self.majority("raised the token counter", results, |e| e)
    }

    /// Turns a majority of grants into the lock: the token is their maximum, held by a counter on a majority (raised
    /// there if need be), and some validity must be left after both rounds.
    async fn seal(&self, req: &AcquireRequest, tokens: &[u64], started: Instant) -> Result<Grant> {
        let token = tokens.iter().copied().max().unwrap_or_default();
        if tokens.iter().filter(|&&t| t == token).count() < self.quorum {
            self.raise_counters(&req.name, token).await?;
        }
        let validity = req.ttl.saturating_sub(started.elapsed()).saturating_sub(drift(req.ttl));
        if validity.is_zero() {
            return Err(Error::unavailable(format!(
                "{}: granted on {} of {} instances, but that took {:?} of the {:?} TTL",
                self.url,
                tokens.len(),
                self.instances.len(),
                started.elapsed(),
                req.ttl
            )));
        }
        Ok(Grant { name: req.name.clone(), holder: req.holder.clone(), token, key: None })
    }

    /// Deletes `holder`'s record on every instance where it exists (a failed attempt, an abandoned acquire).
    async fn release_everywhere(&self, req: &AcquireRequest) -> Vec<Result<()>> {
        self.on_all(|b| async move { b.abandon(req).await }).await
    }

    /// Deletes `req.holder`'s record everywhere (an attempt in doubt); done once a majority answered.
    async fn abandon(&self, req: &AcquireRequest) -> Result<()> {
        let results = self.release_everywhere(req).await;
        self.majority_answers("answered", results).map(drop)
    }

    /// How long until others' records have expired on enough of the `answered` instances for a majority to be
    /// free: the longest a missed wake-up can cost. `None` if an expiry that matters is unknown.
    fn free_in(&self, holder_ttls: Vec<Option<Duration>>, answered: usize) -> Option<Duration> {
        let must_expire = (holder_ttls.len() + self.quorum).checked_sub(answered).filter(|&k| k > 0)?;
        let mut ttls: Vec<Duration> = holder_ttls.into_iter().map(|t| t.unwrap_or(Duration::MAX)).collect();
        ttls.sort();
        ttls.get(must_expire - 1).copied().filter(|&t| t != Duration::MAX)
    }

    /// The holder of the lock and when it frees: a holder needs records on a majority, and the lock is held until
    /// all but a minority of them expire.
    fn majority_holder(&self, infos: &[LockInfo]) -> (Option<String>, Option<Duration>) {
        for candidate in infos.iter().filter_map(|i| i.holder.as_ref()) {
            let mut remaining: Vec<Option<Duration>> =
                infos.iter().filter(|i| i.holder.as_ref() == Some(candidate)).map(|i| i.remaining).collect();
            if remaining.len() >= self.quorum {
                remaining.sort_by(|a, b| b.cmp(a));
                return (Some(candidate.clone()), remaining[self.quorum - 1]);
            }
        }
        (None, None)
    }
}

#[async_trait]
impl Backend for RedlockBackend {
    fn capability(&self) -> Capability {
        Capability { fencing: true, native_wait: true, fair: false, session_bound: false }
    }

    fn describe(&self) -> &str {
        &self.url
    }

    fn begin(self: Arc<Self>, req: AcquireRequest, undo: Undo) -> Box<dyn Pending> {
        Box::new(RedlockAttempt::new(self, req, undo))
    }

    async fn renew(&self, grant: &Grant, ttl: Duration) -> Result<()> {
        let results = self.on_all(|b| async move { b.renew(grant, ttl).await }).await;
        self.majority("renewed", results, |_| lock_lost(grant, &self.url))
    }

    async fn release(&self, grant: &Grant) -> Result<()> {
        let results = self.on_all(|b| async move { b.release(grant).await }).await;
        self.majority("released", results, |_| not_held(grant, &self.url))
    }

    async fn force_release(&self, name: &str) -> Result<bool> {
        let results = self.on_all(|b| async move { b.force_release(name).await }).await;
        Ok(self.majority_answers("answered", results)?.contains(&true))
    }

    async fn inspect(&self, name: &str) -> Result<LockInfo> {
        let results = self.on_all(|b| async move { b.inspect(name).await }).await;
        let infos = self.majority_answers("answered", results)?;
        let (holder, remaining) = self.majority_holder(&infos);
        // Each instance counts its own subscribers; which of them is right is no majority question.
        Ok(LockInfo { holder, remaining, last_token: infos.iter().filter_map(|i| i.last_token).max(), waiters: None })
    }

    async fn fence_write(&self, resource: &str, token: u64, value: &[u8]) -> Result<()> {
        let results = self.on_all(|b| async move { b.fence_write(resource, token, value).await }).await;
        self.majority("accepted the write", results, |e| e)
    }

    async fn fence_read(&self, resource: &str) -> Result<(u64, Vec<u8>)> {
        let results = self.on_all(|b| async move { b.fence_read(resource).await }).await;
        let answers = self.majority_answers("answered", results)?;
        Ok(answers.into_iter().max_by_key(|(token, _)| *token).unwrap_or_default())
    }

    async fn close(&self) {
        join_all(self.instances.iter().filter_map(Instance::connected).map(|b| async move { b.close().await })).await;
    }
}
