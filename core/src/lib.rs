//! fencelock: distributed locks with fencing tokens, one implementation for every language.
//!
//! ```no_run
//! # async fn demo() -> fencelock::Result<()> {
//! use std::time::Duration;
//! use fencelock::{Client, LockOptions};
//!
//! let client = Client::connect("redis://127.0.0.1:6379").await?;
//! let lease = client.lock("orders", &LockOptions::default().ttl(Duration::from_secs(10))).await?;
//! // Guard the protected resource with the token: a stale holder's write is rejected.
//! client.fence("orders-table").write(lease.fence(), b"new state").await?;
//! lease.release().await?;
//! # Ok(()) }
//! ```
//!
//! Backends by URL: `sqlite:PATH` (embedded default), `redis://` / `rediss://` (Redisson RLock layout),
//! `memory://NAME` (in-process, for tests). See DESIGN.md for the algorithms and guarantees.

mod backend;
mod client;
mod error;
mod fence;
mod lease;
mod options;
mod reentry;
mod url;
mod watchdog;

pub use backend::{Capability, LockInfo};
pub use client::Client;
pub use error::{Error, ErrorKind, Result};
pub use fence::Fence;
pub use lease::Lease;
pub use options::{ClientOptions, DEFAULT_TTL, LockOptions, MAX_NAME_BYTES, MAX_TTL};
pub use url::{DEFAULT_URL, default_url};
