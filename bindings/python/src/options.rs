//! Python option values → core options: durations are float seconds (DESIGN.md §4).

use std::time::Duration;

use fencelock::{ClientOptions, LockOptions, MetricsNames, Result};

use crate::error::invalid;

/// `secs` seconds as a `Duration`; `InvalidArgument` naming `what` if negative, NaN or too large.
pub(crate) fn seconds(what: &str, secs: f64) -> Result<Duration> {
    Duration::try_from_secs_f64(secs)
        .map_err(|_| invalid(format!("{what} must be a finite number of seconds ≥ 0, got {secs}")))
}

/// A wait of `secs` seconds: as [`seconds`], except that a finite wait too long for a `Duration` saturates (the
/// core waits without limit when the clock cannot represent the deadline).
pub(crate) fn wait_seconds(what: &str, secs: f64) -> Result<Duration> {
    match Duration::try_from_secs_f64(secs) {
        Err(_) if secs.is_finite() && secs > 0.0 => Ok(Duration::MAX),
        _ => seconds(what, secs),
    }
}

/// The options of one `lock`/`try_lock` call.
pub(crate) fn lock_options(
    ttl: f64,
    timeout: Option<f64>,
    watchdog: bool,
    owner: Option<String>,
    fair: Option<bool>,
) -> Result<LockOptions> {
    let mut opts = LockOptions::default().ttl(seconds("ttl", ttl)?).watchdog(watchdog);
    if let Some(fair) = fair {
        opts = opts.fair(fair);
    }
    if let Some(t) = timeout {
        opts = opts.timeout(wait_seconds("timeout", t)?);
    }
    if let Some(owner) = owner {
        opts = opts.owner(owner);
    }
    Ok(opts)
}

/// The options of `connect`; `None` keeps the core default.
pub(crate) fn client_options(connect_timeout: Option<f64>, request_timeout: Option<f64>) -> Result<ClientOptions> {
    let mut opts = ClientOptions::default();
    if let Some(t) = connect_timeout {
        opts = opts.connect_timeout(seconds("connect_timeout", t)?);
    }
    if let Some(t) = request_timeout {
        opts = opts.request_timeout(seconds("request_timeout", t)?);
    }
    Ok(opts)
}

/// Which lock names get metric series: none, all (`all_names`), or the listed ones.
pub(crate) fn names_policy(names: Option<Vec<String>>, all_names: bool) -> MetricsNames {
    match names {
        _ if all_names => MetricsNames::All,
        None => MetricsNames::None,
        Some(names) => MetricsNames::Only(names.into_iter().collect()),
    }
}
