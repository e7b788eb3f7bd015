//! `{ ttlMs, timeoutMs, watchdog, owner }` → `LockOptions`. Numbers are milliseconds; node/index.js has already
//! checked their types, core checks names and TTL ranges.

use std::time::Duration;

use fencelock::LockOptions;
use napi_derive::napi;

use crate::error::invalid;

/// Lock options as JS passes them (the `signal` is handled by the wrapper).
#[napi(object)]
#[derive(Debug, Default)]
pub struct LockOpts {
    pub ttl_ms: Option<f64>,
    /// `Infinity` or absent: wait forever.
    pub timeout_ms: Option<f64>,
    pub watchdog: Option<bool>,
    pub owner: Option<String>,
}

/// A non-negative, finite number of milliseconds (fractions are kept to the microsecond).
pub(crate) fn millis(what: &str, ms: f64) -> napi::Result<Duration> {
    if !ms.is_finite() || ms < 0.0 {
        return Err(invalid(format!("{what} must be a non-negative number of milliseconds, got {ms}")));
    }
    Ok(Duration::from_micros((ms * 1000.0).round() as u64))
}

pub(crate) fn lock_options(o: Option<LockOpts>) -> napi::Result<LockOptions> {
    let o = o.unwrap_or_default();
    let mut opts = LockOptions::default();
    if let Some(ttl) = o.ttl_ms {
        opts = opts.ttl(millis("ttlMs", ttl)?);
    }
    match o.timeout_ms {
        Some(t) if t == f64::INFINITY => {}
        Some(t) => opts = opts.timeout(millis("timeoutMs", t)?),
        None => {}
    }
    if let Some(w) = o.watchdog {
        opts = opts.watchdog(w);
    }
    if let Some(owner) = o.owner {
        opts = opts.owner(owner);
    }
    Ok(opts)
}
