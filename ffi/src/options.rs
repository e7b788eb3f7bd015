//! `fencelock_lock_options` and `fencelock_client_options` and their conversions to core's `LockOptions` and
//! `ClientOptions`; the default owner is the calling thread.

use std::collections::BTreeSet;
use std::ffi::{c_char, c_int};
use std::ptr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use fencelock::{ClientOptions, DEFAULT_TTL, Error, ErrorKind, LockOptions, MetricsNames, Result};

use crate::args;

/// `timeout_ms` value that makes `fencelock_lock` wait until the lock is free (the default).
pub const FENCELOCK_WAIT_FOREVER: u64 = u64::MAX;

/// Options of one `fencelock_lock` / `fencelock_try_lock` call. Start from `fencelock_lock_options_default()`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct fencelock_lock_options {
    /// Lease time to live in milliseconds (1 ms to 24 h). Default 30000.
    pub ttl_ms: u64,
    /// How long `fencelock_lock` waits for the holder to let go, in milliseconds; `FENCELOCK_WAIT_FOREVER` (the
    /// default) waits until it is free. Ignored by `fencelock_try_lock`.
    pub timeout_ms: u64,
    /// Renew the lease every ttl/3 in the background until it is released. Default true.
    pub watchdog: bool,
    /// Reentrancy key, UTF-8: a second lock of the same name by the same owner on the same client returns at once
    /// with the same fence token. NULL (the default) means the calling thread.
    pub owner: *const c_char,
    /// Wait order where the backend offers both (Redis): 0 (the default) the backend's default, > 0 arrival order
    /// among all clients, < 0 none.
    pub fair: c_int,
}

/// The default options: ttl 30 s, wait forever, watchdog on, owner = the calling thread.
#[unsafe(no_mangle)]
pub extern "C" fn fencelock_lock_options_default() -> fencelock_lock_options {
    fencelock_lock_options {
        ttl_ms: DEFAULT_TTL.as_millis() as u64,
        timeout_ms: FENCELOCK_WAIT_FOREVER,
        watchdog: true,
        owner: ptr::null(),
        fair: 0,
    }
}

/// Options of `fencelock_client_connect_with`. Start from `fencelock_client_options_default()`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct fencelock_client_options {
    /// How long connecting may take, in milliseconds. Default 5000.
    pub connect_timeout_ms: u64,
    /// How long one backend request may take, in milliseconds. Default 5000.
    pub request_timeout_ms: u64,
    /// Record metrics (`fencelock_client_metrics`). Default true; false makes recording free and every figure 0.
    pub metrics: bool,
    /// Give every lock name series of its own in the metrics text and JSON, up to 1000 names (later ones are summed
    /// under `_other`). Default false: names are unbounded, so none become labels unless opted in.
    pub metrics_all_names: bool,
    /// A NULL-terminated array of the lock names that get series of their own (UTF-8), or NULL (the default) for
    /// none. Copied at connect. Setting it and `metrics_all_names` together is `FENCELOCK_INVALID_ARGUMENT`.
    pub metrics_names: *const *const c_char,
}

/// The default client options: 5 s to connect, 5 s per request, metrics on, no lock names as labels.
#[unsafe(no_mangle)]
pub extern "C" fn fencelock_client_options_default() -> fencelock_client_options {
    let d = ClientOptions::default();
    fencelock_client_options {
        connect_timeout_ms: d.connect_timeout.as_millis() as u64,
        request_timeout_ms: d.request_timeout.as_millis() as u64,
        metrics: d.metrics,
        metrics_all_names: false,
        metrics_names: ptr::null(),
    }
}

/// Core client options from C options; NULL means the defaults.
///
/// # Safety
/// `opts` is NULL or points to a valid `fencelock_client_options` whose `metrics_names` is NULL or a NULL-terminated
/// array of NUL-terminated strings.
pub(crate) unsafe fn client_options(opts: *const fencelock_client_options) -> Result<ClientOptions> {
    // SAFETY: the caller's promise.
    let o = unsafe { opts.as_ref() }.copied().unwrap_or_else(|| fencelock_client_options_default());
    // SAFETY: the caller's promise.
    let names = match (o.metrics_all_names, unsafe { names_list(o.metrics_names) }?) {
        (true, Some(_)) => {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                "options.metrics_all_names and options.metrics_names are both set: choose one",
            ));
        }
        (true, None) => MetricsNames::All,
        (false, Some(list)) => MetricsNames::Only(list),
        (false, None) => MetricsNames::None,
    };
    Ok(ClientOptions::default()
        .connect_timeout(Duration::from_millis(o.connect_timeout_ms))
        .request_timeout(Duration::from_millis(o.request_timeout_ms))
        .metrics(o.metrics)
        .metrics_names(names))
}

/// The strings of a NULL-terminated array; NULL is `None`.
///
/// # Safety
/// `list` is NULL or a NULL-terminated array of NUL-terminated strings.
unsafe fn names_list(list: *const *const c_char) -> Result<Option<BTreeSet<String>>> {
    if list.is_null() {
        return Ok(None);
    }
    let mut names = BTreeSet::new();
    for i in 0.. {
        // SAFETY: the array's entries up to its NULL terminator are readable, by the caller's promise.
        let p = unsafe { *list.add(i) };
        if p.is_null() {
            break;
        }
        // SAFETY: a non-NULL entry is a NUL-terminated string.
        names.insert(unsafe { args::string(p, &format!("options.metrics_names[{i}]")) }?.to_owned());
    }
    Ok(Some(names))
}

static NEXT_THREAD: AtomicU64 = AtomicU64::new(1);

thread_local! {
    // C's default owner (DESIGN.md §4): one id per thread, so a thread's second lock of a name is reentrant.
    static THREAD_OWNER: String = format!("thread-{}", NEXT_THREAD.fetch_add(1, Ordering::Relaxed));
}

/// Core options from C options; NULL means the defaults.
///
/// # Safety
/// `opts` is NULL or points to a valid `fencelock_lock_options` whose `owner` is NULL or a NUL-terminated string.
pub(crate) unsafe fn lock_options(opts: *const fencelock_lock_options) -> Result<LockOptions> {
    // SAFETY: the caller's promise.
    let o = unsafe { opts.as_ref() }.copied().unwrap_or_else(|| fencelock_lock_options_default());
    let mut lo = LockOptions::default().ttl(Duration::from_millis(o.ttl_ms)).watchdog(o.watchdog);
    if o.timeout_ms != FENCELOCK_WAIT_FOREVER {
        lo = lo.timeout(Duration::from_millis(o.timeout_ms));
    }
    if o.fair != 0 {
        lo = lo.fair(o.fair > 0);
    }
    // SAFETY: the caller's promise.
    let owner = match unsafe { args::opt_string(o.owner, "options.owner") }? {
        Some(owner) => owner.to_owned(),
        None => THREAD_OWNER.with(String::clone),
    };
    Ok(lo.owner(owner))
}
