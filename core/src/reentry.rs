//! Per-client table of lock names: the local queue (a fair async mutex per name, so the backend sees at most one
//! contender per name from this client) and the current holds (for reentrancy by the same owner). A name's entry is
//! keyed by its family too (`HoldKind::family`): a mutex, a read-write lock and a semaphore of one name are apart.
//! A mutex or a write hold keeps the name's gate while held; a shared hold (a read, a permit) lets it go once
//! granted, so a name can have several holds here, each of another owner (or kind: a writer's downgrade).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use tokio::sync::{Mutex as AsyncMutex, OwnedMutexGuard};

use crate::backend::HoldKind;
use crate::error::Result;

/// The table's key of `name` for holds of `kind`.
pub(crate) fn table_key(kind: HoldKind, name: &str) -> String {
    match kind.family() {
        "lock" => name.to_string(),
        family => format!("{family}\0{name}"),
    }
}

/// What the table needs of a hold: its key, its owner and kind, and a way in for that owner's next lock.
pub(crate) trait Reentrant {
    /// The table key it is registered under (`table_key`).
    fn key(&self) -> &str;
    /// The reentrancy key it was taken with, if any.
    fn owner(&self) -> Option<&str>;
    /// The kind of hold.
    fn kind(&self) -> HoldKind;
    /// One more hold, unless released; `LockLost` if the grant is already lost.
    fn reenter(&self) -> Option<Result<()>>;
}

#[derive(Debug)]
struct Slot<H> {
    gate: Arc<AsyncMutex<()>>,
    held: Vec<Weak<H>>,
}

impl<H> Default for Slot<H> {
    fn default() -> Self {
        Slot { gate: Arc::default(), held: Vec::new() }
    }
}

impl<H: Reentrant> Slot<H> {
    fn live(&self) -> impl Iterator<Item = Arc<H>> + '_ {
        self.held.iter().filter_map(Weak::upgrade)
    }
}

/// Lock names this client is using.
#[derive(Debug)]
pub(crate) struct Table<H> {
    slots: Mutex<HashMap<String, Slot<H>>>,
}

impl<H> Default for Table<H> {
    fn default() -> Self {
        Table { slots: Mutex::default() }
    }
}

impl<H: Reentrant> Table<H> {
    fn slots(&self) -> std::sync::MutexGuard<'_, HashMap<String, Slot<H>>> {
        self.slots.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The hold of `kind` that `owner` already has under `key`, with its count raised; `None` if it has none.
    pub(crate) fn reenter(&self, key: &str, owner: &str, kind: HoldKind) -> Option<Result<Arc<H>>> {
        let hold = self.slots().get(key)?.live().find(|h| h.owner() == Some(owner) && h.kind() == kind)?;
        hold.reenter().map(|r| r.map(|()| hold))
    }

    /// The kinds of hold `owner` has under `key`.
    pub(crate) fn kinds_held(&self, key: &str, owner: &str) -> Vec<HoldKind> {
        let slots = self.slots();
        let Some(slot) = slots.get(key) else { return Vec::new() };
        slot.live().filter(|h| h.owner() == Some(owner)).map(|h| h.kind()).collect()
    }

    /// A claim on the local queue of `name`; dropping it without a hold tidies the slot away.
    pub(crate) fn claim(self: &Arc<Self>, key: &str) -> Claim<H> {
        let gate = self.slots().entry(key.to_string()).or_default().gate.clone();
        Claim { table: self.clone(), key: key.to_string(), gate: Some(gate) }
    }

    pub(crate) fn register(&self, hold: &Arc<H>) {
        if let Some(slot) = self.slots().get_mut(hold.key()) {
            slot.held.retain(|w| w.strong_count() > 0);
            slot.held.push(Arc::downgrade(hold));
        }
    }

    pub(crate) fn unregister(&self, key: &str, hold: &H) {
        let mut slots = self.slots();
        if let Some(slot) = slots.get_mut(key) {
            slot.held.retain(|w| w.strong_count() > 0 && !std::ptr::eq(w.as_ptr(), hold));
            Self::tidy(&mut slots, key);
        }
    }

    /// Every hold this client has, for `close`.
    pub(crate) fn holds(&self) -> Vec<Arc<H>> {
        self.slots().values().flat_map(|s| s.live().collect::<Vec<_>>()).collect()
    }

    /// Number of names with a slot (held or queued), for tests of cleanup.
    pub(crate) fn len(&self) -> usize {
        self.slots().len()
    }

    // A slot nobody holds or queues for is removed; the gate's count includes the slot's own reference.
    fn tidy(slots: &mut HashMap<String, Slot<H>>, key: &str) {
        if slots
            .get(key)
            .is_some_and(|s| s.held.iter().all(|w| w.strong_count() == 0) && Arc::strong_count(&s.gate) == 1)
        {
            slots.remove(key);
        }
    }
}

/// A place in the local queue of one name.
#[derive(Debug)]
pub(crate) struct Claim<H: Reentrant> {
    table: Arc<Table<H>>,
    key: String,
    gate: Option<Arc<AsyncMutex<()>>>,
}

impl<H: Reentrant> Claim<H> {
    /// Waits for the local queue (FIFO). Cancel-safe: a dropped wait leaves the queue.
    pub(crate) async fn enter(&self) -> OwnedMutexGuard<()> {
        self.gate.clone().expect("claim is live").lock_owned().await
    }

    /// The queue slot if nobody in this client holds or waits ahead.
    pub(crate) fn try_enter(&self) -> Option<OwnedMutexGuard<()>> {
        self.gate.clone().expect("claim is live").try_lock_owned().ok()
    }
}

impl<H: Reentrant> Drop for Claim<H> {
    fn drop(&mut self) {
        self.gate.take();
        Table::tidy(&mut self.table.slots(), &self.key);
    }
}
