//! `mysql://` / `mariadb://`: the table algorithm of [`super`] on MySQL or MariaDB (InnoDB), every time in it the
//! server's clock (`UTC_TIMESTAMP(6)`, constant within a statement), so client clocks never matter.
//!
//! **Why each step is atomic.** Every step is one autocommit statement on one row, at READ COMMITTED:
//! - Acquire is one `INSERT … ON DUPLICATE KEY UPDATE`. InnoDB takes an exclusive lock on the duplicate key's index
//!   record before it evaluates the UPDATE part, so two acquires of one name run one after the other, the second
//!   seeing the first's row. For a name without a row, one INSERT wins the key and the other waits on that record's
//!   lock, then takes the UPDATE path. READ COMMITTED keeps the gap locks of duplicate checks short, so concurrent
//!   acquires of different names do not deadlock on a shared gap; a deadlock InnoDB still reports (1213) is retried.
//! - Renew, release, abandon and force-release are single-row `UPDATE`s by primary key: the row's exclusive lock is
//!   held from the WHERE check to the write.
//!
//! **The acquire's UPDATE part assigns left to right** (MySQL and MariaDB evaluate `SET a = …, b = …` in order, each
//! seeing the columns assigned before it), so it is ordered to mean the same under that rule and under MariaDB's
//! `SIMULTANEOUS_ASSIGNMENT` mode: `fence`, `count` and `holder` test the old row; `expires_at` comes last and tests a
//! row whose holder is already the new one iff it was taken. The new token reaches the client through
//! `LAST_INSERT_ID(expr)`, which the OK packet carries, so the acquire is one round trip; the affected-row count says
//! what happened (1 inserted, 2 taken, 0 busy: the client does not ask for found rows).
//!
//! **Registers fail closed** through `fencelock_epoch`, as [`super`] describes for every SQL store; the tables are
//! MySQL's own spelling of the shared schema (binary keys, InnoDB), with the same rows and meanings.
//!
//! **Waiters poll**, with the jittered 1–8 ms backoff every polling store uses, bounded by the holder's TTL: MySQL has
//! no LISTEN/NOTIFY. The candidate was a `GET_LOCK('<lock>:handoff')` each waiter blocks in, on a connection of its
//! own, while the holder keeps that named lock on a connection of its own for the whole hold. Measured on MariaDB
//! 10.11 (loopback, 47 µs round trip): a blocked `GET_LOCK` returned a p50 of 183 µs and a p99 of 4.9 ms after the
//! holder's `RELEASE_LOCK` was sent, and a hand-off through it costs that plus the release and the waiter's upsert,
//! against polling's measured hand-off gap p50 of ~210 µs (3.3 round trips) with 8 contenders. It would also hold a
//! connection per waiter during each wait and one per holding client throughout, and a holder whose connection
//! drops would wake every waiter into a TTL-long busy record. Polling wins with several waiters and costs up to one
//! poll interval (≤ 8 ms) with a single one.
//!
//! Connections come from a small pool: the protocol answers one statement at a time per connection, so concurrent
//! renewals and acquires need a few. TLS is rustls (DESIGN.md §8), chosen with MySQL's own `ssl-mode=` values, a
//! private CA in `ca=` and a client certificate in `cert=` and `key=` (backend/tls.rs reads them); plaintext stays the default, as in every MySQL driver, and `PREFERRED` is refused because
//! its silent fallback to plaintext is what a user who asked for TLS does not want.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use mysql_async::prelude::Queryable;
use mysql_async::{
    ClientIdentity, Conn, Opts, OptsBuilder, Params, Pool, PoolConstraints, PoolOpts, Row, SslOpts, params,
};

use super::{holder_ttl, lock_info, micros, stored_token};
use crate::backend::record::{RecordAttempt, Records};
use crate::backend::tls::TlsFiles;
use crate::backend::{
    AcquireRequest, Attempt, Backend, Busy, Capability, Grant, LockInfo, Pending, Undo, fenced, lock_lost, not_held,
};
use crate::error::{Error, Result};
use crate::options::ClientOptions;

/// The server clock in unix µs (`UTC_TIMESTAMP`, so the session's time zone and its DST steps never matter).
macro_rules! now_us {
    () => {
        "TIMESTAMPDIFF(MICROSECOND, '1970-01-01', UTC_TIMESTAMP(6))"
    };
}

/// Free, expired, or already ours (a grant whose reply was lost).
macro_rules! takeable {
    () => {
        concat!("(holder IS NULL OR expires_at <= ", now_us!(), " OR holder = VALUES(holder))")
    };
}

/// The tables, in InnoDB with binary keys: names compare byte for byte, with no case folding or trailing-space
/// padding that a text collation would add. The epoch row is the tables' birth on the server clock; where lock rows
/// already exist (tables made by an older version) it is the smallest counter, below every live token.
const SCHEMA: &[&str] = &[
    "CREATE TABLE IF NOT EXISTS fencelock_locks (
        name VARBINARY(512) PRIMARY KEY,
        holder VARBINARY(600),
        count INT NOT NULL DEFAULT 0,
        expires_at BIGINT NOT NULL DEFAULT 0,
        fence BIGINT NOT NULL
    ) ENGINE = InnoDB",
    "CREATE TABLE IF NOT EXISTS fencelock_fences (
        resource VARBINARY(512) PRIMARY KEY,
        token BIGINT NOT NULL,
        value LONGBLOB NOT NULL
    ) ENGINE = InnoDB",
    "CREATE TABLE IF NOT EXISTS fencelock_epoch (id INT PRIMARY KEY, us BIGINT NOT NULL) ENGINE = InnoDB",
    concat!(
        "INSERT IGNORE INTO fencelock_epoch (id, us) SELECT 1, COALESCE(MIN(fence), ",
        now_us!(),
        ") FROM fencelock_locks"
    ),
];

// Creating needs the CREATE privilege even when the tables exist, so look first: a user who may only read and
// write them still connects.
const SCHEMA_READY: &str = "SELECT (SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE()
        AND table_name IN ('fencelock_locks', 'fencelock_fences', 'fencelock_epoch')) = 3
    AND EXISTS (SELECT 1 FROM fencelock_epoch WHERE id = 1)";

/// One client at a time creates the tables: concurrent `CREATE TABLE IF NOT EXISTS` is safe in InnoDB, but the epoch
/// must be read from a finished `fencelock_locks`. A named lock is the server's mutex for that.
const SCHEMA_LOCK: &str = "SELECT GET_LOCK('fencelock_schema', :wait)";
const SCHEMA_UNLOCK: &str = "DO RELEASE_LOCK('fencelock_schema')";

// :name, :holder, :ttl µs. See the module comment for the order of the assignments and what the reply means.
const ACQUIRE: &str = concat!(
    "INSERT INTO fencelock_locks (name, holder, count, expires_at, fence)
    VALUES (:name, :holder, 1, ",
    now_us!(),
    " + :ttl, LAST_INSERT_ID(",
    now_us!(),
    "))
    ON DUPLICATE KEY UPDATE
        fence = IF(",
    takeable!(),
    ", LAST_INSERT_ID(fence + 1), fence),
        count = IF(",
    takeable!(),
    ", 1, count),
        holder = IF(",
    takeable!(),
    ", VALUES(holder), holder),
        expires_at = IF(",
    takeable!(),
    ", VALUES(expires_at), expires_at)"
);

// :name → the holder's remaining µs, asked only when the acquire found the lock busy.
const REMAINING: &str = concat!("SELECT expires_at - ", now_us!(), " FROM fencelock_locks WHERE name = :name");

// :name, :holder, :fence, :ttl µs. One row changed if extended.
const RENEW: &str = concat!(
    "UPDATE fencelock_locks SET expires_at = ",
    now_us!(),
    " + :ttl WHERE name = :name AND holder = :holder AND fence = :fence AND expires_at > ",
    now_us!()
);

// Only a live row counts as released: an expired row of ours is already free for others.
const RELEASE: &str = concat!(
    "UPDATE fencelock_locks SET holder = NULL, count = 0, expires_at = 0
    WHERE name = :name AND holder = :holder AND fence = :fence AND expires_at > ",
    now_us!()
);

const FORCE_RELEASE: &str = concat!(
    "UPDATE fencelock_locks SET holder = NULL, count = 0, expires_at = 0
    WHERE name = :name AND holder IS NOT NULL AND expires_at > ",
    now_us!()
);

const ABANDON: &str =
    "UPDATE fencelock_locks SET holder = NULL, count = 0, expires_at = 0 WHERE name = :name AND holder = :holder";

// :name → (holder, remaining µs, fence).
const INSPECT: &str =
    concat!("SELECT holder, expires_at - ", now_us!(), ", fence FROM fencelock_locks WHERE name = :name");

// :resource, :token, :value. No row is offered for a token below the epoch; an existing row takes the value iff the
// token is not older (`value` first, while `token` is still the old one). Changed rows: 1 new, 2 raised, 0 refused
// or the same token and value again (the caller tells those apart by reading).
const FENCE_WRITE: &str = "INSERT INTO fencelock_fences (resource, token, value)
    SELECT :resource, :token, :value FROM fencelock_epoch WHERE id = 1 AND :token >= us
    ON DUPLICATE KEY UPDATE value = IF(VALUES(token) >= token, VALUES(value), value),
        token = GREATEST(token, VALUES(token))";

// :resource → (stored token or NULL, value or NULL, epoch).
const FENCE_READ: &str = "SELECT f.token, f.value, e.us FROM fencelock_epoch e
    LEFT JOIN fencelock_fences f ON f.resource = :resource WHERE e.id = 1";

/// The connections to open at most per client: enough for the watchdog's renewals to overlap waiting acquires.
const MAX_CONNECTIONS: usize = 8;

/// Retries of a statement InnoDB chose as a deadlock victim (it rolled back, so it can simply run again).
const DEADLOCK_RETRIES: usize = 3;

/// How a connection uses TLS: MySQL's `ssl-mode` values, with `ca=` naming a private CA's PEM file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SslMode {
    /// Plaintext (the default, as in the driver).
    Disabled,
    /// TLS, the server's certificate not checked (MySQL's meaning; with `ca=` it is checked as for `VerifyCa`).
    Required,
    /// TLS with a certificate that the CA signed, for any host name. mysql_async 0.37 checks the name anyway (see
    /// `err`), so in practice this is `VerifyIdentity`: stricter than asked, never looser.
    VerifyCa,
    /// TLS with a certificate that the CA signed for the host connected to.
    VerifyIdentity,
}

impl SslMode {
    fn parse(value: &str, shown: &str) -> Result<SslMode> {
        match value.to_ascii_uppercase().as_str() {
            "DISABLED" => Ok(SslMode::Disabled),
            "REQUIRED" => Ok(SslMode::Required),
            "VERIFY_CA" => Ok(SslMode::VerifyCa),
            "VERIFY_IDENTITY" => Ok(SslMode::VerifyIdentity),
            "PREFERRED" => Err(Error::invalid(format!(
                "{shown}: ssl-mode=PREFERRED would fall back to plaintext unnoticed; choose REQUIRED or DISABLED"
            ))),
            _ => Err(Error::invalid(format!(
                "{shown}: ssl-mode={value:?}: expected DISABLED, REQUIRED, VERIFY_CA or VERIFY_IDENTITY"
            ))),
        }
    }

    /// The driver's TLS settings from the files of `ca=` (trusted roots; else the built-in web roots) and `cert=`
    /// with `key=` (a client certificate, for users made `REQUIRE X509`), checked and read now so that a bad file
    /// is reported at connect, by parameter.
    fn driver_opts(self, files: &TlsFiles, shown: &str) -> Result<Option<SslOpts>> {
        files.require_tls(self != SslMode::Disabled, shown, "ssl-mode=DISABLED")?;
        let mode = match self {
            SslMode::Disabled => return Ok(None),
            SslMode::Required if files.ca.is_some() => SslMode::VerifyCa,
            mode => mode,
        };
        let pem = files.read(shown)?;
        pem.client_config(files, shown)?;
        let mut ssl = SslOpts::default();
        if let Some(ca) = pem.ca {
            ssl = ssl.with_root_certs(vec![ca.into()]).with_disable_built_in_roots(true);
        }
        if let (Some(cert), Some(key)) = (pem.cert, pem.key) {
            ssl = ssl.with_client_identity(Some(ClientIdentity::new(cert.into(), key.into())));
        }
        Ok(Some(match mode {
            SslMode::Required => ssl.with_danger_accept_invalid_certs(true),
            SslMode::VerifyCa => ssl.with_danger_skip_domain_validation(true),
            _ => ssl,
        }))
    }
}

/// `%XX` escapes of a query value decoded (a path may hold any byte).
fn unescape(value: &str) -> String {
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = if bytes[i] == b'%' { value.get(i + 1..i + 3) } else { None };
        match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
            Some(b) => {
                out.push(b);
                i += 3;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Parses a `mysql://` or `mariadb://` URL into driver options and the URL to show (no password). fencelock's own
/// parameters are `ssl-mode`, `ca`, `cert` and `key`; the rest go to the driver, which refuses ones it does not know.
fn options(url: &str, opts: &ClientOptions) -> Result<(Opts, String, SslMode)> {
    let shown = super::super::redact(url);
    let rest = url.split_once("://").map(|(_, r)| r).unwrap_or_default();
    let (base, query) = rest.split_once('?').unwrap_or((rest, ""));
    let (mut mode, mut files) = (None, TlsFiles::default());
    let mut passed = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        match key {
            "ssl-mode" | "ssl_mode" | "sslmode" => mode = Some(SslMode::parse(value, &shown)?),
            "ca" | "ssl-ca" => files.ca = Some(unescape(value)),
            "cert" | "ssl-cert" => files.cert = Some(unescape(value)),
            "key" | "ssl-key" => files.key = Some(unescape(value)),
            "require_ssl" | "verify_ca" | "verify_identity" | "built_in_roots" => {
                return Err(Error::invalid(format!("{shown}: {key}= is not used here: give ssl-mode= and ca=")));
            }
            _ => passed.push(pair),
        }
    }
    // Files alone ask for the strictest check.
    let mode = mode.unwrap_or(if files.any() { SslMode::VerifyIdentity } else { SslMode::Disabled });
    let ssl = mode.driver_opts(&files, &shown)?;
    let mode = if mode == SslMode::Required && files.ca.is_some() { SslMode::VerifyCa } else { mode };
    let driver_url =
        if passed.is_empty() { format!("mysql://{base}") } else { format!("mysql://{base}?{}", passed.join("&")) };
    let parsed = Opts::from_url(&driver_url).map_err(|e| Error::invalid(format!("URL {shown:?}: {e}")))?;
    if parsed.db_name().is_none_or(str::is_empty) {
        return Err(Error::invalid(format!("URL {shown:?} names no database, as in mysql://user@host:3306/db")));
    }
    let user = parsed.user().map(|u| format!("{u}@")).unwrap_or_default();
    let db = parsed.db_name().unwrap_or_default();
    let shown = format!("mysql://{user}{}:{}/{db}", parsed.ip_or_hostname(), parsed.tcp_port());
    let wait_secs = opts.request_timeout.as_secs().max(1);
    let pool = PoolOpts::default()
        .with_constraints(PoolConstraints::new(1, MAX_CONNECTIONS).expect("1 ≤ max"))
        // Without a TTL the pool keeps only `min` idle connections and closes the rest at once, so a burst of
        // calls would pay a handshake each; with one, idle ones above `min` close after a minute.
        .with_inactive_connection_ttl(Duration::from_secs(60))
        // A reset per returned connection costs a round trip and would drop the session settings below.
        .with_reset_connection(false);
    let built = OptsBuilder::from_opts(parsed)
        .ssl_opts(ssl)
        // TCP even to 127.0.0.1: the driver would otherwise switch to the server's socket file, bypassing proxies.
        .prefer_socket(false)
        .tcp_nodelay(true)
        .client_found_rows(false)
        .pool_opts(pool)
        .init(vec![
            "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED".to_string(),
            // A row lock waited on longer than a request may take is a server that stopped answering.
            format!("SET SESSION innodb_lock_wait_timeout = {wait_secs}"),
        ]);
    Ok((built.into(), shown, mode))
}

/// The MySQL / MariaDB backend. Its `Debug` shows the redacted URL: the pool's options hold the password.
pub(crate) struct MysqlBackend {
    pool: Pool,
    /// One connection kept out of the pool for calls that do not overlap: the pool's hand-back goes through a
    /// recycler task, which costs a cross-task wake-up per statement.
    kept: tokio::sync::Mutex<Option<Conn>>,
    url: String,
    opts: ClientOptions,
    ssl_mode: SslMode,
}

impl std::fmt::Debug for MysqlBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MysqlBackend").field("url", &self.url).field("ssl_mode", &self.ssl_mode).finish_non_exhaustive()
    }
}

/// Opens the backend `url` names.
pub(crate) async fn connect(url: &str, opts: &ClientOptions) -> Result<Arc<dyn Backend>> {
    let (driver, shown, ssl_mode) = options(url, opts)?;
    let backend =
        MysqlBackend { pool: Pool::new(driver), kept: Default::default(), url: shown, opts: opts.clone(), ssl_mode };
    // Connect now, so a bad address, credential or schema problem is reported by connect rather than by a lock.
    tokio::time::timeout(opts.connect_timeout, backend.prepare_schema()).await.map_err(|_| {
        Error::unavailable(format!("{}: no connection within {:?}", backend.url, opts.connect_timeout))
    })??;
    Ok(Arc::new(backend))
}

/// The reply to one statement: the rows it returned, and what its OK packet said.
struct Reply {
    rows: Vec<Row>,
    affected: u64,
    last_insert_id: Option<u64>,
}

impl MysqlBackend {
    /// Maps a driver error. Lost connections, a server going away and lock waits are `Unavailable`; refused
    /// credentials and a missing database are configuration errors, which retrying cannot fix.
    fn err(&self, e: mysql_async::Error) -> Error {
        match &e {
            mysql_async::Error::Server(s) => match s.code {
                // ER_ACCESS_DENIED_ERROR, ER_DBACCESS_DENIED_ERROR, ER_ACCESS_DENIED_NO_PASSWORD_ERROR
                1044 | 1045 | 1698 => Error::invalid(format!("{}: authentication failed: {}", self.url, s.message)),
                // ER_BAD_DB_ERROR
                1049 => Error::invalid(format!("{}: {}", self.url, s.message)),
                // too many connections, shutdown, lock wait timeout, deadlock, connection killed, query interrupted
                1040 | 1053 | 1205 | 1213 | 1317 | 1927 | 3024 => {
                    Error::unavailable(format!("{}: {}", self.url, s.message))
                }
                _ => Error::internal(format!("{}: unexpected reply: {e}", self.url)),
            },
            mysql_async::Error::Url(_) => Error::invalid(format!("{}: {e}", self.url)),
            // A certificate that does not check out is configuration, as a refused password is: retrying won't help.
            mysql_async::Error::Io(io) if is_tls_refusal(io) => {
                // mysql_async 0.37 skips the name check by matching rustls's old wording of the error, which
                // rustls 0.23 no longer uses: VERIFY_CA then checks the name as well. Say so rather than mislead.
                let strict = matches!(self.ssl_mode, SslMode::VerifyCa) && e.to_string().contains("not valid for name");
                let note =
                    if strict { " (VERIFY_CA checks the host name here too: the driver cannot skip it)" } else { "" };
                Error::invalid(format!("{}: TLS handshake refused: {e}{note}", self.url))
            }
            // I/O, a closed connection, a pool being torn down: the server or the path to it.
            _ => Error::unavailable(format!("{}: {e}", self.url)),
        }
    }

    fn is_deadlock(e: &mysql_async::Error) -> bool {
        matches!(e, mysql_async::Error::Server(s) if s.code == 1213)
    }

    /// A pooled connection within the connect timeout.
    async fn conn(&self) -> Result<Conn> {
        match tokio::time::timeout(self.opts.connect_timeout, self.pool.get_conn()).await {
            Ok(conn) => conn.map_err(|e| self.err(e)),
            Err(_) => {
                Err(Error::unavailable(format!("{}: no connection within {:?}", self.url, self.opts.connect_timeout)))
            }
        }
    }

    /// Runs one prepared statement (cached per connection, so one round trip after its first use) within the
    /// request timeout, retrying a deadlock victim.
    async fn exec(&self, sql: &'static str, params: Params) -> Result<Reply> {
        let mut attempts = 0;
        loop {
            let reply =
                tokio::time::timeout(self.opts.request_timeout, self.exec_once(sql, params.clone())).await.map_err(
                    |_| Error::unavailable(format!("{}: no reply within {:?}", self.url, self.opts.request_timeout)),
                )??;
            match reply {
                Err(e) if Self::is_deadlock(&e) && attempts < DEADLOCK_RETRIES => attempts += 1,
                Err(e) => return Err(self.err(e)),
                Ok(reply) => return Ok(reply),
            }
        }
    }

    /// One statement on the kept connection when it is free, else on one from the pool. The kept one is taken out
    /// of its slot for the call: if the call is dropped mid-statement (a timeout, a cancelled acquire), the
    /// connection goes back to the pool, which cleans it up, and the slot is refilled by a later call.
    async fn exec_once(&self, sql: &'static str, params: Params) -> Result<Result<Reply, mysql_async::Error>> {
        let mut kept = self.kept.try_lock().ok();
        let mut conn = match kept.as_mut().and_then(|slot| slot.take()) {
            Some(conn) => conn,
            None => self.conn().await?,
        };
        let reply = match conn.exec(sql, params).await {
            Ok(rows) => Ok(Reply { rows, affected: conn.affected_rows(), last_insert_id: conn.last_insert_id() }),
            Err(e) => Err(e),
        };
        let healthy = reply.as_ref().err().is_none_or(|e| !e.is_fatal());
        if let Some(slot) = kept.as_mut().filter(|_| healthy) {
            **slot = Some(conn);
        }
        Ok(reply)
    }

    /// Creates the tables if they are missing, one client at a time.
    async fn prepare_schema(&self) -> Result<()> {
        let mut conn = self.conn().await?;
        let context = |e| self.err(e).context("preparing the fencelock tables");
        let ready: Option<bool> = conn
            .query_first(SCHEMA_READY)
            .await
            .or_else(|e| match e {
                // The epoch table does not exist yet (ER_NO_SUCH_TABLE).
                mysql_async::Error::Server(ref s) if s.code == 1146 => Ok(Some(false)),
                e => Err(e),
            })
            .map_err(context)?;
        if ready == Some(true) {
            return Ok(());
        }
        let wait = self.opts.connect_timeout.as_secs().max(1);
        let locked: Option<Option<i64>> =
            conn.exec_first(SCHEMA_LOCK, params! { "wait" => wait }).await.map_err(context)?;
        if locked.flatten() != Some(1) {
            return Err(Error::unavailable(format!("{}: another client kept the schema lock for {wait} s", self.url)));
        }
        let mut created = Ok(());
        for statement in SCHEMA {
            if let Err(e) = conn.query_drop(*statement).await {
                created = Err(context(e));
                break;
            }
        }
        // Released even after a failure; dropping the connection would release it too.
        let _ = conn.query_drop(SCHEMA_UNLOCK).await;
        created
    }

    async fn changed(&self, sql: &'static str, params: Params) -> Result<bool> {
        Ok(self.exec(sql, params).await?.affected > 0)
    }
}

/// Whether an I/O error is the TLS layer refusing the server (its certificate, name or protocol), not the network.
fn is_tls_refusal(e: &mysql_async::IoError) -> bool {
    match e {
        mysql_async::IoError::Tls(_) => true,
        mysql_async::IoError::Io(io) => io.get_ref().is_some_and(|inner| inner.is::<rustls::Error>()),
    }
}

/// Column `i` of `row`; a type mismatch is a bug in the statements above, reported rather than panicking.
fn col<T: mysql_async::prelude::FromValue>(row: &Row, i: usize) -> Result<T> {
    match row.get_opt(i) {
        Some(Ok(v)) => Ok(v),
        Some(Err(e)) => Err(Error::internal(format!("mysql: unexpected reply in column {i}: {e}"))),
        None => Err(Error::internal(format!("mysql: a reply without column {i}"))),
    }
}

/// A binary column that holds text this client wrote (a holder).
fn text(bytes: Option<Vec<u8>>) -> Option<String> {
    bytes.map(|b| String::from_utf8_lossy(&b).into_owned())
}

#[async_trait]
impl Backend for MysqlBackend {
    fn capability(&self) -> Capability {
        Capability {
            fencing: true,
            native_wait: false,
            fair: false,
            session_bound: false,
            rw_lock: false,
            semaphore: false,
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
        let params = params! {
            "name" => &grant.name, "holder" => &grant.holder, "fence" => grant.token as i64, "ttl" => micros(ttl),
        };
        if self.changed(RENEW, params).await? {
            return Ok(());
        }
        // Nothing changed: lost, or (within one µs of the last renewal, with the same TTL) already extended.
        let info = self.inspect(&grant.name).await?;
        if info.holder.as_deref() == Some(grant.holder.as_str()) && info.last_token == Some(grant.token) {
            Ok(())
        } else {
            Err(lock_lost(grant, &self.url))
        }
    }

    async fn release(&self, grant: &Grant) -> Result<()> {
        let params = params! { "name" => &grant.name, "holder" => &grant.holder, "fence" => grant.token as i64 };
        if self.changed(RELEASE, params).await? { Ok(()) } else { Err(not_held(grant, &self.url)) }
    }

    async fn force_release(&self, name: &str) -> Result<bool> {
        self.changed(FORCE_RELEASE, params! { "name" => name }).await
    }

    async fn inspect(&self, name: &str) -> Result<LockInfo> {
        let reply = self.exec(INSPECT, params! { "name" => name }).await?;
        let row = match reply.rows.first() {
            Some(r) => Some((text(col(r, 0)?), col::<i64>(r, 1)?, col::<i64>(r, 2)?)),
            None => None,
        };
        Ok(lock_info(row))
    }

    async fn fence_write(&self, resource: &str, token: u64, value: &[u8]) -> Result<()> {
        let signed = stored_token(resource, &self.url, token)?;
        let params = params! { "resource" => resource, "token" => signed, "value" => value };
        if self.changed(FENCE_WRITE, params).await? {
            return Ok(());
        }
        // Refused, or the same token written again with the same value: the stored token tells them apart.
        let reply = self.exec(FENCE_READ, params! { "resource" => resource }).await?;
        let row = reply.rows.first().ok_or_else(|| Error::internal(format!("{}: no fencelock_epoch row", self.url)))?;
        let (stored, epoch): (Option<i64>, i64) = (col(row, 0)?, col(row, 2)?);
        match stored {
            Some(s) if s == signed && epoch <= signed => Ok(()),
            _ => Err(fenced(resource, &self.url, token, stored.unwrap_or(epoch).max(epoch) as u64)),
        }
    }

    async fn fence_read(&self, resource: &str) -> Result<(u64, Vec<u8>)> {
        let reply = self.exec(FENCE_READ, params! { "resource" => resource }).await?;
        let Some(row) = reply.rows.first() else { return Ok((0, Vec::new())) };
        let (token, value): (Option<i64>, Option<Vec<u8>>) = (col(row, 0)?, col(row, 1)?);
        Ok((token.unwrap_or(0) as u64, value.unwrap_or_default()))
    }

    async fn close(&self) {
        // The pool's disconnect waits for every connection to come back: the kept one first, then those in calls,
        // which the request timeout bounds.
        drop(self.kept.lock().await.take());
        let _ = tokio::time::timeout(self.opts.request_timeout, self.pool.clone().disconnect()).await;
    }
}

#[async_trait]
impl Records for MysqlBackend {
    type Waiter = ();

    async fn take(&self, req: &AcquireRequest, _waiter: &mut ()) -> Result<Attempt> {
        let params = params! { "name" => &req.name, "holder" => &req.holder, "ttl" => micros(req.ttl) };
        let reply = self.exec(ACQUIRE, params).await?;
        if reply.affected > 0 {
            let token = reply.last_insert_id.ok_or_else(|| {
                Error::internal(format!("{}: the acquire's reply carried no token (LAST_INSERT_ID)", self.url))
            })?;
            return Ok(Attempt::Acquired(req.grant(token, None)));
        }
        let left = self.exec(REMAINING, params! { "name" => &req.name }).await?;
        let left = left.rows.first().map(|r| col::<i64>(r, 0)).transpose()?;
        Ok(Attempt::Busy(Busy { holder_ttl: holder_ttl(left) }))
    }

    async fn abandon(&self, req: &AcquireRequest) -> Result<()> {
        self.changed(ABANDON, params! { "name" => &req.name, "holder" => &req.holder }).await.map(drop)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;

    #[test]
    fn urls_keep_secrets_out_and_refuse_tls() {
        let opts = ClientOptions::default();
        let (_, shown, _) = options("mysql://u:secret@h:3307/db", &opts).unwrap();
        assert_eq!(shown, "mysql://u@h:3307/db");
        let (_, shown, _) = options("mariadb://h/db", &opts).unwrap();
        assert_eq!(shown, "mysql://h:3306/db");
        for (url, says) in [
            ("mysql://u:secret@h/db?ssl-mode=PREFERRED", "plaintext"),
            ("mysql://u:secret@h/db?ssl-mode=maybe", "VERIFY_IDENTITY"),
            ("mysql://u:secret@h/db?ssl-mode=DISABLED&ca=/x.pem", "DISABLED"),
            ("mysql://u:secret@h/db?ssl-mode=REQUIRED&cert=/c.pem", "cert= and key= go together"),
            ("mysql://u:secret@h/db?ca=/nonexistent%20dir/ca.pem", "\"/nonexistent dir/ca.pem\" cannot be read"),
            ("mysql://u:secret@h/db?require_ssl=true", "ssl-mode="),
        ] {
            let err = options(url, &opts).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{url}: {err}");
            assert!(err.message().contains(says) && !err.message().contains("secret"), "{url}: {err}");
        }
        for mode in ["DISABLED", "required", "VERIFY_CA", "VERIFY_IDENTITY"] {
            assert!(options(&format!("mysql://h/db?ssl-mode={mode}"), &opts).is_ok(), "{mode}");
        }
        let err = options("mysql://u:secret@h:3306", &opts).unwrap_err();
        assert!(err.message().contains("names no database") && !err.message().contains("secret"), "{err}");
        let err = options("mysql://h/db?nonsense=1", &opts).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    }

    #[test]
    fn the_acquire_assigns_expires_at_last() {
        // The order the module comment argues for: the columns that test the old row first, expires_at last.
        let update = ACQUIRE.split("ON DUPLICATE KEY UPDATE").nth(1).unwrap();
        let assigned: Vec<&str> =
            update.lines().filter_map(|l| l.trim().split_once(" = ")).map(|(column, _)| column).collect();
        assert_eq!(assigned, ["fence", "count", "holder", "expires_at"], "{update}");
    }
}
