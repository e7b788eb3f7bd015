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
//! Read-write locks and semaphores have tables of their own, never shared with the mutex's (a lock, a read-write lock
//! and a semaphore of one name are three records with three counters): their layout is documented next to their
//! SQL in `rwlock.rs` and `semaphore.rs`, and every step on them is a `script.rs` transaction.
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
mod script;
mod semaphore;
pub(crate) mod sqlite;

use std::time::Duration;

use crate::backend::LockInfo;
use crate::error::{Error, Result};

use self::script::{
    Decide, Head, HoldRow, Outcome, Param, Plan, Script, Write, abandon_script, is_hold, next_token, on_live_row,
    release_script, renew_script, soonest, take_script,
};

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
        // PostgreSQL and MySQL keep no waiter table to count; SQLite's backend fills it in from its queue.
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
