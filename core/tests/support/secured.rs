//! What every backend's TLS and authentication tests check, against a server that requires both.

use std::time::Duration;

use fencelock::{Client, ClientOptions, Error, ErrorKind, LockOptions};
use tokio::time::Instant;

/// Bounds that keep a refused connect short.
pub fn quick() -> ClientOptions {
    ClientOptions::default().connect_timeout(Duration::from_secs(5)).request_timeout(Duration::from_secs(5))
}

/// A name `url` appended with query parameters `params` (`a=b&c=d`).
pub fn with_params(url: &str, params: &str) -> String {
    let sep = if url.contains('?') { '&' } else { '?' };
    format!("{url}{sep}{params}")
}

/// Over `url`: a lock excludes another client, a waiter is woken by the release (long before the holder's TTL
/// would free it), tokens rise, and a fenced write with the older token is refused. Every part of it runs over the
/// backend's connections to the secured server, waiting ones included.
pub async fn locks_fence_and_wake(url: &str) {
    let holder = Client::connect_with(url, &quick()).await.expect("TLS with the right password connects");
    let rival = Client::connect_with(url, &quick()).await.unwrap();
    let name = super::unique("secured");
    let ttl = Duration::from_secs(30);
    let first = holder.lock(&name, &LockOptions::default().ttl(ttl)).await.unwrap();
    assert!(rival.try_lock(&name, &LockOptions::default()).await.unwrap().is_none(), "the lock excludes");

    let opts = LockOptions::default().ttl(ttl).timeout(ttl);
    let waiting = rival.lock(&name, &opts);
    tokio::pin!(waiting);
    assert!(tokio::time::timeout(Duration::from_millis(300), &mut waiting).await.is_err(), "the waiter waits");
    let released = Instant::now();
    first.release().await.unwrap();
    let second = waiting.await.expect("the waiter gets the lock");
    assert!(released.elapsed() < ttl / 3, "the waiter took {:?}: not woken by the release", released.elapsed());
    assert!(second.fence() > first.fence(), "tokens rise: {} then {}", first.fence(), second.fence());

    let fence = rival.fence(&super::unique("secured-resource"));
    fence.write(second.fence(), b"new").await.unwrap();
    let stale = fence.write(first.fence(), b"stale").await.unwrap_err();
    assert_eq!(stale.kind(), ErrorKind::Fenced, "{stale}");
    second.release().await.unwrap();
    holder.close().await;
    rival.close().await;
}

/// `err` is a final `INVALID_ARGUMENT` that says `says` and nowhere shows `secret`.
pub fn assert_refused(err: &Error, says: &str, secret: &str) {
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    assert!(!err.retryable(), "{err}");
    assert!(err.message().contains(says), "expected {says:?} in: {err}");
    for shown in [err.to_string(), err.message().to_string(), format!("{err:?}")] {
        assert!(!shown.contains(secret), "the secret shows in {shown}");
    }
}
