//! The scheme table: which backend a URL names. Errors name the bad part of the URL.

use std::sync::Arc;

use super::{Backend, memory::MemoryBackend, redact, redis::RedisBackend, sql::sqlite::SqliteBackend};
use crate::error::{Error, Result};
use crate::options::ClientOptions;
use crate::tasks::Tasks;

const SCHEMES: &str = "sqlite:, postgres://, mysql://, mariadb://, redis://, rediss://, redis+cluster://, redis+sentinel://, redlock://, etcd://, etcd+https://, zk://, memory://";

/// Splits `scheme:rest`, lower-casing the scheme.
fn scheme_of(url: &str) -> Result<(String, &str)> {
    let Some((scheme, rest)) = url.split_once(':') else {
        return Err(Error::invalid(format!("URL {:?} has no scheme; expected one of {SCHEMES}", redact(url))));
    };
    Ok((scheme.to_ascii_lowercase(), rest))
}

/// Whether an SQLite path names a database private to its connection: `:memory:`, or a `file:` URI (which SQLite
/// opens as such) of `:memory:`, with `mode=memory`, or with no file name (a temporary database).
fn is_in_memory(path: &str) -> bool {
    let path = path.to_ascii_lowercase();
    if path.starts_with(":memory:") {
        return true;
    }
    let Some(uri) = path.strip_prefix("file:") else { return false };
    let (file, query) = uri.split_once('?').unwrap_or((uri, ""));
    file.is_empty() || file.starts_with(":memory:") || query.split('&').any(|p| p == "mode=memory")
}

/// Opens the backend a URL names. Whatever a backend or its driver said, the error that leaves carries no secret of
/// `url`: every site redacts the URL it quotes, and [`Error::scrub`] catches a driver that quoted a secret itself.
pub(crate) async fn open(url: &str, opts: &ClientOptions, tasks: &Tasks) -> Result<Arc<dyn Backend>> {
    // zookeeper-client's TLS compiles aws-lc-rs beside ring, and drivers that build their TLS configuration with
    // ClientConfig::builder() (mysql_async, zookeeper-client) panic unless a process default provider is set.
    super::tls::provider();
    open_scheme(url, opts, tasks).await.map_err(|e| e.scrub(url))
}

async fn open_scheme(url: &str, opts: &ClientOptions, tasks: &Tasks) -> Result<Arc<dyn Backend>> {
    let (scheme, rest) = scheme_of(url)?;
    let backend: Arc<dyn Backend> = match scheme.as_str() {
        "sqlite" => {
            let path = rest.strip_prefix("//").unwrap_or(rest);
            if path.is_empty() {
                return Err(Error::invalid(format!(
                    "URL {:?}: sqlite needs a file path, as in sqlite:locks.db",
                    redact(url)
                )));
            }
            if is_in_memory(path) {
                return Err(Error::invalid(format!(
                    "URL {:?}: an in-memory SQLite database is private to one connection, so its locks would \
                     exclude nobody; name a file every process opens, as in sqlite:locks.db (or use memory://NAME \
                     within one process)",
                    redact(url)
                )));
            }
            Arc::new(SqliteBackend::open(path, opts).await?)
        }
        "redis" | "rediss" => Arc::new(RedisBackend::connect(url, opts).await?),
        "memory" => Arc::new(MemoryBackend::named(rest.trim_start_matches('/'))),
        "redis+cluster" => super::redis_cluster::connect(url, opts).await?,
        "redis+sentinel" => super::redis::sentinel::connect(url, opts).await?,
        "redlock" => super::redlock::connect(url, opts).await?,
        "etcd" | "etcd+https" => super::etcd::connect(url, opts, tasks).await?,
        "zk" => super::zookeeper::connect(url, opts).await?,
        "postgres" | "postgresql" => super::sql::postgres::connect(url, opts).await?,
        "mysql" | "mariadb" => super::sql::mysql::connect(url, opts).await?,
        other => {
            return Err(Error::invalid(format!("URL {:?}: unknown scheme {other:?}; expected {SCHEMES}", redact(url))));
        }
    };
    Ok(backend)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;

    #[tokio::test]
    async fn bad_urls_name_the_problem() {
        let (opts, tasks) = (ClientOptions::default(), Tasks::new());
        let err = open("nonsense", &opts, &tasks).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument);
        assert!(err.message().contains("no scheme"), "{err}");
        let err = open("ftp://x", &opts, &tasks).await.unwrap_err();
        assert!(err.message().contains("\"ftp\""), "{err}");
        let err = open("sqlite:", &opts, &tasks).await.unwrap_err();
        assert!(err.message().contains("file path"), "{err}");
        let opts = ClientOptions::default().connect_timeout(std::time::Duration::from_millis(500));
        for url in [
            "etcd://h:99999",
            "etcd://a:2379,h:0",
            "zk://h:99999",
            "redis://h:99999",
            "redis+cluster://a,h:99999",
            "redis+sentinel://a,h:99999/m",
            "redlock://a,b,h:99999",
            "postgres://u@h:99999/db",
            "mysql://u@h:99999/db",
            "mariadb://u@h:65536/db",
        ] {
            let err = open(url, &opts, &tasks).await.unwrap_err();
            assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{url}: {err}");
            assert!(err.message().contains("port") || err.message().contains("Port"), "{url}: {err}");
        }
        for url in [
            "sqlite::memory:",
            "sqlite://:memory:",
            "sqlite:file::memory:?cache=shared",
            "sqlite:file:x.db?mode=memory",
        ] {
            let err = open(url, &opts, &tasks).await.unwrap_err();
            assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{url}");
            assert!(err.message().contains("in-memory SQLite"), "{url}: {err}");
        }
    }
}
