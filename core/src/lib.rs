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
//! Backends by URL (one file each under `backend/`, behind one `Backend` trait):
//!
//! | URL | algorithm | waiters woken by |
//! |---|---|---|
//! | `sqlite:PATH` (the embedded default) | a row per lock, upsert if free, expired or ours | polling |
//! | `postgres://…` | the same table on the server clock | `LISTEN`/`NOTIFY` |
//! | `mysql://…`, `mariadb://…` | the same table on the server clock | polling |
//! | `redis://`, `rediss://` | Lua scripts on Redisson's RLock layout | pub/sub |
//! | `redis+cluster://h1,h2,…` | the same scripts on a Redis Cluster, a lock's keys on one slot | sharded pub/sub |
//! | `redlock://h1,h2,h3` | Redlock over independent instances, tokens raised on a majority | pub/sub |
//! | `etcd://h1:2379,…`, `etcd+https://…` | etcd's `concurrency.Mutex` | watch of the predecessor |
//! | `zk://[user:pass@]h1:2181,…[/chroot]` | Curator's `InterProcessMutex` | watch of the predecessor |
//! | `memory://NAME` | in-process, for tests | notify |
//!
//! TLS and credentials are set in the URL alike on every backend (`rediss://`, `?tls=true`, `sslmode=`,
//! `ssl-mode=`; `ca=`, `cert=`, `key=`; `user:pass@`): see the README's "TLS and authentication".
//!
//! See DESIGN.md for the algorithms and guarantees.

mod backend;
mod client;
mod election;
mod error;
mod fence;
mod handle;
mod lease;
pub mod metrics;
mod mutant;
mod options;
#[cfg(feature = "otel")]
pub mod otel;
mod redact;
mod reentry;
mod rwlock;
mod semaphore;
mod tasks;
mod url;
mod watchdog;

pub use backend::{Capability, HoldKind, Leader, LockInfo};
pub use client::{Client, MAX_PERMITS};
pub use election::{Election, Leadership, MAX_VALUE_BYTES};
pub use error::{Error, ErrorKind, Result};
pub use fence::Fence;
pub use lease::{Lease, LeaseEnd};
pub use metrics::{MetricsNames, MetricsSnapshot};
pub use options::{ClientOptions, DEFAULT_TTL, LockOptions, MAX_NAME_BYTES, MAX_TTL};
pub use rwlock::RwLock;
pub use semaphore::{Permit, Semaphore};
pub use url::{DEFAULT_URL, default_url, redact};
