//! URL → backend. Errors name the bad part of the URL.

use std::sync::Arc;

use crate::backend::{self, Backend, memory::MemoryBackend, redis::RedisBackend, sqlite::SqliteBackend};
use crate::error::{Error, Result};
use crate::options::ClientOptions;

/// The URL used when none is given and `FENCELOCK_URL` is unset: an embedded SQLite file in the working directory.
pub const DEFAULT_URL: &str = "sqlite:fencelock.db";

/// `FENCELOCK_URL`, else [`DEFAULT_URL`].
pub fn default_url() -> String {
    std::env::var("FENCELOCK_URL").ok().filter(|u| !u.is_empty()).unwrap_or_else(|| DEFAULT_URL.to_string())
}

/// Splits `scheme:rest`, lower-casing the scheme.
fn scheme_of(url: &str) -> Result<(String, &str)> {
    let Some((scheme, rest)) = url.split_once(':') else {
        return Err(Error::invalid(format!(
            "URL {url:?} has no scheme; expected one of sqlite:, postgres://, redis://, rediss://, redis+cluster://, redlock://, etcd://, zk://, memory://"
        )));
    };
    Ok((scheme.to_ascii_lowercase(), rest))
}

/// Opens the backend a URL names.
pub(crate) async fn open(url: &str, opts: &ClientOptions) -> Result<Arc<dyn Backend>> {
    let (scheme, rest) = scheme_of(url)?;
    let backend: Arc<dyn Backend> = match scheme.as_str() {
        "sqlite" => {
            let path = rest.strip_prefix("//").unwrap_or(rest);
            if path.is_empty() {
                return Err(Error::invalid(format!("URL {url:?}: sqlite needs a file path, as in sqlite:locks.db")));
            }
            Arc::new(SqliteBackend::open(path, opts).await?)
        }
        "redis" | "rediss" => Arc::new(RedisBackend::connect(url, opts).await?),
        "memory" => Arc::new(MemoryBackend::named(rest.trim_start_matches('/'))),
        "redis+cluster" => backend::redis_cluster::connect(url, opts).await?,
        "redlock" => backend::redlock::connect(url, opts).await?,
        "etcd" => backend::etcd::connect(url, opts).await?,
        "zk" => backend::zookeeper::connect(url, opts).await?,
        "postgres" | "postgresql" => backend::postgres::connect(url, opts).await?,
        other => {
            return Err(Error::invalid(format!(
                "URL {url:?}: unknown scheme {other:?}; expected sqlite:, postgres://, redis://, rediss://, redis+cluster://, redlock://, etcd://, zk://, memory://"
            )));
        }
    };
    Ok(backend)
}

/// `url` with any password replaced by `***`, for messages.
pub(crate) fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else { return url.to_string() };
    let (auth, tail) = match rest.find('@') {
        Some(at) if !rest[..at].contains('/') => (&rest[..at], &rest[at..]),
        _ => return url.to_string(),
    };
    match auth.split_once(':') {
        Some((user, _)) => format!("{scheme}://{user}:***{tail}"),
        None => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;

    #[test]
    fn passwords_are_hidden() {
        assert_eq!(redact("redis://u:secret@h:1/0"), "redis://u:***@h:1/0");
        assert_eq!(redact("redis://h:1"), "redis://h:1");
        assert_eq!(redact("sqlite:a.db"), "sqlite:a.db");
    }

    #[tokio::test]
    async fn bad_urls_name_the_problem() {
        let opts = ClientOptions::default();
        let err = open("nonsense", &opts).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument);
        assert!(err.message().contains("no scheme"), "{err}");
        let err = open("ftp://x", &opts).await.unwrap_err();
        assert!(err.message().contains("\"ftp\""), "{err}");
        let err = open("sqlite:", &opts).await.unwrap_err();
        assert!(err.message().contains("file path"), "{err}");
    }
}
