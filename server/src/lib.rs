//! fencelockd: a gRPC lock service that speaks etcd's lease + v3lock protocol (so etcd's own clients in Go, .NET,
//! Ruby, … get fencelock locks with no binding) plus a native service for what etcd's API lacks, over any fencelock
//! backend URL.
//!
//! - `etcd` — `etcdserverpb.Lease` and `v3lockpb.Lock`: a lease owns the locks taken with it and releases them when
//!   it is revoked or its keep-alives stop.
//! - `election` — `v3electionpb.Election`: etcd's elections over fencelock's, on the same etcd leases; a leader
//!   key's rev is the term.
//! - `native` — `fencelock.v1.Locks`: try-lock, renew with a new TTL, fenced writes, the lost stream.
//! - `registry` — the one lease table under both, bounded by `--max-leases` and `--max-waiters`; each lease belongs
//!   to the identity that took it.
//! - `identity` — who is calling: the client certificate's subject CN with mutual TLS, else one anonymous identity.
//! - `users` — optional etcd-style password authentication (`--users`): `Auth.Authenticate` and its tokens.
//! - `transport` — server TLS and mutual TLS from the flags; the warning for plaintext off loopback.
//! - `serve` — the server with health and reflection, and the shutdown order.
//! - `grpc_calls` — gRPC calls counted by method and status code (a tower layer around every service).
//! - `metrics` — `--metrics-listen`: Prometheus text at `GET /metrics`, core's families and fencelockd's own.

pub mod election;
pub mod etcd;
pub mod grpc_calls;
pub mod identity;
pub mod metrics;
pub mod native;
/// The generated gRPC code, shared with the etcd backend (crate `fencelock-proto`).
pub use fencelock_proto as proto;
pub mod registry;
pub mod serve;
pub mod status;
pub mod transport;
pub mod users;
