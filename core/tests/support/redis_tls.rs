//! TLS and authentication checks shared by the Redis, Redlock and Redis Cluster tests, against the servers of
//! scripts/services.sh that accept TLS only and require a password (user fencelock, password fencelock-pw).

use std::time::Duration;

use fencelock::{Client, ClientOptions, Error, ErrorKind, LockOptions};
use tokio::time::Instant;

/// The password every TLS test server gives the fencelock user.
pub const PASSWORD: &str = "fencelock-pw";

/// A TLS test server's URL (without `ca=`) and the test PKI's files.
pub struct TlsServer {
    pub url: String,
    pub ca: String,
    pub wrong_ca: String,
    /// A client certificate the CA signed, and its key.
    pub cert: String,
    pub key: String,
}

impl TlsServer {
    /// The server of `var`, or `None` (skip with a note) when the test command did not start it.
    pub fn from_env(var: &str) -> Option<TlsServer> {
        let url = super::service_url(var)?;
        let file = |v: &str| std::env::var(v).unwrap_or_else(|_| panic!("{v} is set with {var}"));
        Some(TlsServer {
            url,
            ca: file("FENCELOCK_TEST_CA"),
            wrong_ca: file("FENCELOCK_TEST_WRONG_CA"),
            cert: file("FENCELOCK_TEST_CLIENT_CERT"),
            key: file("FENCELOCK_TEST_CLIENT_KEY"),
        })
    }

    /// The URL with `ca=` the test CA, and `more` parameters.
    pub fn with_ca(&self, more: &str) -> String {
        with_params(&self.url, &format!("ca={}{more}", self.ca))
    }
}

/// `url` with `params` added to its query.
pub fn with_params(url: &str, params: &str) -> String {
    let sep = if url.contains('?') { '&' } else { '?' };
    format!("{url}{sep}{params}")
}

/// `url` with its TLS switched off: `redis://` for `rediss://`, no `tls=true` for Redlock and Redis Cluster.
pub fn plaintext(url: &str) -> String {
    url.replacen("rediss://", "redis://", 1)
        .replace("?tls=true&", "?")
        .replace("?tls=true", "")
        .replace("&tls=true", "")
}

/// `url` with the fencelock user's password replaced by `password`.
pub fn with_password(url: &str, password: &str) -> String {
    assert!(url.contains(PASSWORD), "{url}");
    url.replacen(PASSWORD, password, 1)
}

pub fn opts() -> ClientOptions {
    ClientOptions::default().connect_timeout(Duration::from_secs(3))
}

/// The `host:port` of every server `url` lists.
pub fn hosts(url: &str) -> Vec<String> {
    let rest = url.split_once("://").unwrap().1;
    let rest = rest.rsplit_once('@').map_or(rest, |(_, hosts)| hosts);
    rest.split(['/', '?']).next().unwrap().split(',').map(str::to_string).collect()
}

/// A raw connection to `host` of `server`, as the fencelock user over TLS (with a client certificate, for the
/// servers that require one).
pub async fn raw(server: &TlsServer, host: &str) -> redis::aio::MultiplexedConnection {
    let read = |path: &str| std::fs::read(path).unwrap();
    let certs = redis::TlsCertificates {
        client_tls: Some(redis::ClientTlsConfig { client_cert: read(&server.cert), client_key: read(&server.key) }),
        root_cert: Some(read(&server.ca)),
    };
    let url = format!("rediss://fencelock:{PASSWORD}@{host}");
    let client = redis::Client::build_with_tls(url.as_str(), certs).unwrap();
    client.get_multiplexed_async_connection().await.unwrap_or_else(|e| panic!("{host}: {e}"))
}

/// How many subscribers `channel` has over all servers of `server.url` (sharded pub/sub on a cluster).
async fn subscribers(server: &TlsServer, channel: &str, sharded: bool) -> i64 {
    let mut total = 0;
    for host in hosts(&server.url) {
        let (_, n): (String, i64) = redis::cmd("PUBSUB")
            .arg(if sharded { "SHARDNUMSUB" } else { "NUMSUB" })
            .arg(channel)
            .query_async(&mut raw(server, &host).await)
            .await
            .unwrap();
        total += n;
    }
    total
}

/// Over `server` (`url` is it with its `ca=`): acquire, renew and release; a waiter on a second client is woken by
/// the release through pub/sub (over the same TLS and credentials), long before the holder's TTL; fencing tokens
/// rise and a register refuses an old one.
pub async fn locks_fence_and_wake(server: &TlsServer, url: &str, sharded: bool) {
    let a = Client::connect_with(url, &opts()).await.unwrap_or_else(|e| panic!("{e}"));
    let b = Client::connect_with(url, &opts()).await.unwrap_or_else(|e| panic!("{e}"));
    assert!(!a.url().contains(PASSWORD), "{}", a.url());
    let name = super::unique("tls");
    let long = LockOptions::default().ttl(Duration::from_secs(30));
    let first = a.lock(&name, &long).await.unwrap();
    first.renew(Some(Duration::from_secs(30))).await.unwrap();
    assert!(b.try_lock(&name, &long).await.unwrap().is_none(), "a second holder over TLS");
    let fence = a.fence(&name);
    fence.write(first.fence(), b"first").await.unwrap();

    let waiter = {
        let (b, name) = (b.clone(), name.clone());
        tokio::spawn(async move { b.lock(&name, &LockOptions::default().timeout(Duration::from_secs(10))).await })
    };
    // Released once the waiter listens: only its subscription can wake it before the 30 s TTL.
    let channel = format!("redisson_lock__channel:{{{name}}}");
    let deadline = Instant::now() + Duration::from_secs(5);
    while subscribers(server, &channel, sharded).await == 0 {
        assert!(Instant::now() < deadline, "the waiter never subscribed to {channel}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let released = Instant::now();
    first.release().await.unwrap();
    let second = waiter.await.unwrap().unwrap();
    assert!(released.elapsed() < Duration::from_secs(5), "woken after {:?}", released.elapsed());
    assert!(second.fence() > first.fence(), "tokens rise: {} then {}", first.fence(), second.fence());
    fence.write(second.fence(), b"second").await.unwrap();
    let err = fence.write(first.fence(), b"stale").await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Fenced, "{err}");
    assert_eq!(fence.read().await.unwrap(), (second.fence(), b"second".to_vec()));
    second.release().await.unwrap();
    a.close().await;
    b.close().await;
}

/// Connecting to `url` fails with `kind`, within the connect timeout (and a little), mentioning `says` and never
/// the secrets of `url`.
pub async fn refused(url: &str, kind: ErrorKind, says: &str) -> Error {
    refused_with(url, &opts(), kind, says).await
}

/// [`refused`] with these options.
pub async fn refused_with(url: &str, opts: &ClientOptions, kind: ErrorKind, says: &str) -> Error {
    let started = Instant::now();
    let err = Client::connect_with(url, opts).await.map(drop).unwrap_err();
    let took = started.elapsed();
    assert!(took < opts.connect_timeout + Duration::from_secs(2), "{url}: took {took:?}: {err}");
    assert_eq!(err.kind(), kind, "{url}: {err}");
    assert!(err.message().contains(says), "{url}: expected {says:?} in: {err}");
    for secret in [PASSWORD, "wrong-pw-42"] {
        assert!(!format!("{err} {err:?}").contains(secret), "{url}: a secret in: {err:?}");
    }
    println!("refused in {took:?}: {err}");
    err
}

/// A plaintext URL to a TLS-only server fails within the connect timeout, saying it may need TLS and `how`.
pub async fn refuses_plaintext(server: &TlsServer, how: &str) {
    let err = refused(&plaintext(&server.url), ErrorKind::Unavailable, "TLS").await;
    assert!(err.message().contains(how), "{err}");
}

/// A CA that did not sign the server's certificate is refused for good, naming `ca=`.
pub async fn refuses_a_wrong_ca(server: &TlsServer) {
    let url = with_params(&server.url, &format!("ca={}", server.wrong_ca));
    let err = refused(&url, ErrorKind::InvalidArgument, "TLS handshake refused").await;
    assert!(err.message().contains("ca=") && !err.retryable(), "{err}");
}

/// A password the server does not know is refused for good, without quoting it.
pub async fn refuses_a_wrong_password(server: &TlsServer) {
    let url = with_password(&server.with_ca(""), "wrong-pw-42");
    let err = refused(&url, ErrorKind::InvalidArgument, "authentication failed for").await;
    assert!(!err.retryable(), "{err}");
}
