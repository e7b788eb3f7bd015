//! `fencelock_lease`: fence token, renew, release, validity, the lost callback, free.

use std::ffi::c_void;
use std::time::Duration;

use fencelock::{Lease, LeaseEnd};
use fencelock_bridge::{block_on, handle, on_runtime_thread, spawn};

use crate::args;
use crate::status::{call, fencelock_status};

/// A held lock. Any thread may use it (ownership is not tied to a thread). It keeps its client alive.
#[derive(Debug)]
pub struct fencelock_lease {
    lease: Lease,
}

pub(crate) fn into_raw(lease: Lease) -> *mut fencelock_lease {
    Box::into_raw(Box::new(fencelock_lease { lease }))
}

impl fencelock_lease {
    pub(crate) fn lease(&self) -> &Lease {
        &self.lease
    }
}

/// Drops `value` with the shared runtime entered, so anything its destructor spawns (a background release, closing
/// connections) has a runtime to run on.
pub(crate) fn drop_in_runtime<T>(value: T) {
    match handle() {
        Ok(h) => {
            let _entered = h.enter();
            drop(value);
        }
        Err(_) => drop(value),
    }
}

/// The fencing token of the lease: larger than every earlier grant's on this lock and backend. Pass it to
/// `fencelock_fence_write` or your own store's guard. Readable after release; 0 for NULL.
///
/// # Safety
/// `lease` is NULL or a live lease.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_lease_fence(lease: *const fencelock_lease) -> u64 {
    // SAFETY: the caller's promise.
    unsafe { lease.as_ref() }.map_or(0, |l| l.lease.fence())
}

/// Extends the lease to `ttl_ms` from now; 0 keeps its current TTL. `FENCELOCK_LOCK_LOST` if it is no longer ours,
/// `FENCELOCK_NOT_HELD` if it was released.
///
/// # Safety
/// `lease` is NULL or a live lease.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_lease_renew(lease: *const fencelock_lease, ttl_ms: u64) -> fencelock_status {
    call("fencelock_lease_renew", || {
        let lease = unsafe { args::handle(lease, "lease") }?;
        let ttl = (ttl_ms != 0).then(|| Duration::from_millis(ttl_ms));
        block_on(lease.lease.renew(ttl))??;
        Ok(fencelock_status::FENCELOCK_OK)
    })
}

/// Releases the lease. `FENCELOCK_NOT_HELD` if it was already released; `FENCELOCK_LOCK_LOST` if the lock was lost
/// while held (the critical section was not protected). The handle still needs `fencelock_lease_free`.
///
/// # Safety
/// `lease` is NULL or a live lease.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_lease_release(lease: *const fencelock_lease) -> fencelock_status {
    call("fencelock_lease_release", || {
        let lease = unsafe { args::handle(lease, "lease") }?;
        block_on(lease.lease.release())??;
        Ok(fencelock_status::FENCELOCK_OK)
    })
}

/// Stores in `*out` whether the lease is still ours by our own clock: not released, not lost, validity not passed.
///
/// # Safety
/// `lease` is NULL or a live lease; `out` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_lease_is_valid(lease: *const fencelock_lease, out: *mut bool) -> fencelock_status {
    call("fencelock_lease_is_valid", || {
        let out = unsafe { args::out(out, "out", false) }?;
        let lease = unsafe { args::handle(lease, "lease") }?;
        *out = lease.lease.is_valid();
        Ok(fencelock_status::FENCELOCK_OK)
    })
}

/// A `user_data` pointer carried to a runtime thread; the caller vouches that the callback may use it there.
struct UserData(*mut c_void);
// SAFETY: fencelock_lease_on_lost documents that the callback runs on another thread with this pointer.
unsafe impl Send for UserData {}
impl UserData {
    fn get(self) -> *mut c_void {
        self.0
    }
}

/// Calls `cb(user_data)` once if the lease is lost (never if it is released first; at once if it is already lost).
/// The callback runs on a fencelock runtime thread, not the caller's: it must be quick and thread-safe, and must not
/// call blocking fencelock functions (they return `FENCELOCK_INTERNAL` there). Freeing the lease cancels a callback
/// that has not run yet (core's lost signal ends as released then). Each call registers one more callback. The reason
/// of the loss: `fencelock_lease_lost_reason`.
///
/// # Safety
/// `lease` is NULL or a live lease; `cb` is NULL or a function safe to call from another thread with `user_data`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_lease_on_lost(
    lease: *const fencelock_lease,
    cb: Option<unsafe extern "C" fn(user_data: *mut c_void)>,
    user_data: *mut c_void,
) -> fencelock_status {
    call("fencelock_lease_on_lost", || {
        let lease = unsafe { args::handle(lease, "lease") }?;
        let cb = cb.ok_or_else(|| fencelock::Error::new(fencelock::ErrorKind::InvalidArgument, "cb is NULL"))?;
        let lost = lease.lease.lost();
        let data = UserData(user_data);
        spawn(async move {
            if let LeaseEnd::Lost(_) = lost.await {
                // SAFETY: the caller's promise about cb and user_data.
                unsafe { cb(data.get()) };
            }
        })?;
        Ok(fencelock_status::FENCELOCK_OK)
    })
}

/// Copies core's reason for the loss of `lease` into `buf` (at most `len` bytes with the NUL, truncated on a UTF-8
/// boundary) and stores in `*out_len` the length of the whole reason; 0 and an empty string while it is not lost.
///
/// # Safety
/// `lease` is NULL or a live lease; `buf` NULL or writable for `len` bytes; `out_len` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_lease_lost_reason(
    lease: *const fencelock_lease,
    buf: *mut std::ffi::c_char,
    len: usize,
    out_len: *mut usize,
) -> fencelock_status {
    call("fencelock_lease_lost_reason", || {
        let out_len = unsafe { args::out(out_len, "out_len", 0) }?;
        let lease = unsafe { args::handle(lease, "lease") }?;
        let reason = lease.lease.lost_reason().unwrap_or_default();
        *out_len = reason.len();
        if !buf.is_null() && len > 0 {
            let mut n = reason.len().min(len - 1);
            while !reason.is_char_boundary(n) {
                n -= 1;
            }
            // SAFETY: the caller's promise: `buf` is writable for `len` > n bytes.
            unsafe {
                std::ptr::copy_nonoverlapping(reason.as_ptr(), buf.cast::<u8>(), n);
                *buf.add(n) = 0;
            }
        }
        Ok(fencelock_status::FENCELOCK_OK)
    })
}

/// Frees the lease handle. An unreleased lease is released first (from a runtime thread, in the background).
/// Callbacks registered with `fencelock_lease_on_lost` that have not run are cancelled. NULL is ignored.
///
/// # Safety
/// `lease` is NULL or a live lease not used after this call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_lease_free(lease: *mut fencelock_lease) {
    if lease.is_null() {
        return;
    }
    // SAFETY: made by Box::into_raw in into_raw, freed once by the caller's promise.
    let lease = unsafe { Box::from_raw(lease) };
    crate::status::quietly(move || {
        if !on_runtime_thread() {
            // NotHeld (already released) and other errors are expected here; the record expires after its TTL.
            let _ = block_on(lease.lease.release());
        }
        // Otherwise Lease's destructor releases it in the background.
        drop_in_runtime(lease);
    });
}
