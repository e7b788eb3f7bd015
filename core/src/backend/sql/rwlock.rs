//! Read-write locks on the SQL stores (DESIGN.md §4b). No anchor has a SQL layout, so this is fencelock's own:
//!
//! - `fencelock_rwlocks`, the head row, one per lock name, never deleted: `fence`, the lock's own counter (the last
//!   token drawn; 0 before the first draw, which starts at the clock in µs as the mutex's does), and `epoch`, the
//!   token of the current run of overlapping read holds.
//! - `fencelock_rwholds`, one row per hold: (`name`, `holder`, `mode`) is the key; `mode` 0 is a read hold, 1 a write
//!   hold, 2 a waiting writer's mark; `expires_at` in unix µs on the store's clock; `token` the hold's token (0 for a
//!   mark). Rows are deleted on release; expired ones by the next acquire on the name.
//!
//! An acquire is one transaction that locks the head row first (SQLite: `BEGIN IMMEDIATE`; servers: `SELECT … FOR
//! UPDATE`), so the steps on a name run one at a time; renew, release and abandon go through the head row too.
//!
//! - A writer gets the lock when no live hold of another holder is in its way; else it writes (or refreshes) its
//!   mark, living twice its TTL from this attempt, so a crashed waiter's mark goes by itself; a grant deletes it.
//! - A reader gets the lock when no other holder's live write hold or mark is there, unless it holds the write lock
//!   itself (a downgrade passes waiting writers). The first reader of a run draws a token, also stored as `epoch`;
//!   readers joining a live run share it. A write draws a token too, so every epoch's token is above the last.

use super::{Decide, Dialect, Head, HoldRow, Outcome, Plan, Script, Write, next_token, on_live_row, soonest};
use crate::backend::{AcquireRequest, Grant, HoldKind};
use crate::error::{Error, Result};
use crate::mutant;

/// The tables, created if absent (`{int64}` is the dialect's integer type).
pub(super) const SCHEMA: &str = "
    CREATE TABLE IF NOT EXISTS fencelock_rwlocks (
        name TEXT PRIMARY KEY,
        fence {int64} NOT NULL,  -- the last token drawn, never reset; 0: none yet
        epoch {int64} NOT NULL   -- the token of the current run of read holds
    );
    CREATE TABLE IF NOT EXISTS fencelock_rwholds (
        name TEXT NOT NULL,
        holder TEXT NOT NULL,
        mode {int64} NOT NULL,        -- 0 read, 1 write, 2 a waiting writer's mark
        expires_at {int64} NOT NULL,  -- unix µs, the store's clock
        token {int64} NOT NULL,
        PRIMARY KEY (name, holder, mode)
    );";

const READ: i64 = 0;
const WRITE: i64 = 1;
const MARK: i64 = 2;

fn mode(kind: HoldKind) -> i64 {
    if kind == HoldKind::Write { WRITE } else { READ }
}

/// A script on `name`'s rows, locking its head row; `rows` reads its holds too.
fn script<R>(d: &Dialect, name: &str, ensure: bool, rows: bool, wakes: bool, decide: Decide<R>) -> Script<R> {
    let Dialect { param: p, now, for_update, .. } = d;
    Script {
        name: name.to_string(),
        ensure: ensure.then(|| {
            let sql = format!(
                "INSERT INTO fencelock_rwlocks (name, fence, epoch) VALUES ({p}1, 0, 0) ON CONFLICT (name) DO NOTHING"
            );
            Write::new(sql, [name.into()])
        }),
        head: format!("SELECT fence, epoch, {now} FROM fencelock_rwlocks WHERE name = {p}1{for_update}"),
        rows: rows.then(|| format!("SELECT mode, holder, expires_at, token FROM fencelock_rwholds WHERE name = {p}1")),
        wakes,
        decide,
    }
}

/// Writes a hold or mark row: (1 name, 2 holder, 3 mode, 4 expires_at, 5 token).
fn put(d: &Dialect, name: &str, holder: &str, mode: i64, expires_at: i64, token: i64) -> Write {
    let p = d.param;
    let sql = format!(
        "INSERT INTO fencelock_rwholds (name, holder, mode, expires_at, token) VALUES ({p}1, {p}2, {p}3, {p}4, {p}5)
         ON CONFLICT (name, holder, mode) DO UPDATE SET expires_at = excluded.expires_at, token = excluded.token"
    );
    Write::new(sql, [name.into(), holder.into(), mode.into(), expires_at.into(), token.into()])
}

/// Deletes `holder`'s rows of `modes` (any expiry).
fn delete(d: &Dialect, name: &str, holder: &str, modes: [i64; 2]) -> Write {
    let p = d.param;
    let sql = format!("DELETE FROM fencelock_rwholds WHERE name = {p}1 AND holder = {p}2 AND mode IN ({p}3, {p}4)");
    Write::new(sql, [name.into(), holder.into(), modes[0].into(), modes[1].into()])
}

/// The live rows of `modes` whose holder is not `me`.
fn others<'a>(rows: &'a [HoldRow], modes: &'a [i64], me: &'a str, now: i64) -> impl Iterator<Item = &'a HoldRow> {
    rows.iter().filter(move |r| modes.contains(&r.key) && r.live(now) && !r.held_by(me, now))
}

/// One acquire of `req` (a read or a write).
pub(super) fn take(d: &'static Dialect, req: &AcquireRequest) -> Script<Result<Plan>> {
    let req2 = req.clone();
    let decide: Decide<Result<Plan>> = Box::new(move |head, rows| match head {
        Some(head) => decide_take(d, &req2, head, rows),
        None => (Vec::new(), Err(Error::internal(format!("read-write lock {:?}: no head row", req2.name)))),
    });
    script(d, &req.name, true, true, false, decide)
}

fn decide_take(d: &Dialect, req: &AcquireRequest, head: Head, rows: &[HoldRow]) -> (Vec<Write>, Result<Plan>) {
    let Head { a: fence, b: epoch, now } = head;
    let (name, me) = (req.name.as_str(), req.holder.as_str());
    let ttl = super::micros(req.ttl);
    let p = d.param;
    // Expired holds and marks go first: they are nobody's.
    let prune = format!("DELETE FROM fencelock_rwholds WHERE name = {p}1 AND expires_at <= {p}2");
    let mut writes = vec![Write::new(prune, [name.into(), now.into()])];
    let others = |modes: &'static [i64]| others(rows, modes, me, now);
    let counter = |fence: i64, epoch: i64| {
        let sql = format!("UPDATE fencelock_rwlocks SET fence = {p}2, epoch = {p}3 WHERE name = {p}1");
        Write::new(sql, [name.into(), fence.into(), epoch.into()])
    };
    let busy = |left_us, marked| Ok(Plan { outcome: Outcome::Busy { left_us }, marked });
    if req.kind == HoldKind::Write {
        if others(&[READ, WRITE]).next().is_some() {
            writes.push(put(d, name, me, MARK, now + 2 * ttl, 0));
            // The mark lives twice the TTL from now: look again before it goes, whatever holds the lock.
            let left = soonest(others(&[READ, WRITE]), now).map(|l| l.min(ttl));
            return (writes, busy(left, true));
        }
        let token = next_token(fence, now);
        writes.push(delete(d, name, me, [MARK, MARK]));
        writes.push(put(d, name, me, WRITE, now + ttl, token));
        writes.push(counter(token, epoch));
        return (writes, Ok(Plan { outcome: Outcome::Granted { token, slot: None }, marked: false }));
    }
    let downgrade = rows.iter().any(|r| r.key == WRITE && r.held_by(me, now));
    let pass_marks = downgrade || mutant::active("readers_pass_waiting_writers");
    let blockers: &'static [i64] = if pass_marks { &[WRITE] } else { &[WRITE, MARK] };
    if !downgrade && others(blockers).next().is_some() {
        return (writes, busy(soonest(others(blockers), now), false));
    }
    let run = rows.iter().any(|r| r.key == READ && r.live(now));
    let token = if run { epoch } else { next_token(fence, now) };
    if !run {
        writes.push(counter(token, token));
    }
    writes.push(put(d, name, me, READ, now + ttl, token));
    (writes, Ok(Plan { outcome: Outcome::Granted { token, slot: None }, marked: false }))
}

/// `op` (an UPDATE or DELETE of the hold rows) on `grant`'s hold while it is live; `ttl_us`: `{p}6` is now + it.
fn own_hold(d: &Dialect, grant: &Grant, op: String, ttl_us: Option<i64>) -> Decide<()> {
    let p = d.param;
    let sql = format!("{op} WHERE name = {p}1 AND holder = {p}2 AND mode = {p}3 AND token = {p}4");
    let key = [
        grant.name.as_str().into(),
        grant.holder.as_str().into(),
        mode(grant.kind).into(),
        (grant.token as i64).into(),
    ];
    on_live_row(d, sql, key, ttl_us)
}

pub(super) fn renew(d: &'static Dialect, grant: &Grant, ttl_us: i64) -> Script<()> {
    let set = format!("UPDATE fencelock_rwholds SET expires_at = {}6", d.param);
    script(d, &grant.name, false, false, false, own_hold(d, grant, set, Some(ttl_us)))
}

pub(super) fn release(d: &'static Dialect, grant: &Grant) -> Script<()> {
    script(d, &grant.name, false, false, true, own_hold(d, grant, "DELETE FROM fencelock_rwholds".into(), None))
}

pub(super) fn abandon(d: &'static Dialect, req: &AcquireRequest) -> Script<()> {
    let (name, holder, mode) = (req.name.clone(), req.holder.clone(), mode(req.kind));
    let decide: Decide<()> = Box::new(move |_, _| (vec![delete(d, &name, &holder, [mode, MARK])], ()));
    script(d, &req.name, false, false, true, decide)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::backend::sql::{Param, SQLITE};

    fn req(holder: &str, kind: HoldKind) -> AcquireRequest {
        let ttl = Duration::from_millis(100);
        AcquireRequest {
            name: "L".into(),
            holder: holder.into(),
            ttl,
            fair: None,
            kind,
            value: Vec::new(),
            waits: true,
        }
    }

    fn row(mode: i64, holder: &str, expires_at: i64, token: i64) -> HoldRow {
        HoldRow { key: mode, holder: Some(holder.into()), expires_at, token }
    }

    fn outcome(req: &AcquireRequest, rows: &[HoldRow]) -> (Outcome, bool, Vec<Write>) {
        let (writes, plan) = decide_take(&SQLITE, req, Head { a: 7, b: 5, now: 1_000 }, rows);
        let plan = plan.unwrap();
        (plan.outcome, plan.marked, writes)
    }

    #[test]
    fn readers_join_the_live_epoch_and_a_new_run_draws_a_token() {
        let (first, ..) = outcome(&req("b", HoldKind::Read), &[row(READ, "a", 900, 5)]);
        assert!(matches!(first, Outcome::Granted { token: 8, .. }), "an expired reader ends the run: {first:?}");
        let (joined, ..) = outcome(&req("b", HoldKind::Read), &[row(READ, "a", 2_000, 5)]);
        assert!(matches!(joined, Outcome::Granted { token: 5, .. }), "{joined:?}");
    }

    #[test]
    fn a_live_mark_keeps_readers_out_except_the_writer_downgrading() {
        let mark = row(MARK, "w", 2_000, 0);
        let (out, marked, _) = outcome(&req("r", HoldKind::Read), std::slice::from_ref(&mark));
        assert!(matches!(out, Outcome::Busy { left_us: Some(1_000) }) && !marked, "{out:?}");
        let (out, ..) = outcome(&req("r", HoldKind::Read), &[row(MARK, "w", 999, 0)]);
        assert!(matches!(out, Outcome::Granted { .. }), "an expired mark blocks: {out:?}");
        let (out, ..) = outcome(&req("o", HoldKind::Read), &[mark, row(WRITE, "o", 3_000, 7)]);
        assert!(matches!(out, Outcome::Granted { token: 8, .. }), "a downgrade waits: {out:?}");
    }

    #[test]
    fn a_busy_writer_marks_for_twice_its_ttl_and_looks_again_within_it() {
        let (out, marked, writes) = outcome(&req("w", HoldKind::Write), &[row(READ, "r", 1_000_000, 5)]);
        assert!(matches!(out, Outcome::Busy { left_us: Some(100_000) }) && marked, "{out:?}");
        let mark = writes.last().unwrap();
        assert!(matches!(mark.params[2..4], [Param::Int(MARK), Param::Int(201_000)]), "{mark:?}");
        let (out, marked, _) = outcome(&req("w", HoldKind::Write), &[row(MARK, "w", 2_000, 0)]);
        assert!(matches!(out, Outcome::Granted { token: 8, .. }) && !marked, "{out:?}");
    }
}
