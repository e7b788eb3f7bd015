//! `zk://h1:2181,h2:2181[/chroot]`: Curator's `InterProcessMutex` recipe on the raw ZooKeeper API, so Curator
//! clients and fencelock exclude each other on the same path.
//!
//! Layout: the lock directory is the name if it starts with `/`, else `/<name>` (container nodes, created on first
//! use). Each acquire creates the EPHEMERAL_SEQUENTIAL node `<dir>/_c_<uuid>-lock-<seq10>` holding the holder id; the
//! queue is ordered by the text after the last `lock-`, the first node holds the lock, and a waiter watches only its
//! predecessor. The `_c_<uuid>` prefix (a fresh uuid per acquire, Curator's "protected" mode) lets an acquire whose
//! create reply was lost find its node instead of making a second one. The fence token is the node's czxid: zxids
//! only rise, so every later grant on any path gets a larger one.
//!
//! Leases are session-bound: one session per client carries every node it holds, with a timeout of twice the
//! client's request timeout (10 s by default; the server clamps it to its 2–20 tick range). The lease TTL cannot
//! shorten it. Renewing checks that the node still exists under our session; a lease ends when the session expires,
//! whatever its TTL, so a lease TTL above the session timeout is only as safe as its fence token. An expired session
//! is replaced on the next call. Uncontended acquire + release costs two round trips: the create and the listing of
//! the queue are pipelined (one session answers in order), then one delete.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use tokio::time::Instant;
use zookeeper_client as zk;

use super::{AcquireRequest, Attempt, Backend, Busy, Capability, Grant, LockInfo, Ticket, fenced, lock_lost, not_held};
use super::{Backoff, Host, decode_register, encode_register, parse_hosts, redact};
use crate::error::{Error, ErrorKind, Result};
use crate::options::ClientOptions;
use crate::tasks::Tasks;

/// The protected-mode prefix Curator puts before the attempt uuid.
const PROTECTED: &str = "_c_";
/// Curator's lock node name; the queue is ordered by the text after its last occurrence.
const LOCK_NAME: &str = "lock-";
/// First and longest pause between retries of a delete lost with the connection.
const PAUSE_FIRST: Duration = Duration::from_millis(50);
const PAUSE_LONGEST: Duration = Duration::from_secs(1);
/// The port of a ZooKeeper host that names none.
const ZK_PORT: u16 = 2181;
/// Where fence registers live, apart from every lock path.
const FENCES: &str = "/fencelock/fences";
/// How often one call retries a lost connection, a reaped directory or a vanished node before giving up.
const TRIES: usize = 5;

const EPHEMERAL_SEQUENTIAL: zk::CreateOptions<'static> =
    zk::CreateMode::EphemeralSequential.with_acls(zk::Acls::anyone_all());
const PERSISTENT: zk::CreateOptions<'static> = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
const CONTAINER: zk::CreateOptions<'static> = zk::CreateMode::Container.with_acls(zk::Acls::anyone_all());

/// Opens the backend `url` names.
pub(crate) async fn connect(url: &str, opts: &ClientOptions, tasks: &Tasks) -> Result<Arc<dyn Backend>> {
    Ok(Arc::new(ZkBackend::connect(url, opts, tasks).await?))
}

/// The lock directory of `name`: the name itself if absolute, else `/<name>`.
fn lock_dir(name: &str) -> Result<String> {
    let dir = if name.starts_with('/') { name.to_string() } else { format!("/{name}") };
    if dir.ends_with('/') {
        return Err(Error::invalid(format!("lock {name:?}: a ZooKeeper lock path must not end with '/'")));
    }
    Ok(dir)
}

fn fence_path(resource: &str) -> String {
    format!("{FENCES}/{}", resource.trim_start_matches('/'))
}

/// The lock nodes among `children`, in Curator's order. Other children (a nested lock's directory) are no
/// contenders; Curator would count them, which only makes it wait longer, never hold alongside us.
fn queue(children: Vec<String>) -> Vec<String> {
    let key = |node: &str| node.rsplit_once(LOCK_NAME).map_or(String::new(), |(_, seq)| seq.to_string());
    let mut queue: Vec<String> = children.into_iter().filter(|c| c.contains(LOCK_NAME)).collect();
    queue.sort_by_cached_key(|node| key(node));
    queue
}

/// A lost connection, or a reply later than the request timeout: the outcome of a write is unknown. zookeeper-client
/// fails the requests in flight on a connection it gives up on with the reason, a `Custom` error ("no response from
/// connection in …ms" after a delay longer than its connection timeout, an I/O error): a lost connection as well.
fn is_connection_loss(e: &zk::Error) -> bool {
    matches!(e, zk::Error::ConnectionLoss | zk::Error::Timeout | zk::Error::Custom(_))
}

/// One ZooKeeper session per client, replaced after it expires; closing drops the last handle, which ends it.
#[derive(Debug)]
struct Session {
    hosts: String,
    chroot: Option<String>,
    timeout: Duration,
    connect_timeout: Duration,
    live: Mutex<Option<zk::Client>>,
    reopen: tokio::sync::Mutex<()>,
    closed: AtomicBool,
}

impl Session {
    async fn open(&self) -> Result<zk::Client, zk::Error> {
        let connect =
            zk::Client::connector().with_session_timeout(self.timeout).with_fail_eagerly().connect(&self.hosts);
        let client = tokio::time::timeout(self.connect_timeout, connect).await.map_err(|_| zk::Error::Timeout)??;
        let Some(root) = &self.chroot else { return Ok(client) };
        // Like a Curator namespace, the chroot is made on first use; persistent, so the server never reaps it.
        client.mkdir(root, &PERSISTENT).await?;
        client.chroot(root.as_str()).map_err(|_| zk::Error::BadArguments(&"invalid chroot"))
    }

    /// The current session handle, expired or not; `None` once closed.
    fn current(&self) -> Option<zk::Client> {
        self.live.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// A live session handle, opening a new session if the last one expired.
    async fn client(&self) -> Result<zk::Client, zk::Error> {
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
    async fn close(&self, bound: Duration) {
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

/// Attempts whose tickets were dropped before their node was known or deleted, by holder: `abandon` and the
/// ticket's own cleanup find their nodes by the `_c_<uuid>` prefix. A live attempt is never listed here.
#[derive(Debug, Default)]
struct Abandoned(Mutex<HashMap<String, Vec<(String, String)>>>);

impl Abandoned {
    fn add(&self, holder: &str, dir: &str, uuid: &str) {
        let mut map = self.0.lock().unwrap_or_else(|p| p.into_inner());
        map.entry(holder.to_string()).or_default().push((dir.to_string(), uuid.to_string()));
    }

    fn take(&self, holder: &str) -> Vec<(String, String)> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).remove(holder).unwrap_or_default()
    }
}

/// State shared by the backend and the tickets it hands out.
#[derive(Debug)]
struct Shared {
    session: Session,
    abandoned: Abandoned,
    url: String,
    request_timeout: Duration,
    tasks: Tasks,
}

impl Shared {
    /// Bounds one request by the request timeout; a late reply counts as a lost connection.
    async fn rpc<T>(&self, request: impl Future<Output = Result<T, zk::Error>>) -> Result<T, zk::Error> {
        tokio::time::timeout(self.request_timeout, request).await.unwrap_or(Err(zk::Error::Timeout))
    }

    fn err(&self, e: zk::Error) -> Error {
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
            _ => ErrorKind::Internal,
        };
        Error::new(kind, format!("{}: {e}", self.url))
    }

    async fn client(&self) -> Result<zk::Client> {
        self.session.client().await.map_err(|e| self.err(e))
    }

    /// Creates `dir` and its parents as container nodes, which the server reaps once empty; servers older than
    /// 3.5.3 refuse containers and get persistent nodes instead.
    async fn make_dirs(&self, zk: &zk::Client, dir: &str) -> Result<(), zk::Error> {
        match self.rpc(zk.mkdir(dir, &CONTAINER)).await {
            Err(zk::Error::Unimplemented) => self.rpc(zk.mkdir(dir, &PERSISTENT)).await,
            done => done,
        }
    }

    /// The queue of `dir` in order, empty if the directory does not exist.
    async fn queue_of(&self, zk: &zk::Client, dir: &str) -> Result<Vec<String>, zk::Error> {
        match self.rpc(zk.list_children(dir)).await {
            Ok(children) => Ok(queue(children)),
            Err(zk::Error::NoNode) => Ok(Vec::new()),
            Err(e) => Err(e),
        }
    }

    /// Deletes the nodes of `holder`'s abandoned attempts, found by their `_c_<uuid>` prefix. What cannot be
    /// reached now stays listed for the next sweep (and vanishes with the session in any case).
    async fn sweep(&self, holder: &str) -> Result<()> {
        let attempts = self.abandoned.take(holder);
        for (i, (dir, uuid)) in attempts.iter().enumerate() {
            if let Err(e) = self.delete_by_prefix(dir, uuid).await {
                attempts[i..].iter().for_each(|(dir, uuid)| self.abandoned.add(holder, dir, uuid));
                return Err(e);
            }
        }
        Ok(())
    }

    async fn delete_by_prefix(&self, dir: &str, uuid: &str) -> Result<()> {
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

    /// Retries the sweep of `holder` until it succeeds or the session timeout passes; by then the session either
    /// answers again or has expired, taking the nodes with it.
    async fn sweep_in_background(self: Arc<Self>, holder: String) {
        let mut backoff = Backoff::new(PAUSE_FIRST, PAUSE_LONGEST, Instant::now() + self.session.timeout);
        while let Err(e) = self.sweep(&holder).await {
            if e.kind() == ErrorKind::Closed || !backoff.wait().await {
                tracing::warn!(holder = %holder, error = %e, "could not delete an abandoned lock node; it goes with the session");
                return;
            }
        }
    }

    fn spawn(&self, task: impl Future<Output = ()> + Send + 'static) {
        self.tasks.spawn(task);
    }
}

/// Our node once its create was answered.
#[derive(Debug, Clone)]
struct Node {
    name: String,
    czxid: u64,
}

/// One acquire's place in the queue, kept in its `Ticket`. Dropped before the lock was granted, it deletes its node.
#[derive(Debug)]
struct Entry {
    shared: Arc<Shared>,
    dir: String,
    holder: String,
    uuid: String,
    node: Option<Node>,
    // A create may have reached the server: look for the node by prefix before creating another.
    sent: bool,
    predecessor: Option<String>,
    granted: bool,
}

impl Entry {
    fn new(shared: Arc<Shared>, dir: String, holder: String) -> Self {
        let uuid = uuid::Uuid::new_v4().to_string();
        Entry { shared, dir, holder, uuid, node: None, sent: false, predecessor: None, granted: false }
    }

    /// `_c_<uuid>-lock-`: the node name before the server appends the sequence.
    fn node_prefix(&self) -> String {
        format!("{PROTECTED}{}-{LOCK_NAME}", self.uuid)
    }

    fn path(&self, node: &str) -> String {
        format!("{}/{node}", self.dir)
    }

    /// Creates our node and lists the queue in one round trip: the session answers in order, so the listing
    /// already contains the node.
    async fn create(&mut self, zk: &zk::Client) -> Result<Vec<String>, zk::Error> {
        let prefix = self.path(&self.node_prefix());
        self.sent = true;
        let create = zk.create(&prefix, self.holder.as_bytes(), &EPHEMERAL_SEQUENTIAL);
        let list = zk.list_children(&self.dir);
        let (created, listed) = tokio::time::timeout(self.shared.request_timeout, futures::future::join(create, list))
            .await
            .unwrap_or((Err(zk::Error::Timeout), Err(zk::Error::Timeout)));
        let (stat, seq) = created?;
        self.node = Some(Node { name: format!("{}{seq}", self.node_prefix()), czxid: stat.czxid as u64 });
        listed
    }

    /// After a lost create reply: our node if the create went through, with the children it was listed among.
    async fn find(&mut self, zk: &zk::Client) -> Result<Option<Vec<String>>, zk::Error> {
        let children = self.shared.rpc(zk.list_children(&self.dir)).await?;
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
                (Some(_), _) => self.shared.rpc(zk.list_children(&self.dir)).await,
                (None, true) => match self.find(&zk).await {
                    Ok(Some(children)) => Ok(children),
                    Ok(None) => self.create(&zk).await,
                    Err(e) => Err(e),
                },
                (None, false) => self.create(&zk).await,
            };
            match listed {
                Ok(children) => {
                    let queue = queue(children);
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
                    self.shared.make_dirs(&zk, &self.dir).await?;
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
}

impl Drop for Entry {
    fn drop(&mut self) {
        if self.granted || !self.sent {
            return;
        }
        let shared = self.shared.clone();
        let Some(zk) = shared.session.current() else { return };
        match self.node.take() {
            Some(node) => {
                // Sent here, not in the task: later requests of this session then find the node gone.
                let delete = zk.delete(&self.path(&node.name), None);
                let (holder, dir, uuid) = (self.holder.clone(), self.dir.clone(), self.uuid.clone());
                self.shared.spawn(async move {
                    match delete.await {
                        Ok(()) | Err(zk::Error::NoNode) | Err(zk::Error::ClientClosed) => {}
                        Err(_) => {
                            shared.abandoned.add(&holder, &dir, &uuid);
                            shared.sweep_in_background(holder).await;
                        }
                    }
                });
            }
            None => {
                self.shared.abandoned.add(&self.holder, &self.dir, &self.uuid);
                self.shared.spawn(shared.sweep_in_background(self.holder.clone()));
            }
        }
    }
}

/// The ZooKeeper backend.
#[derive(Debug)]
pub(crate) struct ZkBackend {
    shared: Arc<Shared>,
}

impl ZkBackend {
    async fn connect(url: &str, opts: &ClientOptions, tasks: &Tasks) -> Result<Self> {
        let usage = || Error::invalid(format!("URL {url:?}: expected zk://host:port[,host:port…][/chroot]"));
        let rest = url.split_once("://").map(|(_, rest)| rest).ok_or_else(usage)?;
        let (hosts, chroot) = match rest.split_once('/') {
            Some((hosts, root)) => (hosts, Some(format!("/{}", root.trim_end_matches('/'))).filter(|r| r != "/")),
            None => (rest, None),
        };
        let hosts = parse_hosts(hosts, ZK_PORT).map_err(|e| Error::invalid(format!("URL {:?}: {e}", redact(url))))?;
        let session = Session {
            hosts: hosts.iter().map(Host::to_string).collect::<Vec<_>>().join(","),
            chroot,
            timeout: opts.request_timeout * 2,
            connect_timeout: opts.connect_timeout,
            live: Mutex::new(None),
            reopen: tokio::sync::Mutex::new(()),
            closed: AtomicBool::new(false),
        };
        let client = session.open().await.map_err(|e| match e {
            zk::Error::BadArguments(_) => Error::invalid(format!("URL {url:?}: {e}")),
            zk::Error::NoHosts | zk::Error::Timeout | zk::Error::ConnectionLoss => Error::unavailable(format!(
                "{url}: no ZooKeeper server answered within {:?} ({e})",
                opts.connect_timeout
            )),
            other => Error::unavailable(format!("{url}: cannot open a session: {other}")),
        })?;
        *session.live.lock().unwrap_or_else(|p| p.into_inner()) = Some(client);
        let shared = Shared {
            session,
            abandoned: Abandoned::default(),
            url: url.to_string(),
            request_timeout: opts.request_timeout,
            tasks: tasks.clone(),
        };
        Ok(ZkBackend { shared: Arc::new(shared) })
    }

    /// The node of a grant, if this session still owns it.
    async fn owns(&self, grant: &Grant) -> Result<bool> {
        let s = &self.shared;
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
        Capability { fencing: true, native_wait: true, fair: true, session_bound: true }
    }

    fn describe(&self) -> &str {
        &self.shared.url
    }

    /// A lost connection costs the session, and with it our node, after the session timeout, whatever the TTL.
    fn lease_bound(&self) -> Option<Duration> {
        Some(self.shared.session.timeout)
    }

    async fn try_acquire(&self, req: &AcquireRequest, ticket: &mut Option<Ticket>) -> Result<Attempt> {
        let s = &self.shared;
        if ticket.is_none() {
            *ticket = Some(Ticket::new(Entry::new(s.clone(), lock_dir(&req.name)?, req.holder.clone())));
        }
        let entry =
            ticket.as_mut().and_then(|t| t.get_mut::<Entry>()).ok_or_else(|| Error::internal("zk: foreign ticket"))?;
        let zk = s.client().await?;
        let queue = entry.enqueue(zk).await.map_err(|e| s.err(e))?;
        let node = entry.node.clone().ok_or_else(|| Error::internal("zk: queued without a node"))?;
        match queue.iter().position(|n| *n == node.name) {
            Some(0) => {
                entry.granted = true;
                let key = Some(entry.path(&node.name));
                Ok(Attempt::Acquired(Grant {
                    name: req.name.clone(),
                    holder: req.holder.clone(),
                    token: node.czxid,
                    key,
                }))
            }
            Some(i) => {
                entry.predecessor = Some(queue[i - 1].clone());
                Ok(Attempt::Busy(Busy { holder_ttl: None }))
            }
            None => Err(Error::internal("zk: our node is missing from the queue it was found in")),
        }
    }

    async fn wait(
        &self,
        _req: &AcquireRequest,
        _busy: &Busy,
        ticket: &mut Option<Ticket>,
        deadline: Option<Instant>,
    ) -> Result<()> {
        let s = &self.shared;
        let Some(entry) = ticket.as_mut().and_then(|t| t.get_mut::<Entry>()) else { return Ok(()) };
        let Some(predecessor) = entry.predecessor.take() else { return Ok(()) };
        let watcher = {
            let zk = s.client().await?;
            // getData, not exists: a watch on a node that is already gone would never fire and never be cleared.
            match s.rpc(zk.get_and_watch_data(&entry.path(&predecessor))).await {
                Ok((_, _, watcher)) => watcher,
                Err(zk::Error::NoNode) => return Ok(()),
                Err(e) => return Err(s.err(e)),
            }
            // The handle goes here, so a client closed while we wait ends its session at once.
        };
        match deadline {
            Some(d) => drop(tokio::time::timeout_at(d, watcher.changed()).await),
            None => drop(watcher.changed().await),
        }
        Ok(())
    }

    async fn renew(&self, grant: &Grant, _ttl: Duration) -> Result<()> {
        if self.owns(grant).await? { Ok(()) } else { Err(lock_lost(grant, &self.shared.url)) }
    }

    /// Retries a delete lost with the connection while the session lives: a session that reconnects keeps the node,
    /// held by nobody, for as long as the process runs (whatever the lease's TTL, even once the lease counts as
    /// lost), and every waiter queues behind it.
    async fn release(&self, grant: &Grant) -> Result<()> {
        let s = &self.shared;
        let Some(zk) = s.session.current() else { return Err(s.err(zk::Error::ClientClosed)) };
        let node = grant.key.as_deref().ok_or_else(|| Error::internal("zk grant without a node path"))?;
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

    async fn abandon(&self, req: &AcquireRequest) -> Result<()> {
        self.shared.sweep(&req.holder).await
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
            let Some(first) = s.queue_of(&zk, &dir).await.map_err(|e| s.err(e))?.into_iter().next() else {
                return Ok(LockInfo { holder: None, remaining: None, last_token: None });
            };
            match s.rpc(zk.get_data(&format!("{dir}/{first}"))).await {
                Ok((data, stat)) => {
                    let holder = Some(String::from_utf8_lossy(&data).into_owned());
                    return Ok(LockInfo { holder, remaining: None, last_token: Some(stat.czxid as u64) });
                }
                Err(zk::Error::NoNode) => continue,
                Err(e) => return Err(s.err(e)),
            }
        }
        Err(Error::unavailable(format!("{}: lock {name:?} kept changing hands", s.url)))
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
                Err(zk::Error::NoNode) => s.rpc(zk.create(&path, &data, &PERSISTENT)).await.map(drop),
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
        self.shared.session.close(self.shared.request_timeout).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_follows_curator_order() {
        let children = ["_c_b-lock-0000000003", "dir", "_c_a-lock-0000000010", "x-lock-0000000001"];
        let q = queue(children.iter().map(|s| s.to_string()).collect());
        assert_eq!(q, ["x-lock-0000000001", "_c_b-lock-0000000003", "_c_a-lock-0000000010"]);
    }

    #[test]
    fn paths_follow_curator_layout() {
        assert_eq!(lock_dir("orders").unwrap(), "/orders");
        assert_eq!(lock_dir("/locks/orders").unwrap(), "/locks/orders");
        assert_eq!(lock_dir("/").unwrap_err().kind(), ErrorKind::InvalidArgument);
        assert_eq!(fence_path("orders-table"), "/fencelock/fences/orders-table");
    }
}
