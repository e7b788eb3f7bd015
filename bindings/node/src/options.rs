//! `{ ttlMs, timeoutMs, watchdog, owner, fair }` → `LockOptions`. Numbers are milliseconds; node/index.js has already
//! checked their types, core checks names and TTL ranges.

use std::time::Duration;

use fencelock::{ClientOptions, LockOptions, MetricsNames};
use napi::bindgen_prelude::Either;
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
    /// Absent: the backend's default order.
    pub fair: Option<bool>,
}

/// Client options as JS passes them; absent values keep core's defaults (5 s each, metrics on, no lock names).
#[napi(object)]
#[derive(Debug, Default)]
pub struct ConnectOpts {
    pub connect_timeout_ms: Option<f64>,
    pub request_timeout_ms: Option<f64>,
    pub metrics: Option<bool>,
    /// `true`: every lock name (capped in core); `false`: none; a list: those names only.
    pub metrics_names: Option<Either<bool, Vec<String>>>,
}

pub(crate) fn client_options(o: Option<ConnectOpts>) -> napi::Result<ClientOptions> {
    let o = o.unwrap_or_default();
    let mut opts = ClientOptions::default();
    if let Some(t) = o.connect_timeout_ms {
        opts = opts.connect_timeout(millis("connectTimeoutMs", t)?);
    }
    if let Some(t) = o.request_timeout_ms {
        opts = opts.request_timeout(millis("requestTimeoutMs", t)?);
    }
    if let Some(on) = o.metrics {
        opts = opts.metrics(on);
    }
    match o.metrics_names {
        Some(Either::A(true)) => opts = opts.metrics_names(MetricsNames::All),
        Some(Either::A(false)) | None => {}
        Some(Either::B(names)) => opts = opts.metrics_names(MetricsNames::Only(names.into_iter().collect())),
    }
    Ok(opts)
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
    if let Some(fair) = o.fair {
        opts = opts.fair(fair);
    }
    Ok(opts)
}
