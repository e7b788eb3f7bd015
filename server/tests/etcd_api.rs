//! etcd's Lease + v3lock services of fencelockd, driven by a tonic client generated from the same protos, against
//! SQLite and Redis, next to a fencelock SDK client on the same backend.

mod support;

use std::time::{Duration, Instant};

use fencelock::LockOptions;
use fencelockd::proto::etcdserverpb::{
    LeaseGrantRequest, LeaseKeepAliveRequest, LeaseLeasesRequest, LeaseRevokeRequest, LeaseTimeToLiveRequest,
};
use fencelockd::proto::v3lockpb::{LockRequest, UnlockRequest};
use support::{Daemon, backends, unique, within};
use tonic::Code;

async fn grant(d: &Daemon, ttl: i64) -> i64 {
    let r = d.leases().lease_grant(LeaseGrantRequest { ttl, id: 0 }).await.expect("grant").into_inner();
    assert!(r.id > 0, "lease ids are positive");
    assert_eq!(r.ttl, ttl);
    r.id
}

async fn lock(d: &Daemon, name: &str, lease: i64) -> Result<(String, i64), tonic::Status> {
    let r = d.locks().lock(LockRequest { name: name.as_bytes().to_vec(), lease }).await?.into_inner();
    Ok((String::from_utf8(r.key).expect("utf-8 key"), r.header.expect("header").revision))
}

#[tokio::test]
async fn lock_excludes_the_sdk_and_unlock_frees_it() {
    for url in backends() {
        let d = Daemon::start(&url, &[]).await;
        let sdk = d.sdk().await;
        let name = unique("etcd-excl");
        let lease = grant(&d, 10).await;
        let (key, rev) = within("lock", 10, lock(&d, &name, lease)).await.expect("lock");
        assert_eq!(key, format!("{name}/{lease:x}"), "{url}: etcd's key layout");
        assert!(rev > 0, "{url}: the revision is the fencing token");

        assert!(sdk.try_lock(&name, &LockOptions::default()).await.unwrap().is_none(), "{url}: the SDK is excluded");
        // Locking again with the same lease is a no-op returning the same key.
        assert_eq!(lock(&d, &name, lease).await.expect("relock"), (key.clone(), rev), "{url}");
        let ttl = d.leases().lease_time_to_live(LeaseTimeToLiveRequest { id: lease, keys: true }).await.unwrap();
        assert_eq!(ttl.into_inner().keys, vec![key.clone().into_bytes()], "{url}: TimeToLive lists the lock key");

        let unlocked = d.locks().unlock(UnlockRequest { key: key.clone().into_bytes() }).await.expect("unlock");
        assert_eq!(unlocked.into_inner().header.unwrap().revision, rev, "{url}");
        let sdk_lease = sdk.try_lock(&name, &LockOptions::default()).await.unwrap().expect("free after Unlock");
        assert!(sdk_lease.fence() > rev as u64, "{url}: tokens rise across the SDK and fencelockd");

        // Now the SDK holds: a Lock through fencelockd waits, and gets the lock when the SDK releases.
        let waiting = tokio::spawn({
            let (d2, name) = (d.locks(), name.clone());
            async move { d2.clone().lock(LockRequest { name: name.into_bytes(), lease }).await }
        });
        d.until_waiting(1).await;
        assert!(!waiting.is_finished(), "{url}: Lock waits while the SDK holds");
        let sdk_fence = sdk_lease.fence();
        sdk_lease.release().await.unwrap();
        let got = within("waiting Lock", 10, waiting).await.unwrap().expect("Lock after the SDK released");
        d.until_waiting(0).await;
        assert!(got.into_inner().header.unwrap().revision as u64 > sdk_fence, "{url}");

        // Unlocking a key twice: the second is NOT_HELD (FAILED_PRECONDITION).
        d.locks().unlock(UnlockRequest { key: key.clone().into_bytes() }).await.expect("unlock");
        let again = d.locks().unlock(UnlockRequest { key: key.into_bytes() }).await.unwrap_err();
        assert_eq!(again.code(), Code::FailedPrecondition, "{url}: {again:?}");
        assert_eq!(again.metadata().get("fencelock-error").unwrap(), "NOT_HELD");
    }
}

#[tokio::test]
async fn a_lease_without_keep_alives_expires_and_releases_its_locks() {
    for url in backends() {
        let d = Daemon::start(&url, &[]).await;
        let sdk = d.sdk().await;
        let (a, b) = (unique("etcd-exp-a"), unique("etcd-exp-b"));
        let lease = grant(&d, 2).await;
        lock(&d, &a, lease).await.expect("lock a");
        lock(&d, &b, lease).await.expect("lock b");

        // Kept alive past several TTLs, the locks stay held (the watchdog renews them on the backend).
        let (tx, rx) = tokio::sync::mpsc::channel(4);
        let mut replies =
            d.leases().lease_keep_alive(tokio_stream::wrappers::ReceiverStream::new(rx)).await.unwrap().into_inner();
        let until = Instant::now() + Duration::from_secs(5);
        while Instant::now() < until {
            tx.send(LeaseKeepAliveRequest { id: lease }).await.unwrap();
            let reply = within("keep-alive reply", 5, replies.message()).await.unwrap().expect("a reply");
            assert_eq!((reply.id, reply.ttl), (lease, 2), "{url}");
            assert!(sdk.try_lock(&a, &LockOptions::default()).await.unwrap().is_none(), "{url}: still held");
            tokio::time::sleep(Duration::from_millis(500)).await;
        }

        // Keep-alives stop: within the TTL the lease expires and both locks are released through the backend.
        drop(tx);
        let stopped = Instant::now();
        let opts = LockOptions::default().timeout(Duration::from_secs(10));
        let got_a = sdk.lock(&a, &opts).await.expect("a is released when the lease expires");
        let got_b = sdk.lock(&b, &opts).await.expect("b too");
        let waited = stopped.elapsed();
        // Without the release the watchdog would hold them for ever (the 10 s timeout above); the bound leaves the
        // release 2 s past the TTL on a loaded machine.
        assert!(waited <= Duration::from_secs(4), "{url}: released {waited:?} after the last keep-alive (TTL 2 s)");
        got_a.release().await.unwrap();
        got_b.release().await.unwrap();

        // The lease is gone: TimeToLive says -1, a keep-alive gets TTL 0, Lock and Revoke are NOT_FOUND.
        let ttl = d.leases().lease_time_to_live(LeaseTimeToLiveRequest { id: lease, keys: false }).await.unwrap();
        assert_eq!(ttl.into_inner().ttl, -1, "{url}");
        let mut replies = d
            .leases()
            .lease_keep_alive(tokio_stream::iter([LeaseKeepAliveRequest { id: lease }]))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(replies.message().await.unwrap().unwrap().ttl, 0, "{url}");
        assert_eq!(lock(&d, &a, lease).await.unwrap_err().code(), Code::NotFound, "{url}");
        let revoke = d.leases().lease_revoke(LeaseRevokeRequest { id: lease }).await.unwrap_err();
        assert_eq!((revoke.code(), revoke.message()), (Code::NotFound, "etcdserver: requested lease not found"));
    }
}

/// One keep-alive on `lease`: the TTL fencelockd answers with.
async fn keep_alive(d: &Daemon, lease: i64) -> i64 {
    let mut replies = d
        .leases()
        .lease_keep_alive(tokio_stream::iter([LeaseKeepAliveRequest { id: lease }]))
        .await
        .expect("keep-alive stream")
        .into_inner();
    within("keep-alive reply", 10, replies.message()).await.expect("keep-alive").expect("a reply").ttl
}

/// TimeToLive of `lease`: -1 once it no longer exists.
async fn time_to_live(d: &Daemon, lease: i64) -> i64 {
    d.leases().lease_time_to_live(LeaseTimeToLiveRequest { id: lease, keys: false }).await.unwrap().into_inner().ttl
}

// An etcd client takes a live lease to mean its locks are held (etcd's Session.Done). When the backend lock goes
// (here deleted by an operator, as Redis without persistence loses it in a restart) and someone else takes it, the
// lease must end: a keep-alive that still said TTL > 0 would tell the old holder it may go on writing.
#[tokio::test]
async fn a_lock_lost_on_the_backend_ends_its_lease() {
    for url in backends() {
        let d = Daemon::start(&url, &[]).await;
        let sdk = d.sdk().await;

        // Caught by the keep-alive itself, at once: it renews the lease's locks on the backend before answering.
        let name = unique("etcd-lost-ka");
        let lease = grant(&d, 30).await;
        let (key, _) = lock(&d, &name, lease).await.expect("lock");
        assert_eq!(keep_alive(&d, lease).await, 30, "{url}: held, the lease lives");
        assert!(sdk.force_release(&name).await.unwrap(), "{url}: the record was there to delete");
        let other = sdk.try_lock(&name, &LockOptions::default()).await.unwrap().expect("the SDK takes the freed lock");
        assert_eq!(keep_alive(&d, lease).await, 0, "{url}: the keep-alive after the loss ends the lease");
        assert_eq!(time_to_live(&d, lease).await, -1, "{url}: the lease is gone");
        let unlock = d.locks().unlock(UnlockRequest { key: key.into_bytes() }).await.unwrap_err();
        assert_eq!(unlock.metadata().get("fencelock-error").unwrap(), "NOT_HELD", "{url}: {unlock:?}");
        assert!(!other.is_lost(), "{url}: ending the lease left the new holder's lock alone");
        other.release().await.unwrap();

        // Caught by the watchdog with no keep-alive sent: its next renewal (every TTL/3, 3 s here) is refused and the
        // lease ends long before its own TTL would have run out.
        let name = unique("etcd-lost-wd");
        let lease = grant(&d, 9).await;
        lock(&d, &name, lease).await.expect("lock");
        assert!(sdk.force_release(&name).await.unwrap(), "{url}");
        let other = sdk.try_lock(&name, &LockOptions::default()).await.unwrap().expect("the SDK takes the freed lock");
        let since = Instant::now();
        while time_to_live(&d, lease).await != -1 {
            assert!(since.elapsed() < Duration::from_secs(8), "{url}: the lease outlived the watchdog's renewal");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        other.release().await.unwrap();
    }
}

#[tokio::test]
async fn revoke_releases_at_once_and_wakes_a_waiting_lock() {
    for url in backends() {
        let d = Daemon::start(&url, &[]).await;
        let name = unique("etcd-revoke");
        let (first, second) = (grant(&d, 60).await, grant(&d, 60).await);
        let (_, rev1) = lock(&d, &name, first).await.expect("lock");
        let waiter = tokio::spawn({
            let (mut locks, name) = (d.locks(), name.clone());
            async move { locks.lock(LockRequest { name: name.into_bytes(), lease: second }).await }
        });
        d.until_waiting(1).await;
        assert!(!waiter.is_finished(), "{url}: a second lease waits");
        let ids: Vec<i64> = d
            .leases()
            .lease_leases(LeaseLeasesRequest {})
            .await
            .unwrap()
            .into_inner()
            .leases
            .iter()
            .map(|l| l.id)
            .collect();
        assert!(ids.contains(&first) && ids.contains(&second), "{url}: {ids:?}");

        d.leases().lease_revoke(LeaseRevokeRequest { id: first }).await.expect("revoke");
        let got = within("the waiter after revoke", 10, waiter).await.unwrap().expect("lock for the second lease");
        assert!(got.into_inner().header.unwrap().revision > rev1, "{url}");

        // Revoking the lease a Lock is waiting on ends that Lock with NOT_FOUND.
        let third = grant(&d, 60).await;
        let waiter = tokio::spawn({
            let (mut locks, name) = (d.locks(), name.clone());
            async move { locks.lock(LockRequest { name: name.into_bytes(), lease: third }).await }
        });
        d.until_waiting(1).await;
        d.leases().lease_revoke(LeaseRevokeRequest { id: third }).await.expect("revoke the waiting lease");
        let err = within("the revoked waiter", 10, waiter).await.unwrap().unwrap_err();
        assert_eq!(err.code(), Code::NotFound, "{url}: {err:?}");
        d.until_waiting(0).await;
    }
}

#[tokio::test]
async fn bad_requests_get_design_status_codes() {
    let url = &backends()[0];
    let d = Daemon::start(url, &[]).await;
    let mut leases = d.leases();
    for ttl in [0, -5, 25 * 3600] {
        let e = leases.lease_grant(LeaseGrantRequest { ttl, id: 0 }).await.unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "TTL {ttl}: {e:?}");
        assert!(e.message().contains("TTL"), "{e:?}");
    }
    let lease = grant(&d, 30).await;
    let dup = leases.lease_grant(LeaseGrantRequest { ttl: 30, id: lease }).await.unwrap_err();
    assert_eq!(dup.code(), Code::FailedPrecondition, "{dup:?}");
    let chosen = leases.lease_grant(LeaseGrantRequest { ttl: 30, id: 0x1234 }).await.unwrap().into_inner();
    assert_eq!(chosen.id, 0x1234, "a client-chosen ID is kept");

    for (name, lease_id, code) in [
        (Vec::new(), lease, Code::InvalidArgument),         // empty name
        (vec![b'x'; 513], lease, Code::InvalidArgument),    // over 512 bytes
        (vec![0xff, 0xfe], lease, Code::InvalidArgument),   // not UTF-8
        (b"ok".to_vec(), 0, Code::InvalidArgument),         // no lease
        (b"ok".to_vec(), 0x7fff_ffff_fff0, Code::NotFound), // unknown lease
    ] {
        let e = d.locks().lock(LockRequest { name, lease: lease_id }).await.unwrap_err();
        assert_eq!(e.code(), code, "{e:?}");
    }
    let e = d.locks().unlock(UnlockRequest { key: b"no-such-key".to_vec() }).await.unwrap_err();
    assert_eq!(e.code(), Code::FailedPrecondition, "{e:?}");
}

#[tokio::test]
async fn max_leases_is_a_clear_resource_exhausted() {
    let url = &backends()[0];
    let d = Daemon::start(url, &["--max-leases", "2"]).await;
    let first = grant(&d, 30).await;
    grant(&d, 30).await;
    let e = d.leases().lease_grant(LeaseGrantRequest { ttl: 30, id: 0 }).await.unwrap_err();
    assert_eq!(e.code(), Code::ResourceExhausted, "{e:?}");
    assert!(e.message().contains("--max-leases 2"), "the message names the bound: {e:?}");
    let native = d
        .native()
        .try_lock(fencelockd::proto::fencelock_v1::LockRequest { name: unique("n"), ..Default::default() })
        .await
        .unwrap_err();
    assert_eq!(native.code(), Code::ResourceExhausted, "native leases count too: {native:?}");
    d.leases().lease_revoke(LeaseRevokeRequest { id: first }).await.unwrap();
    grant(&d, 30).await;
}

/// A Lock whose caller's deadline passes while it waits ends as etcd's does, `DEADLINE_EXCEEDED` (etcd's clients
/// check for that code), not tonic's own `CANCELLED` ("Timeout expired"), and leaves no waiter behind.
#[tokio::test]
async fn a_lock_past_the_callers_deadline_is_deadline_exceeded() {
    let d = Daemon::start(&support::sqlite(), &[]).await;
    let sdk = d.sdk().await;
    let name = unique("etcd-deadline");
    let held = sdk.lock(&name, &LockOptions::default()).await.unwrap();
    let lease = grant(&d, 10).await;
    for timeout in [Duration::from_millis(300), Duration::from_millis(1000)] {
        let mut req = tonic::Request::new(LockRequest { name: name.as_bytes().to_vec(), lease });
        req.set_timeout(timeout);
        let started = Instant::now();
        let e = within("Lock with a deadline", 10, d.locks().lock(req)).await.unwrap_err();
        assert_eq!(e.code(), Code::DeadlineExceeded, "{timeout:?}: {e:?}");
        assert!(started.elapsed() >= timeout.mul_f64(0.7), "{timeout:?}: it waited ({:?})", started.elapsed());
        d.until_waiting(0).await;
    }
    held.release().await.unwrap();
}
