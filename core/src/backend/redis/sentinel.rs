//! `redis+sentinel://`: the single-Redis scripts and Redisson layout of [`super`] on the master that Redis Sentinel
//! names, following failovers. A Redisson client in Sentinel mode on the same master interoperates, as on one server.
//!
//! URL: `redis+sentinel://[[user]:password@]s1[:26379],s2,…/<master name>[?db=N&tls=true&ca=&cert=&key=
//! &wait_replicas=N&wait_timeout_ms=T&fair=]`.
//!
//! - **Discovery.** The sentinels are asked in turn (`SENTINEL get-master-addr-by-name`); the node named must say it
//!   is a master (`ROLE`), else the next sentinel is asked. A name no sentinel knows is `InvalidArgument`; no
//!   sentinel answering, or none naming a master, `Unavailable`; both name the sentinels, never the credentials.
//! - **Failovers.** A task listens for `+switch-master` on one sentinel (the next one when it drops, re-discovering
//!   on each reconnect in case it missed the event), and a command that finds the node refusing connections or
//!   answering `READONLY` (a demoted master) re-discovers too. Re-discovery is single-flight; it swaps the command
//!   connection under [`Conn`] and moves the waiters' pub/sub: every channel is subscribed on the new master and
//!   every waiter woken to re-check. A command that was certainly not run (refused connection, a write to a closed
//!   socket, `READONLY`) waits for
//!   the new master up to the request timeout and is retried there; any other failure is returned as it is (its
//!   outcome is unknown, which the cancel protocol handles).
//! - **Credentials** authenticate to the data nodes. Sentinels are asked without them, and with them only if a
//!   sentinel answers `NOAUTH` (a sentinel with `requirepass` or ACL users of the same name). TLS, when on, applies to
//!   sentinels and data nodes alike, with the same `ca=`, `cert=` and `key=`.
//! - **Replicas.** `wait_replicas` defaults to what makes a majority of the data nodes the sentinels know at
//!   connect, the master counting as one: ⌈r/2⌉ of r replicas (1 of 2), 0 with none. See [`super::replicas`].

use std::collections::BTreeSet;
use std::fmt;
use std::sync::{Arc, Mutex, OnceLock, RwLock, Weak};
use std::time::Duration;

use redis::aio::{ConnectionLike, ConnectionManager};
use redis::{
    AsyncConnectionConfig, Client, Cmd, ErrorKind as RedisErrorKind, Pipeline, PushInfo, PushKind, RedisError,
    RedisFuture, ServerErrorKind, Value,
};
use tokio::sync::{Mutex as AsyncMutex, watch};
use tokio::task::AbortHandle;
use tokio::time::Instant;

use super::replicas::Wanted;
use super::{Deployment, RedisLock, Security, channel, is_transient, manager_config, names, on_push, token_key};
use crate::backend::waiters::{Channels, Listen};
use crate::backend::{Backend, Host, parse_hosts, redact};
use crate::error::{Error, Result};
use crate::options::ClientOptions;

/// The port of a sentinel that names none.
const SENTINEL_PORT: u16 = 26379;
const EXPECTED: &str = "expected redis+sentinel://host:26379,host,…/<master name>";

/// Opens a `redis+sentinel://` backend.
pub(crate) async fn connect(url: &str, opts: &ClientOptions) -> Result<Arc<dyn Backend>> {
    Ok(Arc::new(RedisLock::<Sentinel>::connect(url, opts).await?))
}

/// What a `redis+sentinel://` URL says.
#[derive(Debug)]
struct Config {
    sentinels: Vec<Host>,
    master: String,
    /// The user-info as written (`user:pass` or `:pass`): a secret, never shown.
    auth: Option<String>,
    db: u32,
    security: Security,
    wanted: Wanted,
    /// `fair=` for every lock of this client (the fair queue's).
    fair: Option<bool>,
}

fn parse(url: &str) -> Result<Config> {
    let shown = redact(url);
    let bad = |why: String| Error::invalid(format!("URL {shown:?}: {why}"));
    let rest = url.split_once("://").map(|(_, rest)| rest).ok_or_else(|| bad(EXPECTED.into()))?;
    if rest.contains('#') {
        return Err(bad("a fragment (#…) is not allowed".into()));
    }
    let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
    let (hosts, master) = rest.split_once('/').unwrap_or((rest, ""));
    if master.is_empty() || master.contains('/') {
        return Err(bad(format!("no master name: {EXPECTED}")));
    }
    let (auth, hosts) = hosts.rsplit_once('@').map_or((None, hosts), |(auth, hosts)| (Some(auth.to_string()), hosts));
    let sentinels = parse_hosts(hosts, SENTINEL_PORT).map_err(bad)?;
    let (mut tls, mut db, mut pairs) = (false, 0, Vec::new());
    for (name, value) in url::form_urlencoded::parse(query.as_bytes()).into_owned() {
        match name.as_str() {
            "tls" => tls = crate::backend::tls::flag(&value, &shown)?,
            "db" => db = value.parse().map_err(|_| bad(format!("db={value:?} is not a database number")))?,
            _ => pairs.push((name, value)),
        }
    }
    let fair = super::fair::take(&mut pairs, &shown)?;
    let (security, rest) = Security::take(pairs, tls, &shown, "add tls=true")?;
    let (wanted, unknown) = Wanted::take(rest, &shown)?;
    if !unknown.is_empty() {
        return Err(bad(format!(
            "unknown parameters {:?}; expected db=, tls=, ca=, cert=, key=, wait_replicas=, wait_timeout_ms=, fair=",
            names(&unknown)
        )));
    }
    Ok(Config { sentinels, master: master.to_string(), auth, db, security, wanted, fair })
}

/// The master this client talks to now.
#[derive(Clone)]
struct Current {
    addr: String,
    conn: ConnectionManager,
}

/// How the sentinels and data nodes are reached.
struct Nodes {
    config: Config,
    shown: String,
    opts: ClientOptions,
}

struct Shared {
    nodes: Nodes,
    current: RwLock<Current>,
    /// Bumped on every switch to a new master; requests wait on it.
    generation: watch::Sender<u64>,
    /// Single-flight re-discovery.
    moving: AsyncMutex<()>,
    pubsub: OnceLock<Arc<PubSubState>>,
}

/// Redis behind Sentinel: the master the sentinels name, followed across failovers.
pub(crate) struct Sentinel {
    shared: Arc<Shared>,
    replicas: u32,
    watcher: AbortHandle,
}

impl fmt::Debug for Sentinel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sentinel").field("url", &self.shared.nodes.shown).finish_non_exhaustive()
    }
}

impl Drop for Sentinel {
    fn drop(&mut self) {
        self.watcher.abort();
    }
}

/// Whether a reply (or a pipeline's replies) says the node is no master any more.
fn read_only(e: &RedisError) -> bool {
    e.kind() == RedisErrorKind::Server(ServerErrorKind::ReadOnly)
}

/// Whether a request certainly never reached the node: the connection was refused, or the write failed on a socket
/// already closed (redis-rs keeps the I/O error kind private, so its text is read), or a demoted master refused it.
fn not_sent(e: &RedisError) -> bool {
    let text = e.to_string().to_ascii_lowercase();
    e.is_connection_refusal()
        || read_only(e)
        || (e.is_connection_dropped() && (text.contains("broken pipe") || text.contains("not connected")))
}

fn values_read_only(values: &[Value]) -> bool {
    values.iter().any(|v| matches!(v, Value::ServerError(e) if e.kind() == Some(ServerErrorKind::ReadOnly)))
}

impl Nodes {
    fn sentinel_list(&self) -> String {
        let list: Vec<String> = self.config.sentinels.iter().map(|h| h.to_string()).collect();
        list.join(",")
    }

    fn scheme(&self) -> &'static str {
        if self.config.security.tls() { "rediss" } else { "redis" }
    }

    fn client(&self, url: &str) -> Result<Client, RedisError> {
        match self.config.security.certificates() {
            Some(certs) => Client::build_with_tls(url, certs),
            None => Client::open(url),
        }
    }

    fn connection_config(&self) -> AsyncConnectionConfig {
        AsyncConnectionConfig::new()
            .set_connection_timeout(Some(self.opts.connect_timeout))
            .set_response_timeout(Some(self.opts.request_timeout))
    }

    /// One question to one sentinel: without credentials, then with them if it wants some.
    async fn ask(&self, sentinel: &Host, cmd: &Cmd) -> Result<Value, RedisError> {
        let plain = format!("{}://{sentinel}", self.scheme());
        let mut conn =
            self.client(&plain)?.get_multiplexed_async_connection_with_config(&self.connection_config()).await;
        if let (Err(e), Some(auth)) = (&conn, &self.config.auth)
            && e.code() == Some("NOAUTH")
        {
            let url = format!("{}://{auth}@{sentinel}", self.scheme());
            conn = self.client(&url)?.get_multiplexed_async_connection_with_config(&self.connection_config()).await;
        }
        let mut conn = conn?;
        let reply = cmd.query_async::<Value>(&mut conn).await;
        match reply {
            Err(e) if e.code() == Some("NOAUTH") && self.config.auth.is_some() => {
                let url = format!("{}://{}@{sentinel}", self.scheme(), self.config.auth.as_deref().unwrap_or(""));
                let mut conn =
                    self.client(&url)?.get_multiplexed_async_connection_with_config(&self.connection_config()).await?;
                cmd.query_async(&mut conn).await
            }
            reply => reply,
        }
    }

    fn data_url(&self, addr: &str, resp3: bool) -> String {
        let auth = self.config.auth.as_ref().map(|a| format!("{a}@")).unwrap_or_default();
        let protocol = if resp3 { "?protocol=resp3" } else { "" };
        format!("{}://{auth}{addr}/{}{protocol}", self.scheme(), self.config.db)
    }

    /// Connects to the data node at `addr` and checks that it is a master.
    async fn open_master(&self, addr: &str) -> Result<Current, String> {
        let shown = redact(&self.data_url(addr, false));
        let client = self.client(&self.data_url(addr, false)).map_err(|e| e.to_string())?;
        let connecting = async {
            let mut conn = ConnectionManager::new_with_config(client, manager_config(&self.opts)).await?;
            let role: Vec<Value> = redis::cmd("ROLE").query_async(&mut conn).await?;
            Ok::<_, RedisError>((conn, role))
        };
        let (conn, role) = tokio::time::timeout(self.opts.connect_timeout, connecting)
            .await
            .map_err(|_| format!("{shown}: no connection within {:?}", self.opts.connect_timeout))?
            .map_err(|e| self.config.security.connect_error(&e, &shown).message().to_string())?;
        match role.first() {
            Some(Value::BulkString(r)) if r == b"master" => Ok(Current { addr: addr.to_string(), conn }),
            _ => Err(format!("{addr} is not a master yet")),
        }
    }

    /// Asks the sentinels in turn for the master, and connects to it.
    async fn discover(&self) -> Result<Current> {
        let mut ask = redis::cmd("SENTINEL");
        ask.arg("get-master-addr-by-name").arg(&self.config.master);
        let (mut said, mut unknown) = (Vec::new(), 0);
        for sentinel in &self.config.sentinels {
            let addr = match self.ask(sentinel, &ask).await {
                Ok(Value::Nil) => {
                    unknown += 1;
                    said.push(format!("{sentinel}: no such master"));
                    continue;
                }
                Ok(v) => match redis::from_redis_value::<(String, u16)>(v) {
                    Ok((host, port)) if host.contains(':') => format!("[{host}]:{port}"),
                    Ok((host, port)) => format!("{host}:{port}"),
                    Err(e) => {
                        said.push(format!("{sentinel}: unexpected reply: {e}"));
                        continue;
                    }
                },
                Err(e) => {
                    // A refused credential is no reason to try the next sentinel, but it is to say so plainly.
                    if let Some(refused) = super::security::refusal(&e, &format!("sentinel {sentinel}")) {
                        return Err(refused);
                    }
                    said.push(format!("{sentinel}: {e}"));
                    continue;
                }
            };
            match self.open_master(&addr).await {
                Ok(current) => return Ok(current),
                Err(why) => said.push(format!("{sentinel} named {addr}: {why}")),
            }
        }
        let master = &self.config.master;
        let what = format!("{} (sentinels {}): {}", self.shown, self.sentinel_list(), said.join("; "));
        if unknown == self.config.sentinels.len() {
            return Err(Error::invalid(format!("no sentinel knows a master named {master:?}: {what}")));
        }
        Err(Error::unavailable(format!("no master named {master:?} found: {what}")))
    }
}

impl Shared {
    fn current(&self) -> (Current, u64) {
        let current = self.current.read().unwrap_or_else(|p| p.into_inner()).clone();
        (current, *self.generation.borrow())
    }

    /// Re-discovers the master unless someone already switched since `seen`; moves the waiters when it changed.
    async fn rediscover(&self, seen: u64) {
        let _moving = self.moving.lock().await;
        if *self.generation.borrow() != seen {
            return;
        }
        let Ok(next) = self.nodes.discover().await else { return };
        if next.addr == self.current().0.addr {
            return;
        }
        let addr = next.addr.clone();
        tracing::info!(backend = %self.nodes.shown, master = %next.addr, "following a failover to a new master");
        *self.current.write().unwrap_or_else(|p| p.into_inner()) = next;
        self.generation.send_modify(|g| *g += 1);
        if let Some(pubsub) = self.pubsub.get() {
            pubsub.move_to(&self.nodes, &addr).await;
        }
    }

    /// After a failed request: whether it was certainly not run (so it may be retried on the master there is once
    /// the sentinels have named a new one, within the request timeout).
    async fn follow(&self, not_run: bool, seen: u64, started: Instant) -> Option<ConnectionManager> {
        let deadline = started + self.nodes.opts.request_timeout;
        let mut switched = self.generation.subscribe();
        loop {
            self.rediscover(seen).await;
            let (current, generation) = self.current();
            if generation != seen {
                return not_run.then_some(current.conn);
            }
            if !not_run || Instant::now() >= deadline {
                return None;
            }
            // Woken by a switch (+switch-master, another request), else asks again shortly: a bounded retry.
            let nap = Instant::now() + Duration::from_millis(250);
            let _ = tokio::time::timeout_at(nap.min(deadline), switched.changed()).await;
        }
    }
}

/// The command connection: the current master's `ConnectionManager`, swapped on failover.
#[derive(Clone)]
pub(crate) struct Conn(Arc<Shared>);

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        Box::pin(async move {
            let started = Instant::now();
            let (current, seen) = self.0.current();
            let reply = current.conn.clone().req_packed_command(cmd).await;
            let not_run = match &reply {
                Ok(Value::ServerError(e)) => e.kind() == Some(ServerErrorKind::ReadOnly),
                Ok(_) => return reply,
                Err(e) => not_sent(e),
            };
            let transient = reply.as_ref().err().is_some_and(is_transient);
            if !not_run && !transient {
                return reply;
            }
            match self.0.follow(not_run, seen, started).await {
                Some(mut next) => next.req_packed_command(cmd).await,
                None => reply,
            }
        })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        Box::pin(async move {
            let started = Instant::now();
            let (current, seen) = self.0.current();
            let reply = current.conn.clone().req_packed_commands(pipeline, offset, count).await;
            let not_run = match &reply {
                Ok(values) if values_read_only(values) => true,
                Ok(_) => return reply,
                Err(e) => not_sent(e),
            };
            let transient = reply.as_ref().err().is_some_and(is_transient);
            if !not_run && !transient {
                return reply;
            }
            match self.0.follow(not_run, seen, started).await {
                Some(mut next) => next.req_packed_commands(pipeline, offset, count).await,
                None => reply,
            }
        })
    }

    fn get_db(&self) -> i64 {
        i64::from(self.0.nodes.config.db)
    }
}

/// Listens for `+switch-master` on one sentinel at a time, re-discovering on each event and on each (re)connect.
async fn watch_switches(shared: Weak<Shared>) {
    let mut next = 0usize;
    loop {
        let Some(s) = shared.upgrade() else { return };
        let nodes = &s.nodes;
        let sentinel = nodes.config.sentinels[next % nodes.config.sentinels.len()].clone();
        next += 1;
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<PushInfo>();
        let url = format!("{}://{sentinel}?protocol=resp3", nodes.scheme());
        let config = nodes.connection_config().set_response_timeout(None).set_push_sender(tx);
        let conn = match nodes.client(&url) {
            Ok(client) => client.get_multiplexed_async_connection_with_config(&config).await,
            Err(e) => Err(e),
        };
        let subscribed = match conn {
            Ok(mut conn) => conn.subscribe("+switch-master").await.map(|()| conn),
            Err(e) => Err(e),
        };
        let Ok(_conn) = subscribed else {
            let pause = nodes.opts.connect_timeout.min(Duration::from_secs(1));
            drop(s);
            // Every sentinel down: try the next one after a pause rather than spin.
            tokio::time::sleep(pause).await;
            continue;
        };
        // An event may have passed while nobody listened.
        let seen = s.current().1;
        s.rediscover(seen).await;
        drop(s);
        while let Some(push) = rx.recv().await {
            let Some(s) = shared.upgrade() else { return };
            match push.kind {
                PushKind::Message => {
                    let seen = s.current().1;
                    s.rediscover(seen).await;
                }
                PushKind::Disconnection => break,
                _ => {}
            }
        }
    }
}

impl Deployment for Sentinel {
    type Conn = Conn;
    type PubSub = PubSub;
    const PUBLISH: &'static str = "publish";
    const NUMSUB: Option<&'static str> = Some("NUMSUB");

    async fn connect(url: &str, opts: &ClientOptions) -> Result<(Self, Conn)> {
        let nodes = Nodes { config: parse(url)?, shown: redact(url), opts: opts.clone() };
        let current = nodes.discover().await?;
        // The replicas the sentinels know now: the default number that must confirm a grant.
        let mut ask = redis::cmd("SENTINEL");
        ask.arg("replicas").arg(&nodes.config.master);
        let mut known = None;
        for sentinel in &nodes.config.sentinels {
            if let Ok(Value::Array(list)) = nodes.ask(sentinel, &ask).await {
                known = Some(list.len() as u32);
                break;
            }
        }
        let replicas = match (nodes.config.wanted.replicas, known) {
            (Some(n), _) => n,
            (None, Some(0) | None) => 0,
            // A majority of the data nodes, the master counting as one: with two replicas, one. Sentinel promotes
            // the replica with the most replicated data, so a grant one of two confirmed survives a master's loss,
            // and grants go on while the other replica restarts or resyncs.
            (None, Some(r)) => r.div_ceil(2),
        };
        let shared = Shared {
            nodes,
            current: RwLock::new(current),
            generation: watch::Sender::new(0),
            moving: AsyncMutex::new(()),
            pubsub: OnceLock::new(),
        };
        let shared = Arc::new(shared);
        let watcher = tokio::spawn(watch_switches(Arc::downgrade(&shared))).abort_handle();
        Ok((Sentinel { shared: shared.clone(), replicas, watcher }, Conn(shared)))
    }

    async fn open_pubsub(&self, opts: &ClientOptions, channels: Arc<Channels>) -> Result<PubSub, RedisError> {
        let addr = self.shared.current().0.addr;
        let conn = PubSubState::open(&self.shared.nodes, &addr, opts, &channels).await?;
        let state = Arc::new(PubSubState {
            channels,
            conn: Mutex::new(conn),
            listened: Mutex::default(),
            order: AsyncMutex::new(()),
        });
        let _ = self.shared.pubsub.set(state.clone());
        Ok(PubSub(state))
    }

    fn token_key(name: &str) -> String {
        token_key(name)
    }

    fn channel(name: &str) -> String {
        channel(name)
    }

    fn transient(e: &RedisError) -> bool {
        is_transient(e)
            || read_only(e)
            || matches!(e.kind(), RedisErrorKind::Server(ServerErrorKind::MasterDown | ServerErrorKind::BusyLoading))
    }

    fn replicas_wanted(&self) -> (u32, Duration) {
        (self.replicas, self.shared.nodes.config.wanted.timeout)
    }

    fn fair(&self) -> Option<bool> {
        self.shared.nodes.config.fair
    }
}

/// The waiters' RESP3 connection to the current master, and the channels it listens on, moved on failover.
struct PubSubState {
    channels: Arc<Channels>,
    conn: Mutex<ConnectionManager>,
    listened: Mutex<BTreeSet<String>>,
    /// Orders listen, unlisten and moves.
    order: AsyncMutex<()>,
}

impl PubSubState {
    async fn open(
        nodes: &Nodes,
        addr: &str,
        opts: &ClientOptions,
        channels: &Arc<Channels>,
    ) -> Result<ConnectionManager, RedisError> {
        let resp3 = nodes.client(&nodes.data_url(addr, true))?;
        let channels = channels.clone();
        let config = manager_config(opts)
            .set_push_sender(move |push: PushInfo| -> Result<(), std::convert::Infallible> {
                on_push(&channels, push);
                Ok(())
            })
            .set_automatic_resubscription();
        ConnectionManager::new_with_config(resp3, config).await
    }

    fn conn(&self) -> ConnectionManager {
        self.conn.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Subscribes every channel on the new master, then wakes every waiter: releases on the old one may be lost.
    async fn move_to(&self, nodes: &Nodes, addr: &str) {
        let _order = self.order.lock().await;
        match PubSubState::open(nodes, addr, &nodes.opts, &self.channels).await {
            Ok(mut conn) => {
                let listened: Vec<String> =
                    self.listened.lock().unwrap_or_else(|p| p.into_inner()).iter().cloned().collect();
                for channel in listened {
                    if let Err(e) = conn.subscribe(&channel).await {
                        tracing::warn!(channel, error = %e, "could not resubscribe on the new master");
                    }
                }
                *self.conn.lock().unwrap_or_else(|p| p.into_inner()) = conn;
            }
            Err(e) => tracing::warn!(error = %e, "no pub/sub connection to the new master; waiters fall back to TTLs"),
        }
        self.channels.wake_all();
    }
}

/// The waiters' connection, shared by this client's subscriptions.
#[derive(Clone)]
pub(crate) struct PubSub(Arc<PubSubState>);

impl fmt::Debug for PubSub {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("PubSub")
    }
}

impl Listen for PubSub {
    type Error = RedisError;

    async fn listen(&self, channel: &str) -> Result<(), RedisError> {
        let _order = self.0.order.lock().await;
        self.0.listened.lock().unwrap_or_else(|p| p.into_inner()).insert(channel.to_string());
        self.0.conn().subscribe(channel).await
    }

    async fn unlisten(&self, channel: &str) {
        let _order = self.0.order.lock().await;
        self.0.listened.lock().unwrap_or_else(|p| p.into_inner()).remove(channel);
        let _ = self.0.conn().unsubscribe(channel).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;

    #[test]
    fn urls_name_sentinels_and_a_master() {
        let c = parse("redis+sentinel://u:pw@a,b:1/mymaster?db=2&wait_replicas=1&wait_timeout_ms=50").unwrap();
        let hosts: Vec<String> = c.sentinels.iter().map(|h| h.to_string()).collect();
        assert_eq!(hosts, ["a:26379", "b:1"]);
        assert_eq!((c.master.as_str(), c.auth.as_deref(), c.db), ("mymaster", Some("u:pw"), 2));
        assert_eq!(c.wanted, Wanted { replicas: Some(1), timeout: Duration::from_millis(50) });
        assert!(!c.security.tls());
        assert!(parse("redis+sentinel://a/m?tls=true").unwrap().security.tls());
        assert_eq!(parse("redis+sentinel://a/m?fair=true").unwrap().fair, Some(true));
        for (url, says) in [
            ("redis+sentinel://a,b", "no master name"),
            ("redis+sentinel://a,b/", "no master name"),
            ("redis+sentinel://a/m?x=1", "unknown parameters [\"x\"]"),
            ("redis+sentinel://u:secret@a/m?password=secret", "unknown parameters [\"password\"]"),
            ("redis+sentinel://a/m?wait_replicas=many", "wait_replicas=\"many\" is not a whole number"),
            ("redis+sentinel://a/m?db=x", "db=\"x\" is not a database number"),
            ("redis+sentinel://a/m?ca=%2Fc.pem", "ca= given but TLS is off (add tls=true)"),
            ("redis+sentinel://a,,b/m", "empty host"),
            ("redis+sentinel://u:secret@a:99999/m", "port \"99999\""),
        ] {
            let err = parse(url).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{url}");
            assert!(err.message().contains(says), "{url}: {err}");
            assert!(!err.message().contains("secret"), "{err}");
        }
    }
}
