//! `fencelock_client`: connect, lock, try_lock, fence, force_release, close, free.

use std::ffi::c_char;
use std::ptr;

use fencelock::{Client, Lease, LockOptions};
use fencelock_bridge::block_on;

use crate::fence::fencelock_fence;
use crate::lease::fencelock_lease;
use crate::options::{client_options, fencelock_client_options, fencelock_lock_options, lock_options};
use crate::status::{busy, call, fencelock_status};
use crate::{args, fence, lease};

/// A connection to one lock backend. Thread-safe: share one client between threads. Leases and fences made from it
/// keep it alive, so they stay usable after `fencelock_client_free`.
#[derive(Debug)]
pub struct fencelock_client {
    pub(crate) client: Client,
}

/// Connects to the backend `url` names (`sqlite:PATH`, `redis://HOST:PORT`, `postgres://…`, `etcd://…`, `zk://…`,
/// `redlock://…`, `memory://NAME`). NULL uses `FENCELOCK_URL`, else the SQLite file `fencelock.db` in the working
/// directory. On success stores a new client in `*out` (free it with `fencelock_client_free`); on failure `*out` is
/// NULL. `FENCELOCK_INVALID_ARGUMENT` for a bad URL, `FENCELOCK_UNAVAILABLE` if the backend cannot be reached.
///
/// # Safety
/// `url` is NULL or a NUL-terminated string; `out` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_client_connect(
    url: *const c_char,
    out: *mut *mut fencelock_client,
) -> fencelock_status {
    call("fencelock_client_connect", || unsafe { connect(url, ptr::null(), out) })
}

/// `fencelock_client_connect` with options: `opts->connect_timeout_ms` bounds the connect,
/// `opts->request_timeout_ms` every backend request, `opts->metrics` and the `metrics_*names` fields choose what
/// `fencelock_client_metrics` records. `opts` NULL means `fencelock_client_options_default()`.
///
/// # Safety
/// As for `fencelock_client_connect`; `opts` NULL or valid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_client_connect_with(
    url: *const c_char,
    opts: *const fencelock_client_options,
    out: *mut *mut fencelock_client,
) -> fencelock_status {
    call("fencelock_client_connect_with", || unsafe { connect(url, opts, out) })
}

/// # Safety
/// As for `fencelock_client_connect_with`.
unsafe fn connect(
    url: *const c_char,
    opts: *const fencelock_client_options,
    out: *mut *mut fencelock_client,
) -> fencelock::Result<fencelock_status> {
    let out = unsafe { args::out(out, "out", ptr::null_mut()) }?;
    let url = unsafe { args::opt_string(url, "url") }?.map_or_else(fencelock::default_url, str::to_string);
    let opts = unsafe { client_options(opts) }?;
    let client = block_on(Client::connect_with(&url, &opts))??;
    *out = Box::into_raw(Box::new(fencelock_client { client }));
    Ok(fencelock_status::FENCELOCK_OK)
}

/// Takes the lock `name`, waiting up to `opts->timeout_ms` (forever by default); `opts` NULL means
/// `fencelock_lock_options_default()`. On success stores a new lease in `*out` (free it with
/// `fencelock_lease_free`). `FENCELOCK_TIMEOUT` if it stayed taken; `*out` is NULL on any failure.
///
/// # Safety
/// `client` is NULL or a live client; `name` NULL or a NUL-terminated string; `opts` NULL or valid; `out` NULL or
/// writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_lock(
    client: *const fencelock_client,
    name: *const c_char,
    opts: *const fencelock_lock_options,
    out: *mut *mut fencelock_lease,
) -> fencelock_status {
    call("fencelock_lock", || unsafe {
        acquire_with("fencelock_lock", client, name, opts, out, |c, name, opts| async move {
            c.lock(&name, &opts).await.map(Some)
        })
    })
}

/// One attempt to take the lock `name`: `FENCELOCK_OK` and a new lease in `*out`, or `FENCELOCK_BUSY` (and NULL)
/// if someone else holds it. `opts->timeout_ms` is ignored; `opts` NULL means the defaults.
///
/// # Safety
/// As for `fencelock_lock`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_try_lock(
    client: *const fencelock_client,
    name: *const c_char,
    opts: *const fencelock_lock_options,
    out: *mut *mut fencelock_lease,
) -> fencelock_status {
    call("fencelock_try_lock", || unsafe {
        acquire_with("fencelock_try_lock", client, name, opts, out, |c, name, opts| async move {
            c.try_lock(&name, &opts).await
        })
    })
}

/// The body of every entry point that makes a lease (`func`): checks the arguments, runs `acquire` with the
/// client, the name and the options, and stores the lease in `*out`; `None` (one attempt found it taken) is
/// `FENCELOCK_BUSY`.
///
/// # Safety
/// As for `fencelock_lock`.
pub(crate) unsafe fn acquire_with<F, Fut>(
    func: &str,
    client: *const fencelock_client,
    name: *const c_char,
    opts: *const fencelock_lock_options,
    out: *mut *mut fencelock_lease,
    acquire: F,
) -> fencelock::Result<fencelock_status>
where
    F: FnOnce(Client, String, LockOptions) -> Fut,
    Fut: Future<Output = fencelock::Result<Option<Lease>>>,
{
    let out = unsafe { args::out(out, "out", ptr::null_mut()) }?;
    let client = unsafe { args::handle(client, "client") }?;
    let name = unsafe { args::string(name, "name") }?;
    let opts = unsafe { lock_options(opts) }?;
    match block_on(acquire(client.client.clone(), name.to_string(), opts))?? {
        Some(lease) => {
            *out = lease::into_raw(lease);
            Ok(fencelock_status::FENCELOCK_OK)
        }
        None => Ok(busy(func, name)),
    }
}

/// The fenced register `resource`, stored in the client's backend: stores a new handle in `*out` (free it with
/// `fencelock_fence_free`). The name is checked when the fence is used.
///
/// # Safety
/// `client` NULL or a live client; `resource` NULL or a NUL-terminated string; `out` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_client_fence(
    client: *const fencelock_client,
    resource: *const c_char,
    out: *mut *mut fencelock_fence,
) -> fencelock_status {
    call("fencelock_client_fence", || {
        let out = unsafe { args::out(out, "out", ptr::null_mut()) }?;
        let client = unsafe { args::handle(client, "client") }?;
        let resource = unsafe { args::string(resource, "resource") }?;
        *out = fence::into_raw(client.client.fence(resource));
        Ok(fencelock_status::FENCELOCK_OK)
    })
}

/// Deletes the lock record `name` whoever holds it (an operator's tool): the holder's lease is lost at its next
/// renewal. Stores in `*out_deleted` whether there was a record. The fence counter is kept, so tokens still rise.
///
/// # Safety
/// `client` NULL or a live client; `name` NULL or a NUL-terminated string; `out_deleted` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_client_force_release(
    client: *const fencelock_client,
    name: *const c_char,
    out_deleted: *mut bool,
) -> fencelock_status {
    call("fencelock_client_force_release", || {
        let out_deleted = unsafe { args::out(out_deleted, "out_deleted", false) }?;
        let client = unsafe { args::handle(client, "client") }?;
        let name = unsafe { args::string(name, "name") }?;
        *out_deleted = block_on(client.client.force_release(name))??;
        Ok(fencelock_status::FENCELOCK_OK)
    })
}

/// Releases every lease the client holds and closes its connections. Later calls on it, its leases and its fences
/// fail with `FENCELOCK_CLOSED`. Closing twice is fine. The handle itself still needs `fencelock_client_free`.
///
/// # Safety
/// `client` is NULL or a live client.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_client_close(client: *const fencelock_client) -> fencelock_status {
    call("fencelock_client_close", || {
        let client = unsafe { args::handle(client, "client") }?;
        block_on(client.client.close())?;
        Ok(fencelock_status::FENCELOCK_OK)
    })
}

/// Frees the client handle. It does not close the client: leases and fences still alive keep the connection until
/// they are freed too. NULL is ignored.
///
/// # Safety
/// `client` is NULL or a live client not used after this call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_client_free(client: *mut fencelock_client) {
    if client.is_null() {
        return;
    }
    // SAFETY: a handle made by Box::into_raw in fencelock_client_connect, freed once by the caller's promise.
    let client = unsafe { Box::from_raw(client) };
    crate::status::quietly(move || crate::lease::drop_in_runtime(client));
}
