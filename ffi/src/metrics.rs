//! `fencelock_metrics`: core's `MetricsSnapshot` as a plain C struct of fixed fields, plus its Prometheus text and
//! JSON as strings. The conversion only copies figures; their meaning and names are core's.

use std::collections::BTreeMap;
use std::ffi::c_char;
use std::ptr;

use fencelock::metrics::{BUCKET_BOUNDS, HistogramSnapshot};
use fencelock::{Error, ErrorKind, MetricsSnapshot, Result};

use crate::client::fencelock_client;
use crate::status::{call, fencelock_status};
use crate::{args, text};

/// Buckets of every `fencelock_histogram`: core's 19 finite bounds (100 µs to 300 s) and `+Inf`. Bucket `i`'s upper
/// bound in seconds is `fencelock_metrics_bucket_le(i)`.
pub const FENCELOCK_METRICS_BUCKETS: usize = 20;
const _: () = assert!(FENCELOCK_METRICS_BUCKETS == BUCKET_BOUNDS.len() + 1);

/// A histogram of durations.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct fencelock_histogram {
    /// Observations so far.
    pub count: u64,
    /// Their sum, in seconds.
    pub sum_seconds: f64,
    /// Cumulative counts: `buckets[i]` observations took at most `fencelock_metrics_bucket_le(i)` seconds; the last
    /// (`+Inf`) equals `count`.
    pub buckets: [u64; FENCELOCK_METRICS_BUCKETS],
}

/// Time spent in `fencelock_lock` / `fencelock_try_lock`, by outcome.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct fencelock_acquire_wait {
    pub acquired: fencelock_histogram,
    /// A `fencelock_try_lock` that found the lock held.
    pub busy: fencelock_histogram,
    pub timeout: fencelock_histogram,
    /// The caller stopped waiting.
    pub cancelled: fencelock_histogram,
    pub error: fencelock_histogram,
}

/// Round trips of one backend operation: `ok` when the backend answered (refusals included), `error` when not.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct fencelock_op_times {
    pub ok: fencelock_histogram,
    pub error: fencelock_histogram,
}

/// Backend round trips by operation.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct fencelock_backend_ops {
    pub acquire: fencelock_op_times,
    pub renew: fencelock_op_times,
    pub release: fencelock_op_times,
    pub force_release: fencelock_op_times,
    pub inspect: fencelock_op_times,
    pub fence_write: fencelock_op_times,
    pub fence_read: fencelock_op_times,
}

/// Backend renewals (watchdog and explicit) by outcome.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct fencelock_renewals {
    pub ok: u64,
    pub failed: u64,
}

/// Leases lost while held, by reason.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct fencelock_losses {
    /// The TTL passed unrenewed.
    pub expired: u64,
    /// The record was gone or another's.
    pub taken: u64,
    /// No renewal got through within the validity.
    pub unreachable: u64,
}

/// Fenced writes by outcome.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct fencelock_fence_writes {
    pub ok: u64,
    /// A stale token.
    pub refused: u64,
    pub error: u64,
}

/// A client's metrics at one moment (client-wide; per-name series are in the text and JSON). Counters count from
/// the client's connect.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct fencelock_metrics {
    /// Whether the client records at all (`fencelock_client_options.metrics`); when false every figure is 0.
    pub enabled: bool,
    pub acquire_wait: fencelock_acquire_wait,
    /// Time from grant to release or loss.
    pub hold_time: fencelock_histogram,
    /// Grants held now (reentrant holds of one owner count once).
    pub active_leases: u64,
    pub renewals: fencelock_renewals,
    pub lost: fencelock_losses,
    pub fence_writes: fencelock_fence_writes,
    /// Lock calls of this client still waiting, locally or at the backend.
    pub local_queue_depth: u64,
    pub backend_ops: fencelock_backend_ops,
}

/// A key core's snapshot always has; a missing one is a bug here, not a zero.
fn get<'a, T>(map: &'a BTreeMap<String, T>, key: &str) -> Result<&'a T> {
    map.get(key).ok_or_else(|| Error::new(ErrorKind::Internal, format!("the metrics snapshot has no {key:?}")))
}

fn histogram(h: &HistogramSnapshot) -> fencelock_histogram {
    let mut out = fencelock_histogram { count: h.count, sum_seconds: h.sum, ..Default::default() };
    for (slot, bucket) in out.buckets.iter_mut().zip(&h.buckets) {
        *slot = bucket.count;
    }
    out
}

fn op(s: &MetricsSnapshot, name: &str) -> Result<fencelock_op_times> {
    let by = get(&s.backend_ops, name)?;
    Ok(fencelock_op_times { ok: histogram(get(by, "ok")?), error: histogram(get(by, "error")?) })
}

fn convert(s: &MetricsSnapshot) -> Result<fencelock_metrics> {
    let wait = |k| get(&s.acquire_wait, k).map(histogram);
    Ok(fencelock_metrics {
        enabled: s.enabled,
        acquire_wait: fencelock_acquire_wait {
            acquired: wait("acquired")?,
            busy: wait("busy")?,
            timeout: wait("timeout")?,
            cancelled: wait("cancelled")?,
            error: wait("error")?,
        },
        hold_time: histogram(&s.hold_time),
        active_leases: s.active_leases,
        renewals: fencelock_renewals { ok: *get(&s.renewals, "ok")?, failed: *get(&s.renewals, "failed")? },
        lost: fencelock_losses {
            expired: *get(&s.lost, "expired")?,
            taken: *get(&s.lost, "taken")?,
            unreachable: *get(&s.lost, "unreachable")?,
        },
        fence_writes: fencelock_fence_writes {
            ok: *get(&s.fence_writes, "ok")?,
            refused: *get(&s.fence_writes, "refused")?,
            error: *get(&s.fence_writes, "error")?,
        },
        local_queue_depth: s.local_queue_depth,
        backend_ops: fencelock_backend_ops {
            acquire: op(s, "acquire")?,
            renew: op(s, "renew")?,
            release: op(s, "release")?,
            force_release: op(s, "force_release")?,
            inspect: op(s, "inspect")?,
            fence_write: op(s, "fence_write")?,
            fence_read: op(s, "fence_read")?,
        },
    })
}

/// Fills `*out` with the client's metrics now; on failure `*out` is all zeros.
///
/// # Safety
/// `client` NULL or a live client; `out` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_client_metrics(
    client: *const fencelock_client,
    out: *mut fencelock_metrics,
) -> fencelock_status {
    call("fencelock_client_metrics", || {
        let out = unsafe { args::out(out, "out", fencelock_metrics::default()) }?;
        let client = unsafe { args::handle(client, "client") }?;
        *out = convert(&client.client.metrics())?;
        Ok(fencelock_status::FENCELOCK_OK)
    })
}

/// Stores in `*out` the client's metrics in Prometheus's text exposition format (0.0.4): core's families
/// (`fencelock_acquire_wait_seconds`, `fencelock_lost_total`, …, labelled `backend`; `fencelock_lock_*` for opted-in
/// names). Free it with `fencelock_string_free`; NULL on failure.
///
/// # Safety
/// `client` NULL or a live client; `out` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_client_metrics_text(
    client: *const fencelock_client,
    out: *mut *mut c_char,
) -> fencelock_status {
    call("fencelock_client_metrics_text", || unsafe { string_out(client, out, |s| s.prometheus_text()) })
}

/// Stores in `*out` the client's metrics as JSON, the snapshot every binding shares (`backend`, `enabled`,
/// `acquire_wait`, …, `names`). Free it with `fencelock_string_free`; NULL on failure.
///
/// # Safety
/// `client` NULL or a live client; `out` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_client_metrics_json(
    client: *const fencelock_client,
    out: *mut *mut c_char,
) -> fencelock_status {
    call("fencelock_client_metrics_json", || unsafe { string_out(client, out, |s| s.to_json()) })
}

/// # Safety
/// As for `fencelock_client_metrics_text`.
unsafe fn string_out(
    client: *const fencelock_client,
    out: *mut *mut c_char,
    render: impl FnOnce(&MetricsSnapshot) -> String,
) -> Result<fencelock_status> {
    let out = unsafe { args::out(out, "out", ptr::null_mut()) }?;
    let client = unsafe { args::handle(client, "client") }?;
    *out = text::into_raw(render(&client.client.metrics()))?;
    Ok(fencelock_status::FENCELOCK_OK)
}

/// The upper bound, in seconds, of bucket `i` of every `fencelock_histogram`: `INFINITY` for the last
/// (`FENCELOCK_METRICS_BUCKETS - 1`), `NAN` for an `i` past it.
#[unsafe(no_mangle)]
pub extern "C" fn fencelock_metrics_bucket_le(i: usize) -> f64 {
    match BUCKET_BOUNDS.get(i) {
        Some(le) => *le,
        None if i == BUCKET_BOUNDS.len() => f64::INFINITY,
        None => f64::NAN,
    }
}
