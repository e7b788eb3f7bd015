//! Liveness: one ZooKeeper session per client, carrying every node it holds, replaced on the next call after it
//! expires.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use zookeeper_client as zk;

use super::Modes;
use super::target::Digest;

/// One ZooKeeper session per client, replaced after it expires; closing drops the last handle, which ends it.
#[derive(Debug)]
pub(super) struct LiveSession {
    pub(super) hosts: String,
    pub(super) chroot: Option<String>,
    /// Digest credentials the session authenticates with (again on every reconnect), if any.
    pub(super) digest: Option<Digest>,
    /// TLS to the secureClientPort, if `tls=true`.
    pub(super) tls: Option<zk::TlsOptions>,
    /// How the nodes we create are made, by whether the session has credentials.
    pub(super) modes: Modes,
    pub(super) timeout: Duration,
    pub(super) connect_timeout: Duration,
    pub(super) live: Mutex<Option<zk::Client>>,
    pub(super) reopen: tokio::sync::Mutex<()>,
    pub(super) closed: AtomicBool,
}

impl LiveSession {
    pub(super) async fn open(&self) -> Result<zk::Client, zk::Error> {
        let mut connector = zk::Client::connector().with_session_timeout(self.timeout);
        if let Some(digest) = &self.digest {
            connector = connector.with_auth("digest", &digest.auth());
        }
        let connect = async {
            match &self.tls {
                Some(tls) => connector.with_tls(tls.clone()).secure_connect(&self.hosts).await,
                None => connector.connect(&self.hosts).await,
            }
        };
        let client = tokio::time::timeout(self.connect_timeout, connect).await.map_err(|_| zk::Error::Timeout)??;
        let Some(root) = &self.chroot else { return Ok(client) };
        // Like a Curator namespace, the chroot is made on first use; persistent, so the server never reaps it.
        client.mkdir(root, &self.modes.persistent).await?;
        client.chroot(root.as_str()).map_err(|_| zk::Error::BadArguments(&"invalid chroot"))
    }

    /// The current session handle, expired or not; `None` once closed.
    pub(super) fn current(&self) -> Option<zk::Client> {
        self.live.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// A live session handle, opening a new session if the last one expired.
    pub(super) async fn client(&self) -> Result<zk::Client, zk::Error> {
        let Some(current) = self.current() else { return Err(zk::Error::ClientClosed) };
        if !current.state().is_terminated() {
            return Ok(current);
        }
        let _turn = self.reopen.lock().await;
        match self.current() {
            None => return Err(zk::Error::ClientClosed),
            Some(c) if !c.state().is_terminated() => return Ok(c),
            Some(_) => {}
        }
        tracing::info!(hosts = %self.hosts, "ZooKeeper session ended; opening a new one");
        let fresh = self.open().await?;
        let mut live = self.live.lock().unwrap_or_else(|p| p.into_inner());
        if self.closed.load(Ordering::SeqCst) {
            return Err(zk::Error::ClientClosed);
        }
        *live = Some(fresh.clone());
        Ok(fresh)
    }

    /// Drops our handle and waits (bounded) for the session to close, which deletes its ephemeral nodes.
    pub(super) async fn close(&self, bound: Duration) {
        self.closed.store(true, Ordering::SeqCst);
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
