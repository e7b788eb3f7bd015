//! etcd's v3election service of fencelockd, driven by a tonic client generated from the same protos, against SQLite
//! and Redis, next to a fencelock SDK client on the same backend.

mod support;

use fencelock::LockOptions;
use fencelockd::proto::etcdserverpb::{LeaseGrantRequest, LeaseRevokeRequest};
use fencelockd::proto::v3electionpb::{
    CampaignRequest, LeaderKey, LeaderRequest, LeaderResponse, ProclaimRequest, ResignRequest,
};
use futures::StreamExt;
use support::{Daemon, backends, unique, within};
use tonic::{Code, Streaming};

async fn grant(d: &Daemon, ttl: i64) -> i64 {
    d.leases().lease_grant(LeaseGrantRequest { ttl, id: 0 }).await.expect("grant").into_inner().id
}

async fn campaign(d: &Daemon, name: &str, lease: i64, value: &[u8]) -> Result<LeaderKey, tonic::Status> {
    let r = d
        .elections()
        .campaign(CampaignRequest { name: name.as_bytes().to_vec(), lease, value: value.to_vec() })
        .await?
        .into_inner();
    let leader = r.leader.expect("a leader key");
    assert_eq!(r.header.expect("header").revision, leader.rev, "the header's revision is the term");
    Ok(leader)
}

async fn leader(d: &Daemon, name: &str) -> Result<LeaderResponse, tonic::Status> {
    Ok(d.elections().leader(LeaderRequest { name: name.as_bytes().to_vec() }).await?.into_inner())
}

/// The next Observe message's (value, term), `None` for "nobody leads".
async fn next(stream: &mut Streaming<LeaderResponse>) -> Option<(Vec<u8>, i64)> {
    let r = within("an Observe message", 10, stream.next()).await.expect("the stream goes on").expect("ok");
    r.kv.map(|kv| (kv.value, kv.mod_revision))
}

#[tokio::test]
async fn campaigns_exclude_each_other_and_terms_rise() {
    for url in backends() {
        let d = Daemon::start(&url, &[]).await;
        let name = unique("elect-excl");
        let (a, b) = (grant(&d, 10).await, grant(&d, 10).await);
        let first = within("campaign a", 10, campaign(&d, &name, a, b"alpha")).await.expect("a leads");
        assert_eq!(first.key, format!("{name}/{a:x}").into_bytes(), "{url}: etcd's key layout");
        assert_eq!((first.name.as_slice(), first.lease), (name.as_bytes(), a), "{url}");
        assert!(first.rev > 0, "{url}: the rev is the term");

        let now = leader(&d, &name).await.expect("Leader");
        let kv = now.kv.expect("kv");
        assert_eq!((kv.value.as_slice(), kv.mod_revision, kv.create_revision), (&b"alpha"[..], first.rev, first.rev));
        assert_eq!((kv.key, kv.lease), (first.key.clone(), a), "{url}: the leader's key and lease");

        // b waits while a leads; an SDK campaigner is excluded too.
        let sdk = d.sdk().await;
        let sdk_try = sdk.election(&name).try_campaign(b"sdk", &LockOptions::default()).await.unwrap();
        assert!(sdk_try.is_none(), "{url}: the SDK is excluded");
        let waiting = tokio::spawn({
            let (e, name) = (d.elections(), name.clone());
            async move {
                e.clone().campaign(CampaignRequest { name: name.into_bytes(), lease: b, value: b"beta".to_vec() }).await
            }
        });
        d.until_waiting(1).await;
        assert!(!waiting.is_finished(), "{url}: b's Campaign waits while a leads");

        // Proclaim keeps the term.
        d.elections()
            .proclaim(ProclaimRequest { leader: Some(first.clone()), value: b"alpha2".to_vec() })
            .await
            .expect("proclaim");
        let kv = leader(&d, &name).await.unwrap().kv.unwrap();
        assert_eq!((kv.value.as_slice(), kv.mod_revision), (&b"alpha2"[..], first.rev), "{url}: same term");

        // Resign hands over to b, with a higher term.
        d.elections().resign(ResignRequest { leader: Some(first.clone()) }).await.expect("resign");
        let second = within("b's campaign", 10, waiting).await.unwrap().expect("b leads").into_inner().leader.unwrap();
        assert_eq!(second.lease, b);
        assert!(second.rev > first.rev, "{url}: terms rise ({} > {})", second.rev, first.rev);
        let kv = leader(&d, &name).await.unwrap().kv.unwrap();
        assert_eq!((kv.value.as_slice(), kv.mod_revision), (&b"beta"[..], second.rev), "{url}");

        // The resigned key no longer leads.
        let stale = d
            .elections()
            .proclaim(ProclaimRequest { leader: Some(first.clone()), value: b"x".to_vec() })
            .await
            .unwrap_err();
        assert_eq!((stale.code(), stale.message()), (Code::FailedPrecondition, "etcdserver: election: not leader"));
        let stale = d.elections().resign(ResignRequest { leader: Some(first) }).await.unwrap_err();
        assert_eq!(stale.code(), Code::FailedPrecondition, "{url}");

        // Nobody leads after b resigns: etcd's error.
        d.elections().resign(ResignRequest { leader: Some(second) }).await.expect("resign b");
        let none = leader(&d, &name).await.unwrap_err();
        assert_eq!((none.code(), none.message()), (Code::FailedPrecondition, "etcdserver: election: no leader"));
        sdk.close().await;
    }
}

#[tokio::test]
async fn observe_sees_every_change_in_order() {
    for url in backends() {
        let d = Daemon::start(&url, &[]).await;
        let name = unique("elect-observe");
        let mut stream = d
            .elections()
            .observe(LeaderRequest { name: name.as_bytes().to_vec() })
            .await
            .expect("observe")
            .into_inner();
        assert_eq!(next(&mut stream).await, None, "{url}: nobody leads yet (reported, unlike etcd)");
        let (a, b) = (grant(&d, 10).await, grant(&d, 10).await);
        let first = campaign(&d, &name, a, b"one").await.unwrap();
        assert_eq!(next(&mut stream).await, Some((b"one".to_vec(), first.rev)), "{url}");
        d.elections().proclaim(ProclaimRequest { leader: Some(first.clone()), value: b"two".to_vec() }).await.unwrap();
        assert_eq!(next(&mut stream).await, Some((b"two".to_vec(), first.rev)), "{url}");
        d.elections().resign(ResignRequest { leader: Some(first.clone()) }).await.unwrap();
        assert_eq!(next(&mut stream).await, None, "{url}: the resignation is reported");
        let second = campaign(&d, &name, b, b"three").await.unwrap();
        assert!(second.rev > first.rev);
        assert_eq!(next(&mut stream).await, Some((b"three".to_vec(), second.rev)), "{url}");
    }
}

#[tokio::test]
async fn leadership_ends_with_its_lease() {
    for url in backends() {
        let d = Daemon::start(&url, &[]).await;
        let name = unique("elect-lease");
        let lease = grant(&d, 10).await;
        let first = campaign(&d, &name, lease, b"v").await.unwrap();
        d.leases().lease_revoke(LeaseRevokeRequest { id: lease }).await.expect("revoke");
        let none = leader(&d, &name).await.unwrap_err();
        assert_eq!(none.code(), Code::FailedPrecondition, "{url}: the revoked lease's leadership ended");
        let revoked = campaign(&d, &name, lease, b"v").await.unwrap_err();
        assert_eq!(revoked.code(), Code::NotFound, "{url}: a campaign on a revoked lease fails");
        let stale = d.elections().proclaim(ProclaimRequest { leader: Some(first), value: b"x".to_vec() }).await;
        assert_eq!(stale.unwrap_err().code(), Code::FailedPrecondition, "{url}");

        // A lease without keep-alives expires, and its leadership with it: another campaign gets in.
        let short = grant(&d, 1).await;
        let expiring = campaign(&d, &name, short, b"short").await.unwrap();
        let other = grant(&d, 10).await;
        let next = within("the campaign after the expiry", 10, campaign(&d, &name, other, b"next"))
            .await
            .expect("leads once the first lease expired");
        assert!(next.rev > expiring.rev, "{url}");
    }
}

#[tokio::test]
async fn a_campaign_needs_a_text_name_and_a_live_lease() {
    let d = Daemon::start(&backends()[0], &[]).await;
    let bad = d
        .elections()
        .campaign(CampaignRequest { name: vec![0xff], lease: grant(&d, 10).await, value: vec![] })
        .await
        .unwrap_err();
    assert_eq!(bad.code(), Code::InvalidArgument);
    let none =
        d.elections().campaign(CampaignRequest { name: b"x".to_vec(), lease: 0, value: vec![] }).await.unwrap_err();
    assert_eq!(none.code(), Code::InvalidArgument);
    let unknown =
        d.elections().campaign(CampaignRequest { name: b"x".to_vec(), lease: 12345, value: vec![] }).await.unwrap_err();
    assert_eq!(unknown.code(), Code::NotFound);
}
