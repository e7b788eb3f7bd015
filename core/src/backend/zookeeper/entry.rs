//! One acquire's queue entry: the EPHEMERAL_SEQUENTIAL node `<dir>/_c_<uuid>-<marker><seq10>` (`lock-`, or a
//! read-write lock's `__READ__`/`__WRIT__`), found again by its protected prefix after a lost create reply, and the
//! watch of the node in its way (`rwlock.rs` says which that is for a read-write lock).

use std::sync::Arc;

use async_trait::async_trait;
use tokio::time::Instant;
use zookeeper_client as zk;

use super::cleanup::{Leftover, delete};
use super::layout::{PROTECTED, lock_dir, marker, queue};
use super::rwlock::{Turn, rw_turn};
use super::shared::{Shared, until_fired};
use super::{TRIES, is_connection_loss};
use crate::backend::{AcquireRequest, Attempt, Busy, Doubt, HoldKind, Pending, Undo};
use crate::error::{Error, Result};

/// Our node once its create was answered.
#[derive(Debug, Clone)]
struct Node {
    name: String,
    czxid: u64,
}

/// One acquire's place in the queue. Dropped before the lock was granted, it deletes its node.
pub(super) struct QueueEntry {
    shared: Arc<Shared>,
    req: AcquireRequest,
    // The lock directory, or why the name has none.
    dir: Result<String>,
    uuid: String,
    node: Option<Node>,
    // A create may have reached the server: look for the node by prefix before creating another.
    sent: bool,
    predecessor: Option<String>,
    // A writer that waited draws a fresh token at its grant (rwlock.rs).
    waited: bool,
    granted: bool,
    doubt: Doubt,
    // `None`: the owner (a semaphore's attempt) undoes this entry along with its own nodes.
    undo: Option<Undo>,
}

impl QueueEntry {
    pub(super) fn new(shared: Arc<Shared>, req: AcquireRequest, undo: Option<Undo>) -> Self {
        let (dir, uuid) = (lock_dir(&req.name), uuid::Uuid::new_v4().to_string());
        QueueEntry {
            shared,
            req,
            dir,
            uuid,
            node: None,
            sent: false,
            predecessor: None,
            waited: false,
            granted: false,
            doubt: Doubt::default(),
            undo,
        }
    }

    fn dir(&self) -> &str {
        self.dir.as_deref().unwrap_or_default()
    }

    /// `_c_<uuid>-<marker>`: the node name before the server appends the sequence.
    fn node_prefix(&self) -> String {
        format!("{PROTECTED}{}-{}", self.uuid, marker(self.req.kind))
    }

    fn path(&self, node: &str) -> String {
        format!("{}/{node}", self.dir())
    }

    /// Creates our node and lists the queue in one round trip: the session answers in order, so the listing
    /// already contains the node.
    async fn create(&mut self, zk: &zk::Client) -> Result<Vec<String>, zk::Error> {
        let prefix = self.path(&self.node_prefix());
        self.sent = true;
        // A latch node's data is the candidate's value, as `LeaderLatch` keeps its participant id; a lock's, the holder.
        let data = if self.req.kind == HoldKind::Leader { &self.req.value[..] } else { self.req.holder.as_bytes() };
        let create = zk.create(&prefix, data, &self.shared.session.modes().ephemeral_sequential);
        let list = zk.list_children(self.dir());
        let (created, listed) = tokio::time::timeout(self.shared.request_timeout, futures::future::join(create, list))
            .await
            .unwrap_or((Err(zk::Error::Timeout), Err(zk::Error::Timeout)));
        // A create the server answered with an error (NoAuth) made no node: nothing to look for or clean up.
        let (stat, seq) = created.inspect_err(|e| self.sent = is_connection_loss(e))?;
        self.node = Some(Node { name: format!("{}{seq}", self.node_prefix()), czxid: stat.czxid as u64 });
        listed
    }

    /// After a lost create reply: our node if the create went through, with the children it was listed among.
    async fn find(&mut self, zk: &zk::Client) -> Result<Option<Vec<String>>, zk::Error> {
        let children = self.shared.rpc(zk.list_children(self.dir())).await?;
        let Some(name) = children.iter().find(|c| c.starts_with(&format!("{PROTECTED}{}-", self.uuid))) else {
            return Ok(None);
        };
        let Some(stat) = self.shared.rpc(zk.check_stat(&self.path(name))).await? else { return Ok(None) };
        self.node = Some(Node { name: name.clone(), czxid: stat.czxid as u64 });
        Ok(Some(children))
    }

    /// The queue in order with our node in it, creating the node (and the directory) as needed.
    async fn enqueue(&mut self, mut zk: zk::Client) -> Result<Vec<String>, zk::Error> {
        let mut last = zk::Error::ConnectionLoss;
        for _ in 0..TRIES {
            let listed = match (&self.node, self.sent) {
                (Some(_), _) => self.shared.rpc(zk.list_children(self.dir())).await,
                (None, true) => match self.find(&zk).await {
                    Ok(Some(children)) => Ok(children),
                    Ok(None) => self.create(&zk).await,
                    Err(e) => Err(e),
                },
                (None, false) => self.create(&zk).await,
            };
            match listed {
                Ok(children) => {
                    let queue = queue(children, self.req.kind);
                    if self.node.as_ref().is_some_and(|n| queue.contains(&n.name)) {
                        return Ok(queue);
                    }
                    // Our node is gone (an operator's force_release): queue again at the back.
                    (self.node, self.sent) = (None, false);
                    continue;
                }
                // The directory is missing or was reaped as an empty container: our node cannot exist.
                Err(zk::Error::NoNode) => {
                    (self.node, self.sent) = (None, false);
                    self.shared.make_dirs(&zk, self.dir()).await?;
                }
                // The session and its nodes are gone: queue again on a new session.
                Err(zk::Error::SessionExpired) => {
                    (self.node, self.sent) = (None, false);
                    zk = self.shared.session.client().await?;
                }
                Err(e) if is_connection_loss(&e) => last = e,
                Err(e) => return Err(e),
            }
        }
        Err(last)
    }

    /// One attempt: queued (once), then held if our node is first, else busy behind its predecessor.
    async fn attempt(&mut self) -> Result<Attempt> {
        let s = self.shared.clone();
        if let Err(e) = &self.dir {
            return Err(e.clone());
        }
        let zk = s.client().await?;
        let queue = self.enqueue(zk.clone()).await.map_err(|e| s.err(e))?;
        let node = self.node.clone().ok_or_else(|| Error::internal("zk: queued without a node"))?;
        let Some(i) = queue.iter().position(|n| *n == node.name) else {
            return Err(Error::internal("zk: our node is missing from the queue it was found in"));
        };
        let turn = match self.req.kind {
            HoldKind::Read | HoldKind::Write => {
                let path = self.path(&node.name);
                rw_turn(&s, &zk, &self.req, self.dir(), &queue, i, (&path, node.czxid), self.waited).await?
            }
            _ if i == 0 => Turn::Held(node.czxid),
            _ => Turn::Behind(queue[i - 1].clone()),
        };
        match turn {
            Turn::Held(token) => {
                self.granted = true;
                Ok(Attempt::Acquired(self.req.grant(token, Some(self.path(&node.name)))))
            }
            Turn::Behind(blocker) => {
                (self.predecessor, self.waited) = (Some(blocker), true);
                Ok(Attempt::Busy(Busy { holder_ttl: None }))
            }
        }
    }

    /// What dropping this entry leaves to delete, and whether its last request is in doubt; `None` once granted or
    /// if it never sent a create.
    pub(super) fn leftover(&mut self) -> Option<(Leftover, bool)> {
        if self.granted || !self.sent {
            return None;
        }
        let zk = self.shared.session.current()?;
        let sent = self.node.take().map(|node| Box::pin(zk.delete(&self.path(&node.name), None)) as _);
        self.sent = false;
        Some((Leftover { dir: self.dir().to_string(), uuid: self.uuid.clone(), sent }, self.doubt.is_set()))
    }
}

#[async_trait]
impl Pending for QueueEntry {
    async fn try_acquire(&mut self) -> Result<Attempt> {
        self.doubt.clone().settle(self.attempt()).await
    }

    async fn wait(&mut self, _busy: &Busy, deadline: Option<Instant>) -> Result<()> {
        let s = &self.shared;
        let Some(predecessor) = self.predecessor.take() else { return Ok(()) };
        let watcher = {
            let zk = s.client().await?;
            // getData, not exists: a watch on a node that is already gone would never fire and never be cleared.
            match s.rpc(zk.get_and_watch_data(&self.path(&predecessor))).await {
                Ok((_, _, watcher)) => watcher,
                Err(zk::Error::NoNode) => return Ok(()),
                Err(e) => return Err(s.err(e)),
            }
            // The handle goes here, so a client closed while we wait ends its session at once.
        };
        until_fired(watcher, deadline).await;
        Ok(())
    }
}

impl Drop for QueueEntry {
    fn drop(&mut self) {
        if self.undo.is_none() {
            return;
        }
        let Some((leftover, in_doubt)) = self.leftover() else { return };
        let task = delete(self.shared.clone(), leftover);
        let Some(undo) = &self.undo else { return };
        if in_doubt { undo.in_doubt(task) } else { undo.entry(task) }
    }
}
