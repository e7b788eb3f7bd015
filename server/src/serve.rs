//! The gRPC server: etcd's Lease, Lock and Election services, the native service, health and reflection, and the shutdown
//! order (stop serving, end open streams, revoke every lease, close the backend).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tonic::transport::server::TcpIncoming;
use tonic::transport::{Server, ServerTlsConfig};
use tonic_health::ServingStatus;

use crate::election::EtcdElections;
use crate::etcd::{EtcdLeases, EtcdLocks};
use crate::grpc_calls::GrpcCalls;
use crate::native::NativeLocks;
use crate::proto::DESCRIPTORS;
use crate::proto::etcdserverpb::auth_server::AuthServer;
use crate::proto::etcdserverpb::lease_server::LeaseServer;
use crate::proto::fencelock_v1::locks_server::LocksServer;
use crate::proto::v3electionpb::election_server::ElectionServer;
use crate::proto::v3lockpb::lock_server::LockServer;
use crate::registry::Registry;
use crate::users::{Authenticator, EtcdAuth, Users};

/// How long shutdown waits for in-flight calls before revoking leases anyway.
const DRAIN: Duration = Duration::from_secs(5);

/// Every service name fencelockd serves (health reports each; reflection lists them).
pub const SERVICES: [&str; 4] = ["etcdserverpb.Lease", "v3lockpb.Lock", "v3electionpb.Election", "fencelock.v1.Locks"];

/// Serves on `incoming` (over TLS if `tls` is given, see `transport::server_tls`; with etcd's `Auth.Authenticate`
/// and a token required on every lease and lock call if `users` is given) until `stop` resolves, then shuts down as
/// documented in the README. Every call is counted in `calls`, by method and status code.
pub async fn serve(
    registry: Arc<Registry>,
    incoming: TcpIncoming,
    tls: Option<ServerTlsConfig>,
    users: Option<Arc<Users>>,
    calls: Arc<GrpcCalls>,
    stop: impl Future<Output = ()> + Send + 'static,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let (health, health_service) = tonic_health::server::health_reporter();
    for name in SERVICES.into_iter().chain([""]) {
        health.set_service_status(name, ServingStatus::Serving).await;
    }
    // Both reflection versions: grpcurl and older tools still ask v1alpha.
    // The descriptors also hold the etcd calls fencelockd does not serve (KV, Watch, Auth): list only its own.
    let reflection = || {
        let builder = tonic_reflection::server::Builder::configure()
            .register_encoded_file_descriptor_set(DESCRIPTORS)
            .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
            .with_service_name("grpc.health.v1.Health")
            .with_service_name("grpc.reflection.v1.ServerReflection")
            .with_service_name("grpc.reflection.v1alpha.ServerReflection");
        SERVICES.into_iter().fold(builder, |b, name| b.with_service_name(name))
    };
    let (reflection_v1, reflection_v1alpha) = (reflection().build_v1()?, reflection().build_v1alpha()?);

    let (stopping_tx, stopping_rx) = tokio::sync::oneshot::channel::<()>();
    let on_stop = {
        let registry = registry.clone();
        async move {
            stop.await;
            tracing::info!("shutting down: no new calls; open streams end; leases are revoked");
            for name in SERVICES.into_iter().chain([""]) {
                health.set_service_status(name, ServingStatus::NotServing).await;
            }
            let _ = stopping_tx.send(());
            // Ends keep-alive streams and waiting Lock calls so the drain below can finish.
            registry.begin_shutdown();
        }
    };
    let mut builder = Server::builder();
    if let Some(tls) = tls {
        builder = builder.tls_config(tls)?;
    }
    let auth = Authenticator(users.clone());
    let server = builder
        .layer(calls.layer())
        .add_service(health_service)
        .add_service(reflection_v1)
        .add_service(reflection_v1alpha)
        .add_optional_service(users.map(|users| AuthServer::new(EtcdAuth(users))))
        .add_service(LeaseServer::with_interceptor(EtcdLeases(registry.clone()), auth.clone()))
        .add_service(LockServer::with_interceptor(EtcdLocks(registry.clone()), auth.clone()))
        .add_service(ElectionServer::with_interceptor(EtcdElections(registry.clone()), auth.clone()))
        .add_service(LocksServer::with_interceptor(NativeLocks(registry.clone()), auth))
        .serve_with_incoming_shutdown(incoming, on_stop);
    tokio::pin!(server);
    tokio::select! {
        r = &mut server => r?,
        _ = async { let _ = stopping_rx.await; tokio::time::sleep(DRAIN).await } => {
            tracing::warn!(drain_s = DRAIN.as_secs(), "calls still open after the drain period; revoking leases anyway");
        }
    }
    registry.shutdown().await;
    tracing::info!("stopped");
    Ok(())
}

/// Binds `addr` (port 0 picks a free one).
pub fn bind(addr: SocketAddr) -> std::io::Result<TcpIncoming> {
    TcpIncoming::bind(addr).map(|i| i.with_nodelay(Some(true)))
}
