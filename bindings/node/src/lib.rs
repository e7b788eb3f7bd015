//! napi-rs glue for fencelock: the native addon `fencelock.<platform>.node` that node/index.js wraps.
//!
//! It converts types and bridges the runtime, nothing more (DESIGN.md §1): every method returns a Promise whose
//! rejection reason is `"<KIND>: <message>"` (napi-rs cannot carry a custom code out of an async call), and
//! node/errors.js turns that into a `LockError` with `.code` in one place. The JS wrapper adds the Node idioms
//! (AbortSignal, `withLock`, `lease.signal`, `Symbol.asyncDispose`).

mod cancel;
mod client;
mod election;
mod error;
mod fence;
mod lease;
mod metrics;
mod options;
mod runtime;

pub use cancel::cancel;
pub use client::{Capability, LockInfo, NativeClient, connect};
pub use election::{LeaderInfo, NativeObserver};
pub use error::ErrorFields;
pub use fence::{FenceValue, NativeFence};
pub use lease::NativeLease;
pub use options::{ConnectOpts, LockOpts};
