//! What a client and a lease tell about themselves: `fencelock_client_capability`, `fencelock_client_inspect`,
//! `fencelock_client_local_entries`, `fencelock_lease_remaining_ms`, `fencelock_lease_is_lost`. Thin reads of core's
//! `Client::capability`, `inspect`, `local_entries` and `Lease::remaining`, `is_lost`.

use std::ffi::c_char;
use std::ptr;

use fencelock_bridge::block_on;

use crate::client::fencelock_client;
use crate::lease::fencelock_lease;
use crate::status::{call, fencelock_status};
use crate::{args, text};

/// What the client's backend offers (core's `Capability`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct fencelock_capability {
    /// Grants carry fencing tokens that rise per lock name.
    pub fencing: bool,
    /// Waiters are woken by the backend (pub/sub, watch, LISTEN) rather than by polling.
    pub native_wait: bool,
    /// Waiters across clients can be served in arrival order.
    pub fair: bool,
    /// Leases are bound to a session (ZooKeeper) rather than to a per-lock TTL.
    pub session_bound: bool,
    /// Read-write locks (`fencelock_rw_lock`).
    pub rw_lock: bool,
    /// Semaphores (`fencelock_semaphore_acquire`).
    pub semaphore: bool,
    /// Leader elections (`fencelock_campaign`).
    pub election: bool,
}

/// Fills `*out` with what the client's backend offers; all false on failure.
///
/// # Safety
/// `client` NULL or a live client; `out` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_client_capability(
    client: *const fencelock_client,
    out: *mut fencelock_capability,
) -> fencelock_status {
    call("fencelock_client_capability", || {
        let out = unsafe { args::out(out, "out", fencelock_capability::default()) }?;
        let client = unsafe { args::handle(client, "client") }?;
        let c = client.client.capability();
        *out = fencelock_capability {
            fencing: c.fencing,
            native_wait: c.native_wait,
            fair: c.fair,
            session_bound: c.session_bound,
            rw_lock: c.rw_lock,
            semaphore: c.semaphore,
            election: c.election,
        };
        Ok(fencelock_status::FENCELOCK_OK)
    })
}

/// Reads the mutex record `name` on the backend: stores in `*out_held` whether someone holds it and, if
/// `out_holder` is not NULL, the holder (`<client id>:<owner>`, a new string to free with `fencelock_string_free`;
/// NULL when free).
///
/// # Safety
/// `client` NULL or a live client; `name` NULL or a NUL-terminated string; `out_held` NULL or writable;
/// `out_holder` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_client_inspect(
    client: *const fencelock_client,
    name: *const c_char,
    out_held: *mut bool,
    out_holder: *mut *mut c_char,
) -> fencelock_status {
    call("fencelock_client_inspect", || {
        let out_held = unsafe { args::out(out_held, "out_held", false) }?;
        let mut holder_out = None;
        if !out_holder.is_null() {
            holder_out = Some(unsafe { args::out(out_holder, "out_holder", ptr::null_mut()) }?);
        }
        let client = unsafe { args::handle(client, "client") }?;
        let name = unsafe { args::string(name, "name") }?;
        let info = block_on(client.client.inspect(name))??;
        *out_held = info.holder.is_some();
        if let (Some(out), Some(holder)) = (holder_out, info.holder) {
            *out = text::into_raw(holder)?;
        }
        Ok(fencelock_status::FENCELOCK_OK)
    })
}

/// Stores in `*out` how many entries the client's local lock table has (holds and waiting calls): 0 once every
/// lease is released and no call waits.
///
/// # Safety
/// `client` NULL or a live client; `out` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_client_local_entries(
    client: *const fencelock_client,
    out: *mut usize,
) -> fencelock_status {
    call("fencelock_client_local_entries", || {
        let out = unsafe { args::out(out, "out", 0) }?;
        let client = unsafe { args::handle(client, "client") }?;
        *out = client.client.local_entries();
        Ok(fencelock_status::FENCELOCK_OK)
    })
}

/// How long the lease stays valid by our own clock, in milliseconds (0 once it passed, and for NULL).
///
/// # Safety
/// `lease` is NULL or a live lease.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_lease_remaining_ms(lease: *const fencelock_lease) -> u64 {
    // SAFETY: the caller's promise.
    unsafe { lease.as_ref() }.map_or(0, |l| u64::try_from(l.lease().remaining().as_millis()).unwrap_or(u64::MAX))
}

/// Whether the lease was lost: its lost signal fired, or its validity passed without a renewal, which fires
/// the signal now (see `fencelock_lease_on_lost`). False for NULL.
///
/// # Safety
/// `lease` is NULL or a live lease.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_lease_is_lost(lease: *const fencelock_lease) -> bool {
    // SAFETY: the caller's promise.
    unsafe { lease.as_ref() }.is_some_and(|l| l.lease().is_lost())
}
