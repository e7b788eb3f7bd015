//! `redis+cluster://h1:6379,h2:6379,…`: the single-Redis scripts of [`super::redis`] on a Redis Cluster, through
//! redis-rs's async cluster connection (slot map, MOVED/ASK redirects, reconnects). Redisson RLock / RFencedLock
//! clients on the same cluster exclude us and are woken by our releases, as on one server.
//!
//! # Key layout: one slot per lock
//!
//! A script may only touch keys of one hash slot, and each lock has three: the hash `<name>` (the record, Redisson's
//! key is the name as given), the fence counter and the release channel. Those two are named as Redisson's
//! `prefixName` names them: `redisson_lock_token:{<name>}` and `redisson_lock__channel:{<name>}`, or, when the name
//! already contains a `{`, `redisson_lock_token:<name>` and `redisson_lock__channel:<name>` (no braces added).
//! Redis hashes a key by its tag — the bytes between its first `{` and the next `}`, if there are any — or else by
//! the whole key. So the three keys share a slot exactly when
//!
//! - the name has no `{` and no `}`: the record hashes as the whole name, the other two by the tag `{<name>}`, that
//!   is by the same bytes (this is every name Redisson users normally pick, and the same keys as `redis://`); or
//! - the name carries a non-empty hash tag of its own (`{user:42}:orders`): all three keys hash by that tag, as
//!   Redisson's do. This is also how several locks are placed on one node on purpose.
//!
//! Any other name — a `}` without a `{` before it, an unclosed `{`, an empty first tag `{}` — would spread its keys
//! over different slots, and the scripts would fail with CROSSSLOT (Redisson's would too). Such names are rejected
//! with `InvalidArgument` that says so, rather than silently given a layout no Redisson client would find.
//!
//! Note that `redis://` always writes `redisson_lock_token:{<name>}`, so for names that contain a `{` the two
//! backends (and Redisson, which uses `prefixName` everywhere) name the counter differently; for brace-free names they
//! agree. Fence registers are one key each, `fencelock_fence:{<resource>}`, and accept any resource.
//!
//! Read-write locks and semaphores name their other keys the same way: `prefixName` for channels and fencelock's
//! side keys (`redisson_rwlock:{<name>}`, `fencelock_rw_epoch:{<name>}`, …), Redisson's `suffixName` for the read
//! holds' timeout keys and the semaphore's zset (`{<name>}:…`, or `<name>:…` for a name with its own tag), so the
//! same names are accepted and every key of one lock lies in its slot.
//!
//! # Waiters
//!
//! Releases publish `0` with SPUBLISH (Redis ≥ 7 sharded pub/sub), on the channel's own slot, which is the lock's: the
//! message stays on the lock's shard, as recent Redisson versions do on Redis 7 clusters (their `getPublishCommand()`).
//! Waiters share one RESP3 cluster connection per client and SSUBSCRIBE there; redis-rs routes each subscription to
//! the slot's master and re-subscribes after reconnects and slot-map refreshes. A message they miss costs at most
//! the holder's remaining TTL, the bound every wait uses, exactly as on `redis://`: a failover; a resharding that
//! moves the slot (the server then drops the sharded subscription, and waiters on that lock fall back to the bound
//! until they next subscribe); an old Redisson release that used plain PUBLISH, which sharded subscribers never see.
//!
//! Fencing tokens come from the same counter as on `redis://`, raised to the server clock in µs, run on the lock's
//! master. Redis Cluster replicates asynchronously: after a failover the promoted replica may lack the last grants,
//! but its clock still puts its tokens above them unless the clocks differ by more than the failover took (see
//! `acquire_lua` in `redis.rs`). Without replicas a dead master makes its slots unavailable rather than losing tokens.
//!
//! URL: `redis+cluster://[[user]:password@]host[:port],host[:port],…[/0][?tls=true[&ca=…&cert=…&key=…]]`; any listed
//! node is a seed for discovering the rest. The credentials and TLS apply to every node, the seeds and those found
//! through `CLUSTER SLOTS` and redirects alike (redis-rs connects to all with one set of parameters, and a cluster
//! whose nodes differ in them is not one deployment). Connect and request timeouts are the client's
//! (`ClientOptions`).

use std::fmt;
use std::sync::Arc;

use redis::cluster::ClusterClientBuilder;
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::Slot;
use redis::{ErrorKind as RedisErrorKind, ProtocolVersion, PushInfo, RedisError, ServerErrorKind};

use super::Backend;
use super::redis::{Deployment, RedisLock, Security, is_transient, names, on_push};
use super::waiters::{Channels, Listen};
use super::{REDIS_PORT, parse_hosts, redact};
use crate::error::{Error, Result};
use crate::options::ClientOptions;

/// Retries redis-rs makes on redirects and reconnects within one request; the request timeout bounds them anyway.
const CLUSTER_RETRIES: u32 = 3;

/// Opens a `redis+cluster://` backend.
pub(crate) async fn connect(url: &str, opts: &ClientOptions) -> Result<Arc<dyn Backend>> {
    Ok(Arc::new(RedisLock::<Cluster>::connect(url, opts).await?))
}

/// Redisson's `prefixName`: `prefix:{name}`, or `prefix:name` when the name brings its own `{`.
fn prefixed(prefix: &str, name: &str) -> String {
    if name.contains('{') { format!("{prefix}:{name}") } else { format!("{prefix}:{{{name}}}") }
}

/// The fence counter of lock `name` (Redisson RFencedLock's key on a cluster).
fn token_key(name: &str) -> String {
    prefixed("redisson_lock_token", name)
}

/// Where releases of `name` are published (Redisson's channel on a cluster).
fn channel(name: &str) -> String {
    prefixed("redisson_lock__channel", name)
}

/// Redis Cluster's hash tag: the bytes between the first `{` and the next `}`, if there are any.
fn hash_tag(key: &str) -> Option<&str> {
    let open = key.find('{')?;
    let close = key[open + 1..].find('}')?;
    Some(&key[open + 1..open + 1 + close]).filter(|t| !t.is_empty())
}

/// Refuses a name whose record, counter and channel would not share a slot (see the module docs).
fn check_name(name: &str) -> Result<()> {
    let same_slot = hash_tag(name).is_some() || !name.contains(['{', '}']);
    debug_assert!(
        !same_slot
            || (Slot::for_key(name) == Slot::for_key(token_key(name))
                && Slot::for_key(name) == Slot::for_key(channel(name))),
        "{name:?}"
    );
    if same_slot {
        return Ok(());
    }
    Err(Error::invalid(format!(
        "lock name {name:?} cannot be used on a Redis Cluster: its record {name:?} and counter {:?} would hash to \
         different slots. Use a name without braces, or one with a non-empty hash tag such as \"{{orders}}:42\"",
        token_key(name)
    )))
}

/// What a `redis+cluster://` URL says: one `redis://` (or `rediss://`) URL per seed node, and how every node is
/// secured.
fn parse(url: &str) -> Result<(Vec<String>, Security, Option<bool>)> {
    let shown = redact(url);
    let bad = |why: String| Error::invalid(format!("URL {shown:?}: {why}"));
    let rest = url
        .split_once("://")
        .map(|(_, rest)| rest)
        .ok_or_else(|| bad("expected redis+cluster://host:port,host:port,…".into()))?;
    let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
    let mut tls = false;
    let mut pairs = Vec::new();
    for (name, value) in url::form_urlencoded::parse(query.as_bytes()).into_owned() {
        match name.as_str() {
            "tls" => tls = super::tls::flag(&value, &shown)?,
            _ => pairs.push((name, value)),
        }
    }
    if let Some((name, _)) = pairs.iter().find(|(n, _)| super::redis::WAIT_PARAMETERS.contains(&n.as_str())) {
        // WAIT would have to run on each lock's shard, through the cluster router: not done yet.
        return Err(bad(format!(
            "{name}= is not supported on redis+cluster:// yet (only redis:// and redis+sentinel://)"
        )));
    }
    let fair = super::redis::fair::take(&mut pairs, &shown)?;
    let (security, unknown) = Security::take(pairs, tls, &shown, "add tls=true")?;
    if !unknown.is_empty() {
        // The names only: a value may be a secret (`?password=…`).
        return Err(bad(format!(
            "unknown parameters {:?}; expected tls=true, ca=, cert=, key=, fair=",
            names(&unknown)
        )));
    }
    let (rest, db) = rest.split_once('/').map_or((rest, ""), |(rest, db)| (rest, db));
    if !matches!(db, "" | "0") {
        return Err(bad(format!("database {db:?}: a Redis Cluster has only database 0")));
    }
    let (auth, hosts) = rest.rsplit_once('@').map_or((None, rest), |(auth, hosts)| (Some(auth), hosts));
    let scheme = if tls { "rediss" } else { "redis" };
    let mut nodes: Vec<String> = Vec::new();
    for host in parse_hosts(hosts, REDIS_PORT).map_err(bad)? {
        let auth = auth.map(|a| format!("{a}@")).unwrap_or_default();
        let node = format!("{scheme}://{auth}{host}");
        redis::Client::open(node.as_str()).map_err(|e| bad(format!("host {host:?}: {e}")))?;
        if !nodes.contains(&node) {
            nodes.push(node);
        }
    }
    Ok((nodes, security, fair))
}

/// Short timeouts and few retries: a dead node must cost a bounded time, not redis-rs's default backoff loop. The
/// certificates serve every node redis-rs connects to, including those it discovers.
fn builder(nodes: &[String], security: &Security, opts: &ClientOptions) -> ClusterClientBuilder {
    let builder = ClusterClientBuilder::new(nodes.to_vec())
        .connection_timeout(opts.connect_timeout)
        .response_timeout(opts.request_timeout)
        .retries(CLUSTER_RETRIES);
    match security.certificates() {
        Some(certs) => builder.certs(certs),
        None => builder,
    }
}

/// The RESP3 cluster connection that carries this client's sharded subscriptions.
#[derive(Clone)]
pub(crate) struct PubSub(ClusterConnection);

impl fmt::Debug for PubSub {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("PubSub")
    }
}

impl Listen for PubSub {
    type Error = RedisError;

    async fn listen(&self, channel: &str) -> Result<(), RedisError> {
        self.0.clone().ssubscribe(channel).await
    }

    async fn unlisten(&self, channel: &str) {
        let _ = self.0.clone().sunsubscribe(channel).await;
    }
}

/// A Redis Cluster, through redis-rs's async cluster connection (slot map, MOVED/ASK redirects, reconnects).
pub(crate) struct Cluster {
    /// Seed node URLs, credentials included: never shown unredacted.
    nodes: Vec<String>,
    security: Security,
    fair: Option<bool>,
}

impl fmt::Debug for Cluster {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let nodes: Vec<String> = self.nodes.iter().map(|n| redact(n)).collect();
        f.debug_struct("Cluster").field("nodes", &nodes).finish()
    }
}

impl Deployment for Cluster {
    type Conn = ClusterConnection;
    type PubSub = PubSub;
    // Sharded pub/sub: the message stays on the lock's shard, where its waiters SSUBSCRIBE.
    const PUBLISH: &'static str = "spublish";
    // SHARDNUMSUB must reach the channel's shard, which the cluster router does not know for PUBSUB: unknown.
    const NUMSUB: Option<&'static str> = None;

    async fn connect(url: &str, opts: &ClientOptions) -> Result<(Self, ClusterConnection)> {
        let shown = redact(url);
        let (nodes, security, fair) = parse(url)?;
        let client =
            builder(&nodes, &security, opts).build().map_err(|e| Error::invalid(format!("URL {shown:?}: {e}")))?;
        let conn = tokio::time::timeout(opts.connect_timeout, client.get_async_connection())
            .await
            .map_err(|_| security.timeout_error(&shown, opts.connect_timeout))?
            .map_err(|e| security.connect_error(&e, &shown))?;
        Ok((Cluster { nodes, security, fair }, conn))
    }

    async fn open_pubsub(&self, opts: &ClientOptions, channels: Arc<Channels>) -> Result<PubSub, RedisError> {
        let client = builder(&self.nodes, &self.security, opts)
            .use_protocol(ProtocolVersion::RESP3)
            .push_sender(move |push: PushInfo| -> Result<(), std::convert::Infallible> {
                on_push(&channels, push);
                Ok(())
            })
            .build()?;
        client.get_async_connection().await.map(PubSub)
    }

    fn token_key(name: &str) -> String {
        token_key(name)
    }

    fn channel(name: &str) -> String {
        channel(name)
    }

    fn check_name(name: &str) -> Result<()> {
        check_name(name)
    }

    fn prefixed(prefix: &str, name: &str) -> String {
        prefixed(prefix, name)
    }

    fn key_prefix(name: &str) -> String {
        // Redisson's `suffixName`: the name itself when it brings its own `{`.
        if name.contains('{') { name.to_string() } else { format!("{{{name}}}") }
    }

    fn fair(&self) -> Option<bool> {
        self.fair
    }

    fn transient(e: &RedisError) -> bool {
        is_transient(e)
            || e.is_cluster_error()
            || matches!(
                e.kind(),
                RedisErrorKind::ClusterConnectionNotFound
                    | RedisErrorKind::Server(ServerErrorKind::MasterDown | ServerErrorKind::BusyLoading)
            )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;

    #[test]
    fn the_keys_of_a_lock_share_a_slot() {
        for name in ["orders", "a:b/c-d", "{user:42}:orders", "x{t}y{z}", "{t}", "a{b}"] {
            check_name(name).unwrap();
            let slot = Slot::for_key(name);
            assert_eq!(Slot::for_key(token_key(name)), slot, "{name}");
            assert_eq!(Slot::for_key(channel(name)), slot, "{name}");
        }
        // Redisson's prefixName: braces are added only when the name has none.
        assert_eq!(token_key("orders"), "redisson_lock_token:{orders}");
        assert_eq!(channel("{u}:x"), "redisson_lock__channel:{u}:x");
    }

    #[test]
    fn names_whose_keys_would_split_are_refused() {
        for name in ["a}b", "}", "a{b", "{}x", "a{}{b}", "{"] {
            let err = check_name(name).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{name}");
            assert!(err.message().contains("hash tag"), "{err}");
            // They really would: the check is not stricter than Redis.
            assert!(
                Slot::for_key(name) != Slot::for_key(token_key(name))
                    || Slot::for_key(name) != Slot::for_key(channel(name)),
                "{name}"
            );
        }
    }

    #[test]
    fn urls_name_every_seed_node() {
        assert_eq!(
            parse("redis+cluster://u:pw@a:1,b,[::1]/0").unwrap().0,
            ["redis://u:pw@a:1", "redis://u:pw@b:6379", "redis://u:pw@[::1]:6379"]
        );
        assert_eq!(parse("redis+cluster://a,a:6379").unwrap().0, ["redis://a:6379"]);
        let (nodes, security, fair) = parse("redis+cluster://:pw@a,b?tls=true").unwrap();
        assert_eq!(fair, None);
        assert_eq!(parse("redis+cluster://a?fair=false").unwrap().2, Some(false));
        assert_eq!(nodes, ["rediss://:pw@a:6379", "rediss://:pw@b:6379"]);
        assert!(security.tls());
        for (url, says) in [
            ("redis+cluster://a,,b", "empty host"),
            ("redis+cluster://a/3", "only database 0"),
            ("redis+cluster://a?x=1", "unknown parameters [\"x\"]"),
            ("redis+cluster://a?wait_replicas=1", "wait_replicas= is not supported on redis+cluster://"),
            ("redis+cluster://a?password=secret", "unknown parameters [\"password\"]"),
            ("redis+cluster://a?tls=on", "tls=\"on\" is neither true nor false"),
            ("redis+cluster://a?fair=on", "fair=\"on\" is neither true nor false"),
            ("redis+cluster://a?cert=%2Fc.pem&key=%2Fk.pem", "cert=, key= given but TLS is off (add tls=true)"),
            ("redis+cluster://u:secret@a/2", "u:***@"),
        ] {
            let err = parse(url).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{url}");
            assert!(err.message().contains(says), "{url}: {err}");
            assert!(!err.message().contains("secret"), "{err}");
        }
    }
}
