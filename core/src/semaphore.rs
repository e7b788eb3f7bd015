//! `Semaphore`: leased permits on one name (DESIGN.md §4b), made by the lock engine with `HoldKind::Permit`.

use crate::backend::HoldKind;
use crate::client::Client;
use crate::error::Result;
use crate::lease::Lease;
use crate::options::{LockOptions, validate_name};

/// A semaphore's hold: a [`Lease`] whose [`slot`](Lease::slot) is the permit's slot and whose token is that slot's
/// own counter.
pub type Permit = Lease;

/// At most `permits` holds at once across every client. Each permit is a lease (TTL, watchdog, lost signal), so a
/// crashed holder's permit comes back after its TTL; each occupies a slot 0…permits−1 whose token rises with every
/// grant of that slot, so a resource partitioned by slot is fenced like a mutex.
#[derive(Debug, Clone)]
pub struct Semaphore {
    client: Client,
    name: String,
    permits: u32,
}

// Here rather than in client.rs, so that the client's module does not depend on its primitives'.
impl Client {
    /// The semaphore `name` of `permits` leased permits (DESIGN.md §4b). Every client of the name must use the same
    /// number; the calls check it.
    pub fn semaphore(&self, name: &str, permits: u32) -> Semaphore {
        Semaphore { client: self.clone(), name: name.to_string(), permits }
    }
}

impl Semaphore {
    /// The semaphore's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The number of permits it was opened with.
    pub fn permits(&self) -> u32 {
        self.permits
    }

    fn kind(&self) -> HoldKind {
        HoldKind::Permit { permits: self.permits }
    }

    /// A permit, waiting up to `opts.timeout` while all are held.
    pub async fn acquire(&self, opts: &LockOptions) -> Result<Permit> {
        self.client.hold(&self.name, self.kind(), opts).await
    }

    /// One attempt at a permit; `None` while all are held.
    pub async fn try_acquire(&self, opts: &LockOptions) -> Result<Option<Permit>> {
        self.client.acquire(&self.name, self.kind(), opts, true).await
    }

    /// Permits not held now.
    pub async fn available(&self) -> Result<u32> {
        validate_name(&self.name)?;
        self.client.available(&self.name, self.permits).await
    }
}
