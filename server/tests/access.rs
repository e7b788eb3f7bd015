//! fencelockd's access control (DESIGN.md §8): TLS and mutual TLS with the test PKI of scripts/services.sh, leases
//! that belong to the identity that took them, random lease ids, fenced writes only with granted tokens,
//! `--max-waiters`, and the warning for plaintext off loopback.

mod support;

use std::process::Stdio;

use fencelock::LockOptions;
use fencelockd::proto::etcdserverpb::lease_client::LeaseClient;
use fencelockd::proto::etcdserverpb::{
    LeaseGrantRequest, LeaseKeepAliveRequest, LeaseLeasesRequest, LeaseRevokeRequest, LeaseTimeToLiveRequest,
};
use fencelockd::proto::fencelock_v1::locks_client::LocksClient;
use fencelockd::proto::fencelock_v1::{
    FencedReadRequest, FencedWriteRequest, LockRequest as NativeLockRequest, ReleaseRequest, RenewRequest,
    WatchLostRequest,
};
use fencelockd::proto::v3electionpb::election_client::ElectionClient;
use fencelockd::proto::v3electionpb::{CampaignRequest, LeaderKey, ProclaimRequest, ResignRequest};
use fencelockd::proto::v3lockpb::lock_client::LockClient;
use fencelockd::proto::v3lockpb::{LockRequest, UnlockRequest};
use support::{Daemon, Pki, sqlite, unique, within};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
use tonic::Code;
use tonic::transport::Channel;

async fn grant(leases: &mut LeaseClient<Channel>, id: i64) -> Result<i64, tonic::Status> {
    Ok(leases.lease_grant(LeaseGrantRequest { ttl: 60, id }).await?.into_inner().id)
}

async fn listed(leases: &mut LeaseClient<Channel>) -> Vec<i64> {
    leases
        .lease_leases(LeaseLeasesRequest {})
        .await
        .expect("LeaseLeases")
        .into_inner()
        .leases
        .iter()
        .map(|l| l.id)
        .collect()
}

fn denied<T: std::fmt::Debug>(what: &str, r: Result<T, tonic::Status>) {
    let e = r.expect_err(what);
    assert_eq!(e.code(), Code::PermissionDenied, "{what}: {e:?}");
    assert!(e.message().contains("belongs to another identity"), "{what}: {e:?}");
}

/// A call over `channel` fails: at connect, or (TLS 1.3 sends the server's refusal of a client certificate after
/// the client thinks the handshake is done) at the first call.
async fn refused(what: &str, channel: Result<Channel, tonic::transport::Error>) {
    let Ok(channel) = channel else { return };
    let r = LeaseClient::new(channel).lease_grant(LeaseGrantRequest { ttl: 5, id: 0 }).await;
    let e = r.expect_err(what);
    // The connection is torn down: a transport error under the status (its code depends on when the refusal
    // arrives: UNAVAILABLE, CANCELLED, UNKNOWN, INTERNAL), not an answer of fencelockd's.
    let torn = std::error::Error::source(&e).is_some_and(|s| s.is::<tonic::transport::Error>());
    assert!(torn, "{what}: {e:?}");
}

#[tokio::test]
async fn mutual_tls_admits_only_clients_its_ca_signed() {
    let Some(pki) = Pki::from_env() else { return };
    let args = pki.server_args(true);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let d = Daemon::start_tls(&sqlite(), &args, Some(pki.client(&pki.ca, Some(&pki.client)))).await;
    let lease = grant(&mut d.leases(), 0).await.expect("a client the CA signed is served");
    assert!(lease > 0);

    refused("no client certificate", d.connect(Some(pki.client(&pki.ca, None))).await).await;
    refused("a certificate the wrong CA signed", d.connect(Some(pki.client(&pki.ca, Some(&pki.rogue)))).await).await;
    refused("plaintext", d.connect(None).await).await;
    refused("a client trusting the wrong CA", d.connect(Some(pki.client(&pki.wrong_ca, Some(&pki.client)))).await)
        .await;
    // The rogue certificate has the same CN as the real one: had it been let in, it would see the real one's lease.
    assert_eq!(listed(&mut d.leases()).await, vec![lease]);
}

#[tokio::test]
async fn tls_without_client_certificates_serves_everyone_as_one_identity() {
    let Some(pki) = Pki::from_env() else { return };
    let args = pki.server_args(false);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let d = Daemon::start_tls(&sqlite(), &args, Some(pki.client(&pki.ca, None))).await;
    let lease = grant(&mut d.leases(), 0).await.expect("TLS without a client certificate");
    refused("plaintext to a TLS port", d.connect(None).await).await;
    let other = d.connect(Some(pki.client(&pki.ca, Some(&pki.other)))).await.expect("connect");
    // No --client-ca: a certificate is not asked for, so both are the anonymous identity and share leases.
    assert_eq!(listed(&mut LeaseClient::new(other.clone())).await, vec![lease]);
    LeaseClient::new(other).lease_revoke(LeaseRevokeRequest { id: lease }).await.expect("anonymous revokes");
}

#[tokio::test]
async fn an_etcd_lease_serves_only_the_identity_that_granted_it() {
    let Some(pki) = Pki::from_env() else { return };
    let args = pki.server_args(true);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let d = Daemon::start_tls(&sqlite(), &args, Some(pki.client(&pki.ca, Some(&pki.client)))).await;
    let b = d.connect(Some(pki.client(&pki.ca, Some(&pki.other)))).await.expect("B connects");
    let (mut a_leases, mut b_leases) = (d.leases(), LeaseClient::new(b.clone()));
    let mut b_locks = LockClient::new(b.clone());

    let name = unique("acl-etcd");
    let lease = grant(&mut a_leases, 0).await.unwrap();
    let key = d.locks().lock(LockRequest { name: name.clone().into_bytes(), lease }).await.unwrap().into_inner().key;
    let b_lease = grant(&mut b_leases, 0).await.unwrap();

    let mut stream = b_leases
        .lease_keep_alive(tokio_stream::iter([LeaseKeepAliveRequest { id: lease }]))
        .await
        .expect("B's keep-alive stream opens")
        .into_inner();
    denied("B keeps A's lease alive", within("keep-alive", 10, stream.message()).await);
    denied("B revokes A's lease", b_leases.lease_revoke(LeaseRevokeRequest { id: lease }).await);
    denied("B locks with A's lease", b_locks.lock(LockRequest { name: unique("acl-b").into_bytes(), lease }).await);
    denied("B unlocks A's key", b_locks.unlock(UnlockRequest { key: key.clone() }).await);
    denied(
        "B asks A's lease's TTL",
        b_leases.lease_time_to_live(LeaseTimeToLiveRequest { id: lease, keys: true }).await,
    );
    assert_eq!(listed(&mut a_leases).await, vec![lease], "A lists only its own lease");
    assert_eq!(listed(&mut b_leases).await, vec![b_lease], "B lists only its own lease");

    // A client-chosen id that is free becomes the chooser's: B's, here. One taken is refused.
    let chosen = 0x5eed_0000_0001;
    assert_eq!(grant(&mut b_leases, chosen).await.expect("a free chosen id"), chosen);
    let taken = grant(&mut a_leases, chosen).await.unwrap_err();
    assert_eq!(taken.code(), Code::FailedPrecondition, "{taken:?}");
    denied("A revokes B's chosen lease", a_leases.lease_revoke(LeaseRevokeRequest { id: chosen }).await);

    // Everything B tried left A's lease and lock alone.
    let sdk = d.sdk().await;
    assert!(sdk.try_lock(&name, &LockOptions::default()).await.unwrap().is_none(), "A still holds {name}");
    d.locks().unlock(UnlockRequest { key }).await.expect("A unlocks");
    a_leases.lease_revoke(LeaseRevokeRequest { id: lease }).await.expect("A revokes");
}

#[tokio::test]
async fn an_etcd_lease_leads_an_election_only_for_the_identity_that_granted_it() {
    let Some(pki) = Pki::from_env() else { return };
    let args = pki.server_args(true);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let d = Daemon::start_tls(&sqlite(), &args, Some(pki.client(&pki.ca, Some(&pki.client)))).await;
    let b = d.connect(Some(pki.client(&pki.ca, Some(&pki.other)))).await.expect("B connects");
    let mut b_elections = ElectionClient::new(b);
    let name = unique("acl-election");
    let lease = grant(&mut d.leases(), 0).await.unwrap();
    let campaign = |name: &str| CampaignRequest { name: name.as_bytes().to_vec(), lease, value: b"a".to_vec() };
    let leader: LeaderKey =
        d.elections().campaign(campaign(&name)).await.expect("A campaigns").into_inner().leader.expect("leader key");
    denied("B campaigns with A's lease", b_elections.campaign(campaign(&unique("acl-b"))).await);
    denied(
        "B proclaims as A",
        b_elections.proclaim(ProclaimRequest { leader: Some(leader.clone()), value: b"b".to_vec() }).await,
    );
    denied("B resigns A", b_elections.resign(ResignRequest { leader: Some(leader.clone()) }).await);
    let sdk = d.sdk().await;
    let now = sdk.election(&name).leader().await.unwrap().expect("A still leads");
    assert_eq!((now.value.as_slice(), now.term as i64), (&b"a"[..], leader.rev));
    d.elections().resign(ResignRequest { leader: Some(leader) }).await.expect("A resigns");
}

#[tokio::test]
async fn a_native_lease_serves_only_the_identity_that_took_it() {
    let Some(pki) = Pki::from_env() else { return };
    let args = pki.server_args(true);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let d = Daemon::start_tls(&sqlite(), &args, Some(pki.client(&pki.ca, Some(&pki.client)))).await;
    let b = d.connect(Some(pki.client(&pki.ca, Some(&pki.other)))).await.expect("B connects");
    let (mut a, mut b) = (d.native(), LocksClient::new(b));

    let name = unique("acl-native");
    let got = a.try_lock(NativeLockRequest { name: name.clone(), ttl_ms: 30_000, timeout_ms: 0 }).await.unwrap();
    let got = got.into_inner();
    assert!(got.acquired);
    denied("B renews A's lease", b.renew(RenewRequest { lease_id: got.lease_id, ttl_ms: 0 }).await);
    denied("B releases A's lease", b.release(ReleaseRequest { lease_id: got.lease_id }).await);
    denied("B watches A's lease", b.watch_lost(WatchLostRequest { lease_id: got.lease_id }).await);
    // B holds no lock of that name: A's token is not B's to write with.
    let write = FencedWriteRequest { resource: name.clone(), token: got.fence, value: b"b".to_vec() };
    let e = b.fenced_write(write).await.unwrap_err();
    assert_eq!(e.code(), Code::PermissionDenied, "B writes with A's token: {e:?}");

    a.fenced_write(FencedWriteRequest { resource: name.clone(), token: got.fence, value: b"a".to_vec() })
        .await
        .expect("A writes with its token");
    a.release(ReleaseRequest { lease_id: got.lease_id }).await.expect("A releases");
}

#[tokio::test]
async fn a_fenced_write_needs_a_token_granted_on_that_name() {
    let d = Daemon::start(&sqlite(), &[]).await;
    let mut native = d.native();
    let (name, elsewhere) = (unique("fence-granted"), unique("fence-elsewhere"));
    let lock = |name: &str| NativeLockRequest { name: name.to_string(), ttl_ms: 30_000, timeout_ms: 0 };
    let write = |resource: &str, token: u64| FencedWriteRequest {
        resource: resource.to_string(),
        token,
        value: token.to_string().into_bytes(),
    };
    let first = native.try_lock(lock(&name)).await.unwrap().into_inner();

    // The attack of issue 17: one write with the highest token locks every real holder out for ever.
    // (u64::MAX itself some backends refuse as out of range; i64::MAX every one stores.)
    let forged = [(&name, i64::MAX as u64), (&name, u64::MAX), (&name, first.fence + 1), (&elsewhere, first.fence)];
    for (resource, token) in forged {
        let e = native.fenced_write(write(resource, token)).await.unwrap_err();
        assert_eq!(e.code(), Code::PermissionDenied, "token {token} on {resource}: {e:?}");
        assert!(e.message().contains("granted this identity no such token"), "{e:?}");
    }
    let read = native.fenced_read(FencedReadRequest { resource: name.clone() }).await.unwrap().into_inner();
    assert_eq!(read.token, 0, "the refused writes left the register untouched");

    native.fenced_write(write(&name, first.fence)).await.expect("the granted token");
    native.release(ReleaseRequest { lease_id: first.lease_id }).await.unwrap();
    let second = native.try_lock(lock(&name)).await.unwrap().into_inner();
    native.fenced_write(write(&name, second.fence)).await.expect("the next grant's token");
    // A token granted earlier is still the caller's: the register itself refuses it as stale (FENCED).
    let stale = native.fenced_write(write(&name, first.fence)).await.unwrap_err();
    assert_eq!(stale.code(), Code::Aborted, "{stale:?}");
    assert_eq!(stale.metadata().get("fencelock-error").unwrap(), "FENCED");
    native.release(ReleaseRequest { lease_id: second.lease_id }).await.unwrap();
}

#[tokio::test]
async fn lease_ids_are_random_63_bit_numbers() {
    let d = Daemon::start(&sqlite(), &[]).await;
    let mut ids = Vec::new();
    for _ in 0..12 {
        ids.push(grant(&mut d.leases(), 0).await.unwrap());
    }
    for _ in 0..4 {
        let req = NativeLockRequest { name: unique("random-id"), ttl_ms: 30_000, timeout_ms: 0 };
        let id = d.native().try_lock(req).await.unwrap().into_inner().lease_id;
        ids.push(i64::try_from(id).expect("native ids are 63-bit too"));
    }
    assert!(ids.iter().all(|&id| id > 0), "{ids:x?}");
    let mut sorted = ids.clone();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(sorted.len(), ids.len(), "distinct: {ids:x?}");
    assert!(ids.windows(2).all(|w| w[1].abs_diff(w[0]) > 1), "not counted up: {ids:x?}");
    // Uniform over 63 bits, 16 ids all below 2^55 has odds of 2^-128; a clock-seeded counter is always there.
    assert!(ids.iter().any(|&id| id >= 1 << 55), "the whole 63-bit range: {ids:x?}");
}

#[tokio::test]
async fn a_chosen_lease_id_must_be_free_of_native_leases_too() {
    let d = Daemon::start(&sqlite(), &[]).await;
    let req = NativeLockRequest { name: unique("chosen"), ttl_ms: 30_000, timeout_ms: 0 };
    let native = d.native().try_lock(req).await.unwrap().into_inner().lease_id;
    let e = grant(&mut d.leases(), native as i64).await.unwrap_err();
    assert_eq!((e.code(), e.message()), (Code::FailedPrecondition, "etcdserver: lease already exists"), "{e:?}");
    let negative = grant(&mut d.leases(), -7).await.unwrap_err();
    assert_eq!(negative.code(), Code::InvalidArgument, "{negative:?}");
}

#[tokio::test]
async fn max_waiters_bounds_waiting_lock_calls() {
    let d = Daemon::start(&sqlite(), &["--max-waiters", "1"]).await;
    let sdk = d.sdk().await;
    let name = unique("waiters");
    let held = sdk.try_lock(&name, &LockOptions::default()).await.unwrap().expect("the SDK holds");
    let lease = grant(&mut d.leases(), 0).await.unwrap();
    let waiter = tokio::spawn({
        let (mut locks, name) = (d.locks(), name.clone());
        async move { locks.lock(LockRequest { name: name.into_bytes(), lease }).await }
    });
    d.until_waiting(1).await;

    let e = d.locks().lock(LockRequest { name: name.clone().into_bytes(), lease }).await.unwrap_err();
    assert_eq!(e.code(), Code::ResourceExhausted, "{e:?}");
    assert!(e.message().contains("--max-waiters 1"), "the message names the bound: {e:?}");
    let native = d.native().lock(NativeLockRequest { name: name.clone(), ttl_ms: 5_000, timeout_ms: 5_000 }).await;
    assert_eq!(native.unwrap_err().code(), Code::ResourceExhausted, "native Lock calls count too");
    let once = d.native().try_lock(NativeLockRequest { name: name.clone(), ttl_ms: 5_000, timeout_ms: 0 }).await;
    assert!(!once.expect("TryLock does not wait, so it is not bounded").into_inner().acquired);

    held.release().await.unwrap();
    within("the waiter", 10, waiter).await.unwrap().expect("the one waiter gets the lock");
    d.until_waiting(0).await;
}

/// fencelockd's log (text, level warn) from start until it listens, with `args`.
async fn startup_log(args: &[&str]) -> String {
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_fencelockd"))
        .args(["--backend", &sqlite(), "--log-format", "text"])
        .args(args)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start fencelockd");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let line = within("listening", 30, lines.next_line()).await.unwrap();
    assert!(line.as_deref().is_some_and(|l| l.starts_with("listening on ")), "{line:?}");
    child.start_kill().unwrap();
    let mut log = String::new();
    within("the log", 10, child.stderr.take().unwrap().read_to_string(&mut log)).await.unwrap();
    log
}

#[tokio::test]
async fn plaintext_off_loopback_warns_unless_insecure() {
    let log = startup_log(&["--listen", "0.0.0.0:0"]).await;
    assert!(log.contains("without TLS") && log.contains("--insecure"), "{log}");
    let log = startup_log(&["--listen", "0.0.0.0:0", "--insecure"]).await;
    assert!(!log.contains("without TLS"), "--insecure: {log}");
    let log = startup_log(&["--listen", "127.0.0.1:0"]).await;
    assert!(!log.contains("without TLS"), "loopback: {log}");
    if let Some(pki) = Pki::from_env() {
        let tls = pki.server_args(false);
        let args: Vec<&str> = ["--listen", "0.0.0.0:0"].into_iter().chain(tls.iter().map(String::as_str)).collect();
        let log = startup_log(&args).await;
        assert!(!log.contains("without TLS"), "TLS: {log}");
    }
}

/// A users file with `users` (name, password), hashed by `fencelockd --hash-password`.
async fn users_file(users: &[(&str, &str)]) -> std::path::PathBuf {
    let mut text = String::new();
    for (name, password) in users {
        let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_fencelockd"))
            .args(["--hash-password", name])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("fencelockd --hash-password");
        use tokio::io::AsyncWriteExt;
        child.stdin.take().unwrap().write_all(format!("{password}\n").as_bytes()).await.unwrap();
        let out = within("--hash-password", 30, child.wait_with_output()).await.unwrap();
        assert!(out.status.success());
        let line = String::from_utf8(out.stdout).unwrap();
        assert!(!line.contains(password), "the line holds a hash, not the password: {line}");
        text.push_str(&line);
    }
    let path = std::env::temp_dir().join(format!("{}.users", unique("fencelockd")));
    std::fs::write(&path, text).unwrap();
    path
}

type WithToken = tonic::service::interceptor::InterceptedService<
    Channel,
    Box<dyn FnMut(tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> + Send + Sync>,
>;

/// `channel` sending `token` as etcd's clients do (the `token` metadata).
fn with_token(channel: &Channel, token: &str) -> WithToken {
    let token: tonic::metadata::MetadataValue<_> = token.parse().unwrap();
    tonic::service::interceptor::InterceptedService::new(
        channel.clone(),
        Box::new(move |mut req: tonic::Request<()>| {
            req.metadata_mut().insert("token", token.clone());
            Ok(req)
        }),
    )
}

#[tokio::test]
async fn etcd_password_users_authenticate_and_own_their_leases() {
    use fencelockd::proto::etcdserverpb::AuthenticateRequest;
    use fencelockd::proto::etcdserverpb::auth_client::AuthClient;
    let file = users_file(&[("alice", "alice-pw"), ("bob", "bob-pw")]).await;
    let d = Daemon::start(&sqlite(), &["--users", file.to_str().unwrap()]).await;
    let mut auth = AuthClient::new(d.channel.clone());
    let login = |name: &str, password: &str| AuthenticateRequest { name: name.into(), password: password.into() };

    let wrong = auth.authenticate(login("alice", "bob-pw")).await.unwrap_err();
    assert_eq!(
        (wrong.code(), wrong.message()),
        (Code::InvalidArgument, "etcdserver: authentication failed, invalid user ID or password")
    );
    let nobody = auth.authenticate(login("carol", "alice-pw")).await.unwrap_err();
    assert_eq!(nobody.code(), Code::InvalidArgument);
    let alice = auth.authenticate(login("alice", "alice-pw")).await.unwrap().into_inner().token;
    let bob = auth.authenticate(login("bob", "bob-pw")).await.unwrap().into_inner().token;

    let no_token = d.leases().lease_grant(LeaseGrantRequest { ttl: 30, id: 0 }).await.unwrap_err();
    assert_eq!(no_token.code(), Code::Unauthenticated, "{no_token:?}");
    let native = d.native().try_lock(NativeLockRequest { name: unique("u"), ttl_ms: 1_000, timeout_ms: 0 }).await;
    assert_eq!(native.unwrap_err().code(), Code::Unauthenticated, "the native service too");
    let mut forged = LeaseClient::new(with_token(&d.channel, "0123456789abcdef"));
    let forged = forged.lease_leases(LeaseLeasesRequest {}).await.unwrap_err();
    assert_eq!((forged.code(), forged.message()), (Code::Unauthenticated, "etcdserver: invalid auth token"));

    let (mut a, mut b) =
        (LeaseClient::new(with_token(&d.channel, &alice)), LeaseClient::new(with_token(&d.channel, &bob)));
    let lease = a.lease_grant(LeaseGrantRequest { ttl: 30, id: 0 }).await.unwrap().into_inner().id;
    let name = unique("users");
    let key = LockClient::new(with_token(&d.channel, &alice))
        .lock(LockRequest { name: name.clone().into_bytes(), lease })
        .await
        .unwrap()
        .into_inner()
        .key;
    denied("bob revokes alice's lease", b.lease_revoke(LeaseRevokeRequest { id: lease }).await);
    denied(
        "bob unlocks alice's key",
        LockClient::new(with_token(&d.channel, &bob)).unlock(UnlockRequest { key }).await,
    );
    let listed = |r: tonic::Response<fencelockd::proto::etcdserverpb::LeaseLeasesResponse>| {
        r.into_inner().leases.iter().map(|l| l.id).collect::<Vec<_>>()
    };
    assert_eq!(listed(a.lease_leases(LeaseLeasesRequest {}).await.unwrap()), vec![lease]);
    assert!(listed(b.lease_leases(LeaseLeasesRequest {}).await.unwrap()).is_empty());
    a.lease_revoke(LeaseRevokeRequest { id: lease }).await.expect("alice revokes her lease");
    std::fs::remove_file(file).unwrap();
}
