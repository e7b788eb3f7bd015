//! Replica-synced grants: `wait_replicas=N` and `wait_timeout_ms=T` on `redis://`, `rediss://` and
//! `redis+sentinel://`. After the acquire script, and after a fence register write, the same connection runs
//! `WAIT N T` (or `WAITAOF 1 N T` where the server has it and `appendonly` is on), pipelined with the script in one
//! round trip: WAIT counts the replicas that acknowledged every write of that connection so far.
//!
//! What it buys: a grant that N replicas confirmed survives a failover to any of them, so the promoted master still
//! excludes the next client. What it does not: Redis is no consensus system, and after a failover to a replica that
//! did not confirm, two clients can hold. That is left to fencing: the new grant's token is higher (see `acquire_lua` in redis.rs),
//! so once the new holder has written a register, the old holder's writes are refused. A grant fewer replicas confirmed is released at once and reported `Unavailable`;
//! a fence write cannot be taken back, so it is reported `Unavailable` saying it reached the master only.
//! Renewals do not wait: they extend what the replicas already hold.
//!
//! WAIT blocks the connection it runs on for up to T while replicas lag, and the command connection is shared by
//! the client's calls, so T must stay below the request timeout (checked at connect).

use std::time::Duration;

use redis::aio::ConnectionLike;
use redis::{Cmd, FromRedisValue, RedisError, Script, ServerErrorKind, Value};

use super::{Deployment, RedisLock};
use crate::backend::AcquireRequest;
use crate::error::{Error, Result};
use crate::options::ClientOptions;

/// How long WAIT waits by default.
pub(crate) const DEFAULT_TIMEOUT: Duration = Duration::from_millis(1000);

/// What the URL asked for: `wait_replicas=` (`None`: the deployment's default) and `wait_timeout_ms=`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Wanted {
    pub(crate) replicas: Option<u32>,
    pub(crate) timeout: Duration,
}

impl Default for Wanted {
    fn default() -> Self {
        Wanted { replicas: None, timeout: DEFAULT_TIMEOUT }
    }
}

impl Wanted {
    /// Takes `wait_replicas` and `wait_timeout_ms` out of a URL's decoded query pairs, returning the rest.
    pub(crate) fn take(pairs: Vec<(String, String)>, shown: &str) -> Result<(Wanted, Vec<(String, String)>)> {
        let mut wanted = Wanted::default();
        let mut rest = Vec::new();
        let number = |name: &str, value: &str| {
            value.parse::<u32>().map_err(|_| {
                Error::invalid(format!("URL {shown:?}: {name}={value:?} is not a whole number of 0 or more"))
            })
        };
        for (name, value) in pairs {
            match name.as_str() {
                "wait_replicas" => wanted.replicas = Some(number(&name, &value)?),
                "wait_timeout_ms" => match number(&name, &value)? {
                    // WAIT 0 waits forever.
                    0 => return Err(Error::invalid(format!("URL {shown:?}: wait_timeout_ms=0 would wait forever"))),
                    ms => wanted.timeout = Duration::from_millis(u64::from(ms)),
                },
                _ => rest.push((name, value)),
            }
        }
        Ok((wanted, rest))
    }

    /// The names of the parameters, for deployments that refuse them.
    pub(crate) const PARAMETERS: [&'static str; 2] = ["wait_replicas", "wait_timeout_ms"];
}

/// How grants are synced to replicas on one backend, settled at connect.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct ReplicaSync {
    /// Replicas that must confirm; 0: no waiting.
    replicas: u32,
    timeout_ms: u64,
    /// WAITAOF (Redis ≥ 7.2 with `appendonly yes`) rather than WAIT.
    aof: bool,
}

/// Whether a server of `version` whose `appendonly` is `appendonly` should be asked WAITAOF rather than WAIT.
pub(crate) fn has_waitaof(version: &str, appendonly: Option<&str>) -> bool {
    let mut parts = version.trim().split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    let (major, minor) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    (major, minor) >= (7, 2) && appendonly.is_some_and(|a| a.eq_ignore_ascii_case("yes"))
}

/// The value of `field` in an `INFO` reply.
fn info_field<'a>(info: &'a str, field: &str) -> Option<&'a str> {
    info.lines().find_map(|l| l.strip_prefix(field)?.strip_prefix(':')).map(str::trim)
}

impl ReplicaSync {
    /// Settles `replicas` (the URL's or the deployment's default) against the server behind `conn`. An ACL user
    /// that may not run INFO or CONFIG gets plain WAIT.
    pub(crate) async fn detect<C: ConnectionLike + Send>(
        conn: &mut C,
        replicas: u32,
        timeout: Duration,
        opts: &ClientOptions,
        shown: &str,
    ) -> Result<Self> {
        if replicas == 0 {
            return Ok(ReplicaSync::default());
        }
        if timeout >= opts.request_timeout {
            return Err(Error::invalid(format!(
                "URL {shown:?}: wait_timeout_ms={} must be shorter than the request timeout ({:?}): WAIT holds \
                 the connection that long",
                timeout.as_millis(),
                opts.request_timeout
            )));
        }
        let info: Option<String> = redis::cmd("INFO").arg("server").query_async(conn).await.ok();
        let version = info.as_deref().and_then(|i| info_field(i, "redis_version")).unwrap_or("0").to_string();
        let appendonly: Option<Vec<String>> =
            redis::cmd("CONFIG").arg("GET").arg("appendonly").query_async(conn).await.ok();
        let aof = has_waitaof(&version, appendonly.as_ref().and_then(|a| a.get(1)).map(String::as_str));
        Ok(ReplicaSync { replicas, timeout_ms: timeout.as_millis() as u64, aof })
    }

    /// Whether grants wait for replicas.
    pub(crate) fn waits(&self) -> bool {
        self.replicas > 0
    }

    fn command(&self) -> Cmd {
        let mut cmd = redis::cmd(if self.aof { "WAITAOF" } else { "WAIT" });
        if self.aof {
            cmd.arg(1);
        }
        cmd.arg(self.replicas).arg(self.timeout_ms);
        cmd
    }

    /// The replicas a WAIT or WAITAOF reply says confirmed (WAITAOF: `[local, replicas]`, and a local fsync that
    /// did not happen counts as none).
    fn confirmed(&self, reply: Value) -> Result<u32, RedisError> {
        if self.aof {
            let (local, replicas): (u32, u32) = FromRedisValue::from_redis_value(reply)?;
            return Ok(if local == 0 { 0 } else { replicas });
        }
        Ok(FromRedisValue::from_redis_value(reply)?)
    }
}

/// An `EVALSHA` of `script` with `keys` and `args`.
fn evalsha(script: &Script, keys: &[String], args: &[Vec<u8>]) -> Cmd {
    let mut cmd = redis::cmd("EVALSHA");
    cmd.arg(script.get_hash()).arg(keys.len()).arg(keys).arg(args);
    cmd
}

/// Runs `script`, then the wait, in one round trip on `conn`; reloads the script once on NOSCRIPT (a new master
/// after a failover has none cached). Returns the script's reply and how many replicas confirmed.
async fn run_synced<T: FromRedisValue, C: ConnectionLike + Send>(
    conn: &mut C,
    sync: &ReplicaSync,
    script: &Script,
    keys: &[String],
    args: &[Vec<u8>],
) -> Result<(T, u32), RedisError> {
    for first in [true, false] {
        let mut pipe = redis::pipe();
        pipe.add_command(evalsha(script, keys, args)).add_command(sync.command()).ignore_errors();
        let mut replies: Vec<Value> = pipe.query_async(conn).await?;
        let (Some(wait), Some(reply)) = (replies.pop(), replies.pop()) else {
            return Err(RedisError::from((redis::ErrorKind::UnexpectedReturnType, "a pipeline reply is missing")));
        };
        match reply {
            Value::ServerError(e) if first && e.kind() == Some(ServerErrorKind::NoScript) => {
                script.load_async(conn).await?;
            }
            Value::ServerError(e) => return Err(e.into()),
            reply => {
                let confirmed = match wait {
                    Value::ServerError(e) => return Err(e.into()),
                    wait => sync.confirmed(wait)?,
                };
                return Ok((T::from_redis_value(reply)?, confirmed));
            }
        }
    }
    unreachable!("the second round returns")
}

impl<D: Deployment> RedisLock<D> {
    /// Runs an acquire script (the free-for-all's or the fair queue's: a reply that starts with 1 is a grant)
    /// and, when grants wait for replicas, WAIT with it; a grant too few replicas confirmed is released and
    /// reported `Unavailable`. The error leaves the attempt in doubt, so its undo releases again if this release
    /// did not get through.
    pub(super) async fn acquire_synced(
        &self,
        req: &AcquireRequest,
        script: &Script,
        keys: &[String],
        args: &[Vec<u8>],
    ) -> Result<Vec<i64>> {
        if !self.sync.waits() {
            let mut acquire = script.prepare_invoke();
            for key in keys {
                acquire.key(key);
            }
            for arg in args {
                acquire.arg(arg);
            }
            return self.invoke(&acquire).await;
        }
        let mut conn = self.conn.clone();
        let (reply, confirmed): (Vec<i64>, u32) =
            run_synced(&mut conn, &self.sync, script, keys, args).await.map_err(|e| self.err(e))?;
        if reply.first() == Some(&1) && confirmed < self.sync.replicas {
            let name = &req.name;
            let released = self.release_taken(req).await;
            let note = match released {
                Ok(_) => "released it".to_string(),
                Err(e) => format!("could not release it ({e}); it expires after its TTL"),
            };
            return Err(Error::unavailable(format!(
                "{}: lock {name:?}: only {confirmed} of {} replicas confirmed the grant within {} ms; {note}",
                self.url, self.sync.replicas, self.sync.timeout_ms
            )));
        }
        Ok(reply)
    }

    /// Runs the fence write script and, when grants wait for replicas, WAIT with it. `None` if stored, else the
    /// higher accepted token; a store too few replicas confirmed is `Unavailable`.
    pub(super) async fn fence_write_synced(
        &self,
        resource: &str,
        key: String,
        args: [Vec<u8>; 2],
    ) -> Result<Option<u64>> {
        if !self.sync.waits() {
            let mut write = self.scripts.fence_write.key(&key);
            write.arg(&args[0]).arg(&args[1]);
            return self.invoke(&write).await;
        }
        let mut conn = self.conn.clone();
        let (higher, confirmed): (Option<u64>, u32) =
            run_synced(&mut conn, &self.sync, &self.scripts.fence_write, &[key], &args)
                .await
                .map_err(|e| self.err(e))?;
        if higher.is_none() && confirmed < self.sync.replicas {
            return Err(Error::unavailable(format!(
                "{}: fence {resource:?}: the write reached the master only: {confirmed} of {} replicas confirmed it \
                 within {} ms",
                self.url, self.sync.replicas, self.sync.timeout_ms
            )));
        }
        Ok(higher)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn parameters_are_numbers() {
        let (w, rest) = Wanted::take(pairs(&[("wait_replicas", "2"), ("x", "1")]), "u").unwrap();
        assert_eq!(w, Wanted { replicas: Some(2), timeout: DEFAULT_TIMEOUT });
        assert_eq!(rest, pairs(&[("x", "1")]));
        let (w, _) = Wanted::take(pairs(&[("wait_timeout_ms", "250")]), "u").unwrap();
        assert_eq!(w, Wanted { replicas: None, timeout: Duration::from_millis(250) });
        for (k, v, says) in [
            ("wait_replicas", "two", "wait_replicas=\"two\" is not a whole number"),
            ("wait_replicas", "-1", "is not a whole number"),
            ("wait_timeout_ms", "1.5", "wait_timeout_ms=\"1.5\" is not"),
            ("wait_timeout_ms", "0", "would wait forever"),
        ] {
            let e = Wanted::take(pairs(&[(k, v)]), "u").unwrap_err();
            assert_eq!(e.kind(), ErrorKind::InvalidArgument);
            assert!(e.message().contains(says), "{e}");
        }
    }

    #[test]
    fn waitaof_needs_7_2_and_appendonly() {
        assert!(has_waitaof("7.2.4", Some("yes")));
        assert!(has_waitaof("8.0.0", Some("YES")));
        assert!(!has_waitaof("7.2.4", Some("no")));
        assert!(!has_waitaof("7.2.4", None));
        assert!(!has_waitaof("7.0.15", Some("yes")));
        assert!(!has_waitaof("6.2.1", Some("yes")));
        assert!(!has_waitaof("garbage", Some("yes")));
        assert_eq!(info_field("# Server\r\nredis_version:7.0.15\r\nredis_mode:x\r\n", "redis_version"), Some("7.0.15"));
    }

    #[test]
    fn replies_count_confirming_replicas() {
        let wait = ReplicaSync { replicas: 2, timeout_ms: 5, aof: false };
        assert_eq!(wait.command().get_packed_command(), redis::cmd("WAIT").arg(2).arg(5).get_packed_command());
        assert_eq!(wait.confirmed(Value::Int(1)).unwrap(), 1);
        let aof = ReplicaSync { aof: true, ..wait };
        assert_eq!(aof.command().get_packed_command(), redis::cmd("WAITAOF").arg(1).arg(2).arg(5).get_packed_command());
        assert_eq!(aof.confirmed(Value::Array(vec![Value::Int(1), Value::Int(2)])).unwrap(), 2);
        assert_eq!(aof.confirmed(Value::Array(vec![Value::Int(0), Value::Int(2)])).unwrap(), 0);
    }
}
