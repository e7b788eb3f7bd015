//! What the SQL backends (SQLite, PostgreSQL, MySQL/MariaDB) share: the two tables and what their rows mean. Each backend keeps
//! only its dialect — the lock statements, placeholders and whose clock they read — and its connection handling.
//!
//! `fencelock_locks` has one row per lock name: `holder` (`<client uuid>:<owner>`, NULL when free), `count`,
//! `expires_at` (unix µs on the store's clock) and `fence`, the last token handed out. An acquire takes the row when
//! it is free, expired or already ours (a grant whose reply was lost), raising `fence` by one; a new row's counter is
//! seeded from the clock in µs. Release, abandon and force-release free the row (holder NULL, count 0, expires_at 0)
//! and keep it, so `fence` never goes back while the table lives. Renew and release match holder and fence, and only
//! a live row counts: an expired row of ours is already free for others.
//!
//! `fencelock_fences` has one row per register: a write lands iff its token is at least the stored one, raising it.
//!
//! Registers fail closed (DESIGN.md §3). `fencelock_epoch` has one row, written with the tables: the store's clock in
//! µs when they were made (or, for tables made by a version without it, the smallest lock counter, below every live
//! token). A register write also needs its token to be at least that epoch. Counters are seeded from the same clock
//! when their row is made and only rise, so every token of these tables' life is above the epoch, and a register
//! missing its row is new, not forgotten; tables that were lost (a deleted SQLite file, a dropped or recreated
//! database) come back with a new epoch, and a holder paused across the loss gets `FENCED` for its old token. What
//! this cannot see is a restore of an older backup: the old epoch comes back with the old rows.

pub(crate) mod mysql;
pub(crate) mod postgres;
mod rwlock;
mod semaphore;
pub(crate) mod sqlite;

use std::time::Duration;

use crate::backend::{AcquireRequest, Attempt, Busy, Grant, HoldKind, LockInfo, permits_mismatch};
use crate::error::{Error, Result};

/// Column types and placeholders of one SQL dialect.
#[derive(Debug)]
pub(super) struct Dialect {
    /// A signed 64-bit integer column.
    int64: &'static str,
    /// A byte-string column.
    bytes: &'static str,
    /// What precedes a parameter's number (`?1`, `$1`).
    param: char,
    /// The larger of two values.
    greatest: &'static str,
    /// The store's clock in unix µs, as SQL.
    now: &'static str,
    /// What makes a SELECT lock the rows it reads, where a transaction needs that to be alone on them.
    for_update: &'static str,
}

pub(super) const SQLITE: Dialect = Dialect {
    int64: "INTEGER",
    bytes: "BLOB",
    param: '?',
    greatest: "max",
    // A `BEGIN IMMEDIATE` transaction has the whole file to itself already.
    for_update: "",
    now: "CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER)",
};
pub(super) const POSTGRES: Dialect = Dialect {
    int64: "BIGINT",
    bytes: "BYTEA",
    param: '$',
    greatest: "GREATEST",
    for_update: " FOR UPDATE",
    now: "(extract(epoch FROM clock_timestamp()) * 1000000)::bigint",
};

impl Dialect {
    /// Both tables, created if absent.
    pub(super) fn schema(&self) -> String {
        let Dialect { int64, bytes, .. } = self;
        format!(
            "
    CREATE TABLE IF NOT EXISTS fencelock_locks (
        name TEXT PRIMARY KEY,
        holder TEXT,
        count INTEGER NOT NULL DEFAULT 0,
        expires_at {int64} NOT NULL DEFAULT 0,  -- unix µs, the store's clock
        fence {int64} NOT NULL
    );
    CREATE TABLE IF NOT EXISTS fencelock_fences (
        resource TEXT PRIMARY KEY,
        token {int64} NOT NULL,
        value {bytes} NOT NULL
    );
    CREATE TABLE IF NOT EXISTS fencelock_epoch (
        id INTEGER PRIMARY KEY,
        us {int64} NOT NULL  -- unix µs, the store's clock, when the tables were made
    );{}{}",
            rwlock::SCHEMA.replace("{int64}", int64),
            semaphore::SCHEMA.replace("{int64}", int64),
        )
    }

    /// Writes the epoch row if missing, after [`Dialect::schema`]; `now` is the store's clock in µs, as SQL.
    pub(super) fn epoch(&self, now: &str) -> String {
        // `WHERE true`: SQLite needs a WHERE before ON CONFLICT in an INSERT … SELECT, to parse it.
        format!(
            "INSERT INTO fencelock_epoch (id, us) SELECT 1, coalesce(min(fence), {now}) FROM fencelock_locks
             WHERE true ON CONFLICT (id) DO NOTHING"
        )
    }

    /// Stores a register if its token is not older than the stored one nor the epoch: (1 resource, 2 token, 3 value)
    /// → a row iff it was stored.
    pub(super) fn fence_write(&self) -> String {
        let Dialect { int64, bytes, param: p, .. } = self;
        format!(
            "
    INSERT INTO fencelock_fences AS f (resource, token, value)
    SELECT CAST({p}1 AS TEXT), CAST({p}2 AS {int64}), CAST({p}3 AS {bytes}) FROM fencelock_epoch
    WHERE id = 1 AND CAST({p}2 AS {int64}) >= us
    ON CONFLICT (resource) DO UPDATE SET token = excluded.token, value = excluded.value
    WHERE excluded.token >= f.token
    RETURNING token"
        )
    }

    /// (1 resource) → the lowest token a write may carry: the larger of the stored token and the epoch.
    pub(super) fn fence_floor(&self) -> String {
        let Dialect { param: p, greatest, .. } = self;
        format!(
            "SELECT {greatest}(coalesce((SELECT token FROM fencelock_fences WHERE resource = {p}1), 0),
                (SELECT us FROM fencelock_epoch WHERE id = 1))"
        )
    }

    /// (1 resource) → (token, value), no row if never written.
    pub(super) fn fence_read(&self) -> String {
        format!("SELECT token, value FROM fencelock_fences WHERE resource = {}1", self.param)
    }
}

/// A statement parameter of the hold tables, which have only these two types.
#[derive(Debug, Clone)]
pub(super) enum Param {
    Int(i64),
    Text(String),
}

impl From<i64> for Param {
    fn from(v: i64) -> Self {
        Param::Int(v)
    }
}

impl From<&str> for Param {
    fn from(v: &str) -> Self {
        Param::Text(v.to_string())
    }
}

/// One statement of a [`Script`] with its parameters.
#[derive(Debug, Clone)]
pub(super) struct Write {
    pub(super) sql: String,
    pub(super) params: Vec<Param>,
}

impl Write {
    pub(super) fn new<const N: usize>(sql: String, params: [Param; N]) -> Self {
        Write { sql, params: params.into() }
    }
}

/// The head row of a read-write lock or semaphore, as its script read it (and, in a transaction, locked it): two
/// numbers of the family's own (see [`rwlock`], [`semaphore`]) and the store's clock in µs.
#[derive(Debug, Clone, Copy)]
pub(super) struct Head {
    pub(super) a: i64,
    pub(super) b: i64,
    pub(super) now: i64,
}

/// One hold row of a read-write lock or semaphore: a key of the family's own (the mode, the slot), the holder,
/// its expiry in µs and its token.
#[derive(Debug, Clone)]
pub(super) struct HoldRow {
    pub(super) key: i64,
    pub(super) holder: Option<String>,
    pub(super) expires_at: i64,
    pub(super) token: i64,
}

impl HoldRow {
    pub(super) fn live(&self, now: i64) -> bool {
        self.holder.is_some() && self.expires_at > now
    }

    pub(super) fn held_by(&self, holder: &str, now: i64) -> bool {
        self.live(now) && self.holder.as_deref() == Some(holder)
    }
}

/// What a script decides from the head and hold rows it read: the writes to make, and its answer.
pub(super) type Decide<R> = Box<dyn Fn(Option<Head>, &[HoldRow]) -> (Vec<Write>, R) + Send + Sync>;

/// One step on a read-write lock's or semaphore's rows, the same on every SQL store: one transaction that makes the
/// head row if asked (`ensure`), reads it (`head`, locking it on a server), reads the hold rows (`rows`), and makes
/// the writes `decide` returns. Every step on a name's holds goes through its head row, so they run one at a time.
pub(super) struct Script<R> {
    /// The lock or semaphore name: the one parameter of `head` and `rows`.
    pub(super) name: String,
    pub(super) ensure: Option<Write>,
    /// (1 name) → (a, b, now): the head row.
    pub(super) head: String,
    /// (1 name) → (key, holder, expires_at, token): every hold row of the name.
    pub(super) rows: Option<String>,
    /// Whether writes free a hold, so a store with notifications wakes the name's waiters.
    pub(super) wakes: bool,
    pub(super) decide: Decide<R>,
}

/// An acquire's outcome, as a script decided it.
#[derive(Debug, Clone)]
pub(super) enum Outcome {
    Granted {
        token: i64,
        slot: Option<u32>,
    },
    Busy {
        left_us: Option<i64>,
    },
    /// The semaphore's holders agreed on another number of permits.
    Mismatch {
        stored: i64,
    },
}

/// An acquire script's answer: the outcome, and whether a waiting writer's mark is now on the store.
#[derive(Debug, Clone)]
pub(super) struct Plan {
    pub(super) outcome: Outcome,
    pub(super) marked: bool,
}

impl Plan {
    /// The engine's answer for `req`.
    pub(super) fn attempt(self, req: &AcquireRequest, backend: &str) -> Result<Attempt> {
        Ok(match self.outcome {
            Outcome::Granted { token, slot: None } => Attempt::Acquired(req.grant(token as u64, None)),
            Outcome::Granted { token, slot: Some(s) } => Attempt::Acquired(req.grant(token as u64, None).in_slot(s)),
            Outcome::Busy { left_us } => Attempt::Busy(Busy { holder_ttl: holder_ttl(left_us) }),
            Outcome::Mismatch { stored } => {
                let HoldKind::Permit { permits } = req.kind else {
                    return Err(Error::internal(format!("{backend}: a permits mismatch for a {}", req.kind.label())));
                };
                return Err(permits_mismatch(&req.name, backend, permits, stored as u32));
            }
        })
    }
}

/// A lock's counter after one more draw; a counter never drawn (0) starts at the clock, like the mutex's.
pub(super) fn next_token(counter: i64, now: i64) -> i64 {
    if counter == 0 { now } else { counter + 1 }
}

/// A decide that runs `sql` (an UPDATE or DELETE whose WHERE names one hold with `key`, parameters 1–4) once,
/// only while the hold is live: `{p}5` is now, and `{p}6` now + `ttl_us` if given.
pub(super) fn on_live_row(d: &Dialect, sql: String, key: [Param; 4], ttl_us: Option<i64>) -> Decide<()> {
    let sql = format!("{sql} AND expires_at > {}5", d.param);
    Box::new(move |head, _| {
        let Some(Head { now, .. }) = head else { return (Vec::new(), ()) };
        let mut params = key.to_vec();
        params.push(now.into());
        params.extend(ttl_us.map(|ttl| Param::Int(now + ttl)));
        (vec![Write { sql: sql.clone(), params }], ())
    })
}

/// The least time left, in µs, of `rows` still live at `now`.
pub(super) fn soonest<'a>(rows: impl Iterator<Item = &'a HoldRow>, now: i64) -> Option<i64> {
    rows.filter(|r| r.live(now)).map(|r| r.expires_at - now).min()
}

/// The script of one acquire of a read-write lock or semaphore hold.
pub(super) fn take_script(d: &'static Dialect, req: &AcquireRequest) -> Script<Result<Plan>> {
    match req.kind {
        HoldKind::Permit { permits } => semaphore::take(d, req, permits),
        _ => rwlock::take(d, req),
    }
}

/// The script extending `grant` to `ttl` from now; it writes one row iff the hold is still ours.
pub(super) fn renew_script(d: &'static Dialect, grant: &Grant, ttl: Duration) -> Script<()> {
    match grant.kind {
        HoldKind::Permit { .. } => semaphore::renew(d, grant, micros(ttl)),
        _ => rwlock::renew(d, grant, micros(ttl)),
    }
}

/// The script freeing `grant`; it writes one row iff the hold was still ours.
pub(super) fn release_script(d: &'static Dialect, grant: &Grant) -> Script<()> {
    match grant.kind {
        HoldKind::Permit { .. } => semaphore::release(d, grant),
        _ => rwlock::release(d, grant),
    }
}

/// The script deleting what an attempt of `req` may have left: a hold taken in doubt, a waiting writer's mark.
pub(super) fn abandon_script(d: &'static Dialect, req: &AcquireRequest) -> Script<()> {
    match req.kind {
        HoldKind::Permit { .. } => semaphore::abandon(d, req),
        _ => rwlock::abandon(d, req),
    }
}

/// Whether `kind` lives in the hold tables rather than in `fencelock_locks`.
pub(super) fn is_hold(kind: HoldKind) -> bool {
    kind != HoldKind::Exclusive
}

/// A duration in the tables' µs.
pub(super) fn micros(d: Duration) -> i64 {
    i64::try_from(d.as_micros()).unwrap_or(i64::MAX)
}

/// How long a busy row's holder still has, from its remaining µs (unknown if the statement could not tell).
pub(super) fn holder_ttl(left_us: Option<i64>) -> Option<Duration> {
    left_us.map(|l| Duration::from_micros(l.max(0) as u64))
}

/// What a lock row says: `(holder, remaining µs, fence)`, or no row for a name never locked.
pub(super) fn lock_info(row: Option<(Option<String>, i64, i64)>) -> LockInfo {
    let Some((holder, left, fence)) = row else {
        return LockInfo { holder: None, remaining: None, last_token: None, waiters: None };
    };
    let live = holder.is_some() && left > 0;
    LockInfo {
        holder: holder.filter(|_| live),
        remaining: live.then(|| Duration::from_micros(left as u64)),
        last_token: Some(fence as u64),
        // SQL backends poll: no waiter table to count.
        waiters: None,
    }
}

/// A fence token as the signed 64-bit column stores it; a larger one cannot be compared there.
pub(super) fn stored_token(resource: &str, backend: &str, token: u64) -> Result<i64> {
    i64::try_from(token)
        .map_err(|_| Error::invalid(format!("fence {resource:?} on {backend}: token {token} exceeds i64")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;

    #[test]
    fn dialects_differ_only_in_types_and_placeholders() {
        let (lite, pg) = (SQLITE.schema(), POSTGRES.schema());
        assert_eq!(lite.replace("INTEGER", "BIGINT").replace("BLOB", "BYTEA"), pg.replace("INTEGER", "BIGINT"));
        assert!(SQLITE.fence_write().contains("SELECT CAST(?1 AS TEXT), CAST(?2 AS INTEGER)"));
        assert_eq!(
            SQLITE.fence_write().replace('?', "$").replace("INTEGER", "BIGINT").replace("BLOB", "BYTEA"),
            POSTGRES.fence_write()
        );
        assert_eq!(SQLITE.fence_floor().replace("?1", "$1").replace("max(", "GREATEST("), POSTGRES.fence_floor());
        assert_eq!(POSTGRES.fence_read(), "SELECT token, value FROM fencelock_fences WHERE resource = $1");
    }

    #[test]
    fn rows_mean_the_same_everywhere() {
        assert_eq!(lock_info(None), LockInfo { holder: None, remaining: None, last_token: None, waiters: None });
        let live = lock_info(Some((Some("c:o".into()), 1_500, 7)));
        assert_eq!(
            live,
            LockInfo {
                holder: Some("c:o".into()),
                remaining: Some(Duration::from_micros(1_500)),
                last_token: Some(7),
                waiters: None
            }
        );
        // Expired or freed: no holder, but the counter is still reported.
        assert_eq!(lock_info(Some((Some("c:o".into()), -3, 7))).holder, None);
        assert_eq!(
            lock_info(Some((None, 0, 9))),
            LockInfo { holder: None, remaining: None, last_token: Some(9), waiters: None }
        );
        assert_eq!(holder_ttl(Some(-5)), Some(Duration::ZERO));
        assert_eq!(holder_ttl(None), None);
        assert_eq!(micros(Duration::from_millis(2)), 2_000);
        assert_eq!(stored_token("r", "sqlite:x", u64::MAX).unwrap_err().kind(), ErrorKind::InvalidArgument);
        assert_eq!(stored_token("r", "sqlite:x", 42).unwrap(), 42);
    }
}
