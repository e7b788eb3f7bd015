//! Read-write locks on Redis in Redisson `RReadWriteLock`'s layout (keys and scripts: [`scripts`]), so a Redisson
//! client on the same name and fencelock exclude each other both ways: hash `<name>` with `mode`, reader fields
//! `<holder>` and the writer's `<holder>:write`, a timeout key per read hold, releases published on
//! `redisson_rwlock:{<name>}`.
//!
//! A waiting writer blocks new readers through a mark of fencelock's own, with a server-clock deadline that each
//! of its attempts refreshes (a crashed waiter's mark lapses by itself); the attempt's drop removes it. Limit:
//! Redisson's readers do not look at the marks, so they still pass a waiting fencelock writer, as they pass
//! Redisson's own waiting writers. Waiters are not queued fairly whatever `fair=` says (Redisson's read-write lock
//! has no fair queue either).

mod scripts;

use std::time::Duration;

use redis::Script;

use super::{Deployment, RedisLock, Waiter};
use crate::backend::{AcquireRequest, Attempt, Busy, Grant, HoldKind, lock_lost, not_held, ttl_ms};
use crate::error::{Error, Result};

/// The shortest a waiting writer's mark lives: below it, a writer with a tiny TTL would refresh in a busy loop.
const MIN_MARK: Duration = Duration::from_secs(1);

/// The read-write lock's scripts for one deployment's publish command.
#[derive(Debug)]
pub(super) struct Scripts {
    read: Script,
    write: Script,
    renew: Script,
    release: Script,
    abandon: Script,
    pub(super) force: Script,
}

impl Scripts {
    pub(super) fn publishing_with(publish: &str) -> Self {
        Scripts {
            read: Script::new(&scripts::read(publish)),
            write: Script::new(&scripts::write(publish)),
            renew: Script::new(&scripts::renew(publish)),
            release: Script::new(&scripts::release(publish)),
            abandon: Script::new(&scripts::abandon(publish)),
            force: Script::new(&scripts::force(publish)),
        }
    }
}

/// The keys every script takes (see [`scripts`]).
pub(super) fn keys<D: Deployment>(name: &str) -> Vec<String> {
    vec![
        name.to_string(),
        D::token_key(name),
        D::prefixed("fencelock_rw_epoch", name),
        D::prefixed("fencelock_rw_writers", name),
        channel::<D>(name),
    ]
}

/// Where read-write lock `name`'s releases are published (Redisson's channel).
pub(super) fn channel<D: Deployment>(name: &str) -> String {
    D::prefixed("redisson_rwlock", name)
}

/// The hash field of a hold of `kind` by `holder`.
fn field(kind: HoldKind, holder: &str) -> String {
    if kind == HoldKind::Write { format!("{holder}:write") } else { holder.to_string() }
}

/// The holder a hash field names (a writer's without its `:write`).
pub(super) fn holder_of(field: &str) -> &str {
    field.strip_suffix(":write").unwrap_or(field)
}

/// How long a waiting writer's mark lives without a refresh: its TTL, at least [`MIN_MARK`].
fn mark(req: &AcquireRequest) -> Duration {
    req.ttl.max(MIN_MARK)
}

impl<D: Deployment> RedisLock<D> {
    /// Invokes one of the read-write scripts with the lock's keys, the key prefix and `args`.
    async fn rw_invoke<T: redis::FromRedisValue>(&self, script: &Script, name: &str, args: &[String]) -> Result<T> {
        let args = std::iter::once(D::key_prefix(name)).chain(args.iter().cloned());
        self.invoke_with(script, keys::<D>(name), args).await
    }

    /// One attempt at a read or write hold. A writer that has waited once marks itself as waiting.
    pub(super) async fn rw_take(&self, req: &AcquireRequest, waiter: &mut Waiter<D::PubSub>) -> Result<Attempt> {
        let writer = req.kind == HoldKind::Write;
        let mark_for = if writer && waiter.sub.is_some() { ttl_ms(mark(req)) } else { 0 };
        let (script, mut args) = if writer {
            (&self.scripts.rw.write, vec![D::key_prefix(&req.name)])
        } else {
            (&self.scripts.rw.read, vec![D::key_prefix(&req.name)])
        };
        args.extend([ttl_ms(req.ttl).to_string(), req.holder.clone()]);
        if writer {
            args.push(mark_for.to_string());
        }
        let args: Vec<Vec<u8>> = args.into_iter().map(String::into_bytes).collect();
        waiter.marked |= mark_for > 0;
        let reply = self.acquire_synced(req, script, &keys::<D>(&req.name), &args).await?;
        let [ok, n] = reply[..] else {
            return Err(Error::internal(format!("{}: unexpected reply {reply:?}", self.url)));
        };
        if ok == -2 {
            return Err(Error::invalid(format!(
                "{}: key {:?} is no lock record (a semaphore's count?), not a read-write lock: use another name",
                self.url, req.name
            )));
        }
        if ok == 1 {
            waiter.marked = false;
            return Ok(Attempt::Acquired(req.grant(n as u64, None)));
        }
        let mut holder_ttl = (n >= 0).then(|| Duration::from_millis(n as u64));
        if mark_for > 0 {
            // Refresh the mark three times per life.
            let refresh = mark(req) / 3;
            holder_ttl = Some(holder_ttl.map_or(refresh, |t| t.min(refresh)));
        }
        Ok(Attempt::Busy(Busy { holder_ttl }))
    }

    pub(super) async fn rw_renew(&self, grant: &Grant, ttl: Duration) -> Result<()> {
        let args = [ttl_ms(ttl).to_string(), field(grant.kind, &grant.holder)];
        let renewed: i64 = self.rw_invoke(&self.scripts.rw.renew, &grant.name, &args).await?;
        if renewed == 1 { Ok(()) } else { Err(lock_lost(grant, &self.url)) }
    }

    pub(super) async fn rw_release(&self, grant: &Grant) -> Result<()> {
        let args = [field(grant.kind, &grant.holder)];
        let released: i64 = self.rw_invoke(&self.scripts.rw.release, &grant.name, &args).await?;
        if released == 1 { Ok(()) } else { Err(not_held(grant, &self.url)) }
    }

    /// Removes `req`'s waiting mark and any hold of its kind it may have taken. Whether a hold went.
    pub(super) async fn rw_abandon(&self, req: &AcquireRequest) -> Result<bool> {
        let args = [req.holder.clone(), field(req.kind, &req.holder)];
        let released: i64 = self.rw_invoke(&self.scripts.rw.abandon, &req.name, &args).await?;
        Ok(released == 1)
    }

    /// Deletes read-write lock `name` whoever holds it: `Some(deleted)`, or `None` if the key is not one.
    pub(super) async fn rw_force(&self, name: &str) -> Result<Option<bool>> {
        let outcome: i64 = self.rw_invoke(&self.scripts.rw.force, name, &[]).await?;
        Ok((outcome >= 0).then_some(outcome == 1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scripts_name_their_publish_command_and_draw_tokens() {
        for script in [scripts::read("spublish"), scripts::write("spublish"), scripts::abandon("spublish")] {
            assert!(script.contains("redis.call('spublish', KEYS[5], 0)"), "{script}");
            assert!(!script.contains("{publish}") && !script.contains("NEXT_TOKEN_HERE"), "{script}");
            assert!(script.contains("redis.call('incr', KEYS[2])"), "{script}");
        }
        assert_eq!(holder_of("u:o:write"), "u:o");
        assert_eq!(field(HoldKind::Write, "u:o"), "u:o:write");
        assert_eq!(field(HoldKind::Read, "u:o"), "u:o");
    }
}
