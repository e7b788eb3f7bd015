//! Java option values → core options. Durations cross as milliseconds; a negative timeout means "wait forever".

use std::collections::BTreeSet;
use std::time::Duration;

use fencelock::{ClientOptions, LockOptions, MetricsNames};
use jni::Env;
use jni::objects::{JObjectArray, JString};

use crate::error::Fail;

/// A Java string argument; `None` for null.
pub(crate) fn opt_string(env: &Env<'_>, s: &JString<'_>) -> Result<Option<String>, Fail> {
    if s.is_null() { Ok(None) } else { Ok(Some(s.try_to_string(env)?)) }
}

/// A Java string argument that must not be null (the Java layer checks, this is the safety net).
pub(crate) fn string(env: &Env<'_>, s: &JString<'_>, what: &str) -> Result<String, Fail> {
    opt_string(env, s)?.ok_or_else(|| {
        Fail::Lock(fencelock::Error::new(fencelock::ErrorKind::InvalidArgument, format!("{what} must not be null")))
    })
}

fn millis(ms: i64) -> Duration {
    Duration::from_millis(ms.max(0) as u64)
}

/// The options of one `lock`/`tryLock` call; `fair` is `LockOptions.fairCode()` (0: the backend's default).
pub(crate) fn lock_options(
    ttl_ms: i64,
    timeout_ms: i64,
    watchdog: bool,
    owner: Option<String>,
    fair: i32,
) -> LockOptions {
    let mut opts = LockOptions::default().ttl(millis(ttl_ms)).watchdog(watchdog);
    if timeout_ms >= 0 {
        opts = opts.timeout(millis(timeout_ms));
    }
    if let Some(owner) = owner {
        opts = opts.owner(owner);
    }
    if fair != 0 {
        opts = opts.fair(fair > 0);
    }
    opts
}

/// The options of `connect`; a non-positive timeout keeps the core default.
pub(crate) fn client_options(connect_ms: i64, request_ms: i64, metrics: bool, names: MetricsNames) -> ClientOptions {
    let mut opts = ClientOptions::default().metrics(metrics).metrics_names(names);
    if connect_ms > 0 {
        opts = opts.connect_timeout(millis(connect_ms));
    }
    if request_ms > 0 {
        opts = opts.request_timeout(millis(request_ms));
    }
    opts
}

/// `ClientOptions.java`'s lock-name policy: every name if `all`, else the listed ones (none when null or empty).
pub(crate) fn metrics_names(
    env: &mut Env<'_>,
    all: bool,
    names: &JObjectArray<'_, JString<'_>>,
) -> Result<MetricsNames, Fail> {
    if all {
        return Ok(MetricsNames::All);
    }
    if names.is_null() {
        return Ok(MetricsNames::None);
    }
    let mut set = BTreeSet::new();
    for i in 0..names.len(env)? {
        let name = names.get_element(env, i)?;
        set.insert(string(env, &name, "a metrics name")?);
    }
    Ok(if set.is_empty() { MetricsNames::None } else { MetricsNames::Only(set) })
}
