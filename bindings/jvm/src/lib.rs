//! JNI glue for the `dev.fencelock` Java package: `libfencelock_jni.so`, packed into the jar by `jvm/`.
//!
//! Every native method is a static method of `dev.fencelock.Native`. Handles are boxed Rust values passed to Java as
//! `long`s; Java counts the calls in flight on each and frees it (close, or a `Cleaner`) only when none is.
//! Everything that waits on a backend runs as a task on the bridge's one runtime and reports to a Java `Completion`
//! from a runtime thread attached to the JVM as a daemon, so Java threads (virtual ones too) park in Java, where
//! `Thread.interrupt()` reaches them, and `main` returning ends the process.

mod callback;
mod client;
mod error;
mod fence;
mod handle;
mod lease;
mod options;
mod task;
