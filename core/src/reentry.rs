//! Per-client table of lock names: the local queue (a fair async mutex per name, so the backend sees at most one
//! contender per name from this client) and the current hold (for reentrancy by the same owner).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use tokio::sync::{Mutex as AsyncMutex, OwnedMutexGuard};

use crate::error::Result;
use crate::lease::Hold;

#[derive(Debug, Default)]
struct Slot {
    gate: Arc<AsyncMutex<()>>,
    held: Option<Weak<Hold>>,
}

/// Lock names this client is using.
#[derive(Debug, Default)]
pub(crate) struct Table {
    slots: Mutex<HashMap<String, Slot>>,
}

impl Table {
    fn slots(&self) -> std::sync::MutexGuard<'_, HashMap<String, Slot>> {
        self.slots.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The hold `owner` already has on `name`, with its count raised; `None` if it has none.
    pub(crate) fn reenter(&self, name: &str, owner: &str) -> Option<Result<Arc<Hold>>> {
        let hold = self.slots().get(name)?.held.as_ref()?.upgrade()?;
        if hold.owner.as_deref() != Some(owner) {
            return None;
        }
        hold.reenter().map(|r| r.map(|()| hold))
    }

    /// A claim on the local queue of `name`; dropping it without a hold tidies the slot away.
    pub(crate) fn claim(self: &Arc<Self>, name: &str) -> Claim {
        let gate = self.slots().entry(name.to_string()).or_default().gate.clone();
        Claim { table: self.clone(), name: name.to_string(), gate: Some(gate) }
    }

    pub(crate) fn register(&self, hold: &Arc<Hold>) {
        if let Some(slot) = self.slots().get_mut(&hold.grant.name) {
            slot.held = Some(Arc::downgrade(hold));
        }
    }

    pub(crate) fn unregister(&self, name: &str, hold: &Hold) {
        let mut slots = self.slots();
        if let Some(slot) = slots.get_mut(name) {
            if slot.held.as_ref().is_some_and(|w| std::ptr::eq(w.as_ptr(), hold)) {
                slot.held = None;
            }
            Self::tidy(&mut slots, name);
        }
    }

    /// Every hold this client has, for `close`.
    pub(crate) fn holds(&self) -> Vec<Arc<Hold>> {
        self.slots().values().filter_map(|s| s.held.as_ref()?.upgrade()).collect()
    }

    /// Number of names with a slot (held or queued), for tests of cleanup.
    pub(crate) fn len(&self) -> usize {
        self.slots().len()
    }

    // A slot nobody holds or queues for is removed; the gate's count includes the slot's own reference.
    fn tidy(slots: &mut HashMap<String, Slot>, name: &str) {
        if slots.get(name).is_some_and(|s| s.held.is_none() && Arc::strong_count(&s.gate) == 1) {
            slots.remove(name);
        }
    }
}

/// A place in the local queue of one name.
#[derive(Debug)]
pub(crate) struct Claim {
    table: Arc<Table>,
    name: String,
    gate: Option<Arc<AsyncMutex<()>>>,
}

impl Claim {
    /// Waits for the local queue (FIFO). Cancel-safe: a dropped wait leaves the queue.
    pub(crate) async fn enter(&self) -> OwnedMutexGuard<()> {
        self.gate.clone().expect("claim is live").lock_owned().await
    }

    /// The queue slot if nobody in this client holds or waits ahead.
    pub(crate) fn try_enter(&self) -> Option<OwnedMutexGuard<()>> {
        self.gate.clone().expect("claim is live").try_lock_owned().ok()
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        self.gate.take();
        Table::tidy(&mut self.table.slots(), &self.name);
    }
}
