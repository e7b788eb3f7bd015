//! `redis://` / `rediss://`: Lua scripts on the Redisson RLock layout, so Redisson clients and fencelock exclude each
//! other: hash `<name>` with field `<client uuid>:<owner>` = hold count, PEXPIRE ttl, release publishes `0` on
//! `redisson_lock__channel:{name}`. The fence token comes from the counter `redisson_lock_token:{name}`, raised to
//! the server clock in µs by the acquire script (see [`acquire_lua`]).
//!
//! Read-write locks ([`rwlock`]) and semaphores ([`semaphore`]) follow Redisson's `RReadWriteLock` and
//! `RPermitExpirableSemaphore` layouts on the same name, with side keys of fencelock's own for what Redisson lacks
//! (writer preference, epoch and slot tokens, the agreed number of permits); the fair queue serves mutexes only.
//!
//! Waiters share one RESP3 pub/sub connection per client; a message they miss costs at most the holder's
//! remaining TTL, the bound every wait uses.
//!
//! URL: `redis[s]://[[user]:password@]host[:port][/db][?ca=PEM&cert=PEM&key=PEM&wait_replicas=N&wait_timeout_ms=T]`
//! (the last two: see [`replicas`]). `rediss://` is TLS with the certificate chain and host name checked against `ca=`
//! (else the system's roots); `cert=` and `key=` are a client certificate for servers that ask for one. `user:password@` authenticates an ACL user, `:password@` the
//! `requirepass` default user (see [`security`]). Both connections, commands and pub/sub, use the same settings.

pub(super) mod fair;
mod replicas;
mod rwlock;
mod security;
mod semaphore;
pub(crate) mod sentinel;

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::{
    Client, ErrorKind as RedisErrorKind, FromRedisValue, ProtocolVersion, PushInfo, PushKind, RedisError, Script,
    ScriptInvocation, ServerErrorKind, Value,
};
use tokio::sync::OnceCell;
use tokio::time::Instant;

use self::replicas::{ReplicaSync, Wanted};
/// The replica-sync parameters, for deployments that refuse them.
pub(crate) const WAIT_PARAMETERS: [&str; 2] = Wanted::PARAMETERS;
pub(crate) use self::security::{Security, names};
use super::record::{RecordAttempt, Records};
use super::redact;
use super::waiters::{Channels, Listen, Subscription, wait_notified};
use super::{
    AcquireRequest, Attempt, Backend, Busy, Capability, Grant, HoldKind, LockInfo, Pending, Undo, fenced, lock_lost,
    not_held, ttl_ms,
};
use crate::error::{Error, Result};
use crate::options::ClientOptions;

/// Takes the lock if free, or if the record is ours (a grant whose reply was lost).
///
/// The token is `max(counter + 1, server TIME in µs)`, and the counter is set to it (a decimal string, so Redisson's
/// `INCR` on the same key keeps working). Why the clock: Redis replicates asynchronously, so after a failover the
/// new master may lack the last grants and its counter may lag (or be missing, as after a restart without
/// persistence); `counter + 1` alone would then hand out a token again. Every token granted before is at most the old
/// master's TIME when it was granted, and the new master's TIME after the failover is later, so the new grant's
/// token is larger. Limit: this holds while the clocks of master and replicas differ by less than the time a
/// failover takes (seconds: sentinels' down-after plus the election); beyond that a token can come out lower than
/// one granted before the failover, which no register can then tell apart: keep the servers' clocks in sync (NTP).
/// µs since the epoch stay below 2^53, so Lua's doubles hold them exactly; the value
/// is built as a string, never formatted with `%g`.
/// KEYS: lock, token counter. ARGV: ttl ms, holder. Returns {1, token} or {0, pttl of the holder}.
fn acquire_lua() -> String {
    format!(
        r"
if redis.call('exists', KEYS[1]) == 0 or redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
{NEXT_TOKEN}
  redis.call('del', KEYS[1])
  redis.call('hset', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return {{1, token}}
end
return {{0, redis.call('pttl', KEYS[1])}}
"
    )
}

/// The text of [`START_FLOOR`], as a literal for `concat!`.
macro_rules! start_floor_lua {
    () => {
        r"
local function start_floor(t)
  local up = string.match(redis.call('info', 'server'), 'uptime_in_seconds:(%d+)')
  return string.format('%d', tonumber(t[1]) - tonumber(up) + 1) .. '000000'
end
local function not_before(floor, now)
  if tonumber(floor) > tonumber(now) then
    error({err = 'TRYAGAIN fencelock: this server started less than a second ago; no grant before its start floor'})
  end
end
"
    };
}

/// Lua that defines `start_floor(t)`: given the server's TIME reply `t`, the first whole second after this server
/// process started, in unix µs, as a decimal string; and `not_before(floor, now)`, which refuses a grant while the
/// clock is still below the floor. Every token a process of this server granted before the start is below the
/// floor, and every token this process grants is at or above it (`NEXT_TOKEN` and the semaphore's slot counter);
/// a fence register refuses tokens below it, so a register this process never wrote, whose last write was lost with
/// the restart, still refuses a holder paused across the restart. INFO gives the uptime in whole seconds only,
/// hence the round up, and hence no grant in a process's first partial second: a token granted then would be the
/// floor, ahead of the clock, and a successor started within the same wall-clock second has the same floor, so it
/// would grant that token again (the faults suite saw it: a `server-kill` half a second after a restart, seed 7).
/// Refused, the grant fails `TRYAGAIN` (UNAVAILABLE, retryable) for at most a second after a start. So every token
/// is at most its server's clock when granted, and a successor's floor, above its start, is above all of them.
/// Cost: one `INFO server` per grant and per register write.
pub(super) const START_FLOOR: &str = start_floor_lua!();

/// Lua that sets `token` to the next fence token of counter KEYS[2]: `max(counter + 1, server TIME in µs, start
/// floor)`, stored back as a decimal string (see [`acquire_lua`] for why the clock, [`START_FLOOR`] for the floor).
/// Shared with the fair queue's and the read-write lock's acquires.
pub(super) const NEXT_TOKEN: &str = concat!(
    "local token\ndo",
    start_floor_lua!(),
    r"  local t = redis.call('time')
  local now = t[1] .. string.format('%06d', tonumber(t[2]))
  not_before(start_floor(t), now)
  token = redis.call('incr', KEYS[2])
  if tonumber(now) > token then
    redis.call('set', KEYS[2], now)
    token = tonumber(now)
  end
end
"
);

/// KEYS: lock. ARGV: ttl ms, holder. 1 if extended, 0 if no longer ours.
pub(super) const RENEW: &str = r"
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  redis.call('pexpire', KEYS[1], ARGV[1])
  return 1
end
return 0
";

/// Deletes whoever holds it (Redisson's forceUnlock does the same), announced with `publish`. KEYS: lock, channel.
/// Returns {1, _} if deleted, {0, _} if there was no key, and {-1, what it is} for a key that is not a lock record (a
/// hash of `<client id>:<owner>` fields with hold counts), which it leaves alone.
fn force_release_lua(publish: &str) -> String {
    format!(
        r"
local kind = redis.call('type', KEYS[1])['ok']
if kind == 'none' then
  return {{0, 'none'}}
end
if kind ~= 'hash' then
  return {{-1, 'a ' .. kind}}
end
local fields = redis.call('hgetall', KEYS[1])
for i = 1, #fields, 2 do
  if not string.find(fields[i], ':', 1, true) or not tonumber(fields[i + 1]) then
    return {{-1, 'a hash whose field ' .. fields[i] .. ' is not <client id>:<owner> with a hold count'}}
  end
end
redis.call('del', KEYS[1])
redis.call('{publish}', KEYS[2], 0)
return {{1, 'hash'}}
"
    )
}

/// KEYS: register. ARGV: token, value. nil if stored, else the lowest token it would take: the larger of the stored
/// token and the server's start floor (registers fail closed, DESIGN.md §3: see [`START_FLOOR`]). Tokens are
/// compared as decimal strings (the longer is larger, then the text), since Lua numbers are doubles and `tonumber`
/// would make 2^53 and 2^53 + 1 equal.
fn fence_write_lua() -> String {
    format!(
        r"{START_FLOOR}
local function digits(s) return (string.gsub(s, '^0+(%d)', '%1')) end
local function above(a, b) return #a > #b or (#a == #b and a > b) end
local least = start_floor(redis.call('time'))
local cur = redis.call('hget', KEYS[1], 'token')
if cur and above(digits(cur), least) then least = digits(cur) end
if above(least, digits(ARGV[1])) then
  return least
end
redis.call('hset', KEYS[1], 'token', ARGV[1], 'value', ARGV[2])
return false
"
    )
}

/// The fence counter of lock `name` (Redisson RFencedLock's key).
pub(super) fn token_key(name: &str) -> String {
    format!("redisson_lock_token:{{{name}}}")
}

/// Where releases of lock `name` are published (Redisson's channel).
fn channel(name: &str) -> String {
    format!("redisson_lock__channel:{{{name}}}")
}

/// A fence register's key.
fn fence_key(resource: &str) -> String {
    format!("fencelock_fence:{{{resource}}}")
}

/// Errors that mean "unreachable now" rather than a bug or an unexpected reply; `TRYAGAIN` is also a grant asked of
/// a server in its first second ([`START_FLOOR`]).
pub(super) fn is_transient(e: &RedisError) -> bool {
    e.is_io_error()
        || e.is_timeout()
        || e.is_connection_dropped()
        || e.is_connection_refusal()
        || e.kind() == RedisErrorKind::Server(ServerErrorKind::TryAgain)
}

/// Routes pushed messages to the waiters of their channel.
pub(super) fn on_push(channels: &Channels, push: PushInfo) {
    match push.kind {
        PushKind::Message | PushKind::SMessage => {
            if let Some(Value::BulkString(ch)) = push.data.first() {
                channels.wake(&String::from_utf8_lossy(ch));
            }
        }
        // A reconnect may have dropped messages: every waiter re-checks.
        PushKind::Disconnection => channels.wake_all(),
        _ => {}
    }
}

/// How one Redis deployment is reached: a single server (here), a cluster (`redis_cluster.rs`) or the master behind
/// Sentinel ([`sentinel`]). The scripts, the
/// wait loop and the Redisson layout are shared; the connection, key naming and error classes are not.
pub(crate) trait Deployment: Send + Sync + fmt::Debug + Sized + 'static {
    /// The command connection.
    type Conn: ConnectionLike + Clone + Send + Sync + 'static;
    /// The RESP3 connection that carries waiters' subscriptions.
    type PubSub: Listen<Error = RedisError> + fmt::Debug;
    /// The command the release scripts publish with (`publish`, or `spublish` for sharded pub/sub).
    const PUBLISH: &'static str;
    /// The `PUBSUB` subcommand counting a channel's subscribers, where one node can answer for all of them.
    const NUMSUB: Option<&'static str>;

    /// Connects the command connection; errors are this crate's, naming the URL without secrets.
    fn connect(url: &str, opts: &ClientOptions) -> impl Future<Output = Result<(Self, Self::Conn)>> + Send;
    /// Connects the pub/sub connection, delivering pushes to `channels`.
    fn open_pubsub(
        &self,
        opts: &ClientOptions,
        channels: Arc<Channels>,
    ) -> impl Future<Output = Result<Self::PubSub, RedisError>> + Send;
    /// The fence counter of lock `name`.
    fn token_key(name: &str) -> String;
    /// Where releases of lock `name` are published.
    fn channel(name: &str) -> String;
    /// Refuses a name this deployment cannot store.
    fn check_name(_name: &str) -> Result<()> {
        Ok(())
    }
    /// Whether an error means "unreachable now".
    fn transient(e: &RedisError) -> bool {
        is_transient(e)
    }
    /// How many replicas must confirm a grant, and how long to wait for them (see [`replicas`]).
    fn replicas_wanted(&self) -> (u32, Duration) {
        (0, replicas::DEFAULT_TIMEOUT)
    }
    /// Redisson's `prefixName` of `name` for another key of the lock (the fair queue's).
    fn prefixed(prefix: &str, name: &str) -> String {
        format!("{prefix}:{{{name}}}")
    }
    /// Redisson's key prefix of lock `name` for keys it names by suffix (`suffixName`): `{name}`, from which the
    /// read holds' timeout keys and the semaphore's timeout zset are named.
    fn key_prefix(name: &str) -> String {
        format!("{{{name}}}")
    }
    /// The URL's `fair=`, if it gave one.
    fn fair(&self) -> Option<bool> {
        None
    }
}

/// A single Redis server, through a reconnecting `ConnectionManager`.
#[derive(Debug)]
pub(crate) struct Server {
    client: Client,
    wanted: Wanted,
    fair: Option<bool>,
}

/// The RESP3 connection that carries this client's subscriptions.
#[derive(Debug, Clone)]
pub(crate) struct PubSub(ConnectionManager);

impl Listen for PubSub {
    type Error = RedisError;

    async fn listen(&self, channel: &str) -> Result<(), RedisError> {
        self.0.clone().subscribe(channel).await
    }

    async fn unlisten(&self, channel: &str) {
        let _ = self.0.clone().unsubscribe(channel).await;
    }
}

fn manager_config(opts: &ClientOptions) -> ConnectionManagerConfig {
    // Few retries with short timeouts: a dead server must cost a bounded time, not redis-rs's default backoff loop.
    ConnectionManagerConfig::new()
        .set_number_of_retries(1)
        .set_connection_timeout(Some(opts.connect_timeout))
        .set_response_timeout(Some(opts.request_timeout))
}

/// The TLS, replica and `fair=` settings of a `redis://` or `rediss://` URL; the rest of it is redis-rs's to read.
fn parse(url: &str) -> Result<(Security, Wanted, Option<bool>)> {
    let shown = redact(url);
    let parsed = url::Url::parse(url).map_err(|e| bad_url(url, e))?;
    if parsed.fragment().is_some() {
        // redis-rs reads `#insecure` as "skip the certificate checks"; they are never skipped.
        return Err(Error::invalid(format!("URL {shown:?}: a fragment (#…) is not allowed")));
    }
    let mut pairs = parsed.query_pairs().into_owned().collect();
    let fair = fair::take(&mut pairs, &shown)?;
    let (security, rest) = Security::take(pairs, parsed.scheme() == "rediss", &shown, "use rediss://")?;
    let (wanted, rest) = Wanted::take(rest, &shown)?;
    let unknown: Vec<&str> = names(&rest).into_iter().filter(|n| *n != "protocol").collect();
    if !unknown.is_empty() {
        return Err(Error::invalid(format!(
            "URL {shown:?}: unknown parameters {unknown:?}; expected ca=, cert=, key= (with rediss://), \
             wait_replicas=, wait_timeout_ms=, fair= or protocol="
        )));
    }
    Ok((security, wanted, fair))
}

/// A URL neither the url crate nor redis-rs could read, naming a bad port in the words of the other backends.
fn bad_url(url: &str, e: impl fmt::Display) -> Error {
    match super::bad_port(url) {
        Some(port) => Error::invalid(format!("URL {:?}: {port}", redact(url))),
        None => Error::invalid(format!("URL {:?}: {e}", redact(url))),
    }
}

impl Server {
    /// Connects to the server of `url` (`redis://` or `rediss://`, whose query is already in `security`).
    pub(crate) async fn open(
        url: &str,
        security: &Security,
        opts: &ClientOptions,
    ) -> Result<(Self, ConnectionManager)> {
        let shown = redact(url);
        let client = match security.certificates() {
            Some(certs) => Client::build_with_tls(url, certs),
            None => Client::open(url),
        }
        .map_err(|e| bad_url(url, e))?;
        let connecting = async {
            let mut conn = ConnectionManager::new_with_config(client.clone(), manager_config(opts)).await?;
            // A server that wants a password takes the connection and refuses its first command: ask one now. An
            // ACL user may lack PING itself; that refusal still says the login worked.
            match redis::cmd("PING").query_async::<()>(&mut conn).await {
                Err(e) if e.kind() != RedisErrorKind::Server(ServerErrorKind::NoPerm) => Err(e),
                _ => Ok(conn),
            }
        };
        let conn = tokio::time::timeout(opts.connect_timeout, connecting)
            .await
            .map_err(|_| security.timeout_error(&shown, opts.connect_timeout))?
            .map_err(|e| security.connect_error(&e, &shown))?;
        Ok((Server { client, wanted: Wanted::default(), fair: None }, conn))
    }
}

impl Deployment for Server {
    type Conn = ConnectionManager;
    type PubSub = PubSub;
    const PUBLISH: &'static str = "publish";
    const NUMSUB: Option<&'static str> = Some("NUMSUB");

    async fn connect(url: &str, opts: &ClientOptions) -> Result<(Self, ConnectionManager)> {
        let (security, wanted, fair) = parse(url)?;
        let (server, conn) = Server::open(url, &security, opts).await?;
        Ok((Server { wanted, fair, ..server }, conn))
    }

    fn replicas_wanted(&self) -> (u32, Duration) {
        (self.wanted.replicas.unwrap_or(0), self.wanted.timeout)
    }

    fn fair(&self) -> Option<bool> {
        self.fair
    }

    async fn open_pubsub(&self, opts: &ClientOptions, channels: Arc<Channels>) -> Result<PubSub, RedisError> {
        let info = self.client.get_connection_info().clone();
        let redis = info.redis_settings().clone().set_protocol(ProtocolVersion::RESP3);
        let client = Client::open(info.set_redis_settings(redis))?;
        let config = manager_config(opts)
            .set_push_sender(move |push: PushInfo| -> Result<(), std::convert::Infallible> {
                on_push(&channels, push);
                Ok(())
            })
            .set_automatic_resubscription();
        ConnectionManager::new_with_config(client, config).await.map(PubSub)
    }

    fn token_key(name: &str) -> String {
        token_key(name)
    }

    fn channel(name: &str) -> String {
        channel(name)
    }
}

#[derive(Debug)]
struct Scripts {
    acquire: Script,
    renew: Script,
    release: Script,
    force: Script,
    fence_write: Script,
    fair: fair::Scripts,
    rw: rwlock::Scripts,
    sem: semaphore::Scripts,
}

impl Scripts {
    /// The scripts of a deployment whose releases are announced with `publish`.
    fn publishing_with(publish: &str) -> Self {
        Scripts {
            acquire: Script::new(&acquire_lua()),
            renew: Script::new(RENEW),
            release: Script::new(&fair::release_lua(publish)),
            force: Script::new(&force_release_lua(publish)),
            fence_write: Script::new(&fence_write_lua()),
            fair: fair::Scripts::publishing_with(publish),
            rw: rwlock::Scripts::publishing_with(publish),
            sem: semaphore::Scripts::publishing_with(publish),
        }
    }
}

/// The Redis lock backend over one deployment; [`RedisBackend`] is the single-server one.
pub(crate) struct RedisLock<D: Deployment> {
    deployment: D,
    conn: D::Conn,
    pubsub: OnceCell<D::PubSub>,
    channels: Arc<Channels>,
    scripts: Scripts,
    /// Whether grants and fence writes wait for replicas (`redis/replicas.rs`).
    sync: ReplicaSync,
    url: String,
    opts: ClientOptions,
    /// Whether waiters queue fairly unless a call says otherwise.
    fair: bool,
}

/// The `redis://` backend.
pub(crate) type RedisBackend = RedisLock<Server>;

impl RedisBackend {
    /// One server of a multi-server backend (a Redlock instance): `url` is `redis://` or `rediss://` without a
    /// query, and `security` comes from the URL that named it.
    pub(crate) async fn connect_instance(url: &str, security: &Security, opts: &ClientOptions) -> Result<Self> {
        let (server, conn) = Server::open(url, security, opts).await?;
        Ok(Self::over(server, conn, url, opts))
    }
}

impl<D: Deployment> fmt::Debug for RedisLock<D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisLock").field("url", &self.url).finish_non_exhaustive()
    }
}

impl<D: Deployment> RedisLock<D> {
    pub(crate) async fn connect(url: &str, opts: &ClientOptions) -> Result<Self> {
        let (deployment, mut conn) = D::connect(url, opts).await?;
        let (replicas, timeout) = deployment.replicas_wanted();
        let sync = ReplicaSync::detect(&mut conn, replicas, timeout, opts, &redact(url)).await?;
        Ok(RedisLock { sync, ..Self::over(deployment, conn, url, opts) })
    }

    fn over(deployment: D, conn: D::Conn, url: &str, opts: &ClientOptions) -> Self {
        RedisLock {
            conn,
            pubsub: OnceCell::new(),
            channels: Arc::default(),
            scripts: Scripts::publishing_with(D::PUBLISH),
            sync: ReplicaSync::default(),
            url: redact(url),
            opts: opts.clone(),
            fair: deployment.fair().unwrap_or(fair::DEFAULT),
            deployment,
        }
    }

    fn err(&self, e: RedisError) -> Error {
        // A password changed or an ACL narrowed since connect: no retry fixes that either.
        if let Some(refused) = security::refusal(&e, &self.url) {
            return refused;
        }
        if D::transient(&e) {
            Error::unavailable(format!("{}: {e}", self.url))
        } else {
            Error::internal(format!("{}: unexpected reply: {e}", self.url))
        }
    }

    /// The shared RESP3 connection that carries every waiter's subscriptions, made on first use.
    async fn pubsub(&self) -> Result<&D::PubSub> {
        self.pubsub
            .get_or_try_init(|| async {
                let opening = self.deployment.open_pubsub(&self.opts, self.channels.clone());
                tokio::time::timeout(self.opts.connect_timeout, opening)
                    .await
                    .map_err(|_| Error::unavailable(format!("{}: no pub/sub connection in time", self.url)))?
                    .map_err(|e| self.err(e))
            })
            .await
    }

    /// Runs a script that is not one of this backend's own (Redlock's counter round), mapping errors alike.
    pub(super) async fn invoke<T: FromRedisValue>(&self, script: &ScriptInvocation<'_>) -> Result<T> {
        script.invoke_async(&mut self.conn.clone()).await.map_err(|e| self.err(e))
    }

    /// Runs `script` with `keys` and `args`.
    async fn invoke_with<T: FromRedisValue>(
        &self,
        script: &Script,
        keys: Vec<String>,
        args: impl IntoIterator<Item = String>,
    ) -> Result<T> {
        let mut call = script.prepare_invoke();
        for key in keys {
            call.key(key);
        }
        for arg in args {
            call.arg(arg);
        }
        self.invoke(&call).await
    }

    async fn release_script(&self, name: &str, holder: &str) -> Result<bool> {
        // The queue's keys too: a release wakes the fair queue's head when one waits.
        let mut release = self.scripts.release.key(name);
        release.key(D::channel(name));
        for key in fair::queue_keys::<D>(name) {
            release.key(key);
        }
        release.arg(holder);
        Ok(self.invoke::<i64>(&release).await? == 1)
    }

    /// Deletes any hold of `req`'s kind that `req.holder` may have taken (and a waiting writer's mark); whether
    /// there was a hold.
    async fn release_taken(&self, req: &AcquireRequest) -> Result<bool> {
        match req.kind {
            HoldKind::Read | HoldKind::Write => self.rw_abandon(req).await,
            HoldKind::Permit { .. } => self.sem_abandon(&req.name, &req.holder).await,
            _ => self.release_script(&req.name, &req.holder).await,
        }
    }

    /// The channel a waiter for `req` listens on: where releases of holds of its kind are published.
    fn channel_of(req: &AcquireRequest) -> String {
        match req.kind {
            HoldKind::Read | HoldKind::Write => rwlock::channel::<D>(&req.name),
            HoldKind::Permit { .. } => semaphore::channel::<D>(&req.name),
            _ => D::channel(&req.name),
        }
    }
}

/// What a waiter keeps between attempts: its subscription once it has waited, and whether a writer's waiting mark
/// of it may be on the server.
#[derive(Debug)]
pub(crate) struct Waiter<L: super::waiters::Listen> {
    sub: Option<Subscription<L>>,
    marked: bool,
}

impl<L: super::waiters::Listen> Default for Waiter<L> {
    fn default() -> Self {
        Waiter { sub: None, marked: false }
    }
}

impl<L: super::waiters::Listen> Waiter<L> {
    /// Notes the release messages seen so far: call it right before an attempt.
    pub(crate) fn mark(&mut self) {
        if let Some(sub) = &mut self.sub {
            sub.mark();
        }
    }
}

#[async_trait]
impl<D: Deployment> Backend for RedisLock<D> {
    fn capability(&self) -> Capability {
        Capability {
            fencing: true,
            native_wait: true,
            fair: self.fair,
            session_bound: false,
            rw_lock: true,
            semaphore: true,
            election: true,
        }
    }

    fn fair_choice(&self) -> bool {
        true
    }

    fn describe(&self) -> &str {
        &self.url
    }

    fn begin(self: Arc<Self>, req: AcquireRequest, undo: Undo) -> Box<dyn Pending> {
        if req.kind == HoldKind::Exclusive && req.fair.unwrap_or(self.fair) {
            return fair::FairAttempt::begin(self, req, undo);
        }
        RecordAttempt::begin(self, req, undo)
    }

    async fn renew(&self, grant: &Grant, ttl: Duration) -> Result<()> {
        match grant.kind {
            HoldKind::Read | HoldKind::Write => return self.rw_renew(grant, ttl).await,
            HoldKind::Permit { .. } => return self.sem_renew(grant, ttl).await,
            _ => {}
        }
        let mut renew = self.scripts.renew.key(&grant.name);
        renew.arg(ttl_ms(ttl)).arg(&grant.holder);
        if self.invoke::<i64>(&renew).await? == 1 { Ok(()) } else { Err(lock_lost(grant, &self.url)) }
    }

    async fn release(&self, grant: &Grant) -> Result<()> {
        match grant.kind {
            HoldKind::Read | HoldKind::Write => return self.rw_release(grant).await,
            HoldKind::Permit { .. } => return self.sem_release(grant).await,
            _ => {}
        }
        if self.release_script(&grant.name, &grant.holder).await? { Ok(()) } else { Err(not_held(grant, &self.url)) }
    }

    async fn force_release(&self, name: &str) -> Result<bool> {
        D::check_name(name)?;
        let mut force = self.scripts.force.key(name);
        force.key(D::channel(name));
        let (deleted, what): (i64, String) = self.invoke(&force).await?;
        if deleted < 0 {
            // Not a mutex: a read-write lock or a semaphore, perhaps.
            if let Some(deleted) = self.rw_force(name).await? {
                return Ok(deleted);
            }
            if let Some(deleted) = self.sem_force(name).await? {
                return Ok(deleted);
            }
            return Err(Error::invalid(format!(
                "{}: key {name:?} is {what}, not a lock record; refusing to delete it",
                self.url
            )));
        }
        Ok(deleted == 1)
    }

    async fn inspect(&self, name: &str) -> Result<LockInfo> {
        D::check_name(name)?;
        // The keys of one lock share a slot, so on a cluster too this is one pipeline to one node.
        let read: Result<(HashMap<String, String>, i64, Option<u64>), RedisError> =
            redis::pipe().hgetall(name).pttl(name).get(D::token_key(name)).query_async(&mut self.conn.clone()).await;
        let (fields, pttl, token) = match read {
            Ok(read) => read,
            Err(e) => {
                // A semaphore's count string is no hash (redis-rs reports WRONGTYPE inside a pipeline failure).
                let kind: Option<String> = redis::cmd("TYPE").arg(name).query_async(&mut self.conn.clone()).await.ok();
                if kind.as_deref() == Some("string") {
                    return self.sem_inspect(name).await;
                }
                return Err(self.err(e));
            }
        };
        // A read-write lock's hash has its `mode`, and names the writer `<holder>:write`.
        let rw = fields.contains_key("mode");
        let mut holders: Vec<String> = fields.into_keys().filter(|f| f != "mode").collect();
        holders.sort_by_key(|f| !f.ends_with(":write"));
        let holder = holders.first().map(|f| rwlock::holder_of(f).to_string());
        // Waiters subscribe to the release channel (one subscription per client, however many of its calls wait).
        let waiters = match D::NUMSUB {
            Some(sub) => {
                let channel = if rw { rwlock::channel::<D>(name) } else { D::channel(name) };
                let mut counts: HashMap<String, u64> = redis::cmd("PUBSUB")
                    .arg(sub)
                    .arg(&channel)
                    .query_async(&mut self.conn.clone())
                    .await
                    .map_err(|e| self.err(e))?;
                Some(counts.remove(&channel).unwrap_or(0))
            }
            None => None,
        };
        Ok(LockInfo {
            remaining: holder.as_ref().and((pttl >= 0).then(|| Duration::from_millis(pttl as u64))),
            holder,
            last_token: token,
            waiters,
        })
    }

    async fn available(&self, name: &str, permits: u32) -> Result<u32> {
        D::check_name(name)?;
        self.sem_available(name, permits).await
    }

    async fn fence_write(&self, resource: &str, token: u64, value: &[u8]) -> Result<()> {
        let args = [token.to_string().into_bytes(), value.to_vec()];
        match self.fence_write_synced(resource, fence_key(resource), args).await? {
            None => Ok(()),
            Some(h) => Err(fenced(resource, &self.url, token, h)),
        }
    }

    async fn fence_read(&self, resource: &str) -> Result<(u64, Vec<u8>)> {
        let (token, value): (Option<u64>, Option<Vec<u8>>) = redis::cmd("HMGET")
            .arg(fence_key(resource))
            .arg("token")
            .arg("value")
            .query_async(&mut self.conn.clone())
            .await
            .map_err(|e| self.err(e))?;
        Ok((token.unwrap_or(0), value.unwrap_or_default()))
    }
}

#[async_trait]
impl<D: Deployment> Records for RedisLock<D> {
    type Waiter = Waiter<D::PubSub>;

    async fn take(&self, req: &AcquireRequest, waiter: &mut Self::Waiter) -> Result<Attempt> {
        D::check_name(&req.name)?;
        // Remember which release messages were already seen, so `wait` returns at once for one that lands meanwhile.
        waiter.mark();
        match req.kind {
            HoldKind::Read | HoldKind::Write => return self.rw_take(req, waiter).await,
            HoldKind::Permit { permits } => return self.sem_take(req, permits).await,
            _ => {}
        }
        let keys = [req.name.clone(), D::token_key(&req.name)];
        let args = [ttl_ms(req.ttl).to_string().into_bytes(), req.holder.clone().into_bytes()];
        let reply = self.acquire_synced(req, &self.scripts.acquire, &keys, &args).await?;
        let [ok, n] = reply[..] else {
            return Err(Error::internal(format!("{}: unexpected reply {reply:?}", self.url)));
        };
        Ok(if ok == 1 {
            Attempt::Acquired(req.grant(n as u64, None))
        } else {
            Attempt::Busy(Busy { holder_ttl: (n >= 0).then(|| Duration::from_millis(n as u64)) })
        })
    }

    async fn wait_free(
        &self,
        req: &AcquireRequest,
        busy: &Busy,
        waiter: &mut Self::Waiter,
        deadline: Option<Instant>,
    ) -> Result<()> {
        let subscribe = async {
            let pubsub = self.pubsub().await?;
            self.channels.subscribe(pubsub, Self::channel_of(req)).await.map_err(|e| self.err(e))
        };
        let free = async {
            if req.kind != HoldKind::Exclusive {
                // Look again at once: a release may have gone to nobody meanwhile.
                return Ok(true);
            }
            let exists: bool = redis::cmd("EXISTS")
                .arg(&req.name)
                .query_async(&mut self.conn.clone())
                .await
                .map_err(|e| self.err(e))?;
            Ok(!exists)
        };
        wait_notified(&mut waiter.sub, busy.wait_until(deadline), subscribe, free).await
    }

    async fn abandon(&self, req: &AcquireRequest) -> Result<()> {
        // A refused name never reached the server.
        if D::check_name(&req.name).is_err() {
            return Ok(());
        }
        self.release_taken(req).await.map(drop)
    }

    fn left_behind(waiter: &Self::Waiter) -> bool {
        waiter.marked
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn force_release_scripts_name_their_publish_command() {
        let force = force_release_lua("publish");
        assert!(force.contains("redis.call('publish', KEYS[2], 0)"), "{force}");
        assert_eq!(force_release_lua("spublish"), force.replace("'publish'", "'spublish'"));
        assert!(!force.contains("{{"), "{force}");
    }
}
