//! Options for `Client::lock` and `Client::connect`, builder style, with the validation of DESIGN.md §5.

use std::time::Duration;

use crate::error::{Error, Result};
use crate::metrics::MetricsNames;

/// Longest lock name, in bytes.
pub const MAX_NAME_BYTES: usize = 512;
/// Longest TTL a lease may ask for.
pub const MAX_TTL: Duration = Duration::from_secs(24 * 3600);
/// TTL when none is given.
pub const DEFAULT_TTL: Duration = Duration::from_secs(30);

/// How one `lock`/`try_lock` call behaves.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockOptions {
    /// Lease time to live on the backend (session timeout on ZooKeeper). Default 30 s.
    pub ttl: Duration,
    /// How long `lock` waits for a holder to let go; `None` waits forever. Ignored by `try_lock`.
    pub timeout: Option<Duration>,
    /// Renew every ttl/3 until released. Default on.
    pub watchdog: bool,
    /// Reentrancy key: a second `lock` by the same owner on the same client returns the same grant.
    /// `None` makes every call its own owner.
    pub owner: Option<String>,
    /// Serve this call's wait in arrival order among all clients, where the backend offers both orders (Redis's
    /// fair queue). `None`: the backend's default (on Redis, the URL's `fair=`).
    pub fair: Option<bool>,
}

impl Default for LockOptions {
    fn default() -> Self {
        LockOptions { ttl: DEFAULT_TTL, timeout: None, watchdog: true, owner: None, fair: None }
    }
}

impl LockOptions {
    /// Sets the lease TTL.
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = ttl;
        self
    }

    /// Sets how long `lock` may wait.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Waits forever (the default).
    pub fn wait_forever(mut self) -> Self {
        self.timeout = None;
        self
    }

    /// Turns the renewal watchdog on or off.
    pub fn watchdog(mut self, on: bool) -> Self {
        self.watchdog = on;
        self
    }

    /// Sets the reentrancy owner.
    pub fn owner(mut self, owner: impl Into<String>) -> Self {
        self.owner = Some(owner.into());
        self
    }

    /// Asks for arrival order (`true`) or a free-for-all (`false`) instead of the backend's default.
    pub fn fair(mut self, on: bool) -> Self {
        self.fair = Some(on);
        self
    }

    pub(crate) fn validate(&self, name: &str) -> Result<()> {
        validate_name(name)?;
        validate_ttl(self.ttl).map_err(|e| e.with_lock(name))?;
        if let Some(owner) =
            self.owner.as_ref().filter(|o| o.is_empty() || o.len() > MAX_NAME_BYTES || o.contains('\0'))
        {
            return Err(Error::invalid(format!(
                "owner must be 1–{MAX_NAME_BYTES} bytes without NUL, got {} bytes",
                owner.len()
            ))
            .with_lock(name));
        }
        Ok(())
    }
}

/// How a `Client` talks to its backend.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientOptions {
    /// Longest time to establish a connection before `Unavailable`. Default 5 s.
    pub connect_timeout: Duration,
    /// Longest time one backend request may take before `Unavailable`. Default 5 s.
    pub request_timeout: Duration,
    /// Record metrics (`Client::metrics`). Default on; off makes every hook a branch.
    pub metrics: bool,
    /// Which lock names get series of their own. Default none: names are unbounded.
    pub metrics_names: MetricsNames,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            connect_timeout: Duration::from_secs(5),
            request_timeout: Duration::from_secs(5),
            metrics: true,
            metrics_names: MetricsNames::None,
        }
    }
}

impl ClientOptions {
    /// Sets the connect timeout.
    pub fn connect_timeout(mut self, d: Duration) -> Self {
        self.connect_timeout = d;
        self
    }

    /// Sets the per-request timeout.
    pub fn request_timeout(mut self, d: Duration) -> Self {
        self.request_timeout = d;
        self
    }

    /// Turns metrics recording on or off.
    pub fn metrics(mut self, on: bool) -> Self {
        self.metrics = on;
        self
    }

    /// Chooses the lock names that get series of their own.
    pub fn metrics_names(mut self, names: MetricsNames) -> Self {
        self.metrics_names = names;
        self
    }

    /// An allow-list of lock names holds lock names.
    pub(crate) fn validate(&self) -> Result<()> {
        if let MetricsNames::Only(names) = &self.metrics_names {
            for name in names {
                validate_name(name).map_err(|e| Error::invalid(format!("metrics_names: {}", e.message())))?;
            }
        }
        Ok(())
    }
}

/// A lock (or fence resource) name: 1–512 bytes, no NUL.
pub(crate) fn validate_name(name: &str) -> Result<()> {
    if name.is_empty() {
        return Err(Error::invalid("lock name is empty"));
    }
    if name.len() > MAX_NAME_BYTES {
        return Err(Error::invalid(format!(
            "lock name is {} bytes, longer than the {MAX_NAME_BYTES}-byte limit",
            name.len()
        )));
    }
    if name.contains('\0') {
        return Err(Error::invalid(format!("lock name {name:?} contains a NUL byte")));
    }
    Ok(())
}

/// A TTL: more than zero, at most 24 h, whole milliseconds are what backends see.
pub(crate) fn validate_ttl(ttl: Duration) -> Result<()> {
    if ttl < Duration::from_millis(1) {
        return Err(Error::invalid(format!("ttl must be at least 1 ms, got {ttl:?}")));
    }
    if ttl > MAX_TTL {
        return Err(Error::invalid(format!("ttl must be at most 24 h, got {ttl:?}")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;

    #[test]
    fn names_and_ttls_are_checked() {
        let ok = LockOptions::default();
        assert!(ok.validate("a").is_ok());
        assert!(ok.validate(&"x".repeat(512)).is_ok());
        for bad in ["", "a\0b"] {
            assert_eq!(ok.validate(bad).unwrap_err().kind(), ErrorKind::InvalidArgument);
        }
        let long = "x".repeat(513);
        let err = ok.validate(&long).unwrap_err();
        assert!(err.message().contains("513 bytes"), "{err}");
        for ttl in [Duration::ZERO, MAX_TTL + Duration::from_millis(1)] {
            let err = LockOptions::default().ttl(ttl).validate("a").unwrap_err();
            assert_eq!(err.kind(), ErrorKind::InvalidArgument);
            assert!(err.message().contains("ttl"), "{err}");
        }
        let err = LockOptions::default().owner("").validate("a").unwrap_err();
        assert!(err.message().contains("owner"));
        let listed = |name: &str| ClientOptions::default().metrics_names(MetricsNames::Only([name.to_string()].into()));
        assert!(listed("a").validate().is_ok());
        let err = listed("").validate().unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument);
        assert!(err.message().starts_with("metrics_names: lock name is empty"), "{err}");
    }
}
