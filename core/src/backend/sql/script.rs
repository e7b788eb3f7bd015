//! The one shape of every step on a read-write lock's or semaphore's rows (a [`Script`]), and what the families'
//! decisions share. The families' own rules and rows are in `rwlock.rs` and `semaphore.rs`; a backend only runs
//! scripts (SQLite under `BEGIN IMMEDIATE`, PostgreSQL as a transaction on a connection of its own).

use std::time::Duration;

use super::{Dialect, holder_ttl, micros, rwlock, semaphore};
use crate::backend::{AcquireRequest, Attempt, Busy, Grant, HoldKind, permits_mismatch};
use crate::error::{Error, Result};

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
