//! `fencelock_status`, the thread-local last error, and the wrapper every entry point runs its body in.

use std::cell::RefCell;
use std::ffi::{CString, c_char};

use fencelock::{Error, Result};
use fencelock_bridge::{STATUS_BUSY, catch_panic, status_code};

/// The result of every operation: `FENCELOCK_OK`, an error code of DESIGN.md §5, or `FENCELOCK_BUSY`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum fencelock_status {
    /// Success.
    FENCELOCK_OK = 0,
    /// `fencelock_lock` waited `timeout_ms` while someone else held the lock. Retryable.
    FENCELOCK_TIMEOUT = 1,
    /// The lease expired, was taken, or could not be renewed in time; only fenced writes are safe now.
    FENCELOCK_LOCK_LOST = 2,
    /// Renew or release of a lease that is no longer ours (for example released twice).
    FENCELOCK_NOT_HELD = 3,
    /// A fenced write carried a token older than one already accepted.
    FENCELOCK_FENCED = 4,
    /// The backend is unreachable, an RPC timed out, or there is no quorum. Retryable.
    FENCELOCK_UNAVAILABLE = 5,
    /// A bad URL, name, TTL or option, a NULL where a value is required, or a string that is not UTF-8.
    FENCELOCK_INVALID_ARGUMENT = 6,
    /// The backend lacks the capability asked for.
    FENCELOCK_UNSUPPORTED = 7,
    /// The client was closed.
    FENCELOCK_CLOSED = 8,
    /// The operation was cancelled.
    FENCELOCK_CANCELLED = 9,
    /// A bug or an unexpected reply (including a blocking call made from an `on_lost` callback).
    FENCELOCK_INTERNAL = 10,
    /// `fencelock_try_lock` found the lock held by someone else.
    FENCELOCK_BUSY = 11,
}

impl fencelock_status {
    fn from_code(code: u32) -> fencelock_status {
        use fencelock_status::*;
        match code {
            0 => FENCELOCK_OK,
            1 => FENCELOCK_TIMEOUT,
            2 => FENCELOCK_LOCK_LOST,
            3 => FENCELOCK_NOT_HELD,
            4 => FENCELOCK_FENCED,
            5 => FENCELOCK_UNAVAILABLE,
            6 => FENCELOCK_INVALID_ARGUMENT,
            7 => FENCELOCK_UNSUPPORTED,
            8 => FENCELOCK_CLOSED,
            9 => FENCELOCK_CANCELLED,
            STATUS_BUSY => FENCELOCK_BUSY,
            _ => FENCELOCK_INTERNAL,
        }
    }
}

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

pub(crate) fn set_last_error(message: &str) {
    let message = CString::new(message.replace('\0', "\\0")).unwrap_or_default();
    LAST_ERROR.with(|e| *e.borrow_mut() = message);
}

/// Runs an entry point's body: panics become `FENCELOCK_INTERNAL`, errors set the last error (prefixed with the
/// function's name) and become their status.
pub(crate) fn call(func: &str, body: impl FnOnce() -> Result<fencelock_status>) -> fencelock_status {
    match catch_panic(body) {
        Ok(status) => status,
        Err(e) => fail(func, &e),
    }
}

/// Runs the body of a `void` entry point (the frees): a panic is swallowed, since it has nowhere to go.
pub(crate) fn quietly(body: impl FnOnce()) {
    let _ = catch_panic(|| {
        body();
        Ok(())
    });
}

/// Records `e`, raised in `func`, as the last error: `KIND: func: lock "x" on backend: message`.
pub(crate) fn fail(func: &str, e: &Error) -> fencelock_status {
    set_last_error(&format!("{}: {func}: {}", e.kind(), e.detail()));
    fencelock_status::from_code(status_code(e))
}

/// `try_lock` found the lock taken: not an error in core, but the caller may ask why.
pub(crate) fn busy(func: &str, name: &str) -> fencelock_status {
    set_last_error(&format!("BUSY: {func}: lock {name:?} is held by another"));
    fencelock_status::FENCELOCK_BUSY
}

/// The message of the last failing call on this thread (kind, function, lock, backend and bad value), or "" if
/// none failed yet. The string stays valid until the next failing call on this thread; reading it does not clear it.
/// Never NULL.
#[unsafe(no_mangle)]
pub extern "C" fn fencelock_last_error() -> *const c_char {
    LAST_ERROR.with(|e| e.borrow().as_ptr())
}

#[cfg(test)]
mod tests {
    use super::*;
    use fencelock::ErrorKind;

    #[test]
    fn statuses_match_the_core_codes() {
        for kind in ErrorKind::ALL {
            let status = fencelock_status::from_code(kind.code());
            assert_eq!(status as u32, kind.code());
        }
        assert_eq!(fencelock_status::from_code(STATUS_BUSY), fencelock_status::FENCELOCK_BUSY);
    }

    #[test]
    fn a_panic_is_internal_with_a_message() {
        let status = call("some_fn", || panic!("boom"));
        assert_eq!(status, fencelock_status::FENCELOCK_INTERNAL);
        // SAFETY: fencelock_last_error never returns NULL and the string lives until the next failure here.
        let msg = unsafe { std::ffi::CStr::from_ptr(fencelock_last_error()) }.to_str().unwrap().to_owned();
        assert!(msg.contains("boom") && msg.contains("some_fn: "), "{msg}");
    }
}
