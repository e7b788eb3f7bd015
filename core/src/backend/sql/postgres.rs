//! `postgres://` / `postgresql://`: the SQLite backend's table algorithm on a server. A row per lock in
//! `fencelock_locks` (holder, count, expires_at in unix µs, fence); every step is one statement, so row locks make it
//! atomic, and every time in it is the server's clock, so client clocks never matter. The fence counter stays in the
//! row after release, and a new row is seeded from the server clock in µs, so tokens keep rising.
//!
//! Release notifies the channel `fencelock_<md5 hex of the name>` (SQL: `'fencelock_' || md5(name)`) in the same
//! statement, so the notification is sent exactly when the release commits, and only while the row's `wake_until`
//! says a waiter may listen: a busy acquire that will wait raises it to the holder's expiry, the end of its wait.
//! An uncontended release therefore sends nothing. Waiters LISTEN on one connection per client; a notification
//! they miss costs at most the holder's remaining TTL, the bound every wait uses.
//!
//! Read-write locks and semaphores (`super::rwlock`, `super::semaphore`) run their scripts as transactions on a
//! third connection of their own, one at a time: a transaction cannot share the pipelined command connection. An
//! abandon runs there too, so it reaches the server after the acquire it undoes. Their releases notify the channel
//! of the name in its family (`fencelock_<md5 hex of "rwlock\0<name>" or "semaphore\0<name>">`) at commit.
//!
//! Commands share one connection rather than a pool: tokio-postgres pipelines concurrent queries on it, and every
//! statement here is a short autocommit one on one row, so more connections would add server processes, not speed.
//!
//! TLS (`sslmode=`, `ca=`, `cert=`, `key=`: see `postgres/ssl.rs`) is the same on both connections. A password the
//! server refuses (SQLSTATE class 28) is `InvalidArgument`: no retry fixes it.

mod scripts;
mod ssl;

use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use async_trait::async_trait;
use md5::{Digest, Md5};
use tokio::sync::Mutex as AsyncMutex;
use tokio::time::Instant;
use tokio_postgres::config::Host;
use tokio_postgres::types::FromSqlOwned;
use tokio_postgres::{AsyncMessage, Client, Config, Connection, Row, Socket, Statement};

use self::scripts::ScriptConn;
use self::ssl::{MakeRustls, RustlsStream};

use super::{
    POSTGRES, abandon_script, holder_ttl, is_hold, lock_info, micros, release_script, renew_script, semaphore,
    stored_token, take_script,
};
use crate::backend::record::{RecordAttempt, Records};
use crate::backend::waiters::{Channels, Listen, Subscription, wait_notified};
use crate::backend::{
    AcquireRequest, Attempt, Backend, Busy, Capability, Grant, HoldKind, LockInfo, Pending, Undo, fenced, lock_lost,
    not_held, permits_mismatch,
};
use crate::backend::{redact, tls};
use crate::error::{Error, ErrorKind, Result};
use crate::options::ClientOptions;

/// Prefixes a statement with the CTE `now`: the server clock in unix µs, read once so every comparison in the
/// statement agrees. `clock_timestamp()`, not `now()`: `now()` is the start of the transaction, which need not be
/// the start of this statement.
macro_rules! with_now {
    ($($sql:expr),+ $(,)?) => {
        concat!("WITH now AS (SELECT ", now_us!(), " AS us) ", $($sql),+)
    };
}

/// ACQUIRE's test of the existing row `l` against the insert `excluded`: free, expired or already ours.
macro_rules! takeable {
    () => {
        "(l.holder IS NULL OR l.expires_at <= (SELECT us FROM now) OR l.holder = excluded.holder)"
    };
}

/// The server clock in unix µs.
macro_rules! now_us {
    () => {
        "(extract(epoch FROM clock_timestamp()) * 1000000)::bigint"
    };
}

/// The schema, created if absent. The statements run as one implicit transaction (one simple query), and the
/// advisory lock lets one connection at a time in: concurrent `CREATE TABLE IF NOT EXISTS` can still collide in
/// the catalog with a unique violation. The key is "fenceloc" in ASCII.
fn schema() -> String {
    format!(
        "SELECT pg_advisory_xact_lock(7378424937698848611);{};{WAKE_COLUMN};{}",
        POSTGRES.schema(),
        POSTGRES.epoch(now_us!())
    )
}

/// The waiters' hint, PostgreSQL's alone (the other dialects never read it): unix µs until which some waiter waits
/// for the row's release, so `FREE` pays for `pg_notify` only while one may listen. Added to tables of earlier
/// versions too.
const WAKE_COLUMN: &str = "ALTER TABLE fencelock_locks ADD COLUMN IF NOT EXISTS wake_until bigint NOT NULL DEFAULT 0";

// Creating needs the CREATE privilege even when the tables exist, so look first: a user who may only read and
// write them still connects.
const SCHEMA_EXISTS: &str = "SELECT to_regclass('fencelock_locks') IS NOT NULL
    AND to_regclass('fencelock_fences') IS NOT NULL AND to_regclass('fencelock_epoch') IS NOT NULL
    AND to_regclass('fencelock_rwlocks') IS NOT NULL AND to_regclass('fencelock_rwholds') IS NOT NULL
    AND to_regclass('fencelock_semaphores') IS NOT NULL AND to_regclass('fencelock_slots') IS NOT NULL
    AND EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass('fencelock_locks')
        AND attname = 'wake_until' AND NOT attisdropped)";

// Free, expired or already ours (a grant whose reply was lost) → take it with the next token. Busy → the holder's
// remaining µs. A caller that will wait ($4) raises the row's `wake_until` to the holder's expiry, the end of its
// wait, in the same write, so a release before then notifies it; a `try_lock` writes nothing when busy (its
// remaining µs then come from the statement's snapshot, NULL if the holder's row is newer: the caller's default
// bound applies). $1 name, $2 holder, $3 ttl µs, $4 waits → (token or NULL, remaining µs).
const ACQUIRE: &str = with_now!(
    "
    , took AS (
        INSERT INTO fencelock_locks AS l (name, holder, count, expires_at, fence)
        SELECT $1, $2, 1, us + $3, us FROM now
        ON CONFLICT (name) DO UPDATE SET
            holder = CASE WHEN ",
    takeable!(),
    " THEN excluded.holder ELSE l.holder END,
            count = CASE WHEN ",
    takeable!(),
    " THEN 1 ELSE l.count END,
            expires_at = CASE WHEN ",
    takeable!(),
    " THEN excluded.expires_at ELSE l.expires_at END,
            fence = CASE WHEN ",
    takeable!(),
    " THEN l.fence + 1 ELSE l.fence END,
            wake_until = CASE WHEN ",
    takeable!(),
    " THEN l.wake_until ELSE greatest(l.wake_until, l.expires_at) END
        WHERE $4 OR ",
    takeable!(),
    "
        RETURNING l.holder = $2 AS ours, fence, expires_at)
    SELECT (SELECT fence FROM took WHERE ours),
        coalesce((SELECT expires_at - us FROM took, now WHERE NOT ours),
            (SELECT expires_at - us FROM fencelock_locks, now WHERE name = $1 AND NOT EXISTS (SELECT FROM took)))"
);

// $1 name, $2 holder, $3 fence, $4 ttl µs. One row if extended; none if no longer ours.
const RENEW: &str = with_now!(
    "
    UPDATE fencelock_locks SET expires_at = now.us + $4 FROM now
    WHERE name = $1 AND holder = $2 AND fence = $3 AND expires_at > now.us"
);

// Release, abandon and force-release in one: frees the record if held, and by $2/$3 when given (NULL matches any),
// then notifies channel $4 if a waiter's hint has not passed. The row is locked before it is read, so `live` is its
// state when freed (an UPDATE's RETURNING only sees the new row). The hint stays: a waiter that subscribed after
// this release still waits on it. $1 name, $2 holder, $3 fence, $4 channel → one row (live) if freed.
const FREE: &str = with_now!(
    "
    , target AS (
        SELECT name, expires_at > now.us AS live, wake_until > now.us AS awaited FROM fencelock_locks, now
        WHERE name = $1 AND holder IS NOT NULL AND holder = coalesce($2, holder) AND fence = coalesce($3, fence)
        FOR UPDATE OF fencelock_locks)
    , freed AS (
        UPDATE fencelock_locks l SET holder = NULL, count = 0, expires_at = 0 FROM target
        WHERE l.name = target.name
        RETURNING target.live, target.awaited)
    SELECT live, CASE WHEN awaited THEN pg_notify($4, '') END FROM freed"
);

// $1 name → (holder, remaining µs, fence).
const INSPECT: &str = with_now!("SELECT holder, expires_at - now.us, fence FROM fencelock_locks, now WHERE name = $1");

/// The NOTIFY channel of a lock. Channel names are identifiers of at most 63 bytes and lock names may have 512, so
/// the name is hashed; md5 because the server has it too, so SQL can compute the same channel.
fn channel(name: &str) -> String {
    let digest = Md5::digest(name.as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("fencelock_{hex}")
}

/// The NOTIFY channel of a hold of `kind` on `name`: the name in its family, so a read-write lock, a semaphore and a
/// mutex of one name wake only their own waiters (names have no NUL).
fn hold_channel(kind: HoldKind, name: &str) -> String {
    channel(&format!("{}\0{name}", kind.family()))
}

/// Column `i` of `row`; a type mismatch is a bug in the statements above, reported rather than panicking.
fn col<T: FromSqlOwned>(row: &Row, i: usize) -> Result<T> {
    row.try_get(i).map_err(|e| Error::internal(format!("postgres: unexpected reply: {e}")))
}

/// The backend as a URL without secrets: rebuilt from the parsed settings, so a password in the query string
/// (`?password=`) is left out as surely as one in the authority.
fn describe(config: &Config) -> String {
    let ports = config.get_ports();
    let hosts: Vec<String> = config
        .get_hosts()
        .iter()
        .enumerate()
        .map(|(i, host)| {
            // libpq rules: one port per host, or one port for all, or the default.
            let port = ports.get(i).or(ports.first()).copied().unwrap_or(5432);
            match host {
                Host::Tcp(h) => format!("{h}:{port}"),
                #[cfg(unix)]
                Host::Unix(dir) => format!("{}:{port}", dir.display()),
            }
        })
        .collect();
    let user = config.get_user().map(|u| format!("{u}@")).unwrap_or_default();
    format!("postgres://{user}{}/{}", hosts.join(","), config.get_dbname().unwrap_or(""))
}

/// The command connection with its statements, prepared once per connection so each step is one round trip.
#[derive(Debug)]
struct PreparedConn {
    client: Client,
    acquire: Statement,
    renew: Statement,
    free: Statement,
    inspect: Statement,
    fence_write: Statement,
    fence_read: Statement,
}

/// What a PostgreSQL waiter keeps: its subscription, and whether a waiting writer's mark of its attempt may be on
/// the server.
#[derive(Default)]
pub(crate) struct PgWaiter {
    sub: Option<Subscription<Listener>>,
    marked: bool,
}

/// The connection that carries this client's LISTENs.
#[derive(Debug, Clone)]
pub(crate) struct Listener {
    client: Arc<Client>,
    channels: Arc<Channels>,
}

impl Listen for Listener {
    type Error = tokio_postgres::Error;

    // The channel is `fencelock_` + hex: a lower-case identifier that needs no quoting.
    async fn listen(&self, channel: &str) -> Result<(), tokio_postgres::Error> {
        self.client.batch_execute(&format!("LISTEN {channel}")).await
    }

    async fn unlisten(&self, channel: &str) {
        if !self.client.is_closed() {
            let _ = self.client.batch_execute(&format!("UNLISTEN {channel}")).await;
        }
    }

    fn is_live(&self) -> bool {
        !self.client.is_closed()
    }
}

/// Reads the listening connection's messages and wakes the channels they name, until the connection ends.
async fn dispatch(mut conn: Connection<Socket, Stream>, channels: Weak<Channels>) {
    while let Some(Ok(message)) = std::future::poll_fn(|cx| conn.poll_message(cx)).await {
        if let (AsyncMessage::Notification(n), Some(c)) = (message, channels.upgrade()) {
            c.wake(n.channel());
        }
    }
    // Notifications may have been lost with the connection: every waiter re-checks, and re-listens on a new one.
    if let Some(c) = channels.upgrade() {
        c.wake_all();
    }
}

/// A connection's stream when TLS is on (tokio-postgres carries a plaintext one under the same type).
type Stream = RustlsStream<Socket>;

/// The PostgreSQL backend.
#[derive(Debug)]
pub(crate) struct PostgresBackend {
    config: Config,
    tls: MakeRustls,
    url: String,
    opts: ClientOptions,
    session: AsyncMutex<Option<Arc<PreparedConn>>>,
    listener: AsyncMutex<Option<Arc<Listener>>>,
    scripts: AsyncMutex<Option<ScriptConn>>,
    closed: AtomicBool,
}

/// Opens the backend `url` names.
pub(crate) async fn connect(url: &str, opts: &ClientOptions) -> Result<Arc<dyn Backend>> {
    Ok(Arc::new(PostgresBackend::connect(url, opts).await?))
}

/// The value in `slot` while `live` says its connection is up, else a new one from `open` (one opener at a time).
async fn live_or_open<T, F>(slot: &AsyncMutex<Option<Arc<T>>>, live: impl Fn(&T) -> bool, open: F) -> Result<Arc<T>>
where
    F: Future<Output = Result<Arc<T>>>,
{
    let mut slot = slot.lock().await;
    if let Some(v) = slot.as_ref().filter(|v| live(v)) {
        return Ok(v.clone());
    }
    *slot = None;
    let v = open.await?;
    *slot = Some(v.clone());
    Ok(v)
}

impl PostgresBackend {
    async fn connect(url: &str, opts: &ClientOptions) -> Result<Self> {
        let split = ssl::split(url)?;
        let mut config = Config::from_str(&split.url).map_err(|e| match crate::backend::bad_port(url) {
            Some(port) => Error::invalid(format!("URL {:?}: {port}", redact(url))),
            None => Error::invalid(format!("URL {:?}: {e}", redact(url))),
        })?;
        let mut shown = describe(&config);
        if split.mode != ssl::Mode::Prefer {
            shown = format!("{shown}?sslmode={}", split.mode.name());
        }
        if config.get_hosts().is_empty() {
            return Err(Error::invalid(format!("URL {:?} names no host", redact(url))));
        }
        config.ssl_mode(split.mode.negotiation());
        config.connect_timeout(opts.connect_timeout);
        let backend = PostgresBackend {
            tls: ssl::connector(split.mode, &split.files, &shown)?,
            config,
            url: shown,
            opts: opts.clone(),
            session: AsyncMutex::default(),
            listener: AsyncMutex::default(),
            scripts: AsyncMutex::default(),
            closed: AtomicBool::new(false),
        };
        // Connect now, so a bad address or schema problem is reported by connect rather than by the first lock.
        backend.session().await?;
        Ok(backend)
    }

    /// Maps a driver error: a lost connection or a server going away is `Unavailable`, the rest is a bug.
    fn err(&self, e: tokio_postgres::Error) -> Error {
        let io = std::error::Error::source(&e).is_some_and(|s| s.is::<std::io::Error>());
        // SQLSTATE classes 08 connection exception, 53 insufficient resources, 57 operator intervention.
        let transient = e.code().is_some_and(|c| matches!(&c.code()[..2], "08" | "53" | "57"));
        if e.is_closed() || io || transient {
            Error::unavailable(format!("{}: {e}", self.url))
        } else {
            Error::internal(format!("{}: unexpected reply: {e}", self.url))
        }
    }

    /// A new connection within the connect timeout; its `Connection` half must be driven by the caller.
    async fn open_connection(&self) -> Result<(Client, Connection<Socket, Stream>)> {
        if self.closed.load(Ordering::SeqCst) {
            return Err(Error::new(ErrorKind::Closed, format!("{}: the client was closed", self.url)));
        }
        tokio::time::timeout(self.opts.connect_timeout, self.config.connect(self.tls.clone()))
            .await
            .map_err(|_| {
                Error::unavailable(format!("{}: no connection within {:?}", self.url, self.opts.connect_timeout))
            })?
            .map_err(|e| self.connect_err(e))
    }

    /// Maps a failed connect: refused credentials and TLS mismatches are the caller's to fix, the rest may pass.
    fn connect_err(&self, e: tokio_postgres::Error) -> Error {
        // The driver's own text names only the kind ("invalid configuration"); its source says what.
        let text = match std::error::Error::source(&e).map(|s| s.to_string()) {
            Some(why) if !e.to_string().contains(&why) => format!("{e}: {why}"),
            _ => e.to_string(),
        };
        // SQLSTATE class 28: invalid_authorization_specification (pg_hba.conf refused) and invalid_password.
        if let Some(db) = e.as_db_error().filter(|db| db.code().code().starts_with("28")) {
            return Error::invalid(format!("authentication failed for {}: {}", self.url, db.message()));
        }
        if text.contains("password missing") {
            return Error::invalid(format!("authentication failed for {}: the server asks for a password", self.url));
        }
        if tls::is_refusal(&e) {
            return tls::refused(&self.url, &text);
        }
        if text.contains("server does not support TLS") {
            return Error::invalid(format!("{}: the server does not offer TLS, which sslmode= requires", self.url));
        }
        Error::unavailable(format!("{}: cannot connect: {text}", self.url))
    }

    async fn open_session(&self) -> Result<PreparedConn> {
        let (client, conn) = self.open_connection().await?;
        let url = self.url.clone();
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!(backend = %url, error = %e, "command connection ended");
            }
        });
        let (fence_write, fence_read) = (POSTGRES.fence_write(), POSTGRES.fence_read());
        let setup = async {
            if !client.query_one(SCHEMA_EXISTS, &[]).await?.try_get::<_, bool>(0)? {
                client.batch_execute(&schema()).await?;
            }
            // PreparedConn concurrently: the requests share the pipeline, so this costs about one round trip.
            let (acquire, renew, free, inspect, fence_write, fence_read) = futures::try_join!(
                client.prepare(ACQUIRE),
                client.prepare(RENEW),
                client.prepare(FREE),
                client.prepare(INSPECT),
                client.prepare(&fence_write),
                client.prepare(&fence_read),
            )?;
            Ok::<_, tokio_postgres::Error>((acquire, renew, free, inspect, fence_write, fence_read))
        };
        let (acquire, renew, free, inspect, fence_write, fence_read) =
            tokio::time::timeout(self.opts.connect_timeout, setup)
                .await
                .map_err(|_| {
                    Error::unavailable(format!("{}: no schema reply within {:?}", self.url, self.opts.connect_timeout))
                })?
                .map_err(|e| self.err(e).context("preparing the fencelock tables"))?;
        Ok(PreparedConn { client, acquire, renew, free, inspect, fence_write, fence_read })
    }

    /// The command connection, re-established if it was lost.
    async fn session(&self) -> Result<Arc<PreparedConn>> {
        live_or_open(&self.session, |s| !s.client.is_closed(), async { self.open_session().await.map(Arc::new) }).await
    }

    /// The listening connection, made on first use and re-established if it was lost.
    async fn listener(&self) -> Result<Arc<Listener>> {
        live_or_open(&self.listener, |l| !l.client.is_closed(), async {
            let (client, conn) = self.open_connection().await?;
            let channels = Arc::<Channels>::default();
            tokio::spawn(dispatch(conn, Arc::downgrade(&channels)));
            Ok(Arc::new(Listener { client: Arc::new(client), channels }))
        })
        .await
    }

    /// Runs one request within the request timeout. A connection that stops answering is dropped, so the next
    /// call connects afresh instead of waiting on it again.
    async fn call<T>(
        &self,
        session: &Arc<PreparedConn>,
        request: impl Future<Output = Result<T, tokio_postgres::Error>>,
    ) -> Result<T> {
        match tokio::time::timeout(self.opts.request_timeout, request).await {
            Ok(reply) => reply.map_err(|e| self.err(e)),
            Err(_) => {
                let mut slot = self.session.lock().await;
                if slot.as_ref().is_some_and(|s| Arc::ptr_eq(s, session)) {
                    *slot = None;
                }
                Err(Error::unavailable(format!("{}: no reply within {:?}", self.url, self.opts.request_timeout)))
            }
        }
    }

    /// Frees `name`'s record if held (and by `holder`, with `token`, when given), notifying its waiters.
    /// `Some(live)` if a record was freed, where `live` says whether its TTL had not yet passed.
    async fn free(&self, name: &str, holder: Option<&str>, token: Option<u64>) -> Result<Option<bool>> {
        let s = self.session().await?;
        let token = token.map(|t| t as i64);
        let row = self.call(&s, s.client.query_opt(&s.free, &[&name, &holder, &token, &channel(name)])).await?;
        row.map(|r| col(&r, 0)).transpose()
    }
}

#[async_trait]
impl Backend for PostgresBackend {
    fn capability(&self) -> Capability {
        Capability {
            fencing: true,
            native_wait: true,
            fair: false,
            session_bound: false,
            rw_lock: true,
            semaphore: true,
            election: true,
        }
    }

    fn describe(&self) -> &str {
        &self.url
    }

    fn begin(self: Arc<Self>, req: AcquireRequest, undo: Undo) -> Box<dyn Pending> {
        RecordAttempt::begin(self, req, undo)
    }

    async fn renew(&self, grant: &Grant, ttl: Duration) -> Result<()> {
        if is_hold(grant.kind) {
            let (_, n) = self.script(renew_script(&POSTGRES, grant, ttl), grant.kind).await?;
            return if n == 0 { Err(lock_lost(grant, &self.url)) } else { Ok(()) };
        }
        let s = self.session().await?;
        let params = [&grant.name as _, &grant.holder as _, &(grant.token as i64) as _, &micros(ttl) as _];
        let n = self.call(&s, s.client.execute(&s.renew, &params)).await?;
        if n == 0 { Err(lock_lost(grant, &self.url)) } else { Ok(()) }
    }

    async fn release(&self, grant: &Grant) -> Result<()> {
        if is_hold(grant.kind) {
            let (_, n) = self.script(release_script(&POSTGRES, grant), grant.kind).await?;
            return if n == 1 { Ok(()) } else { Err(not_held(grant, &self.url)) };
        }
        match self.free(&grant.name, Some(&grant.holder), Some(grant.token)).await? {
            Some(true) => Ok(()),
            _ => Err(not_held(grant, &self.url)),
        }
    }

    async fn force_release(&self, name: &str) -> Result<bool> {
        Ok(self.free(name, None, None).await? == Some(true))
    }

    async fn inspect(&self, name: &str) -> Result<LockInfo> {
        let s = self.session().await?;
        let row = self.call(&s, s.client.query_opt(&s.inspect, &[&name])).await?;
        let row = row.map(|r| Ok::<_, Error>((col(&r, 0)?, col(&r, 1)?, col(&r, 2)?))).transpose()?;
        Ok(lock_info(row))
    }

    async fn available(&self, name: &str, permits: u32) -> Result<u32> {
        let kind = HoldKind::Permit { permits };
        let (count, _) = self.script(semaphore::available(&POSTGRES, name, permits), kind).await?;
        count.map_err(|stored| permits_mismatch(name, &self.url, permits, stored as u32))
    }

    async fn fence_write(&self, resource: &str, token: u64, value: &[u8]) -> Result<()> {
        let signed = stored_token(resource, &self.url, token)?;
        let s = self.session().await?;
        let stored = self.call(&s, s.client.query_opt(&s.fence_write, &[&resource, &signed, &value])).await?;
        if stored.is_some() {
            return Ok(());
        }
        let floor = self.call(&s, s.client.query_one(&POSTGRES.fence_floor(), &[&resource])).await?;
        Err(fenced(resource, &self.url, token, col::<i64>(&floor, 0)? as u64))
    }

    async fn fence_read(&self, resource: &str) -> Result<(u64, Vec<u8>)> {
        let s = self.session().await?;
        let Some(row) = self.call(&s, s.client.query_opt(&s.fence_read, &[&resource])).await? else {
            return Ok((0, Vec::new()));
        };
        Ok((col::<i64>(&row, 0)? as u64, col(&row, 1)?))
    }

    async fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        // Dropping the clients ends their connections once in-flight calls let go of them.
        self.session.lock().await.take();
        self.listener.lock().await.take();
        self.scripts.lock().await.take();
    }
}

#[async_trait]
impl Records for PostgresBackend {
    type Waiter = PgWaiter;

    async fn take(&self, req: &AcquireRequest, waiter: &mut Self::Waiter) -> Result<Attempt> {
        // Remember which notifications were already seen, so `wait` returns at once for one that lands meanwhile.
        if let Some(sub) = &mut waiter.sub {
            sub.mark();
        }
        if is_hold(req.kind) {
            let (plan, _) = self.script(take_script(&POSTGRES, req), req.kind).await?;
            let plan = plan?;
            waiter.marked = plan.marked;
            return plan.attempt(req, &self.url);
        }
        let s = self.session().await?;
        let params = [&req.name as _, &req.holder as _, &micros(req.ttl) as _, &req.waits as _];
        let row = self.call(&s, s.client.query_one(&s.acquire, &params)).await?;
        Ok(match col::<Option<i64>>(&row, 0)? {
            Some(token) => Attempt::Acquired(req.grant(token as u64, None)),
            None => Attempt::Busy(Busy { holder_ttl: holder_ttl(col(&row, 1)?) }),
        })
    }

    async fn wait_free(
        &self,
        req: &AcquireRequest,
        busy: &Busy,
        waiter: &mut Self::Waiter,
        deadline: Option<Instant>,
    ) -> Result<()> {
        let hold = is_hold(req.kind);
        let subscribe = async {
            let listener = self.listener().await?;
            let name = if hold { hold_channel(req.kind, &req.name) } else { channel(&req.name) };
            listener.channels.subscribe(&*listener, name).await.map_err(|e| self.err(e))
        };
        // A hold's waiter just tries again: the attempt is the only look that knows its kind.
        let free = async { Ok(hold || self.inspect(&req.name).await?.holder.is_none()) };
        wait_notified(&mut waiter.sub, busy.wait_until(deadline), subscribe, free).await
    }

    fn left_behind(waiter: &PgWaiter) -> bool {
        waiter.marked
    }

    async fn abandon(&self, req: &AcquireRequest) -> Result<()> {
        if is_hold(req.kind) {
            return self.script(abandon_script(&POSTGRES, req), req.kind).await.map(drop);
        }
        self.free(&req.name, Some(&req.holder), None).await.map(drop)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn channels_are_short_identifiers() {
        // The same as SQL `'fencelock_' || md5('a')`.
        assert_eq!(channel("a"), "fencelock_0cc175b9c0f1b6a831c399e269772661");
        assert_eq!(channel(&"x".repeat(512)).len(), 42);
    }

    #[test]
    fn descriptions_hide_passwords() {
        let config = Config::from_str("postgres://u:secret@h:5433/db?password=other").unwrap();
        assert_eq!(describe(&config), "postgres://u@h:5433/db");
        let config = Config::from_str("postgresql://a,b:7/x").unwrap();
        assert_eq!(describe(&config), "postgres://a:5432,b:7/x");
    }
}
