//! The mutex's waiter queue in the database file, so a hand-off is first come, first served across every process
//! that shares the file, and a releaser that asks again at once waits behind those already waiting.
//!
//! `fencelock_waiters` has one row per waiting acquire: the lock name, the holder, a ticket (one more than the
//! name's highest when the row is made) and an expiry in unix µs. A call that will wait makes its row with its first busy
//! attempt and refreshes the expiry while it waits ([`REFRESH`]); a grant, a timeout or a cancel deletes it. A free
//! row is taken only by the holder of the lowest live ticket, or by anyone when no live row is older than the
//! caller's own; so a `try_lock` or a newcomer never jumps the queue, and a waiter that died (killed, or paused past
//! [`WAITER_TTL`]) stops counting when its row expires. A caller that asks for `fair(false)` takes a free row
//! whatever the queue says, and never queues.
//!
//! Read-write locks and semaphores keep their own orders (writer preference; free slots), without a queue.

use std::sync::LazyLock;
use std::time::Duration;

use rusqlite::{Connection, params};

use crate::backend::sql::micros;

/// How long a waiter's row counts without a refresh: how long a dead waiter can hold up a free lock.
pub(super) const WAITER_TTL: Duration = Duration::from_secs(2);
/// How often a live waiter refreshes its row, well inside [`WAITER_TTL`].
pub(super) const REFRESH: Duration = Duration::from_millis(700);

pub(super) const SCHEMA: &str = "
    CREATE TABLE IF NOT EXISTS fencelock_waiters (
        name TEXT NOT NULL,
        holder TEXT NOT NULL,
        ticket INTEGER NOT NULL,
        expires_at INTEGER NOT NULL,  -- unix µs, this host's clock
        PRIMARY KEY (name, holder)
    );";

/// (1 name, 2 holder, 3 now), on a row of `fencelock_locks`: whether the caller may take it: it is free, expired or
/// ours, and no live waiter other than the caller holds an older ticket.
const IN_TURN: &str = "(holder = ?2 OR ((holder IS NULL OR expires_at <= ?3) AND NOT EXISTS (
        SELECT 1 FROM fencelock_waiters w WHERE w.name = ?1 AND w.holder <> ?2 AND w.expires_at > ?3
        AND w.ticket < coalesce(
            (SELECT m.ticket FROM fencelock_waiters m WHERE m.name = ?1 AND m.holder = ?2 AND m.expires_at > ?3),
            9223372036854775807))))";

/// (1 name, 2 holder, 3 now, 4 ttl µs) → the fence, iff [`IN_TURN`].
pub(super) static ACQUIRE_IN_TURN: LazyLock<String> = LazyLock::new(|| {
    format!(
        "INSERT INTO fencelock_locks (name, holder, count, expires_at, fence) VALUES (?1, ?2, 1, ?3 + ?4, ?3)
         ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, count = 1, expires_at = excluded.expires_at,
             fence = fence + 1
         WHERE {IN_TURN} RETURNING fence"
    )
});

/// (1 name, 2 holder, 3 now) → a row iff [`IN_TURN`]: a read, which never waits for a writer, so a queued waiter
/// that is not first in line looks without taking the file's write lock.
pub(super) static MY_TURN: LazyLock<String> =
    LazyLock::new(|| format!("SELECT 1 FROM fencelock_locks WHERE name = ?1 AND {IN_TURN}"));

/// (1 name, 2 now): drops the expired places, run before [`JOIN`], so a waiter whose own place expired joins again
/// at the end.
pub(super) const DROP_EXPIRED: &str = "DELETE FROM fencelock_waiters WHERE name = ?1 AND expires_at <= ?2";

/// (1 name, 2 holder, 3 now, 4 waiter ttl µs): joins the queue at its end, or refreshes the caller's place.
pub(super) const JOIN: &str = "
    INSERT INTO fencelock_waiters (name, holder, ticket, expires_at)
    VALUES (?1, ?2, coalesce((SELECT max(ticket) FROM fencelock_waiters WHERE name = ?1), 0) + 1, ?3 + ?4)
    ON CONFLICT (name, holder) DO UPDATE SET expires_at = excluded.expires_at";

/// (1 name, 2 holder): leaves the queue.
pub(super) const LEAVE: &str = "DELETE FROM fencelock_waiters WHERE name = ?1 AND holder = ?2";

/// (1 name, 2 now) → how many waiters count now.
pub(super) const COUNT: &str = "SELECT count(*) FROM fencelock_waiters WHERE name = ?1 AND expires_at > ?2";

/// Joins `name`'s queue, or refreshes the place `holder` has in it, at `now` (unix µs).
pub(super) fn join(c: &Connection, name: &str, holder: &str, now: i64) -> rusqlite::Result<usize> {
    c.prepare_cached(DROP_EXPIRED)?.execute(params![name, now])?;
    c.prepare_cached(JOIN)?.execute(params![name, holder, now, micros(WAITER_TTL)])
}
