//! What every fencelock binding shares, so none of them re-invents it (DESIGN.md §1, TOOLCHAIN.md gotchas 4 and 7):
//!
//! - [`handle`]: one lazily built multi-thread tokio runtime per process, rebuilt in a `fork()`ed child;
//!   [`build_for_host`] hands it to a host that must own it (napi-rs), keeping only its handle;
//! - [`block_on`] for blocking callers (C, JNI, sync Python) and [`spawn`] for async ones; neither lets a write on a
//!   reset connection raise SIGPIPE in the host (`sigpipe`: a C host keeps its default action, which ends the process);
//! - [`status_code`]: the one mapping from core errors to the numeric codes of DESIGN.md §5;
//! - [`catch_panic`]: a panic becomes an `Internal` error instead of unwinding into a host language;
//! - [`acquire`] (`lock` or `try_lock` by one flag) and [`block_interruptibly`], the blocking wait in [`SLICE`]s
//!   that a host's interrupt ends (Python's signals, Java's `Thread.interrupt()`);
//! - [`hold`], [`hold_kind`] and [`available`]: read-write locks and semaphores by the kind's name, as the bindings
//!   pass it;
//! - [`campaign`], [`proclaim`], [`leader`] and [`Observer`]: elections, a leadership travelling as its lease.

mod election;
mod kinds;
mod panic;
mod runtime;
mod sigpipe;
mod status;
mod wait;

pub use election::{Observer, campaign, leader, proclaim};
pub use kinds::{available, hold, hold_kind, permits_of};
pub use panic::catch_panic;
pub use runtime::{block_on, build_for_host, handle, on_runtime_thread, spawn};
pub use status::{STATUS_BUSY, status_code};
pub use wait::{SLICE, block_interruptibly};
