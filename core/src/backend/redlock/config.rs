//! The `redlock://` URL: one `redis://` URL per instance, and the per-instance timeout.

use std::time::Duration;

use crate::backend::{REDIS_PORT, parse_hosts, redact};
use crate::error::{Error, Result};

/// How long one instance may take to answer one request unless the URL says otherwise.
const DEFAULT_INSTANCE_TIMEOUT: Duration = Duration::from_millis(50);

/// Fewer instances give no fault tolerance over `redis://`.
const MIN_INSTANCES: usize = 3;

/// What a `redlock://` URL says.
#[derive(Debug, PartialEq)]
pub(super) struct Config {
    /// One `redis://` URL per instance, credentials and database included.
    pub(super) instances: Vec<String>,
    /// How long one instance may take to answer one request.
    pub(super) instance_timeout: Duration,
}

/// Parses `redlock://[user:password@]host:port,host:port,…[/db][?instance_timeout_ms=N]`.
pub(super) fn parse(url: &str) -> Result<Config> {
    let bad = |why: String| Error::invalid(format!("URL {:?}: {why}", redact(url)));
    let rest = url.split_once("://").map(|(_, rest)| rest).ok_or_else(|| bad("expected redlock://h1,h2,h3".into()))?;
    let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
    let (rest, db) = rest.split_once('/').map_or((rest, None), |(rest, db)| (rest, Some(db)));
    let (auth, hosts) = rest.rsplit_once('@').map_or((None, rest), |(auth, hosts)| (Some(auth), hosts));

    let mut instances: Vec<String> = Vec::new();
    for host in parse_hosts(hosts, REDIS_PORT).map_err(bad)? {
        let auth = auth.map(|a| format!("{a}@")).unwrap_or_default();
        let db = db.map(|d| format!("/{d}")).unwrap_or_default();
        let instance = format!("redis://{auth}{host}{db}");
        redis::Client::open(instance.as_str()).map_err(|e| bad(format!("host {host:?}: {e}")))?;
        if instances.contains(&instance) {
            return Err(bad(format!("host {host:?} is listed twice; each instance must count once")));
        }
        instances.push(instance);
    }
    if instances.len() < MIN_INSTANCES {
        return Err(bad(format!(
            "Redlock needs at least {MIN_INSTANCES} instances, got {}; use redis:// for one server",
            instances.len()
        )));
    }

    let mut instance_timeout = DEFAULT_INSTANCE_TIMEOUT;
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        match pair.split_once('=') {
            Some(("instance_timeout_ms", v)) => match v.parse::<u64>() {
                Ok(ms) if ms > 0 => instance_timeout = Duration::from_millis(ms),
                _ => return Err(bad(format!("instance_timeout_ms must be a positive number of ms, got {v:?}"))),
            },
            // The name only: the value of an unknown parameter may be a secret (`?password=…`).
            _ => {
                let name = pair.split_once('=').map_or(pair, |(name, _)| name);
                return Err(bad(format!("unknown parameter {name:?}; expected instance_timeout_ms=N")));
            }
        }
    }
    Ok(Config { instances, instance_timeout })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;

    #[test]
    fn urls_name_every_instance() {
        let c = parse("redlock://u:pw@a:1,b:2,[::1]/3?instance_timeout_ms=20").unwrap();
        assert_eq!(c.instances, ["redis://u:pw@a:1/3", "redis://u:pw@b:2/3", "redis://u:pw@[::1]:6379/3"]);
        assert_eq!(c.instance_timeout, Duration::from_millis(20));
        assert_eq!(parse("redlock://a,b,c").unwrap().instance_timeout, DEFAULT_INSTANCE_TIMEOUT);
    }

    #[test]
    fn bad_urls_name_the_problem() {
        for (url, says) in [
            ("redlock://a,b", "at least 3"),
            ("redlock://a,,b", "empty host"),
            ("redlock://a,b,a:6379", "listed twice"),
            ("redlock://a,b,c?instance_timeout_ms=0", "positive"),
            ("redlock://a,b,c?colour=blue", "unknown parameter"),
            ("redlock://u:secret@a,b", "u:***@"),
        ] {
            let err = parse(url).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{url}");
            assert!(err.message().contains(says), "{url}: {err}");
            assert!(!err.message().contains("secret"), "{err}");
        }
    }
}
