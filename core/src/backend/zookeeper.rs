//! `zk://[user:password@]h1:2181,h2:2181[/chroot][?tls=true&ca=…&cert=…&key=…]`: Curator's `InterProcessMutex`,
//! `InterProcessReadWriteLock` (`rwlock.rs`) and `InterProcessSemaphoreV2` (`semaphore.rs`) recipes on the raw
//! ZooKeeper API, so Curator clients and fencelock exclude each other (or count each other's leases) on one path.
//!
//! Security: the user-info is digest authentication. With it, every node fencelock creates (lock nodes, their
//! directories, the chroot, fence registers) gets the creator-only ACL (ZooKeeper's `auth` scheme: the identities the
//! session authenticated as), so no other identity can delete a lock node or write a fence register; without it
//! nodes are world-writable, as Curator makes them by default. The digest scheme accepts any password (it only names
//! an identity), so a wrong one shows at the first node its identity may not touch: `NoAuth`, reported as
//! `INVALID_ARGUMENT` "authentication failed for …". `tls=true` connects to the secureClientPort (`secure.rs`).
//!
//! Layout: the lock directory is the name if it starts with `/`, else `/<name>` (container nodes, created on first
//! use). Each acquire creates the EPHEMERAL_SEQUENTIAL node `<dir>/_c_<uuid>-lock-<seq10>` holding the holder id; the
//! queue is ordered by the text after the last `lock-`, the first node holds the lock, and a waiter watches only its
//! predecessor. The `_c_<uuid>` prefix (a fresh uuid per acquire, Curator's "protected" mode) lets an acquire whose
//! create reply was lost find its node instead of making a second one. The fence token is the node's czxid: zxids
//! only rise, so every later grant on any path gets a larger one.
//!
//! Leases are session-bound: a client opens one session per lease TTL (in whole milliseconds) on first use, asking
//! for a session timeout equal to the TTL, and every node held with that TTL lives on it. The server clamps the
//! timeout to its min/max (2–20 ticks by default; we ask for at least 1 s); the lease's validity and the watchdog follow the timeout it
//! granted, so a TTL above the maximum is renewed at a third of the maximum, and a TTL below the minimum still stands
//! for the minimum after a crash. A renewal cannot move a node to another session, so it cannot change the TTL
//! (core refuses that). Renewing checks that the node still exists under its session; an expired session is replaced
//! on the next call. The client's first session (fence registers, inspection, operator calls; its timeout is the
//! default TTL) is opened at connect, so a bad URL or credential fails there. Uncontended acquire + release costs two
//! round trips: the create and the listing of the queue are pipelined (one session answers in order), then one
//! delete.
//!
//! Files: `target.rs` (the URL), `session.rs` (liveness), `secure.rs` (TLS), `layout.rs` (Curator's paths and queue
//! order), `entry.rs` (one acquire's node), `cleanup.rs` (deleting a node an acquire left), `shared.rs` (what the
//! backend and its attempts share).

mod cleanup;
mod entry;
mod layout;
mod rwlock;
mod secure;
mod semaphore;
mod session;
mod shared;
mod target;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use tokio::time::Instant;
use zookeeper_client as zk;

use self::entry::QueueEntry;
use self::layout::{lock_dir, queue};
use self::secure::Secure;
use self::semaphore::SemAttempt;
use self::session::{LiveSession, SessionConfig};
use self::shared::Shared;
use super::{
    AcquireRequest, Backend, Capability, Grant, HoldKind, Leader, LockInfo, Pending, Undo, fenced, lock_lost, not_held,
};
use super::{Backoff, Host, decode_register, encode_register, redact};
use crate::error::{Error, Result};
use crate::options::{ClientOptions, DEFAULT_TTL};

/// First and longest pause between retries of a delete lost with the connection.
const PAUSE_FIRST: Duration = Duration::from_millis(50);
const PAUSE_LONGEST: Duration = Duration::from_secs(1);
/// The port of a ZooKeeper host that names none.
const ZK_PORT: u16 = 2181;
/// Where fencelock's own nodes live, apart from every lock path: fence registers, read-write epochs, semaphore
/// permits and slots.
const FENCELOCK_ROOT: &str = "/fencelock";
const FENCES: &str = "/fencelock/fences";
/// The shortest session timeout asked for: below it, zookeeper-client's connect and ping timeouts (fractions of
/// the session timeout) would give up on a server merely slow to answer. Servers grant at least 2 ticks anyway.
const SHORTEST_SESSION: Duration = Duration::from_secs(1);
/// How often one call retries a lost connection, a reaped directory or a vanished node before giving up.
const TRIES: usize = 5;

/// How each kind of node fencelock makes is created: creator-only with credentials, else world-writable.
#[derive(Debug)]
struct Modes {
    ephemeral_sequential: zk::CreateOptions<'static>,
    ephemeral: zk::CreateOptions<'static>,
    persistent: zk::CreateOptions<'static>,
    container: zk::CreateOptions<'static>,
}

impl Modes {
    fn new(authenticated: bool) -> Modes {
        let acls = if authenticated { zk::Acls::creator_all() } else { zk::Acls::anyone_all() };
        Modes {
            ephemeral_sequential: zk::CreateMode::EphemeralSequential.with_acls(acls),
            ephemeral: zk::CreateMode::Ephemeral.with_acls(acls),
            persistent: zk::CreateMode::Persistent.with_acls(acls),
            container: zk::CreateMode::Container.with_acls(acls),
        }
    }
}

/// A refused or insufficient credential (`NoAuth`, `AuthFailed`): no retry helps, so `INVALID_ARGUMENT`.
fn auth_failed(shown: &str, e: &zk::Error) -> Error {
    Error::invalid(format!(
        "authentication failed for {shown}: ZooKeeper refused access ({e}): the credentials, or their absence, do \
         not have the rights the node's ACL requires"
    ))
}

/// Opens the backend `url` names.
pub(crate) async fn connect(url: &str, opts: &ClientOptions) -> Result<Arc<dyn Backend>> {
    Ok(Arc::new(ZkBackend::connect(url, opts).await?))
}

fn fence_path(resource: &str) -> String {
    format!("{FENCES}/{}", resource.trim_start_matches('/'))
}

/// A lost connection, or a reply later than the request timeout: the outcome of a write is unknown. zookeeper-client
/// fails the requests in flight on a connection it gives up on with the reason, a `Custom` error ("no response from
/// connection in …ms" after a delay longer than its connection timeout, an I/O error): a lost connection as well.
fn is_connection_loss(e: &zk::Error) -> bool {
    matches!(e, zk::Error::ConnectionLoss | zk::Error::Timeout | zk::Error::Custom(_))
}

/// The ZooKeeper backend.
#[derive(Debug)]
pub(crate) struct ZkBackend {
    /// The client's first session: fence registers, inspection and operator calls, and holds of the default TTL.
    shared: Arc<Shared>,
    /// The session of each lease TTL in whole milliseconds, the first one's included.
    by_ttl: Mutex<HashMap<u128, Arc<Shared>>>,
}

impl ZkBackend {
    async fn connect(url: &str, opts: &ClientOptions) -> Result<Self> {
        let shown = redact(url);
        let target = target::parse(url, &shown)?;
        let secure = target.tls.as_ref().map(|files| Secure::new(files, &target.hosts, &shown)).transpose()?;
        let config = Arc::new(SessionConfig {
            hosts: target.hosts.iter().map(Host::to_string).collect::<Vec<_>>().join(","),
            chroot: target.chroot,
            modes: Modes::new(target.digest.is_some()),
            digest: target.digest,
            tls: secure.as_ref().map(|s| s.options.clone()),
            connect_timeout: opts.connect_timeout,
            closed: AtomicBool::new(false),
        });
        let session = LiveSession::new(config, DEFAULT_TTL);
        match session.client().await {
            Ok(_) => {}
            Err(e @ (zk::Error::NoHosts | zk::Error::Timeout | zk::Error::ConnectionLoss)) => {
                if let Some(secure) = &secure
                    && let Some(refused) = secure.refusal(&target.hosts, opts.connect_timeout, &shown).await
                {
                    return Err(refused);
                }
                // A server that requires TLS closes a plaintext connection without a word.
                let hint = if secure.is_none() { "; a server that only takes TLS needs ?tls=true" } else { "" };
                return Err(Error::unavailable(format!(
                    "{shown}: no ZooKeeper server answered within {:?} ({e}){hint}",
                    opts.connect_timeout
                )));
            }
            Err(e @ zk::Error::BadArguments(_)) => return Err(Error::invalid(format!("URL {shown:?}: {e}"))),
            Err(e @ (zk::Error::NoAuth | zk::Error::AuthFailed)) => return Err(auth_failed(&shown, &e)),
            Err(other) => return Err(Error::unavailable(format!("{shown}: cannot open a session: {other}"))),
        };
        // describe(), and every later message, shows the URL without its secrets.
        let shared = Arc::new(Shared { session, url: shown, request_timeout: opts.request_timeout });
        let by_ttl = Mutex::new(HashMap::from([(DEFAULT_TTL.as_millis(), shared.clone())]));
        Ok(ZkBackend { shared, by_ttl })
    }

    /// The session that carries holds taken with `ttl`, made (not yet opened) on first use.
    fn session_for(&self, ttl: Duration) -> Arc<Shared> {
        let mut by_ttl = self.by_ttl.lock().unwrap_or_else(|p| p.into_inner());
        let first = &self.shared;
        by_ttl
            .entry(ttl.as_millis())
            .or_insert_with(|| {
                let session = LiveSession::new(first.session.config.clone(), ttl.max(SHORTEST_SESSION));
                Arc::new(Shared { session, url: first.url.clone(), request_timeout: first.request_timeout })
            })
            .clone()
    }

    fn sessions(&self) -> Vec<Arc<Shared>> {
        self.by_ttl.lock().unwrap_or_else(|p| p.into_inner()).values().cloned().collect()
    }

    /// The node of a grant, if its session still owns it.
    async fn owns(&self, grant: &Grant) -> Result<bool> {
        let s = &self.session_for(grant.ttl);
        let Some(zk) = s.session.current() else { return Err(s.err(zk::Error::ClientClosed)) };
        // No new session here: an expired one took the node with it.
        if zk.state().is_terminated() {
            return Ok(false);
        }
        let node = grant.key.as_deref().ok_or_else(|| Error::internal("zk grant without a node path"))?;
        match s.rpc(zk.check_stat(node)).await {
            Ok(stat) => Ok(stat.is_some_and(|st| st.ephemeral_owner == zk.session_id().0)),
            Err(zk::Error::SessionExpired) => Ok(false),
            Err(e) => Err(s.err(e)),
        }
    }
}

#[async_trait]
impl Backend for ZkBackend {
    fn capability(&self) -> Capability {
        Capability::SESSION_BOUND
    }

    fn describe(&self) -> &str {
        &self.shared.url
    }

    /// A lost connection costs the session, and with it our node, after the timeout the server granted it.
    fn lease_bound(&self, ttl: Duration) -> Option<Duration> {
        let session = self.session_for(ttl);
        Some(session.session.negotiated().unwrap_or(session.session.timeout))
    }

    fn begin(self: Arc<Self>, req: AcquireRequest, undo: Undo) -> Box<dyn Pending> {
        let shared = self.session_for(req.ttl);
        match req.kind {
            HoldKind::Permit { permits } => Box::new(SemAttempt::new(shared, req, permits, undo)),
            _ => Box::new(QueueEntry::new(shared, req, Some(undo))),
        }
    }

    async fn renew(&self, grant: &Grant, _ttl: Duration) -> Result<()> {
        if self.owns(grant).await? { Ok(()) } else { Err(lock_lost(grant, &self.shared.url)) }
    }

    /// Retries a delete lost with the connection while the session lives: a session that reconnects keeps the node,
    /// held by nobody, for as long as the process runs (whatever the lease's TTL, even once the lease counts as
    /// lost), and every waiter queues behind it.
    async fn release(&self, grant: &Grant) -> Result<()> {
        let s = &self.session_for(grant.ttl);
        let Some(zk) = s.session.current() else { return Err(s.err(zk::Error::ClientClosed)) };
        let node = grant.key.as_deref().ok_or_else(|| Error::internal("zk grant without a node path"))?;
        if matches!(grant.kind, HoldKind::Permit { .. }) {
            semaphore::release_slot(s, &zk, grant).await?;
        }
        // Past the session timeout without a reply, the server has expired the session or answers again.
        let until = Instant::now() + s.session.timeout.max(zk.session_timeout());
        let mut backoff = Backoff::new(PAUSE_FIRST, PAUSE_LONGEST, until);
        let mut unsure = false;
        loop {
            // The uuid in the node name is this grant's alone, so an unconditional delete cannot hit another holder.
            match s.rpc(zk.delete(node, None)).await {
                Ok(()) => return Ok(()),
                // An earlier attempt of ours may have deleted it.
                Err(zk::Error::NoNode) if unsure => return Ok(()),
                Err(zk::Error::NoNode | zk::Error::SessionExpired) => return Err(not_held(grant, &s.url)),
                Err(e) if is_connection_loss(&e) && !zk.state().is_terminated() => {
                    if !backoff.wait().await {
                        return Err(s.err(e));
                    }
                    unsure = true;
                }
                Err(e) => return Err(s.err(e)),
            }
        }
    }

    async fn force_release(&self, name: &str) -> Result<bool> {
        let s = &self.shared;
        let dir = lock_dir(name)?;
        let zk = s.client().await?;
        for _ in 0..TRIES {
            let Some(first) = s.queue_of(&zk, &dir).await.map_err(|e| s.err(e))?.into_iter().next() else {
                return Ok(false);
            };
            match s.rpc(zk.delete(&format!("{dir}/{first}"), None)).await {
                Ok(()) => return Ok(true),
                // Released meanwhile: the next in line holds it now.
                Err(zk::Error::NoNode) => continue,
                Err(e) => return Err(s.err(e)),
            }
        }
        Err(Error::unavailable(format!("{}: lock {name:?} kept changing hands", s.url)))
    }

    async fn inspect(&self, name: &str) -> Result<LockInfo> {
        let s = &self.shared;
        let dir = lock_dir(name)?;
        let zk = s.client().await?;
        for _ in 0..TRIES {
            let queue = s.queue_of(&zk, &dir).await.map_err(|e| s.err(e))?;
            // The children behind the first (the holder) are waiting.
            let waiters = Some(queue.len().saturating_sub(1) as u64);
            let Some(first) = queue.into_iter().next() else {
                return Ok(LockInfo { holder: None, remaining: None, last_token: None, waiters });
            };
            match s.rpc(zk.get_data(&format!("{dir}/{first}"))).await {
                Ok((data, stat)) => {
                    let holder = Some(String::from_utf8_lossy(&data).into_owned());
                    return Ok(LockInfo { holder, remaining: None, last_token: Some(stat.czxid as u64), waiters });
                }
                Err(zk::Error::NoNode) => continue,
                Err(e) => return Err(s.err(e)),
            }
        }
        Err(Error::unavailable(format!("{}: lock {name:?} kept changing hands", s.url)))
    }

    async fn available(&self, name: &str, permits: u32) -> Result<u32> {
        semaphore::available(&self.shared, name, permits).await
    }

    fn keeps_leader_values(&self) -> bool {
        true
    }

    /// `LeaderLatch`'s leader: the first latch node, its data, and its czxid as the term.
    async fn leader(&self, name: &str) -> Result<Option<Leader>> {
        let s = &self.shared;
        let dir = lock_dir(name)?;
        let zk = s.client().await?;
        for _ in 0..TRIES {
            let children = match s.rpc(zk.list_children(&dir)).await {
                Err(zk::Error::NoNode) => return Ok(None),
                listed => listed.map_err(|e| s.err(e))?,
            };
            let Some(first) = queue(children, HoldKind::Leader).into_iter().next() else { return Ok(None) };
            match s.rpc(zk.get_data(&format!("{dir}/{first}"))).await {
                Ok((value, stat)) => return Ok(Some(Leader { value, term: stat.czxid as u64 })),
                // Resigned meanwhile: the next in line leads now.
                Err(zk::Error::NoNode) => continue,
                Err(e) => return Err(s.err(e)),
            }
        }
        Err(Error::unavailable(format!("{}: election {name:?} kept changing leaders", s.url)))
    }

    /// A new value in our latch node; gone with our session, it is `LockLost`.
    async fn proclaim(&self, grant: &Grant, value: &[u8]) -> Result<()> {
        let s = &self.session_for(grant.ttl);
        let Some(zk) = s.session.current() else { return Err(s.err(zk::Error::ClientClosed)) };
        let node = grant.key.as_deref().ok_or_else(|| Error::internal("zk grant without a node path"))?;
        match s.rpc(zk.set_data(node, value, None)).await {
            Ok(_) => Ok(()),
            Err(zk::Error::NoNode | zk::Error::SessionExpired) => Err(lock_lost(grant, &s.url)),
            Err(e) => Err(s.err(e)),
        }
    }

    async fn fence_write(&self, resource: &str, token: u64, value: &[u8]) -> Result<()> {
        let s = &self.shared;
        let path = fence_path(resource);
        let data = encode_register(token, value);
        let zk = s.client().await?;
        // Compare-and-set on the node version; a lost race reads the new version and decides again.
        loop {
            let outcome = match s.rpc(zk.get_data(&path)).await {
                Ok((stored, stat)) => {
                    let (highest, _) = decode_register(&format!("fence node {path}"), &stored)?;
                    if highest > token {
                        return Err(fenced(resource, &s.url, token, highest));
                    }
                    s.rpc(zk.set_data(&path, &data, Some(stat.version))).await.map(drop)
                }
                Err(zk::Error::NoNode) => s.rpc(zk.create(&path, &data, &s.session.modes().persistent)).await.map(drop),
                Err(e) => Err(e),
            };
            match outcome {
                Ok(()) => return Ok(()),
                Err(zk::Error::BadVersion | zk::Error::NodeExists) => continue,
                Err(zk::Error::NoNode) => {
                    let parent = path.rsplit_once('/').map_or(FENCES, |(parent, _)| parent);
                    s.make_dirs(&zk, parent).await.map_err(|e| s.err(e))?;
                }
                Err(e) => return Err(s.err(e)),
            }
        }
    }

    async fn fence_read(&self, resource: &str) -> Result<(u64, Vec<u8>)> {
        let s = &self.shared;
        let path = fence_path(resource);
        let zk = s.client().await?;
        match s.rpc(zk.get_data(&path)).await {
            Ok((data, _)) => decode_register(&format!("fence node {path}"), &data),
            Err(zk::Error::NoNode) => Ok((0, Vec::new())),
            Err(e) => Err(s.err(e)),
        }
    }

    async fn close(&self) {
        self.shared.session.config.closed.store(true, Ordering::SeqCst);
        let sessions = self.sessions();
        futures::future::join_all(sessions.iter().map(|s| s.session.close(s.request_timeout))).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fence_paths_lie_apart() {
        assert_eq!(fence_path("orders-table"), "/fencelock/fences/orders-table");
    }
}
