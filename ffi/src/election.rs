//! Leader election (DESIGN.md §4b): `fencelock_campaign`, `fencelock_try_campaign`, `fencelock_proclaim`,
//! `fencelock_leader`, `fencelock_observe` and `fencelock_observer_close`. A leadership is a `fencelock_lease`: its
//! fence token (`fencelock_lease_fence`) is the term, and `fencelock_lease_release` resigns. Thin calls of the
//! bridge's `campaign`, `proclaim`, `leader` and `Observer`.

use std::cell::Cell;
use std::ffi::{c_char, c_void};
use std::ptr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use fencelock::{Error, ErrorKind, Leader};
use fencelock_bridge::{Observer, block_on, on_runtime_thread, spawn};
use tokio::task::JoinHandle;

use crate::args;
use crate::client::{acquire_with, fencelock_client};
use crate::lease::fencelock_lease;
use crate::options::fencelock_lock_options;
use crate::status::{call, fail, fencelock_status};

/// A campaign through `acquire_with`: the value is checked after the out-parameter is cleared.
///
/// # Safety
/// As for `fencelock_campaign`.
#[expect(clippy::too_many_arguments, reason = "the C signature's arguments and the call's name and mode")]
unsafe fn campaign(
    func: &str,
    client: *const fencelock_client,
    name: *const c_char,
    value: *const u8,
    value_len: usize,
    opts: *const fencelock_lock_options,
    out: *mut *mut fencelock_lease,
    once: bool,
) -> fencelock::Result<fencelock_status> {
    let value = unsafe { args::bytes(value, value_len, "value") }.map(<[u8]>::to_vec);
    unsafe {
        acquire_with(func, client, name, opts, out, |c, name, opts| async move {
            fencelock_bridge::campaign(&c, &name, &value?, &opts, once).await
        })
    }
}

/// Campaigns in the election `name` with the leader's value (`value_len` bytes at `value`, at most 65536; `value`
/// may be NULL only when `value_len` is 0), waiting up to `opts->timeout_ms` while another leads; `opts` NULL means
/// the defaults. On success a new lease in `*out`, the leadership: its fence token (`fencelock_lease_fence`) is the
/// term, higher than every earlier leader's; it renews, is lost and is freed like any lease, and
/// `fencelock_lease_release` resigns. `FENCELOCK_TIMEOUT` if another still leads (a campaign that fails leaves no
/// candidate behind); `*out` is NULL on any failure.
///
/// # Safety
/// `client` is NULL or a live client; `name` NULL or a NUL-terminated string; `value` NULL or readable for
/// `value_len` bytes; `opts` NULL or valid; `out` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_campaign(
    client: *const fencelock_client,
    name: *const c_char,
    value: *const u8,
    value_len: usize,
    opts: *const fencelock_lock_options,
    out: *mut *mut fencelock_lease,
) -> fencelock_status {
    call("fencelock_campaign", || unsafe {
        campaign("fencelock_campaign", client, name, value, value_len, opts, out, false)
    })
}

/// One attempt at `fencelock_campaign`: `FENCELOCK_OK` and the leadership, or `FENCELOCK_BUSY` (and NULL) while
/// another leads.
///
/// # Safety
/// As for `fencelock_campaign`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_try_campaign(
    client: *const fencelock_client,
    name: *const c_char,
    value: *const u8,
    value_len: usize,
    opts: *const fencelock_lock_options,
    out: *mut *mut fencelock_lease,
) -> fencelock_status {
    call("fencelock_try_campaign", || unsafe {
        campaign("fencelock_try_campaign", client, name, value, value_len, opts, out, true)
    })
}

/// Replaces the value of the leadership `lease` of the election `name` (`value_len` bytes at `value`), keeping its
/// term. `FENCELOCK_NOT_HELD` after a resign, `FENCELOCK_LOCK_LOST` if the leadership was lost,
/// `FENCELOCK_INVALID_ARGUMENT` if `lease` is no leadership of this election.
///
/// # Safety
/// `client` NULL or a live client; `name` NULL or a NUL-terminated string; `lease` NULL or a live lease; `value`
/// NULL or readable for `value_len` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_proclaim(
    client: *const fencelock_client,
    name: *const c_char,
    lease: *const fencelock_lease,
    value: *const u8,
    value_len: usize,
) -> fencelock_status {
    call("fencelock_proclaim", || {
        let client = unsafe { args::handle(client, "client") }?;
        let name = unsafe { args::string(name, "name") }?;
        let lease = unsafe { args::handle(lease, "lease") }?;
        let value = unsafe { args::bytes(value, value_len, "value") }?;
        block_on(fencelock_bridge::proclaim(&client.client, name, lease.lease(), value))??;
        Ok(fencelock_status::FENCELOCK_OK)
    })
}

/// Reads the current leader of the election `name`: `*out_found` whether someone leads, `*out_term` its term (0
/// when nobody does), and, if `out_value` is not NULL, its value: a new buffer in `*out_value` (NULL when empty) of
/// `*out_len` bytes, to free with `fencelock_bytes_free(*out_value, *out_len)`. `out_len` is required with
/// `out_value`.
///
/// # Safety
/// `client` NULL or a live client; `name` NULL or a NUL-terminated string; the out-parameters NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_leader(
    client: *const fencelock_client,
    name: *const c_char,
    out_found: *mut bool,
    out_term: *mut u64,
    out_value: *mut *mut u8,
    out_len: *mut usize,
) -> fencelock_status {
    call("fencelock_leader", || {
        let out_found = unsafe { args::out(out_found, "out_found", false) }?;
        let out_term = unsafe { args::out(out_term, "out_term", 0) }?;
        let mut value_out = None;
        if !out_value.is_null() {
            let v = unsafe { args::out(out_value, "out_value", ptr::null_mut()) }?;
            let n = unsafe { args::out(out_len, "out_len", 0) }?;
            value_out = Some((v, n));
        } else if !out_len.is_null() {
            // SAFETY: the caller's promise: writable.
            unsafe { out_len.write(0) };
        }
        let client = unsafe { args::handle(client, "client") }?;
        let name = unsafe { args::string(name, "name") }?;
        if let Some(leader) = block_on(fencelock_bridge::leader(&client.client, name))?? {
            *out_found = true;
            *out_term = leader.term;
            if let Some((v, n)) = value_out {
                *n = leader.value.len();
                *v = crate::fence::bytes_into_raw(leader.value);
            }
        }
        Ok(fencelock_status::FENCELOCK_OK)
    })
}

/// The callback of `fencelock_observe`: one change of leader. `status` is `FENCELOCK_OK` for a change —
/// `has_leader` false when nobody leads, else the leader's `value` (`len` bytes, valid only during the call; NULL
/// when empty) and `term` — or the error that interrupted the observation (then `has_leader` is false, and
/// `fencelock_last_error()` describes it during the call).
pub type fencelock_observe_callback = Option<
    unsafe extern "C" fn(
        user_data: *mut c_void,
        has_leader: bool,
        value: *const u8,
        len: usize,
        term: u64,
        status: fencelock_status,
    ),
>;

/// A running observation of one election (`fencelock_observe`); stop and free it with `fencelock_observer_close`.
#[derive(Debug)]
pub struct fencelock_observer {
    shared: Arc<Shared>,
    task: Option<JoinHandle<()>>,
}

/// What the observer's task and `fencelock_observer_close` share.
#[derive(Debug)]
struct Shared {
    // Held while the callback runs; false once closed, so no callback starts after close took it.
    open: Mutex<bool>,
    // Set by a close from inside this observer's own callback, which cannot take `open`.
    stopped: AtomicBool,
}

thread_local! {
    // The observer whose callback this thread is running, if any.
    static IN_CALLBACK: Cell<*const Shared> = const { Cell::new(ptr::null()) };
}

/// A `user_data` pointer carried to a runtime thread; the caller vouches that the callback may use it there.
struct UserData(*mut c_void);
// SAFETY: fencelock_observe documents that the callback runs on another thread with this pointer.
unsafe impl Send for UserData {}

/// Delivers one report unless the observer was closed; false when the observation ends here.
fn deliver(
    shared: &Shared,
    cb: unsafe extern "C" fn(*mut c_void, bool, *const u8, usize, u64, fencelock_status),
    data: &UserData,
    report: &fencelock::Result<Option<Leader>>,
) -> bool {
    let open = shared.open.lock().unwrap_or_else(|e| e.into_inner());
    if !*open || shared.stopped.load(Ordering::Acquire) {
        return false;
    }
    IN_CALLBACK.with(|c| c.set(shared));
    let go_on = match report {
        // SAFETY: the caller's promise about cb and user_data; the value lives until the call returns.
        Ok(Some(l)) => {
            let value = if l.value.is_empty() { ptr::null() } else { l.value.as_ptr() };
            unsafe { cb(data.0, true, value, l.value.len(), l.term, fencelock_status::FENCELOCK_OK) };
            true
        }
        Ok(None) => {
            unsafe { cb(data.0, false, ptr::null(), 0, 0, fencelock_status::FENCELOCK_OK) };
            true
        }
        Err(e) => {
            let status = fail("fencelock_observe", e);
            unsafe { cb(data.0, false, ptr::null(), 0, 0, status) };
            // Core's stream goes on after an outage (a reconnect resumes it); any other error ends it.
            e.retryable()
        }
    };
    IN_CALLBACK.with(|c| c.set(ptr::null()));
    drop(open);
    go_on && !shared.stopped.load(Ordering::Acquire)
}

/// Observes the election `name`: `cb(user_data, …)` runs for every change of leader, in order, starting with the
/// current one (a new leader, a proclaimed value, or nobody leading), and never reports a term lower than one it
/// reported. The first read happens in this call: if it fails, so does this call (no callback runs, `*out` is NULL).
/// After that `cb` runs on a fencelock runtime thread, one call at a time: it must be quick and must not call
/// blocking fencelock functions (they return `FENCELOCK_INTERNAL` there). An outage (`FENCELOCK_UNAVAILABLE`,
/// `FENCELOCK_TIMEOUT`) is reported and the observation goes on; any other error (`FENCELOCK_CLOSED` when the
/// client is closed) is reported once and ends it. On success a new observer in `*out`: stop it with
/// `fencelock_observer_close`.
///
/// # Safety
/// `client` NULL or a live client; `name` NULL or a NUL-terminated string; `cb` NULL or a function safe to call from
/// another thread with `user_data`; `out` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_observe(
    client: *const fencelock_client,
    name: *const c_char,
    cb: fencelock_observe_callback,
    user_data: *mut c_void,
    out: *mut *mut fencelock_observer,
) -> fencelock_status {
    call("fencelock_observe", || {
        let out = unsafe { args::out(out, "out", ptr::null_mut()) }?;
        let client = unsafe { args::handle(client, "client") }?;
        let name = unsafe { args::string(name, "name") }?;
        let cb = cb.ok_or_else(|| Error::new(ErrorKind::InvalidArgument, "cb is NULL"))?;
        let observer = Observer::new(&client.client, name);
        let first = block_on(observer.next())??;
        let shared = Arc::new(Shared { open: Mutex::new(true), stopped: AtomicBool::new(false) });
        let data = UserData(user_data);
        let task_shared = Arc::clone(&shared);
        let task = spawn(async move {
            let data = data;
            let mut report = Ok(first);
            while deliver(&task_shared, cb, &data, &report) {
                report = observer.next().await;
            }
        })?;
        *out = Box::into_raw(Box::new(fencelock_observer { shared, task: Some(task) }));
        Ok(fencelock_status::FENCELOCK_OK)
    })
}

/// Stops the observation and frees the observer: no callback runs after this returns (one under way on another
/// thread is waited for). From inside the observer's own callback it stops it too: that call is the last. Do not
/// call it while holding a lock the callback takes, nor from another observer's callback. NULL is ignored.
///
/// # Safety
/// `observer` is NULL or a live observer not used after this call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_observer_close(observer: *mut fencelock_observer) {
    if observer.is_null() {
        return;
    }
    // SAFETY: made by Box::into_raw in fencelock_observe, freed once by the caller's promise.
    let mut observer = unsafe { Box::from_raw(observer) };
    crate::status::quietly(move || {
        let shared = &observer.shared;
        shared.stopped.store(true, Ordering::Release);
        let own = IN_CALLBACK.with(|c| ptr::eq(c.get(), Arc::as_ptr(shared)));
        if !own {
            // Waits for a callback under way; none starts after this.
            *shared.open.lock().unwrap_or_else(|e| e.into_inner()) = false;
        }
        if let Some(task) = observer.task.take() {
            task.abort();
            if !on_runtime_thread() {
                // The task and its clone of the client are gone when this returns.
                let _ = block_on(task);
            }
        }
        crate::lease::drop_in_runtime(observer);
    });
}
