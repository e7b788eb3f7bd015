//! Semaphores with leased permits on Redis in Redisson `RPermitExpirableSemaphore`'s layout (keys and scripts:
//! [`scripts`]): the count string `<name>`, the `{<name>}:timeout` zset of permit ids → expiry, the
//! `redisson_sc:{<name>}` channel. A Redisson client on the same name counts against the same permits; fencelock's
//! holds also occupy slots 0…N−1 in a hash of its own, each with its own rising fence counter.
//!
//! A permit's zset member is the holder id (see [`permit_id`]), so an attempt's undo can find the permit its
//! request may have taken. Every release publishes the new count, which wakes every waiter; each looks again, and
//! as many as there are free permits get one. Waiters are not queued fairly whatever `fair=` says.

mod scripts;

use std::time::Duration;

use redis::Script;

use super::{Deployment, RedisLock};
use crate::backend::{AcquireRequest, Attempt, Busy, Grant, LockInfo, lock_lost, not_held, permits_mismatch, ttl_ms};
use crate::error::{Error, Result};

/// The semaphore's scripts for one deployment's publish command.
#[derive(Debug)]
pub(super) struct Scripts {
    acquire: Script,
    renew: Script,
    release: Script,
    available: Script,
    pub(super) force: Script,
}

impl Scripts {
    pub(super) fn publishing_with(publish: &str) -> Self {
        Scripts {
            acquire: Script::new(&scripts::acquire(publish)),
            renew: Script::new(&scripts::renew(publish)),
            release: Script::new(&scripts::release(publish)),
            available: Script::new(&scripts::available(publish)),
            force: Script::new(&scripts::force(publish)),
        }
    }
}

/// The keys every script takes (see [`scripts`]).
pub(super) fn keys<D: Deployment>(name: &str) -> Vec<String> {
    vec![
        name.to_string(),
        timeout_key::<D>(name),
        channel::<D>(name),
        D::prefixed("fencelock_sem_slots", name),
        D::prefixed("fencelock_sem_tokens", name),
        D::prefixed("fencelock_sem_permits", name),
    ]
}

/// Redisson's zset of permit ids → expiry.
pub(super) fn timeout_key<D: Deployment>(name: &str) -> String {
    format!("{}:timeout", D::key_prefix(name))
}

/// Where semaphore `name`'s releases are published (Redisson's channel).
pub(super) fn channel<D: Deployment>(name: &str) -> String {
    D::prefixed("redisson_sc", name)
}

/// The zset member of `holder`'s permit: the holder id's bytes. Current Redisson stores each permit id as the
/// bytes its hex names (`decodeHexDump`), so a Redisson client would show ours as the holder id in hex.
pub(super) fn permit_id(holder: &str) -> String {
    holder.to_string()
}

impl<D: Deployment> RedisLock<D> {
    async fn sem_invoke<T: redis::FromRedisValue>(&self, script: &Script, name: &str, args: &[String]) -> Result<T> {
        self.invoke_with(script, keys::<D>(name), args.iter().cloned()).await
    }

    /// One attempt at a permit of a semaphore of `permits`.
    pub(super) async fn sem_take(&self, req: &AcquireRequest, permits: u32) -> Result<Attempt> {
        let args = [permits.to_string(), permit_id(&req.holder), ttl_ms(req.ttl).to_string()].map(String::into_bytes);
        let reply = self.acquire_synced(req, &self.scripts.sem.acquire, &keys::<D>(&req.name), &args).await?;
        match reply[..] {
            [1, token, slot] => Ok(Attempt::Acquired(req.grant(token as u64, None).in_slot(slot as u32))),
            [0, ms] => Ok(Attempt::Busy(Busy { holder_ttl: (ms >= 0).then(|| Duration::from_millis(ms as u64)) })),
            [-1, stored] => Err(permits_mismatch(&req.name, &self.url, permits, stored as u32)),
            [-2, _] => Err(self.not_a_semaphore(&req.name)),
            _ => Err(Error::internal(format!("{}: unexpected reply {reply:?}", self.url))),
        }
    }

    pub(super) async fn sem_renew(&self, grant: &Grant, ttl: Duration) -> Result<()> {
        let slot = grant.slot.unwrap_or(u32::MAX);
        let args = [permit_id(&grant.holder), ttl_ms(ttl).to_string(), slot.to_string(), grant.token.to_string()];
        let renewed: i64 = self.sem_invoke(&self.scripts.sem.renew, &grant.name, &args).await?;
        if renewed == 1 { Ok(()) } else { Err(lock_lost(grant, &self.url)) }
    }

    pub(super) async fn sem_release(&self, grant: &Grant) -> Result<()> {
        if self.sem_abandon(&grant.name, &grant.holder).await? { Ok(()) } else { Err(not_held(grant, &self.url)) }
    }

    /// Gives back the permit `holder` may hold; whether it held one.
    pub(super) async fn sem_abandon(&self, name: &str, holder: &str) -> Result<bool> {
        let released: i64 = self.sem_invoke(&self.scripts.sem.release, name, &[permit_id(holder)]).await?;
        Ok(released == 1)
    }

    pub(super) async fn sem_available(&self, name: &str, permits: u32) -> Result<u32> {
        let (ok, n): (i64, i64) = self.sem_invoke(&self.scripts.sem.available, name, &[permits.to_string()]).await?;
        match ok {
            1 => Ok(n.max(0) as u32),
            -2 => Err(self.not_a_semaphore(name)),
            _ => Err(permits_mismatch(name, &self.url, permits, n as u32)),
        }
    }

    /// The error of a semaphore call on a name whose key is a lock's or read-write lock's hash.
    fn not_a_semaphore(&self, name: &str) -> Error {
        Error::invalid(format!(
            "{}: key {name:?} is a lock's or read-write lock's hash, not a semaphore: use another name",
            self.url
        ))
    }

    /// The permit of semaphore `name` that expires first, as a lock's holder.
    pub(super) async fn sem_inspect(&self, name: &str) -> Result<LockInfo> {
        let (first, time): (Vec<(String, f64)>, (u64, u64)) = redis::pipe()
            .zrange_withscores(timeout_key::<D>(name), 0, 0)
            .cmd("TIME")
            .query_async(&mut self.conn.clone())
            .await
            .map_err(|e| self.err(e))?;
        let now_ms = time.0 * 1000 + time.1 / 1000;
        let first = first.into_iter().next();
        Ok(LockInfo {
            remaining: first.as_ref().map(|(_, at)| Duration::from_millis((*at as u64).saturating_sub(now_ms))),
            holder: first.map(|(id, _)| id),
            last_token: None,
            waiters: None,
        })
    }

    /// Deletes every permit of semaphore `name`: `Some(deleted)`, or `None` if the key is not one.
    pub(super) async fn sem_force(&self, name: &str) -> Result<Option<bool>> {
        let outcome: i64 = self.sem_invoke(&self.scripts.sem.force, name, &[]).await?;
        Ok((outcome >= 0).then_some(outcome == 1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scripts_name_their_publish_command() {
        assert_eq!(permit_id("u:1"), "u:1");
        let acquire = scripts::acquire("spublish");
        assert!(acquire.contains("redis.call('spublish', KEYS[3]") && !acquire.contains("publish_cmd"));
    }
}
