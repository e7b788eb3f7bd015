//! The memory backend's read-write locks and semaphores: the reference semantics of DESIGN.md §4b, in plain
//! data structures, for unit tests of the engine.

use std::collections::HashMap;

use tokio::time::{Duration, Instant};

use crate::backend::{AcquireRequest, Attempt, Busy, Grant, HoldKind, permits_mismatch, unix_micros};
use crate::error::Result;
use crate::mutant;

/// A lock's counter after one more draw; a missing counter starts at the clock, like the persistent backends'.
fn next(counter: u64) -> u64 {
    if counter == 0 { unix_micros() } else { counter + 1 }
}

fn live(expires: &Instant, now: Instant) -> bool {
    *expires > now
}

/// One read-write lock: a writer, readers sharing the current epoch's token, and the writers waiting, whose marks
/// keep new readers out.
#[derive(Debug, Default)]
pub(super) struct RwRecord {
    counter: u64,
    writer: Option<(String, Instant)>,
    readers: HashMap<String, Instant>,
    epoch: u64,
    waiting_writers: HashMap<String, Instant>,
}

impl RwRecord {
    fn prune(&mut self, now: Instant) {
        if self.writer.as_ref().is_some_and(|(_, e)| !live(e, now)) {
            self.writer = None;
        }
        self.readers.retain(|_, e| live(e, now));
        self.waiting_writers.retain(|_, e| live(e, now));
    }

    /// The longest a busy attempt need wait: the soonest a hold in its way expires.
    fn busy(&self, now: Instant, kind: HoldKind) -> Attempt {
        let writer = self.writer.iter().map(|(_, e)| *e);
        let soonest = match kind {
            HoldKind::Write => writer.chain(self.readers.values().copied()).min(),
            _ => writer.chain(self.waiting_writers.values().copied()).min(),
        };
        Attempt::Busy(Busy { holder_ttl: soonest.map(|e| e - now) })
    }

    /// One attempt; `mark` is whether this attempt's writer has left a waiting mark.
    pub(super) fn take(&mut self, req: &AcquireRequest, now: Instant, mark: &mut bool) -> Attempt {
        self.prune(now);
        let mine = |h: &str| h == req.holder;
        let until = now + req.ttl;
        match req.kind {
            HoldKind::Write => {
                let free = self.writer.as_ref().is_none_or(|(h, _)| mine(h)) && self.readers.keys().all(|h| mine(h));
                if !free {
                    // Marked for twice its TTL, refreshed by every attempt: a crashed waiter's mark goes by itself.
                    self.waiting_writers.insert(req.holder.clone(), now + req.ttl * 2);
                    *mark = true;
                    return self.busy(now, req.kind);
                }
                self.waiting_writers.remove(&req.holder);
                *mark = false;
                self.counter = next(self.counter);
                self.writer = Some((req.holder.clone(), until));
                Attempt::Acquired(req.grant(self.counter, None))
            }
            _ => {
                let writing = self.writer.as_ref().map(|(h, _)| mine(h));
                // A writer taking the read lock too (a downgrade) passes the waiting writers; nobody else does.
                let blocked = match writing {
                    Some(true) => false,
                    Some(false) => true,
                    None => {
                        self.waiting_writers.keys().any(|h| !mine(h)) && !mutant::active("readers_pass_waiting_writers")
                    }
                };
                if blocked {
                    return self.busy(now, req.kind);
                }
                if self.readers.is_empty() {
                    self.counter = next(self.counter);
                    self.epoch = self.counter;
                }
                self.readers.insert(req.holder.clone(), until);
                Attempt::Acquired(req.grant(self.epoch, None))
            }
        }
    }

    fn holds(&self, grant: &Grant, now: Instant) -> bool {
        match grant.kind {
            HoldKind::Write => self.writer.as_ref().is_some_and(|(h, e)| *h == grant.holder && live(e, now)),
            _ => self.readers.get(&grant.holder).is_some_and(|e| live(e, now)) && self.epoch == grant.token,
        }
    }

    pub(super) fn renew(&mut self, grant: &Grant, now: Instant, ttl: Duration) -> bool {
        if !self.holds(grant, now) {
            return false;
        }
        match grant.kind {
            HoldKind::Write => self.writer = Some((grant.holder.clone(), now + ttl)),
            _ => {
                self.readers.insert(grant.holder.clone(), now + ttl);
            }
        }
        true
    }

    pub(super) fn release(&mut self, grant: &Grant, now: Instant) -> bool {
        if !self.holds(grant, now) {
            return false;
        }
        match grant.kind {
            HoldKind::Write => self.writer = None,
            _ => {
                self.readers.remove(&grant.holder);
            }
        }
        true
    }

    /// Deletes what `req` may have left: its waiting mark, and a hold of its kind taken in doubt.
    pub(super) fn abandon(&mut self, req: &AcquireRequest) {
        self.waiting_writers.remove(&req.holder);
        match req.kind {
            HoldKind::Write if self.writer.as_ref().is_some_and(|(h, _)| *h == req.holder) => self.writer = None,
            HoldKind::Read => {
                self.readers.remove(&req.holder);
            }
            _ => {}
        }
    }

    /// Whether an attempt of `kind` might succeed now, for a waiter deciding whether to sleep.
    pub(super) fn may_take(&mut self, kind: HoldKind, now: Instant) -> bool {
        self.prune(now);
        self.writer.is_none() && (kind != HoldKind::Write || self.readers.is_empty())
    }
}

/// One slot of a semaphore: its holder and the slot's own token counter.
#[derive(Debug, Default, Clone)]
struct Slot {
    holder: Option<(String, Instant)>,
    counter: u64,
}

/// One semaphore: the number of permits its clients agreed on, and a slot per permit.
#[derive(Debug, Default)]
pub(super) struct SemRecord {
    slots: Vec<Slot>,
}

impl SemRecord {
    /// The slots, made on first use; `InvalidArgument` if the semaphore has another number of permits.
    fn slots(&mut self, name: &str, url: &str, permits: u32, now: Instant) -> Result<&mut [Slot]> {
        if self.slots.iter().all(|s| s.holder.as_ref().is_none_or(|(_, e)| !live(e, now))) {
            // Nobody holds: the number may change, and the counters stay (their tokens keep rising).
            self.slots.resize(permits as usize, Slot::default());
        }
        if self.slots.len() != permits as usize {
            return Err(permits_mismatch(name, url, permits, self.slots.len() as u32));
        }
        Ok(&mut self.slots)
    }

    pub(super) fn take(&mut self, req: &AcquireRequest, url: &str, permits: u32, now: Instant) -> Result<Attempt> {
        let slots = self.slots(&req.name, url, permits, now)?;
        // A holder already in a slot (a re-take after an attempt in doubt) keeps it; else the lowest free slot.
        let held = |s: &Slot, who: Option<&str>| {
            s.holder.as_ref().is_some_and(|(h, e)| live(e, now) && who.is_none_or(|w| w == h))
        };
        let mine = slots.iter().position(|s| held(s, Some(&req.holder)));
        let Some(i) = mine.or_else(|| slots.iter().position(|s| !held(s, None))) else {
            let soonest = slots.iter().filter_map(|s| s.holder.as_ref().map(|(_, e)| *e)).min();
            return Ok(Attempt::Busy(Busy { holder_ttl: soonest.map(|e| e - now) }));
        };
        let slot = &mut slots[i];
        slot.counter = next(slot.counter);
        slot.holder = Some((req.holder.clone(), now + req.ttl));
        Ok(Attempt::Acquired(req.grant(slot.counter, None).in_slot(i as u32)))
    }

    fn slot_of(&mut self, grant: &Grant, now: Instant) -> Option<&mut Slot> {
        let slot = self.slots.get_mut(grant.slot? as usize)?;
        let mine = slot.holder.as_ref().is_some_and(|(h, e)| *h == grant.holder && live(e, now));
        (mine && slot.counter == grant.token).then_some(slot)
    }

    pub(super) fn renew(&mut self, grant: &Grant, now: Instant, ttl: Duration) -> bool {
        self.slot_of(grant, now).map(|s| s.holder = Some((grant.holder.clone(), now + ttl))).is_some()
    }

    pub(super) fn release(&mut self, grant: &Grant, now: Instant) -> bool {
        self.slot_of(grant, now).map(|s| s.holder = None).is_some()
    }

    pub(super) fn abandon(&mut self, req: &AcquireRequest) {
        for slot in &mut self.slots {
            if slot.holder.as_ref().is_some_and(|(h, _)| *h == req.holder) {
                slot.holder = None;
            }
        }
    }

    pub(super) fn available(&mut self, name: &str, url: &str, permits: u32, now: Instant) -> Result<u32> {
        let slots = self.slots(name, url, permits, now)?;
        Ok(slots.iter().filter(|s| s.holder.as_ref().is_none_or(|(_, e)| !live(e, now))).count() as u32)
    }

    /// Whether a slot is free now, for a waiter deciding whether to sleep.
    pub(super) fn may_take(&self, now: Instant) -> bool {
        self.slots.iter().any(|s| s.holder.as_ref().is_none_or(|(_, e)| !live(e, now)))
    }
}
