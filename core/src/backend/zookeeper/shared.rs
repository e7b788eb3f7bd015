//! What the backend and its attempts share: the session, request bounds and error mapping, directories and queues.

use std::time::Duration;

use zookeeper_client as zk;

use super::auth_failed;
use super::layout::{PROTECTED, queue};
use super::session::LiveSession;
use crate::backend::HoldKind;
use crate::error::{Error, ErrorKind, Result};

/// State shared by the backend and its attempts.
#[derive(Debug)]
pub(super) struct Shared {
    pub(super) session: LiveSession,
    pub(super) url: String,
    pub(super) request_timeout: Duration,
}

impl Shared {
    /// Bounds one request by the request timeout; a late reply counts as a lost connection.
    pub(super) async fn rpc<T>(&self, request: impl Future<Output = Result<T, zk::Error>>) -> Result<T, zk::Error> {
        tokio::time::timeout(self.request_timeout, request).await.unwrap_or(Err(zk::Error::Timeout))
    }

    pub(super) fn err(&self, e: zk::Error) -> Error {
        let kind = match e {
            zk::Error::ConnectionLoss
            | zk::Error::Timeout
            | zk::Error::Custom(_)
            | zk::Error::NoHosts
            | zk::Error::SessionExpired
            | zk::Error::SessionMoved
            | zk::Error::Throttled
            | zk::Error::NotReadOnly => ErrorKind::Unavailable,
            zk::Error::ClientClosed => ErrorKind::Closed,
            zk::Error::BadArguments(_) => ErrorKind::InvalidArgument,
            zk::Error::NoAuth | zk::Error::AuthFailed => return auth_failed(&self.url, &e),
            _ => ErrorKind::Internal,
        };
        Error::new(kind, format!("{}: {e}", self.url))
    }

    pub(super) async fn client(&self) -> Result<zk::Client> {
        self.session.client().await.map_err(|e| self.err(e))
    }

    /// Creates `dir` and its parents as container nodes, which the server reaps once empty; servers older than
    /// 3.5.3 refuse containers and get persistent nodes instead.
    pub(super) async fn make_dirs(&self, zk: &zk::Client, dir: &str) -> Result<(), zk::Error> {
        let modes = self.session.modes();
        match self.rpc(zk.mkdir(dir, &modes.container)).await {
            Err(zk::Error::Unimplemented) => self.rpc(zk.mkdir(dir, &modes.persistent)).await,
            done => done,
        }
    }

    /// The mutex queue of `dir` in order, empty if the directory does not exist.
    pub(super) async fn queue_of(&self, zk: &zk::Client, dir: &str) -> Result<Vec<String>, zk::Error> {
        match self.rpc(zk.list_children(dir)).await {
            Ok(children) => Ok(queue(children, HoldKind::Exclusive)),
            Err(zk::Error::NoNode) => Ok(Vec::new()),
            Err(e) => Err(e),
        }
    }

    /// Deletes the nodes in `dir` whose name starts with `_c_<uuid>-`: an attempt's node, found again by its
    /// protected prefix when its create reply was lost.
    pub(super) async fn delete_by_prefix(&self, dir: &str, uuid: &str) -> Result<()> {
        let zk = self.client().await?;
        let prefix = format!("{PROTECTED}{uuid}-");
        let children = match self.rpc(zk.list_children(dir)).await {
            Err(zk::Error::NoNode) => return Ok(()),
            listed => listed.map_err(|e| self.err(e))?,
        };
        for node in children.iter().filter(|c| c.starts_with(&prefix)) {
            match self.rpc(zk.delete(&format!("{dir}/{node}"), None)).await {
                Ok(()) | Err(zk::Error::NoNode) => {}
                Err(e) => return Err(self.err(e)),
            }
        }
        Ok(())
    }
}

/// Waits until `watcher` fires or `deadline` passes, whichever is first; a waiter then looks again either way.
pub(super) async fn until_fired(watcher: zk::OneshotWatcher, deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(d) => drop(tokio::time::timeout_at(d, watcher.changed()).await),
        None => drop(watcher.changed().await),
    }
}
