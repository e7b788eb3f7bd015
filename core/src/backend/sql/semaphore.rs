//! Semaphores with leased permits on the SQL stores (DESIGN.md §4b). No anchor has a SQL layout, so this is
//! fencelock's own:
//!
//! - `fencelock_semaphores`, the head row, one per name: `permits`, the number its holders agreed on. Only a
//!   semaphore nobody holds may change it; asking with another number while a permit is held is `InvalidArgument`.
//! - `fencelock_slots`, one row per (`name`, `slot`), made on the slot's first use and never deleted: `holder`
//!   (NULL when free), `expires_at` (unix µs on the store's clock, 0 when free) and `fence`, the slot's own counter,
//!   seeded from the clock in µs and raised by one on every grant, so it never goes back, even when the slot stood
//!   free or expired or the number of permits changed in between (slots above it are kept, unused).
//!
//! An acquire is one transaction that locks the head row first (see [`super::rwlock`]) and gives the holder its
//! own live slot if it has one (a grant whose reply was lost), else the lowest slot below `permits` that is free or
//! expired. An expired hold counts as free; nothing needs to delete it.

use super::{Decide, Dialect, Head, HoldRow, Outcome, Plan, Script, Write, next_token, on_live_row, soonest};
use crate::backend::{AcquireRequest, Grant};
use crate::error::{Error, Result};

/// The tables, created if absent (`{int64}` is the dialect's integer type).
pub(super) const SCHEMA: &str = "
    CREATE TABLE IF NOT EXISTS fencelock_semaphores (
        name TEXT PRIMARY KEY,
        permits {int64} NOT NULL
    );
    CREATE TABLE IF NOT EXISTS fencelock_slots (
        name TEXT NOT NULL,
        slot {int64} NOT NULL,                 -- 0 … permits − 1
        holder TEXT,                           -- NULL when free
        expires_at {int64} NOT NULL DEFAULT 0, -- unix µs, the store's clock
        fence {int64} NOT NULL,                -- the slot's last token, never reset
        PRIMARY KEY (name, slot)
    );";

/// A script on `name`'s rows, locking its head row (`ensure`: made with `permits` if absent).
fn script<R>(d: &Dialect, name: &str, ensure: Option<u32>, wakes: bool, decide: Decide<R>) -> Script<R> {
    let Dialect { param: p, now, for_update, .. } = d;
    Script {
        name: name.to_string(),
        ensure: ensure.map(|permits| {
            let sql = format!(
                "INSERT INTO fencelock_semaphores (name, permits) VALUES ({p}1, {p}2) ON CONFLICT (name) DO NOTHING"
            );
            Write::new(sql, [name.into(), i64::from(permits).into()])
        }),
        // The head's two numbers are both the permits.
        head: format!("SELECT permits, permits, {now} FROM fencelock_semaphores WHERE name = {p}1{for_update}"),
        rows: Some(format!("SELECT slot, holder, expires_at, fence FROM fencelock_slots WHERE name = {p}1")),
        wakes,
        decide,
    }
}

/// Whether `permits` may be used on a semaphore whose head says `stored`: `Err(stored)` if not.
fn agreed(stored: i64, permits: u32, rows: &[HoldRow], now: i64) -> std::result::Result<(), i64> {
    if stored == i64::from(permits) || !rows.iter().any(|r| r.live(now)) { Ok(()) } else { Err(stored) }
}

/// One acquire of a permit of `req.name`, which has `permits`.
pub(super) fn take(d: &'static Dialect, req: &AcquireRequest, permits: u32) -> Script<Result<Plan>> {
    let req2 = req.clone();
    let decide: Decide<Result<Plan>> = Box::new(move |head, rows| match head {
        Some(head) => decide_take(d, &req2, permits, head, rows),
        None => (Vec::new(), Err(Error::internal(format!("semaphore {:?}: no head row", req2.name)))),
    });
    script(d, &req.name, Some(permits), false, decide)
}

fn decide_take(
    d: &Dialect,
    req: &AcquireRequest,
    permits: u32,
    head: Head,
    rows: &[HoldRow],
) -> (Vec<Write>, Result<Plan>) {
    let Head { a: stored, now, .. } = head;
    let (name, me, p) = (req.name.as_str(), req.holder.as_str(), d.param);
    let plan = |outcome| Ok(Plan { outcome, marked: false });
    if let Err(stored) = agreed(stored, permits, rows, now) {
        return (Vec::new(), plan(Outcome::Mismatch { stored }));
    }
    let mut writes = Vec::new();
    if stored != i64::from(permits) {
        let sql = format!("UPDATE fencelock_semaphores SET permits = {p}2 WHERE name = {p}1");
        writes.push(Write::new(sql, [name.into(), i64::from(permits).into()]));
    }
    let slot = |i: i64| rows.iter().find(|r| r.key == i);
    let n = i64::from(permits);
    let mine = (0..n).find(|&i| slot(i).is_some_and(|r| r.held_by(me, now)));
    let Some(i) = mine.or_else(|| (0..n).find(|&i| slot(i).is_none_or(|r| !r.live(now)))) else {
        return (writes, plan(Outcome::Busy { left_us: soonest(rows.iter().filter(|r| r.key < n), now) }));
    };
    let token = slot(i).map_or(now, |r| next_token(r.token, now));
    let sql = format!(
        "INSERT INTO fencelock_slots (name, slot, holder, expires_at, fence) VALUES ({p}1, {p}2, {p}3, {p}4, {p}5)
         ON CONFLICT (name, slot) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at,
             fence = excluded.fence"
    );
    let expires_at = now + super::micros(req.ttl);
    writes.push(Write::new(sql, [name.into(), i.into(), me.into(), expires_at.into(), token.into()]));
    (writes, plan(Outcome::Granted { token, slot: Some(i as u32) }))
}

/// `op` (an UPDATE of the slots) on `grant`'s slot while it is live; `ttl_us`: `{p}6` is now + it.
fn own_slot(d: &Dialect, grant: &Grant, op: String, ttl_us: Option<i64>) -> Decide<()> {
    let p = d.param;
    let sql = format!("{op} WHERE name = {p}1 AND slot = {p}2 AND holder = {p}3 AND fence = {p}4");
    let slot = grant.slot.map_or(-1, i64::from);
    let key = [grant.name.as_str().into(), slot.into(), grant.holder.as_str().into(), (grant.token as i64).into()];
    on_live_row(d, sql, key, ttl_us)
}

pub(super) fn renew(d: &'static Dialect, grant: &Grant, ttl_us: i64) -> Script<()> {
    let set = format!("UPDATE fencelock_slots SET expires_at = {}6", d.param);
    script(d, &grant.name, None, false, own_slot(d, grant, set, Some(ttl_us)))
}

pub(super) fn release(d: &'static Dialect, grant: &Grant) -> Script<()> {
    let free = "UPDATE fencelock_slots SET holder = NULL, expires_at = 0".to_string();
    script(d, &grant.name, None, true, own_slot(d, grant, free, None))
}

pub(super) fn abandon(d: &'static Dialect, req: &AcquireRequest) -> Script<()> {
    let (name, holder, p) = (req.name.clone(), req.holder.clone(), d.param);
    let decide: Decide<()> = Box::new(move |_, _| {
        let sql =
            format!("UPDATE fencelock_slots SET holder = NULL, expires_at = 0 WHERE name = {p}1 AND holder = {p}2");
        (vec![Write::new(sql, [name.as_str().into(), holder.as_str().into()])], ())
    });
    script(d, &req.name, None, true, decide)
}

/// Counts the free permits of `name` out of `permits`: `Err(stored)` if its holders agreed on another number.
pub(super) fn available(d: &'static Dialect, name: &str, permits: u32) -> Script<std::result::Result<u32, i64>> {
    let decide: Decide<std::result::Result<u32, i64>> = Box::new(move |head, rows| {
        let Some(Head { a: stored, now, .. }) = head else { return (Vec::new(), Ok(permits)) };
        let counted = agreed(stored, permits, rows, now).map(|()| {
            let held = rows.iter().filter(|r| r.key < i64::from(permits) && r.live(now)).count() as u32;
            permits.saturating_sub(held)
        });
        (Vec::new(), counted)
    });
    script(d, name, None, false, decide)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::backend::HoldKind;
    use crate::backend::sql::SQLITE;

    fn take_with(permits: u32, stored: i64, rows: &[HoldRow]) -> Result<Outcome> {
        let kind = HoldKind::Permit { permits };
        let req = AcquireRequest {
            name: "S".into(),
            holder: "me".into(),
            ttl: Duration::from_secs(1),
            fair: None,
            kind,
            value: Vec::new(),
            waits: true,
        };
        decide_take(&SQLITE, &req, permits, Head { a: stored, b: stored, now: 1_000 }, rows).1.map(|p| p.outcome)
    }

    fn slot(slot: i64, holder: Option<&str>, expires_at: i64, token: i64) -> HoldRow {
        HoldRow { key: slot, holder: holder.map(String::from), expires_at, token }
    }

    #[test]
    fn the_lowest_free_slot_is_taken_with_its_next_token() {
        let held = slot(0, Some("a"), 5_000, 40);
        let out = take_with(3, 3, &[held.clone(), slot(1, Some("b"), 999, 60)]).unwrap();
        assert!(matches!(out, Outcome::Granted { token: 61, slot: Some(1) }), "an expired slot is free: {out:?}");
        let out = take_with(3, 3, &[held.clone(), slot(1, Some("b"), 5_000, 60)]).unwrap();
        assert!(
            matches!(out, Outcome::Granted { token: 1_000, slot: Some(2) }),
            "a new slot starts at the clock: {out:?}"
        );
        let out = take_with(1, 1, &[held]).unwrap();
        assert!(matches!(out, Outcome::Busy { left_us: Some(4_000) }), "{out:?}");
    }

    #[test]
    fn the_number_changes_only_while_nobody_holds() {
        let out = take_with(3, 2, &[slot(0, Some("a"), 5_000, 40)]).unwrap();
        assert!(matches!(out, Outcome::Mismatch { stored: 2 }), "{out:?}");
        let out = take_with(3, 2, &[slot(0, Some("a"), 999, 40), slot(1, None, 0, 9)]).unwrap();
        assert!(matches!(out, Outcome::Granted { token: 41, slot: Some(0) }), "{out:?}");
    }
}
