//! fencelockd's native `fencelock.v1.Locks` service: try-lock, renew with a new TTL, release, fenced writes, the
//! lost stream, and its error codes, against SQLite and Redis next to an SDK client.

mod support;

use std::time::Duration;

use fencelock::LockOptions;
use fencelockd::proto::fencelock_v1::{
    FencedReadRequest, FencedWriteRequest, LockRequest, ReleaseRequest, RenewRequest, WatchLostRequest,
};
use support::{Daemon, backends, unique, within};
use tonic::Code;

fn req(name: &str, ttl_ms: u64, timeout_ms: u64) -> LockRequest {
    LockRequest { name: name.to_string(), ttl_ms, timeout_ms }
}

#[tokio::test]
async fn try_lock_renew_release_and_fenced_writes() {
    for url in backends() {
        let d = Daemon::start(&url, &[]).await;
        let (mut native, sdk) = (d.native(), d.sdk().await);
        let name = unique("native");
        let got = native.try_lock(req(&name, 2_000, 0)).await.unwrap().into_inner();
        assert!(got.acquired && got.fence > 0, "{url}: {got:?}");
        let busy = native.try_lock(req(&name, 2_000, 0)).await.unwrap().into_inner();
        assert!(!busy.acquired, "{url}: a second try-lock finds it taken");
        assert!(sdk.try_lock(&name, &LockOptions::default()).await.unwrap().is_none(), "{url}: excludes the SDK");

        // Lock with a timeout on a held name: DEADLINE_EXCEEDED (TIMEOUT).
        let e = native.lock(req(&name, 2_000, 300)).await.unwrap_err();
        assert_eq!(e.code(), Code::DeadlineExceeded, "{url}: {e:?}");
        assert_eq!(e.metadata().get("fencelock-error").unwrap(), "TIMEOUT");

        // Renew with a new, longer TTL keeps it past its first TTL.
        let renewed = native.renew(RenewRequest { lease_id: got.lease_id, ttl_ms: 6_000 }).await.unwrap().into_inner();
        assert!(renewed.remaining_ms > 4_000, "{url}: {renewed:?}");
        tokio::time::sleep(Duration::from_millis(2_500)).await;
        assert!(sdk.try_lock(&name, &LockOptions::default()).await.unwrap().is_none(), "{url}: renewed past 2 s");

        // Fenced writes through the service, on the register of the lock's name: the holder's token is accepted, an
        // older one is ABORTED (FENCED).
        let resource = name.clone();
        native
            .fenced_write(FencedWriteRequest { resource: resource.clone(), token: got.fence, value: b"v1".to_vec() })
            .await
            .expect("write with the current token");
        let stale = native
            .fenced_write(FencedWriteRequest {
                resource: resource.clone(),
                token: got.fence - 1,
                value: b"old".to_vec(),
            })
            .await
            .unwrap_err();
        assert_eq!(stale.code(), Code::Aborted, "{url}: {stale:?}");
        assert_eq!(stale.metadata().get("fencelock-error").unwrap(), "FENCED");
        let read = native.fenced_read(FencedReadRequest { resource: resource.clone() }).await.unwrap().into_inner();
        assert_eq!((read.token, read.value), (got.fence, b"v1".to_vec()), "{url}");
        // The SDK sees the same register.
        assert_eq!(sdk.fence(&resource).read().await.unwrap(), (got.fence, b"v1".to_vec()), "{url}");

        native.release(ReleaseRequest { lease_id: got.lease_id }).await.expect("release");
        let again = native.release(ReleaseRequest { lease_id: got.lease_id }).await.unwrap_err();
        assert_eq!(again.code(), Code::FailedPrecondition, "{url}: {again:?}");
        let renew = native.renew(RenewRequest { lease_id: got.lease_id, ttl_ms: 0 }).await.unwrap_err();
        assert_eq!(renew.code(), Code::FailedPrecondition, "{url}: {renew:?}");
        let sdk_lease = sdk.try_lock(&name, &LockOptions::default()).await.unwrap().expect("free after Release");
        assert!(sdk_lease.fence() > got.fence, "{url}");

        // The SDK holds; a waiting native Lock gets it when the SDK releases.
        let waiter = tokio::spawn({
            let (mut native, name) = (native.clone(), name.clone());
            async move { native.lock(req(&name, 5_000, 10_000)).await }
        });
        d.until_waiting(1).await;
        assert!(!waiter.is_finished(), "{url}: waits while the SDK holds");
        sdk_lease.release().await.unwrap();
        let got = within("native Lock", 10, waiter).await.unwrap().expect("lock").into_inner();
        assert!(got.acquired, "{url}");
        native.release(ReleaseRequest { lease_id: got.lease_id }).await.unwrap();
    }
}

#[tokio::test]
async fn the_lost_stream_reports_a_lease_that_expired() {
    for url in backends() {
        let d = Daemon::start(&url, &[]).await;
        let (mut native, sdk) = (d.native(), d.sdk().await);
        let name = unique("native-lost");
        let got = native.try_lock(req(&name, 1_000, 0)).await.unwrap().into_inner();
        assert!(got.acquired);
        let mut lost = native.watch_lost(WatchLostRequest { lease_id: got.lease_id }).await.unwrap().into_inner();
        // No renewal: the lease is lost after its TTL, and the stream says so, then ends.
        let event = within("the lost event", 10, lost.message()).await.unwrap().expect("one event");
        assert_eq!((event.lease_id, event.name.as_str(), event.fence), (got.lease_id, name.as_str(), got.fence));
        assert!(within("the stream's end", 10, lost.message()).await.unwrap().is_none(), "{url}: ends after the event");
        let renew = native.renew(RenewRequest { lease_id: got.lease_id, ttl_ms: 0 }).await.unwrap_err();
        assert_eq!(renew.code(), Code::FailedPrecondition, "{url}: {renew:?}");
        assert!(sdk.try_lock(&name, &LockOptions::default()).await.unwrap().is_some(), "{url}: expired on the backend");

        // A released lease's stream ends with no event.
        let got = native.try_lock(req(&unique("native-rel"), 5_000, 0)).await.unwrap().into_inner();
        let mut stream = native.watch_lost(WatchLostRequest { lease_id: got.lease_id }).await.unwrap().into_inner();
        native.release(ReleaseRequest { lease_id: got.lease_id }).await.unwrap();
        assert!(within("the stream's end", 10, stream.message()).await.unwrap().is_none(), "{url}");
        let unknown = native.watch_lost(WatchLostRequest { lease_id: got.lease_id }).await.unwrap_err();
        assert_eq!(unknown.code(), Code::FailedPrecondition, "{url}");
    }
}

#[tokio::test]
async fn native_bad_requests_are_invalid_argument() {
    let url = &backends()[0];
    let d = Daemon::start(url, &[]).await;
    let mut native = d.native();
    for (name, ttl_ms) in [(String::new(), 1_000), ("x".repeat(513), 1_000), ("ok".into(), 25 * 3600 * 1000)] {
        let e = native.try_lock(req(&name, ttl_ms, 0)).await.unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");
        assert_eq!(e.metadata().get("fencelock-error").unwrap(), "INVALID_ARGUMENT");
    }
    let e = native.fenced_write(FencedWriteRequest { resource: String::new(), token: 1, value: vec![] }).await;
    assert_eq!(e.unwrap_err().code(), Code::InvalidArgument);
}
