//! JNI glue for the `dev.fencelock` Java package: `libfencelock_jni.so`, packed into the jar by `jvm/`.
//!
//! Every native method is a static method of `dev.fencelock.Native`. Handles are boxed Rust values passed to Java as
//! `long`s; Java counts the calls in flight on each and frees it (close, or a `Cleaner`) only when none is.
//! Operations that wait on a backend run as tasks on the bridge's one runtime and report to a Java `Completion` from
//! a runtime thread attached to the JVM as a daemon (so `main` returning ends the process); callers park in Java,
//! where interrupts reach them and virtual threads unmount. `lock`/`tryLock`/`campaign`/`release` from a platform
//! thread take a faster path (`blocking.rs`): the future runs on the caller's thread, checking for interrupts every
//! 50 ms.

mod blocking;
mod callback;
mod client;
mod election;
mod error;
mod fence;
mod handle;
mod lease;
mod metrics;
mod options;
mod task;
