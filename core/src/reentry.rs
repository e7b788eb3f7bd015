//! Per-client table of lock names: the local queue (a fair async mutex per name, so the backend sees at most one
//! contender per name from this client) and the current hold (for reentrancy by the same owner).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use tokio::sync::{Mutex as AsyncMutex, OwnedMutexGuard};

use crate::error::Result;

/// What the table needs of a hold: its name, its owner, and a way in for that owner's next lock.
pub(crate) trait Reentrant {
    /// The lock name.
    fn name(&self) -> &str;
    /// The reentrancy key it was taken with, if any.
    fn owner(&self) -> Option<&str>;
    /// One more hold, unless released; `LockLost` if the grant is already lost.
    fn reenter(&self) -> Option<Result<()>>;
}

#[derive(Debug)]
struct Slot<H> {
    gate: Arc<AsyncMutex<()>>,
    held: Option<Weak<H>>,
}

impl<H> Default for Slot<H> {
    fn default() -> Self {
        Slot { gate: Arc::default(), held: None }
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

    /// The hold `owner` already has on `name`, with its count raised; `None` if it has none.
    pub(crate) fn reenter(&self, name: &str, owner: &str) -> Option<Result<Arc<H>>> {
        let hold = self.slots().get(name)?.held.as_ref()?.upgrade()?;
        if hold.owner() != Some(owner) {
            return None;
        }
        hold.reenter().map(|r| r.map(|()| hold))
    }

    /// A claim on the local queue of `name`; dropping it without a hold tidies the slot away.
    pub(crate) fn claim(self: &Arc<Self>, name: &str) -> Claim<H> {
        let gate = self.slots().entry(name.to_string()).or_default().gate.clone();
        Claim { table: self.clone(), name: name.to_string(), gate: Some(gate) }
    }

    pub(crate) fn register(&self, hold: &Arc<H>) {
        if let Some(slot) = self.slots().get_mut(hold.name()) {
            slot.held = Some(Arc::downgrade(hold));
        }
    }

    pub(crate) fn unregister(&self, name: &str, hold: &H) {
        let mut slots = self.slots();
        if let Some(slot) = slots.get_mut(name) {
            if slot.held.as_ref().is_some_and(|w| std::ptr::eq(w.as_ptr(), hold)) {
                slot.held = None;
            }
            Self::tidy(&mut slots, name);
        }
    }

    /// Every hold this client has, for `close`.
    pub(crate) fn holds(&self) -> Vec<Arc<H>> {
        self.slots().values().filter_map(|s| s.held.as_ref()?.upgrade()).collect()
    }

    /// Number of names with a slot (held or queued), for tests of cleanup.
    pub(crate) fn len(&self) -> usize {
        self.slots().len()
    }

    // A slot nobody holds or queues for is removed; the gate's count includes the slot's own reference.
    fn tidy(slots: &mut HashMap<String, Slot<H>>, name: &str) {
        if slots.get(name).is_some_and(|s| s.held.is_none() && Arc::strong_count(&s.gate) == 1) {
            slots.remove(name);
        }
    }
}

/// A place in the local queue of one name.
#[derive(Debug)]
pub(crate) struct Claim<H: Reentrant> {
    table: Arc<Table<H>>,
    name: String,
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
        Table::tidy(&mut self.table.slots(), &self.name);
    }
}
