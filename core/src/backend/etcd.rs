//! `etcd://[user:password@]h1:2379,h2:2379`, over TLS as `etcd+https://…` or `etcd://…?tls=true` (with `ca=`,
//! `cert=`, `key=`, DESIGN.md §8): the algorithm and wire layout of etcd's `concurrency.Mutex`, so
//! `etcdctl lock <name>`, Go's `concurrency.Mutex` and fencelock exclude each other.
//!
//! - Each waiter writes one key, `<name>/<lease id in hex>`, empty, attached to its client's lease for that TTL
//!   (see `session.rs`). Keys queue by create revision: the owner is the key with the smallest one. Its fence token
//!   is the keyspace's epoch plus that create revision (`epoch.rs`): revisions only rise, and the epoch keeps
//!   tokens rising, and registers refusing old ones, when etcd loses its data.
//! - Acquire is one Txn: create our key if absent, and read the first-created key under `<name>/`.
//! - A waiter watches only its predecessor, the key created just before its own, until that key is deleted, then
//!   runs the Txn again. The Txn compares the owner with our key as it is now, so a waiter whose key vanished while
//!   it waited (its lease expired: the Jepsen finding on etcd 3.4.3) is never told it holds the lock.
//! - As in etcd, locks are prefixes: the keys of lock `a/b` also lie under `a/`, so do not nest lock names.
//! - KeptLease-bound: a key lives while its client keeps the lease alive, so a lock outlives its TTL while the client
//!   does; the TTL bounds how long a crashed client keeps it. `inspect` names the holder by its key, as the layout
//!   (shared with etcdctl) has no room for a holder id.
//!
//! An uncontended acquire + release is two round trips (the Txn, the delete), plus one lease grant per client and TTL.
//!
//! Read-write locks follow etcd's `recipes/rwmutex.go` layout (`<name>/read/…`, `<name>/write/…`, see `rwlock.rs`),
//! semaphores a layout of fencelock's own (`<name>/sem/…`, see `semaphore.rs`). Both live under `<name>/` like the
//! mutex's keys, as the recipes' do: use one name for one kind of lock.
//!
//! Files: `session.rs` (the kept leases), `epoch.rs` (the base of tokens), `watches.rs` (waiters' shared
//! watches), `attempt.rs` (one mutex acquire's queue key), `rwlock.rs` and
//! `semaphore.rs` (their acquires, releases and layouts), `deletes.rs` (deletes of our keys in flight), `ops.rs` (the
//! KV requests and their replies), `rpc.rs` (the gRPC API with failover).

mod attempt;
mod deletes;
mod epoch;
mod ops;
mod rpc;
mod rwlock;
mod secure;
mod semaphore;
mod session;
mod watches;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use fencelock_proto::etcdserverpb::{RangeResponse, response_op};
use tokio::sync::broadcast;
use tonic::Code;
use url::form_urlencoded;

use self::attempt::EtcdAttempt;
use self::deletes::{Deletes, delete_own};
use self::epoch::{EPOCH_KEY, Epoch};
use self::rpc::{Credentials, EtcdError, Rpc, Settings, describe};
use self::rwlock::RwAttempt;
use self::secure::{causes, tls_config};
use self::semaphore::SemAttempt;
use self::session::{KeptLease, KeptLeases, Refresh};
use self::watches::{Feed, Watches};
use super::tls::TlsFiles;
use super::{
    AcquireRequest, Backend, Capability, Grant, HoldKind, Leader, LockInfo, Pending, Undo, fenced, lock_lost, not_held,
};
use super::{decode_register, encode_register, parse_hosts, redact};
use crate::error::{Error, Result};
use crate::options::ClientOptions;
use crate::redact::userinfo_end;
use crate::tasks::Tasks;

/// The port of an etcd host that names none.
const ETCD_PORT: u16 = 2379;

/// Prefix of the fence registers, a namespace apart from lock keys.
const FENCE_PREFIX: &str = "fencelock/fence/";

/// Opens the backend `url` names.
pub(crate) async fn connect(url: &str, opts: &ClientOptions, tasks: &Tasks) -> Result<Arc<dyn Backend>> {
    Ok(Arc::new(EtcdBackend::connect(url, opts, tasks).await?))
}

/// What an `etcd://` URL names.
#[derive(Debug, PartialEq, Eq)]
struct Target {
    endpoints: Vec<String>,
    user: Option<Credentials>,
    /// The certificate files when TLS is on (`etcd+https://` or `?tls=true`).
    tls: Option<TlsFiles>,
}

fn parse_url(url: &str) -> Result<Target> {
    let shown = redact(url);
    let bad = |what: &str| {
        Error::invalid(format!(
            "URL {shown:?}: {what}; expected etcd://[user:password@]host:port[,host:port…][?tls=true&ca=…&cert=…&key=…]"
        ))
    };
    let (scheme, rest) = url.split_once("://").ok_or_else(|| bad("no //"))?;
    // The query begins after the user-info, whose password may hold a `?` (and a query value may hold a `@`).
    let after_auth = userinfo_end(rest).map_or(0, |i| i + 1);
    let (rest, query) = match rest[after_auth..].find('?') {
        Some(i) => (&rest[..after_auth + i], &rest[after_auth + i + 1..]),
        None => (rest, ""),
    };
    let (files, others) = TlsFiles::take(form_urlencoded::parse(query.as_bytes()).into_owned().collect());
    let https = scheme.eq_ignore_ascii_case("etcd+https");
    let mut tls = https;
    for (name, value) in others {
        match (name.as_str(), value.as_str()) {
            ("tls", value) => match (super::tls::flag(value, &shown)?, https) {
                (false, true) => return Err(bad("tls=false contradicts etcd+https://")),
                (on, _) => tls = on,
            },
            (other, _) => return Err(bad(&format!("unknown parameter {other:?}"))),
        }
    }
    files.require_tls(tls, &shown, "use etcd+https:// or tls=true")?;
    let rest = rest.trim_end_matches('/');
    let (user, hosts) = match rest.rsplit_once('@') {
        Some((auth, hosts)) => {
            let (u, p) = auth.split_once(':').ok_or_else(|| bad("credentials need user:password"))?;
            (Some(Credentials { name: u.to_string(), password: p.to_string() }), hosts)
        }
        None => (None, rest),
    };
    let http = if tls { "https" } else { "http" };
    let endpoints =
        parse_hosts(hosts, ETCD_PORT).map_err(|e| bad(&e))?.iter().map(|h| format!("{http}://{h}")).collect();
    Ok(Target { endpoints, user, tls: tls.then_some(files) })
}

/// The error for a first request that failed with `e`: final for refused credentials and TLS, else `Unavailable`.
async fn connect_error(e: EtcdError, target: &Target, shown: &str, within: Duration) -> Error {
    match e.code() {
        // Wrong or missing credentials, or a user without rights: retrying will not help.
        Code::InvalidArgument | Code::Unauthenticated => {
            return Error::invalid(format!("authentication failed for {shown}: {}", e.message()));
        }
        Code::PermissionDenied => return Error::invalid(format!("{shown}: etcd refused access: {}", e.message())),
        _ => {}
    }
    let refused = match &target.tls {
        Some(files) => secure::refusal(&e, &target.endpoints, files, shown, within).await,
        None => secure::tls_expected(&target.endpoints, shown, within).await,
    };
    if let Some(refused) = refused {
        return refused;
    }
    Error::unavailable(format!("{shown}: cannot connect: {}", causes(&e)))
}

fn key_of(name: &str, lease: i64) -> String {
    format!("{name}/{lease:x}")
}

fn prefix_of(name: &str) -> String {
    format!("{name}/")
}

/// The lease id in a key's suffix: our own keys name the lease that carries them.
fn lease_in(key: &str) -> Option<i64> {
    i64::from_str_radix(key.rsplit_once('/')?.1, 16).ok()
}

/// `<prefix>/<unix nanos>`, the shape of the recipes' `newUniqueEphemeralKey`: the queue key of a read-write lock
/// or semaphore acquire.
fn unique_key(prefix: &str) -> String {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    format!("{prefix}/{nanos}")
}

/// A read-write lock's or semaphore's queue key, its create revision (0 until an answer told it) and the lease it
/// rides on.
#[derive(Debug)]
struct HoldKey {
    key: String,
    rev: i64,
    lease: i64,
}

fn is_lease_not_found(e: &EtcdError) -> bool {
    e.message().contains("lease not found")
}

/// Whether `kv` is the key of `grant`, a read, write or permit hold: a read or write key's name is its acquire's
/// own, and its token no revision of the key; a slot's token is its key's create revision.
fn holds(kv: &fencelock_proto::mvccpb::KeyValue, grant: &Grant) -> bool {
    match grant.kind {
        HoldKind::Read | HoldKind::Write => kv.value == grant.holder.as_bytes(),
        _ => kv.create_revision == grant.revision && kv.value == grant.holder.as_bytes(),
    }
}

/// The etcd backend.
#[derive(Debug)]
pub(crate) struct EtcdBackend {
    rpc: Arc<Rpc>,
    leases: KeptLeases,
    watches: Arc<Watches>,
    deletes: Arc<Deletes>,
    tasks: Tasks,
    url: String,
    request_timeout: Duration,
}

impl EtcdBackend {
    async fn connect(url: &str, opts: &ClientOptions, tasks: &Tasks) -> Result<Self> {
        let target = parse_url(url)?;
        let shown = redact(url);
        let unavailable = |what: String| Error::unavailable(format!("{shown}: {what}"));
        let settings = Settings {
            connect_timeout: opts.connect_timeout,
            request_timeout: opts.request_timeout,
            user: target.user.clone(),
            tls: target.tls.as_ref().map(|files| tls_config(files, &shown)).transpose()?,
        };
        let rpc = Arc::new(
            Rpc::new(target.endpoints.clone(), settings).map_err(|e| Error::invalid(format!("{shown}: {e}")))?,
        );
        // Channels connect lazily: one read proves an endpoint answers (the first listed that does).
        let deadline = tokio::time::Instant::now() + opts.connect_timeout;
        let connecting = rpc.range_within(opts.connect_timeout, ops::count("fencelock/"));
        let answered = tokio::time::timeout(opts.connect_timeout, connecting)
            .await
            .map_err(|_| unavailable(format!("no answer within {:?}", opts.connect_timeout)))?;
        if let Err(e) = answered {
            // What is left of the connect timeout bounds the diagnosis.
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            return Err(connect_error(e, &target, &shown, left).await);
        }
        Ok(EtcdBackend {
            leases: KeptLeases::new(rpc.clone()),
            watches: Arc::default(),
            rpc,
            deletes: Arc::default(),
            tasks: tasks.clone(),
            url: shown,
            request_timeout: opts.request_timeout,
        })
    }

    fn err(&self, e: EtcdError) -> Error {
        match e.code() {
            Code::InvalidArgument | Code::PermissionDenied => {
                Error::internal(format!("{}: {}", self.url, describe(&e)))
            }
            _ => Error::unavailable(format!("{}: {}", self.url, describe(&e))),
        }
    }

    /// Creates our key with `value` (empty for a mutex, the candidate's for an election) if absent and reads the
    /// owner, in one Txn. Returns our key's and the owner's create revision.
    async fn enqueue(&self, name: &str, key: &str, value: &[u8], lease: i64) -> Result<(i64, i64), EtcdError> {
        let prefix = prefix_of(name);
        let txn = ops::txn(
            vec![ops::created_at(key, 0)],
            vec![ops::put(key, value.to_vec(), lease), ops::read(ops::first_created(&prefix))],
            vec![ops::read(ops::get(key)), ops::read(ops::first_created(&prefix))],
        );
        let mut resp = self.rpc.txn(txn).await?;
        let mine = if resp.succeeded {
            ops::revision(resp.header.as_ref())
        } else {
            ops::kvs(&mut resp, 0).first().map_or(0, |kv| kv.create_revision)
        };
        let owner = ops::kvs(&mut resp, 1).first().map_or(0, |kv| kv.create_revision);
        Ok((mine, owner))
    }

    /// For a queued key: the owner's create revision if our key still has revision `rev`, in a read-only Txn (a
    /// linearizable read, not a raft write like `enqueue`). `None` if our key is gone and must be queued again.
    async fn recheck(&self, name: &str, key: &str, rev: i64) -> Result<Option<i64>, EtcdError> {
        let prefix = prefix_of(name);
        let txn = ops::txn(vec![ops::created_at(key, rev)], vec![ops::read(ops::first_created(&prefix))], Vec::new());
        let mut resp = self.rpc.txn(txn).await?;
        Ok(resp.succeeded.then(|| ops::kvs(&mut resp, 0).first().map_or(0, |kv| kv.create_revision)))
    }

    /// The lease session a grant's key rides on, if this client still keeps it alive.
    async fn session_of(&self, grant: &Grant) -> Option<(String, Arc<KeptLease>)> {
        let key = grant.key.clone()?;
        let session = self.leases.by_id(lease_in(&key)?).await?;
        Some((key, session))
    }

    /// A feed of the deletes under `prefix`, on the client's shared watch of it (`watches.rs`). Subscribe before
    /// reading what to wait for: every delete after that read is in the feed.
    async fn deletes_under(&self, prefix: &str) -> Result<Feed> {
        self.watches.subscribe(&self.rpc, prefix).await.map_err(|e| self.err(e))
    }

    /// Waits until `key`, which stood at revision `at`, is deleted after it, or the watch behind `feed` ends.
    async fn deleted(&self, mut feed: Feed, key: &[u8], at: i64) -> Result<()> {
        loop {
            match feed.recv().await {
                Ok(d) if d.key == key && d.rev > at => return Ok(()),
                Ok(_) => {}
                // Deletes were dropped: look again rather than risk having missed ours.
                Err(broadcast::error::RecvError::Lagged(_)) => return Ok(()),
                Err(broadcast::error::RecvError::Closed) => {
                    return Err(self.err(EtcdError::unavailable("the watch stream ended")));
                }
            }
        }
    }

    /// Waits until `key`, as a look at revision `after` found it, is deleted: read again once subscribed, since the
    /// look came before the subscription.
    async fn watch_delete(&self, name: &str, key: &[u8], after: i64) -> Result<()> {
        // The name's keys share the name's watch; a key outside them (a read-write lock's grant record) shares
        // the watch of its directory, which is the name's too.
        let lock = prefix_of(name);
        let text = String::from_utf8_lossy(key);
        let prefix = match text.rfind('/') {
            _ if text.starts_with(&lock) => lock.as_str(),
            Some(i) => &text[..=i],
            None => &text,
        };
        let feed = self.deletes_under(prefix).await?;
        let found = self.rpc.range(ops::get(key)).await.map_err(|e| self.err(e))?;
        // Gone, or another key of the same name made since the look: the waiter looks again.
        if found.kvs.first().is_none_or(|kv| kv.create_revision > after) {
            return Ok(());
        }
        self.deleted(feed, key, ops::revision(found.header.as_ref())).await
    }

    /// A watch stream that broke: its endpoint loses the preference and the waiter gets `Unavailable`, so that
    /// `wait_out` watches again (on the next endpoint) once the cluster answers, rather than have the next Txn meet
    /// an election in progress.
    fn broken_watch(&self, endpoint: usize, e: Option<EtcdError>) -> Error {
        self.rpc.demote(endpoint);
        self.err(e.unwrap_or_else(|| EtcdError::unavailable("the watch stream ended")))
    }

    /// The first-created key under lock `name` (with the count of all its keys) and the epoch, read together so
    /// that a token derived from the key belongs to its data life.
    async fn owner(&self, name: &str) -> Result<(RangeResponse, Epoch)> {
        let read =
            ops::txn(Vec::new(), vec![ops::read(ops::first_created(&prefix_of(name))), epoch::read()], Vec::new());
        let mut resp = self.rpc.txn(read).await.map_err(|e| self.err(e))?;
        let epoch = epoch::of(&self.rpc, &ops::kvs(&mut resp, 1)).await.map_err(|e| self.err(e))?;
        let owner = match resp.responses.into_iter().next().and_then(|r| r.response) {
            Some(response_op::Response::ResponseRange(range)) => range,
            _ => RangeResponse::default(),
        };
        Ok((owner, epoch))
    }

    /// Writes `value` under `token` to register `key` if no higher token wrote it and the token belongs to the
    /// current data life: at or above its epoch, which a register lost with the data is seeded with (`epoch.rs`).
    async fn fence_put(&self, key: &str, token: u64, value: &[u8]) -> Result<()> {
        let stored = encode_register(token, value);
        let resource = &key[FENCE_PREFIX.len()..];
        let reads = || vec![ops::read(ops::get(key)), epoch::read()];
        let mut resp = self.rpc.txn(ops::txn(Vec::new(), reads(), Vec::new())).await.map_err(|e| self.err(e))?;
        // Compare-and-swap on the register's ModRevision and the epoch's CreateRevision; a lost race re-reads
        // both in the same Txn and tries again.
        loop {
            let current = ops::kvs(&mut resp, 0);
            let epoch = epoch::of(&self.rpc, &ops::kvs(&mut resp, 1)).await.map_err(|e| self.err(e))?;
            let seen = current.first().map_or(0, |kv| kv.mod_revision);
            let mut least = epoch.base;
            if let Some(kv) = current.first() {
                least = least.max(decode_register(&format!("{}: fence register {key}", self.url), &kv.value)?.0);
            }
            if token < least {
                return Err(fenced(resource, &self.url, token, least));
            }
            let txn = ops::txn(
                vec![ops::modified_at(key, seen), ops::created_at(EPOCH_KEY, epoch.rev)],
                vec![ops::put(key, stored.clone(), 0)],
                reads(),
            );
            resp = self.rpc.txn(txn).await.map_err(|e| self.err(e))?;
            if resp.succeeded {
                return Ok(());
            }
        }
    }
}

#[async_trait]
impl Backend for EtcdBackend {
    fn capability(&self) -> Capability {
        // KeptLease-bound: a key lives while its client keeps the lease alive, whatever the lock's own renewals.
        Capability::SESSION_BOUND
    }

    fn describe(&self) -> &str {
        &self.url
    }

    fn begin(self: Arc<Self>, req: AcquireRequest, undo: Undo) -> Box<dyn Pending> {
        match req.kind {
            HoldKind::Read | HoldKind::Write => Box::new(RwAttempt::new(self, req, undo)),
            HoldKind::Permit { permits } => Box::new(SemAttempt::new(self, req, permits, undo)),
            _ => Box::new(EtcdAttempt::new(self, req, undo)),
        }
    }

    async fn renew(&self, grant: &Grant, _ttl: Duration) -> Result<()> {
        // The lease's TTL was fixed at grant; renewal proves the key is ours and the lease alive right now.
        let (ours, session) = match grant.kind {
            HoldKind::Exclusive | HoldKind::Leader => {
                let Some((key, session)) = self.session_of(grant).await else {
                    return Err(lock_lost(grant, &self.url));
                };
                let (found, refresh) =
                    tokio::join!(self.rpc.range(ops::get(key)), session.refresh(self.request_timeout));
                let found = found.map_err(|e| self.err(e))?;
                let ours =
                    found.kvs.first().is_some_and(|kv| kv.lease == session.id && kv.create_revision == grant.revision);
                (ours, (session, refresh))
            }
            // A read-write or semaphore key names no lease: the key read tells which one to refresh.
            _ => {
                let Some(key) = grant.key.as_deref() else { return Err(lock_lost(grant, &self.url)) };
                let found = self.rpc.range(ops::get(key)).await.map_err(|e| self.err(e))?;
                let Some(kv) = found.kvs.first().filter(|kv| holds(kv, grant)) else {
                    return Err(lock_lost(grant, &self.url));
                };
                let Some(session) = self.leases.by_id(kv.lease).await else {
                    return Err(lock_lost(grant, &self.url));
                };
                let refresh = session.refresh(self.request_timeout).await;
                (true, (session, refresh))
            }
        };
        let (session, refresh) = session;
        match refresh {
            _ if !ours => Err(lock_lost(grant, &self.url)),
            Refresh::Alive => Ok(()),
            Refresh::Gone => Err(lock_lost(grant, &self.url)),
            Refresh::Silent => Err(Error::unavailable(format!(
                "{}: lease {:x} keepalive not acknowledged within {:?}",
                self.url, session.id, self.request_timeout
            ))),
        }
    }

    async fn release(&self, grant: &Grant) -> Result<()> {
        match grant.kind {
            HoldKind::Read | HoldKind::Write => return rwlock::release(self, grant).await,
            HoldKind::Permit { .. } => return semaphore::release(self, grant).await,
            _ => {}
        }
        let Some(key) = grant.key.as_deref() else { return Err(not_held(grant, &self.url)) };
        let deleted = self.deletes.start(key).run(self.rpc.clone(), grant.revision, &self.tasks).await;
        if deleted.map_err(|e| self.err(e))? { Ok(()) } else { Err(not_held(grant, &self.url)) }
    }

    async fn force_release(&self, name: &str) -> Result<bool> {
        let owner = self.rpc.range(ops::first_created(&prefix_of(name))).await.map_err(|e| self.err(e))?;
        let Some(kv) = owner.kvs.into_iter().next() else { return Ok(false) };
        let key = String::from_utf8_lossy(&kv.key).into_owned();
        delete_own(&self.rpc, &key, kv.create_revision).await.map_err(|e| self.err(e))
    }

    async fn inspect(&self, name: &str) -> Result<LockInfo> {
        let (mut owner, epoch) = self.owner(name).await?;
        // A range's count is of every key under the prefix, whatever its limit: the holder and those behind it.
        let waiters = Some(owner.count.saturating_sub(1).max(0) as u64);
        let Some(kv) = owner.kvs.pop() else {
            return Ok(LockInfo { holder: None, remaining: None, last_token: None, waiters });
        };
        let remaining = match kv.lease {
            0 => None,
            lease => {
                let found = self.rpc.time_to_live(lease).await.map_err(|e| self.err(e))?;
                (found.ttl >= 0).then(|| Duration::from_secs(found.ttl as u64))
            }
        };
        Ok(LockInfo {
            holder: Some(String::from_utf8_lossy(&kv.key).into_owned()),
            remaining,
            last_token: Some(epoch.token(kv.create_revision)),
            waiters,
        })
    }

    async fn available(&self, name: &str, permits: u32) -> Result<u32> {
        semaphore::available(self, name, permits).await
    }

    fn keeps_leader_values(&self) -> bool {
        true
    }

    /// `concurrency.Election`'s leader: the first-created key under the name, its value, and its token (the
    /// epoch plus its create revision) as the term.
    async fn leader(&self, name: &str) -> Result<Option<Leader>> {
        let (owner, epoch) = self.owner(name).await?;
        Ok(owner.kvs.into_iter().next().map(|kv| Leader { term: epoch.token(kv.create_revision), value: kv.value }))
    }

    /// `concurrency.Election.Proclaim`: a put of our key on its lease, only while its create revision is our term.
    async fn proclaim(&self, grant: &Grant, value: &[u8]) -> Result<()> {
        let Some((key, session)) = self.session_of(grant).await else { return Err(lock_lost(grant, &self.url)) };
        let txn = ops::txn(
            vec![ops::created_at(&key, grant.revision)],
            vec![ops::put(&key, value.to_vec(), session.id)],
            Vec::new(),
        );
        let resp = self.rpc.txn(txn).await.map_err(|e| self.err(e))?;
        if resp.succeeded { Ok(()) } else { Err(lock_lost(grant, &self.url)) }
    }

    async fn fence_write(&self, resource: &str, token: u64, value: &[u8]) -> Result<()> {
        self.fence_put(&format!("{FENCE_PREFIX}{resource}"), token, value).await
    }

    async fn fence_read(&self, resource: &str) -> Result<(u64, Vec<u8>)> {
        let key = format!("{FENCE_PREFIX}{resource}");
        let found = self.rpc.range(ops::get(key.as_str())).await.map_err(|e| self.err(e))?;
        match found.kvs.first() {
            Some(kv) => decode_register(&format!("{}: fence register {key}", self.url), &kv.value),
            None => Ok((0, Vec::new())),
        }
    }

    async fn close(&self) {
        self.watches.close().await;
        self.leases.revoke_all().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tls_by_scheme_or_parameter_and_files_only_with_it() {
        let t = parse_url("etcd+https://u:p?w@a,b:7?ca=%2Fca.pem").unwrap();
        assert_eq!(t.endpoints, ["https://a:2379", "https://b:7"]);
        assert_eq!(t.user, Some(Credentials { name: "u".into(), password: "p?w".into() }));
        assert_eq!(t.tls.unwrap().ca.as_deref(), Some("/ca.pem"));
        let t = parse_url("etcd://h?tls=true").unwrap();
        assert_eq!((t.endpoints, t.tls), (vec!["https://h:2379".to_string()], Some(TlsFiles::default())));
        assert_eq!(parse_url("etcd://h").unwrap().tls, None);
        let t = parse_url("etcd://u:p@h?tls=true&ca=/a@b.pem").unwrap();
        assert_eq!((t.endpoints, t.tls.unwrap().ca), (vec!["https://h:2379".to_string()], Some("/a@b.pem".into())));
        for (url, says) in [
            ("etcd://h?ca=/ca.pem", "ca= given but TLS is off"),
            ("etcd+https://h?tls=false", "contradicts"),
            ("etcd://h?tls=yes", "neither true nor false"),
            ("etcd://h?sslmode=require", "unknown parameter \"sslmode\""),
        ] {
            let e = parse_url(url).unwrap_err();
            assert!(e.message().contains(says), "{url}: {e}");
        }
    }

    #[test]
    fn debug_output_hides_the_password() {
        let t = parse_url("etcd://root:pa/ss-9@h").unwrap();
        let settings = Settings {
            connect_timeout: Duration::from_secs(1),
            request_timeout: Duration::from_secs(1),
            user: t.user.clone(),
            tls: Some(tonic::transport::ClientTlsConfig::new()),
        };
        for shown in [format!("{t:?}"), format!("{settings:?}")] {
            assert!(!shown.contains("pa/ss-9") && shown.contains("root"), "{shown}");
        }
    }
}
