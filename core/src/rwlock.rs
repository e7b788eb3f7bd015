//! `RwLock`: a read-write lock on one name (DESIGN.md §4b). Its holds are leases like a mutex's, made by the same
//! engine with another `HoldKind`.

use crate::backend::HoldKind;
use crate::client::Client;
use crate::error::Result;
use crate::lease::Lease;
use crate::options::LockOptions;

/// Many readers or one writer. A waiting writer blocks new readers; a writer may take the read lock too (a
/// downgrade: release the write hold after, and the read hold stays); a reader asking for the write lock with the
/// same owner is refused (`InvalidArgument`), never deadlocked. Each write hold, and each run of overlapping read
/// holds, has a token of its own from the lock's counter: readers of one run share it.
#[derive(Debug, Clone)]
pub struct RwLock {
    client: Client,
    name: String,
}

// Here rather than in client.rs, so that the client's module does not depend on its primitives'.
impl Client {
    /// The read-write lock `name`: many readers or one writer (DESIGN.md §4b).
    pub fn rw_lock(&self, name: &str) -> RwLock {
        RwLock { client: self.clone(), name: name.to_string() }
    }
}

impl RwLock {
    /// The lock name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// A read hold, waiting up to `opts.timeout` while a writer holds or waits.
    pub async fn read(&self, opts: &LockOptions) -> Result<Lease> {
        self.client.hold(&self.name, HoldKind::Read, opts).await
    }

    /// One attempt at a read hold; `None` while a writer holds or waits.
    pub async fn try_read(&self, opts: &LockOptions) -> Result<Option<Lease>> {
        self.client.acquire(&self.name, HoldKind::Read, opts, true).await
    }

    /// The write hold, waiting up to `opts.timeout` for readers and another writer to leave.
    pub async fn write(&self, opts: &LockOptions) -> Result<Lease> {
        self.client.hold(&self.name, HoldKind::Write, opts).await
    }

    /// One attempt at the write hold; `None` while anyone holds.
    pub async fn try_write(&self, opts: &LockOptions) -> Result<Option<Lease>> {
        self.client.acquire(&self.name, HoldKind::Write, opts, true).await
    }
}
