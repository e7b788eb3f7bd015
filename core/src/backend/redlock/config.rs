//! The `redlock://` URL: one `redis://` (or `rediss://`) URL per instance, how they are secured, and the
//! per-instance timeout.

use std::time::Duration;

use std::net::SocketAddr;

use crate::backend::redis::{Security, names};
use crate::backend::{Host, REDIS_PORT, parse_hosts, redact};
use crate::error::{Error, Result};

/// How long one instance may take to answer one request unless the URL says otherwise.
const DEFAULT_INSTANCE_TIMEOUT: Duration = Duration::from_millis(50);

/// Fewer instances give no fault tolerance over `redis://`.
const MIN_INSTANCES: usize = 3;

/// What a `redlock://` URL says.
#[derive(Debug)]
pub(super) struct Config {
    /// One `redis://` or `rediss://` URL per instance, credentials and database included, no query.
    pub(super) instances: Vec<String>,
    /// TLS, the same for every instance.
    pub(super) security: Security,
    /// How long one instance may take to answer one request.
    pub(super) instance_timeout: Duration,
    /// The host of each instance, as listed.
    pub(super) hosts: Vec<Host>,
}

/// Parses `redlock://[user:password@]host:port,host:port,…[/db][?instance_timeout_ms=N&tls=true&ca=…&cert=…&key=…]`.
pub(super) fn parse(url: &str) -> Result<Config> {
    let shown = redact(url);
    let bad = |why: String| Error::invalid(format!("URL {shown:?}: {why}"));
    let rest = url.split_once("://").map(|(_, rest)| rest).ok_or_else(|| bad("expected redlock://h1,h2,h3".into()))?;
    let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
    let (rest, db) = rest.split_once('/').map_or((rest, None), |(rest, db)| (rest, Some(db)));
    let (auth, hosts) = rest.rsplit_once('@').map_or((None, rest), |(auth, hosts)| (Some(auth), hosts));

    let mut instance_timeout = DEFAULT_INSTANCE_TIMEOUT;
    let mut tls = false;
    let mut pairs = Vec::new();
    for (name, value) in url::form_urlencoded::parse(query.as_bytes()).into_owned() {
        match name.as_str() {
            "instance_timeout_ms" => match value.parse::<u64>() {
                Ok(ms) if ms > 0 => instance_timeout = Duration::from_millis(ms),
                _ => return Err(bad(format!("instance_timeout_ms must be a positive number of ms, got {value:?}"))),
            },
            "tls" => tls = crate::backend::tls::flag(&value, &shown)?,
            _ => pairs.push((name, value)),
        }
    }
    let (security, unknown) = Security::take(pairs, tls, &shown, "add tls=true")?;
    if !unknown.is_empty() {
        // The names only: the value of an unknown parameter may be a secret (`?password=…`).
        return Err(bad(format!(
            "unknown parameters {:?}; expected instance_timeout_ms=N, tls=true, ca=, cert=, key=",
            names(&unknown)
        )));
    }

    let scheme = if tls { "rediss" } else { "redis" };
    let mut instances: Vec<String> = Vec::new();
    let hosts = parse_hosts(hosts, REDIS_PORT).map_err(bad)?;
    for host in &hosts {
        let auth = auth.map(|a| format!("{a}@")).unwrap_or_default();
        let db = db.map(|d| format!("/{d}")).unwrap_or_default();
        let instance = format!("{scheme}://{auth}{host}{db}");
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

    Ok(Config { instances, security, instance_timeout, hosts })
}

/// Refuses two listed hosts that resolve to a common address: they are one instance counted twice, which lets a
/// "majority" be one server (`localhost` and `127.0.0.1`). A host that does not resolve within `limit` is left to
/// the connection, which reports it unreachable.
pub(super) async fn check_distinct(url: &str, hosts: &[Host], limit: Duration) -> Result<()> {
    let resolve = |host: &Host| {
        let name = host.name.trim_start_matches('[').trim_end_matches(']').to_string();
        let port = host.port;
        async move {
            match tokio::time::timeout(limit, tokio::net::lookup_host((name.as_str(), port))).await {
                Ok(Ok(addrs)) => addrs.collect::<Vec<SocketAddr>>(),
                _ => Vec::new(),
            }
        }
    };
    let resolved = futures::future::join_all(hosts.iter().map(resolve)).await;
    for (i, a) in resolved.iter().enumerate() {
        for (j, b) in resolved.iter().enumerate().skip(i + 1) {
            if let Some(common) = a.iter().find(|addr| b.contains(addr)) {
                return Err(Error::invalid(format!(
                    "URL {:?}: hosts \"{}\" and \"{}\" are the same instance (both reach {common}); each instance must \
                     count once",
                    redact(url),
                    hosts[i],
                    hosts[j]
                )));
            }
        }
    }
    Ok(())
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
        assert!(!parse("redlock://a,b,c?tls=false").unwrap().security.tls());
        let c = parse("redlock://:pw@a,b,c/1?tls=true").unwrap();
        assert_eq!(c.instances, ["rediss://:pw@a:6379/1", "rediss://:pw@b:6379/1", "rediss://:pw@c:6379/1"]);
        assert!(c.security.tls());
    }

    #[tokio::test]
    async fn hosts_that_resolve_alike_are_one_instance() {
        let url = "redlock://u:secret@localhost:7001,127.0.0.1:7002,127.0.0.1:7001";
        let c = parse(url).unwrap();
        let err = check_distinct(url, &c.hosts, Duration::from_secs(5)).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument);
        assert!(err.message().contains("\"localhost:7001\" and \"127.0.0.1:7001\""), "{err}");
        assert!(!err.message().contains("secret"), "{err}");
        let url = "redlock://localhost:7001,127.0.0.1:7002,[::1]:7003";
        check_distinct(url, &parse(url).unwrap().hosts, Duration::from_secs(5)).await.unwrap();
    }

    #[test]
    fn bad_urls_name_the_problem() {
        for (url, says) in [
            ("redlock://a,b", "at least 3"),
            ("redlock://a,,b", "empty host"),
            ("redlock://a,b,a:6379", "listed twice"),
            ("redlock://a,b,c?instance_timeout_ms=0", "positive"),
            ("redlock://a,b,c?colour=blue", "unknown parameter"),
            ("redlock://a,b,c?tls=yes", "tls=\"yes\" is neither true nor false"),
            ("redlock://a,b,c?ca=%2Fca.pem", "ca= given but TLS is off (add tls=true)"),
            ("redlock://a,b,c?tls=true&ca=%2Fnonexistent.pem", "ca=\"/nonexistent.pem\" cannot be read"),
            ("redlock://u:secret@a,b", "u:***@"),
        ] {
            let err = parse(url).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{url}");
            assert!(err.message().contains(says), "{url}: {err}");
            assert!(!err.message().contains("secret"), "{err}");
        }
    }
}
