//! Reporting to Java from runtime threads. A `Completion` is a global reference to a `dev.fencelock.Completion`;
//! it is called on a runtime thread that attaches to the JVM as a daemon (jni-rs attaches non-daemon threads only),
//! once, so the JVM never waits for the runtime at exit. Only methods of objects handed over from Java are called
//! here: `FindClass` on a thread the JVM did not start would search the system class loader, not the caller's.

use std::cell::Cell;
use std::ffi::CString;
use std::ptr;

use jni::objects::{Global, JObject};
use jni::sys::{JNI_OK, JavaVMAttachArgs, jint, jlong};
use jni::{Env, JValue, JavaVM, jni_sig, jni_str};

use crate::handle::into_handle;
use crate::lease::JLease;

/// What a successful operation hands back, one variant per kind of result. It crosses to Java as the four
/// arguments of `Completion.done(long a, long b, String text, byte[] data)`; [`Value::wire`] is the one place that
/// lays each variant out (and `Native.java` documents the same layout per method).
#[derive(Debug)]
pub(crate) enum Value {
    /// Nothing to report (close, renew, release, a fenced write).
    Unit,
    /// `connect`: the new client's handle.
    Client { handle: jlong },
    /// `lock`/`tryLock`: the lease handle and its fencing token.
    Lease { handle: jlong, fence: u64 },
    /// `tryLock` found the lock taken.
    Busy,
    /// `inspect`: the last token handed out, the holder's remaining time and its id, each if known.
    Info { last_token: Option<u64>, remaining_ms: Option<u64>, holder: Option<String> },
    /// `forceRelease`: whether there was a record.
    Existed(bool),
    /// `available`: a number of permits.
    Count(u32),
    /// `fenceRead`: the highest accepted token and its value.
    Fence { token: u64, value: Vec<u8> },
    /// `onLost`: core's reason for the loss.
    Lost { reason: String },
    /// `leader`/`observerNext`: the leader, or `None` when nobody leads.
    Leader(Option<fencelock::Leader>),
}

impl Value {
    /// What an acquire or campaign completes with: its lease as a new handle, or `Busy` when `once` found it taken.
    pub(crate) fn acquired(lease: Option<fencelock::Lease>) -> Value {
        match lease {
            Some(lease) => Value::Lease { fence: lease.fence(), handle: into_handle(JLease::new(lease)) },
            None => Value::Busy,
        }
    }
}

/// `Completion.done`'s arguments.
type Wire = (i64, i64, Option<String>, Option<Vec<u8>>);

impl Value {
    /// The layout Java reads: `(a, b, text, data)`; -1 stands for an unknown number.
    fn wire(self) -> Wire {
        let known = |n: Option<u64>| n.map_or(-1, |n| n as i64);
        match self {
            Value::Unit | Value::Busy => (0, 0, None, None),
            Value::Client { handle } => (handle, 0, None, None),
            Value::Lease { handle, fence } => (handle, fence as i64, None, None),
            Value::Info { last_token, remaining_ms, holder } => (known(last_token), known(remaining_ms), holder, None),
            Value::Existed(existed) => (existed as i64, 0, None, None),
            Value::Count(n) => (i64::from(n), 0, None, None),
            Value::Fence { token, value } => (token as i64, 0, None, Some(value)),
            Value::Lost { reason } => (0, 0, Some(reason), None),
            Value::Leader(Some(l)) => (1, l.term as i64, None, Some(l.value)),
            Value::Leader(None) => (0, 0, None, None),
        }
    }
}

/// A Java `Completion` waiting for one result. Dropped unfinished (an aborted task), it only frees its reference.
#[derive(Debug)]
pub(crate) struct Completion {
    target: Option<Global<JObject<'static>>>,
}

impl Drop for Completion {
    fn drop(&mut self) {
        if let Some(target) = self.target.take() {
            // Deleting a global reference needs an attached thread; make it a daemon attachment, not a scoped one.
            if let Ok(vm) = JavaVM::singleton() {
                attach_daemon(&vm);
            }
            drop(target);
        }
    }
}

impl Completion {
    pub(crate) fn new(env: &Env<'_>, obj: &JObject<'_>) -> jni::errors::Result<Self> {
        Ok(Completion { target: Some(env.new_global_ref(obj)?) })
    }

    /// Calls `done(a, b, text, data)` or `fail(code, message, lock, backend, retryable)`. Runs on a runtime thread.
    pub(crate) fn finish(mut self, result: fencelock::Result<Value>) {
        let (Ok(vm), Some(target)) = (JavaVM::singleton(), self.target.take()) else { return };
        attach_daemon(&vm);
        let outcome = vm.attach_current_thread(|env| -> jni::errors::Result<()> {
            let called = match result {
                Ok(v) => {
                    let (a, b, text, data) = v.wire();
                    let text = match text {
                        Some(t) => env.new_string(t)?.into(),
                        None => JObject::null(),
                    };
                    let data = match data {
                        Some(d) => env.byte_array_from_slice(&d)?.into(),
                        None => JObject::null(),
                    };
                    env.call_method(
                        &target,
                        jni_str!("done"),
                        jni_sig!("(JJLjava/lang/String;[B)V"),
                        &[JValue::Long(a), JValue::Long(b), JValue::Object(&text), JValue::Object(&data)],
                    )
                }
                Err(e) => {
                    let args = crate::error::ErrorArgs::new(env, &e)?;
                    env.call_method(
                        &target,
                        jni_str!("fail"),
                        jni_sig!("(ILjava/lang/String;Ljava/lang/String;Ljava/lang/String;Z)V"),
                        &args.values(),
                    )
                }
            };
            // The global reference is deleted while the thread is attached.
            drop(target);
            called.map(drop)
        });
        if let Err(e) = outcome {
            // A Completion only completes a CompletableFuture; it throws only if the JVM is out of memory.
            eprintln!("fencelock: could not report a result to Java: {e}");
        }
    }
}

thread_local! {
    static ATTACHED: Cell<bool> = const { Cell::new(false) };
}

/// Attaches this runtime thread to the JVM as a daemon thread, once; later attaches find it attached.
fn attach_daemon(vm: &JavaVM) {
    if ATTACHED.get() {
        return;
    }
    let name = std::thread::current().name().and_then(|n| CString::new(n).ok());
    let mut args = JavaVMAttachArgs {
        version: jni::sys::JNI_VERSION_1_8 as jint,
        name: name.as_ref().map_or(ptr::null_mut(), |n| n.as_ptr().cast_mut()),
        group: ptr::null_mut(),
    };
    let raw = vm.get_raw();
    let mut env = ptr::null_mut();
    // SAFETY: `raw` is the live JavaVM; AttachCurrentThreadAsDaemon (JNI 1.4) is a no-op for an attached thread, and
    // `args` with its name outlives the call.
    let rc = unsafe { ((**raw).v1_4.AttachCurrentThreadAsDaemon)(raw, &mut env, (&raw mut args).cast()) };
    ATTACHED.set(rc == JNI_OK);
}
