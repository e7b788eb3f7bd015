//! Read-write locks and semaphores (DESIGN.md §4b): `fencelock_rw_lock`, `fencelock_try_rw_lock`,
//! `fencelock_semaphore_acquire`, `fencelock_semaphore_try_acquire`, `fencelock_semaphore_available`. Their holds
//! are `fencelock_lease`s like a mutex's; a permit's slot is `fencelock_lease_slot`.

use std::ffi::{c_char, c_int};

use fencelock::{Error, ErrorKind, HoldKind};
use fencelock_bridge::block_on;

use crate::args;
use crate::client::{acquire_with, fencelock_client};
use crate::lease::fencelock_lease;
use crate::options::fencelock_lock_options;
use crate::status::{call, fencelock_status};

/// `mode` of `fencelock_rw_lock`: a read hold, shared with other readers.
pub const FENCELOCK_READ: c_int = 1;
/// `mode` of `fencelock_rw_lock`: the write hold, alone.
pub const FENCELOCK_WRITE: c_int = 2;

/// The side of the read-write lock `mode` names.
fn side(mode: c_int) -> fencelock::Result<HoldKind> {
    match mode {
        FENCELOCK_READ => Ok(HoldKind::Read),
        FENCELOCK_WRITE => Ok(HoldKind::Write),
        _ => Err(Error::new(
            ErrorKind::InvalidArgument,
            format!("mode is {mode}: use FENCELOCK_READ ({FENCELOCK_READ}) or FENCELOCK_WRITE ({FENCELOCK_WRITE})"),
        )),
    }
}

/// The side `mode` of the read-write lock `name` through `hold`.
///
/// # Safety
/// As for `fencelock_lock`.
unsafe fn rw(
    func: &str,
    client: *const fencelock_client,
    name: *const c_char,
    mode: c_int,
    opts: *const fencelock_lock_options,
    out: *mut *mut fencelock_lease,
    once: bool,
) -> fencelock::Result<fencelock_status> {
    unsafe { hold(func, client, name, side(mode), opts, out, once) }
}

/// A hold of `kind` (the bad mode it may be, checked after the out-parameter is cleared) by the bridge's dispatch.
///
/// # Safety
/// As for `fencelock_lock`.
unsafe fn hold(
    func: &str,
    client: *const fencelock_client,
    name: *const c_char,
    kind: fencelock::Result<HoldKind>,
    opts: *const fencelock_lock_options,
    out: *mut *mut fencelock_lease,
    once: bool,
) -> fencelock::Result<fencelock_status> {
    unsafe {
        acquire_with(func, client, name, opts, out, |c, name, opts| async move {
            fencelock_bridge::hold(&c, &name, kind?, &opts, once).await
        })
    }
}

/// A hold of the read-write lock `name`: `mode` `FENCELOCK_READ` (many readers at once) or `FENCELOCK_WRITE` (alone;
/// a waiting writer blocks new readers). Waits up to `opts->timeout_ms`; `opts` NULL means the defaults. On success
/// a new lease in `*out` (free it with `fencelock_lease_free`); readers whose holds overlap share one fence token.
/// A writer may also take the read lock with the same owner (a downgrade); a reader asking for the write lock with
/// its owner gets `FENCELOCK_INVALID_ARGUMENT`. `FENCELOCK_UNSUPPORTED` if the backend has no read-write locks.
///
/// # Safety
/// As for `fencelock_lock`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_rw_lock(
    client: *const fencelock_client,
    name: *const c_char,
    mode: c_int,
    opts: *const fencelock_lock_options,
    out: *mut *mut fencelock_lease,
) -> fencelock_status {
    call("fencelock_rw_lock", || unsafe { rw("fencelock_rw_lock", client, name, mode, opts, out, false) })
}

/// One attempt at `fencelock_rw_lock`: `FENCELOCK_OK` and a lease, or `FENCELOCK_BUSY` (and NULL) while a writer
/// holds or waits (read) or anyone holds (write).
///
/// # Safety
/// As for `fencelock_lock`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_try_rw_lock(
    client: *const fencelock_client,
    name: *const c_char,
    mode: c_int,
    opts: *const fencelock_lock_options,
    out: *mut *mut fencelock_lease,
) -> fencelock_status {
    call("fencelock_try_rw_lock", || unsafe { rw("fencelock_try_rw_lock", client, name, mode, opts, out, true) })
}

/// A permit of the semaphore `name` of `permits` permits (every client of the name must use the same number, else
/// `FENCELOCK_INVALID_ARGUMENT` naming both). Waits up to `opts->timeout_ms` while all are held. The lease's fence
/// token is its slot's own counter; `fencelock_lease_slot` gives the slot (0…permits−1). A crashed holder's permit
/// comes back after its TTL.
///
/// # Safety
/// As for `fencelock_lock`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_semaphore_acquire(
    client: *const fencelock_client,
    name: *const c_char,
    permits: u32,
    opts: *const fencelock_lock_options,
    out: *mut *mut fencelock_lease,
) -> fencelock_status {
    call("fencelock_semaphore_acquire", || unsafe {
        hold("fencelock_semaphore_acquire", client, name, Ok(HoldKind::Permit { permits }), opts, out, false)
    })
}

/// One attempt at `fencelock_semaphore_acquire`: `FENCELOCK_OK` and a lease, or `FENCELOCK_BUSY` (and NULL) while
/// every permit is held.
///
/// # Safety
/// As for `fencelock_lock`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_semaphore_try_acquire(
    client: *const fencelock_client,
    name: *const c_char,
    permits: u32,
    opts: *const fencelock_lock_options,
    out: *mut *mut fencelock_lease,
) -> fencelock_status {
    call("fencelock_semaphore_try_acquire", || unsafe {
        hold("fencelock_semaphore_try_acquire", client, name, Ok(HoldKind::Permit { permits }), opts, out, true)
    })
}

/// Stores in `*out_count` how many of the semaphore's `permits` permits nobody holds now.
///
/// # Safety
/// `client` NULL or a live client; `name` NULL or a NUL-terminated string; `out_count` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_semaphore_available(
    client: *const fencelock_client,
    name: *const c_char,
    permits: u32,
    out_count: *mut u32,
) -> fencelock_status {
    call("fencelock_semaphore_available", || {
        let out_count = unsafe { args::out(out_count, "out_count", 0) }?;
        let client = unsafe { args::handle(client, "client") }?;
        let name = unsafe { args::string(name, "name") }?;
        *out_count = block_on(client.client.semaphore(name, permits).available())??;
        Ok(fencelock_status::FENCELOCK_OK)
    })
}

/// The semaphore slot (0…permits−1) a permit's lease occupies; -1 for a lease of another kind, or NULL.
///
/// # Safety
/// `lease` is NULL or a live lease.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_lease_slot(lease: *const fencelock_lease) -> i64 {
    // SAFETY: the caller's promise.
    unsafe { lease.as_ref() }.and_then(|l| l.lease().slot()).map_or(-1, i64::from)
}
