//! Liveness: one ZooKeeper session per client and lease TTL (the way etcd keeps one lease per TTL), asking for a
//! session timeout equal to the TTL, so a crashed or partitioned holder's nodes go when its TTL runs out. Each is
//! opened on first use and replaced on the next call after it expires.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use zookeeper_client as zk;

use super::Modes;
use super::target::Digest;

/// What every session of one client shares: where and how to connect, and whether the client was closed.
#[derive(Debug)]
pub(super) struct SessionConfig {
    pub(super) hosts: String,
    pub(super) chroot: Option<String>,
    /// Digest credentials the session authenticates with (again on every reconnect), if any.
    pub(super) digest: Option<Digest>,
    /// TLS to the secureClientPort, if `tls=true`.
    pub(super) tls: Option<zk::TlsOptions>,
    /// How the nodes we create are made, by whether the session has credentials.
    pub(super) modes: Modes,
    pub(super) connect_timeout: Duration,
    pub(super) closed: AtomicBool,
}

/// One ZooKeeper session, replaced after it expires; closing drops the last handle, which ends it.
#[derive(Debug)]
pub(super) struct LiveSession {
    pub(super) config: std::sync::Arc<SessionConfig>,
    /// The session timeout asked for; the server clamps it to its 2–20 tick range (`negotiated`).
    pub(super) timeout: Duration,
    live: Mutex<Option<zk::Client>>,
    reopen: tokio::sync::Mutex<()>,
}

impl LiveSession {
    /// A session of `timeout`, opened by the first call that needs it.
    pub(super) fn new(config: std::sync::Arc<SessionConfig>, timeout: Duration) -> Self {
        LiveSession { config, timeout, live: Mutex::new(None), reopen: tokio::sync::Mutex::new(()) }
    }

    pub(super) fn modes(&self) -> &Modes {
        &self.config.modes
    }

    async fn open(&self) -> Result<zk::Client, zk::Error> {
        let c = &self.config;
        let mut connector = zk::Client::connector().with_session_timeout(self.timeout);
        if let Some(digest) = &c.digest {
            connector = connector.with_auth("digest", &digest.auth());
        }
        let connect = async {
            match &c.tls {
                Some(tls) => connector.with_tls(tls.clone()).secure_connect(&c.hosts).await,
                None => connector.connect(&c.hosts).await,
            }
        };
        let client = tokio::time::timeout(c.connect_timeout, connect).await.map_err(|_| zk::Error::Timeout)??;
        let Some(root) = &c.chroot else { return Ok(client) };
        // Like a Curator namespace, the chroot is made on first use; persistent, so the server never reaps it.
        client.mkdir(root, &c.modes.persistent).await?;
        client.chroot(root.as_str()).map_err(|_| zk::Error::BadArguments(&"invalid chroot"))
    }

    /// The current session handle, expired or not; `None` before the first open and once closed.
    pub(super) fn current(&self) -> Option<zk::Client> {
        self.live.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The session timeout the server granted, once the session is open.
    pub(super) fn negotiated(&self) -> Option<Duration> {
        self.current().map(|c| c.session_timeout())
    }

    /// A live session handle, opening a session if there is none yet or the last one expired.
    pub(super) async fn client(&self) -> Result<zk::Client, zk::Error> {
        let closed = || self.config.closed.load(Ordering::SeqCst);
        if closed() {
            return Err(zk::Error::ClientClosed);
        }
        if let Some(current) = self.current().filter(|c| !c.state().is_terminated()) {
            return Ok(current);
        }
        let _turn = self.reopen.lock().await;
        if let Some(current) = self.current().filter(|c| !c.state().is_terminated()) {
            return Ok(current);
        }
        let replacing = self.current().is_some();
        if replacing {
            tracing::info!(hosts = %self.config.hosts, "ZooKeeper session ended; opening a new one");
        }
        let fresh = self.open().await?;
        let mut live = self.live.lock().unwrap_or_else(|p| p.into_inner());
        if closed() {
            return Err(zk::Error::ClientClosed);
        }
        *live = Some(fresh.clone());
        Ok(fresh)
    }

    /// Drops our handle and waits (bounded) for the session to close, which deletes its ephemeral nodes. The
    /// client's `closed` flag must be set first, so no call opens it again.
    pub(super) async fn close(&self, bound: Duration) {
        let Some(client) = self.live.lock().unwrap_or_else(|p| p.into_inner()).take() else { return };
        let mut state = client.state_watcher();
        drop(client);
        let closed = async {
            while !state.peek_state().is_terminated() {
                state.changed().await;
            }
        };
        // Handles still in use by in-flight calls keep the session open until they finish.
        let _ = tokio::time::timeout(bound, closed).await;
    }
}
