//! Operations: health, reflection, and what a graceful shutdown releases.

mod support;

use std::time::Duration;

use fencelock::LockOptions;
use fencelockd::proto::etcdserverpb::LeaseGrantRequest;
use fencelockd::proto::fencelock_v1::LockRequest as NativeLockRequest;
use fencelockd::proto::v3lockpb::LockRequest;
use support::{Daemon, backends, unique, within};
use tokio_stream::StreamExt;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;
use tonic_reflection::pb::v1::ServerReflectionRequest;
use tonic_reflection::pb::v1::server_reflection_client::ServerReflectionClient;
use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;
use tonic_reflection::pb::v1::server_reflection_response::MessageResponse;

#[tokio::test]
async fn health_reports_every_service_serving() {
    let d = Daemon::start(&backends()[0], &[]).await;
    let mut health = HealthClient::new(d.channel.clone());
    for service in ["", "etcdserverpb.Lease", "v3lockpb.Lock", "v3electionpb.Election", "fencelock.v1.Locks"] {
        let r = health.check(HealthCheckRequest { service: service.into() }).await.unwrap().into_inner();
        assert_eq!(r.status(), ServingStatus::Serving, "{service:?}");
    }
    let unknown = health.check(HealthCheckRequest { service: "nope.Nope".into() }).await.unwrap_err();
    assert_eq!(unknown.code(), tonic::Code::NotFound);
}

#[tokio::test]
async fn reflection_lists_the_services() {
    let d = Daemon::start(&backends()[0], &[]).await;
    let mut reflection = ServerReflectionClient::new(d.channel.clone());
    let request = ServerReflectionRequest {
        host: String::new(),
        message_request: Some(MessageRequest::ListServices(String::new())),
    };
    let mut replies = reflection.server_reflection_info(tokio_stream::iter([request])).await.unwrap().into_inner();
    let reply = replies.next().await.expect("a reply").expect("ok");
    let Some(MessageResponse::ListServicesResponse(list)) = reply.message_response else {
        panic!("unexpected reply {reply:?}")
    };
    let names: Vec<&str> = list.service.iter().map(|s| s.name.as_str()).collect();
    for service in
        ["etcdserverpb.Lease", "v3lockpb.Lock", "v3electionpb.Election", "fencelock.v1.Locks", "grpc.health.v1.Health"]
    {
        assert!(names.contains(&service), "{service} in {names:?}");
    }
    // The shared descriptors also describe etcd's KV, Watch, Auth and Maintenance, which fencelockd does not serve.
    for unserved in ["etcdserverpb.KV", "etcdserverpb.Watch", "etcdserverpb.Auth", "etcdserverpb.Maintenance"] {
        assert!(!names.contains(&unserved), "{unserved} listed in {names:?}");
    }
}

#[tokio::test]
async fn sigterm_releases_every_lock_at_once() {
    for url in backends() {
        let d = Daemon::start(&url, &[]).await;
        let sdk = d.sdk().await;
        let (etcd_name, native_name) = (unique("shutdown-etcd"), unique("shutdown-native"));
        // Long TTLs: if shutdown left them to expire, the SDK would wait a minute.
        let lease = d.leases().lease_grant(LeaseGrantRequest { ttl: 60, id: 0 }).await.unwrap().into_inner().id;
        d.locks().lock(LockRequest { name: etcd_name.clone().into_bytes(), lease }).await.unwrap();
        let native = d
            .native()
            .try_lock(NativeLockRequest { name: native_name.clone(), ttl_ms: 60_000, timeout_ms: 0 })
            .await
            .unwrap()
            .into_inner();
        assert!(native.acquired);
        // A keep-alive stream stays open; shutdown must end it rather than wait for it.
        let (_tx, rx) = tokio::sync::mpsc::channel(1);
        let _stream = d.leases().lease_keep_alive(tokio_stream::wrappers::ReceiverStream::new(rx)).await.unwrap();

        let status = d.terminate().await;
        assert!(status.success(), "{url}: {status:?}");
        let opts = LockOptions::default().timeout(Duration::from_secs(2));
        for name in [&etcd_name, &native_name] {
            let got = sdk.lock(name, &opts).await;
            assert!(got.is_ok(), "{url}: {name} released at shutdown: {got:?}");
        }
    }
}

#[tokio::test]
async fn a_backend_it_cannot_reach_is_logged_without_its_password() {
    // Port 1 on loopback: nothing answers, so fencelockd logs the backend and exits. The log names the host only.
    for (backend, secret) in
        [("etcd://root:pa/ss@127.0.0.1:1", "pa/ss"), ("redlock://u:p@ss@127.0.0.1:1,127.0.0.1:2,127.0.0.1:3", "p@ss")]
    {
        let out = within(
            "fencelockd exits",
            30,
            tokio::process::Command::new(env!("CARGO_BIN_EXE_fencelockd"))
                .args(["--listen", "127.0.0.1:0", "--backend", backend, "--log-format", "text"])
                .env("RUST_LOG", "info")
                .output(),
        )
        .await
        .expect("run fencelockd");
        let log = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{log}");
        assert!(log.contains("cannot connect to the backend") && log.contains("127.0.0.1:1"), "{log}");
        assert!(!log.contains(secret), "the log shows {secret:?}: {log}");
    }
}
