//! etcd's `etcdserverpb.Lease` and `v3lockpb.Lock` services over the registry.

use std::pin::Pin;
use std::sync::Arc;

use fencelock::ErrorKind;
use futures::{Stream, StreamExt};
use tonic::{Request, Response, Status, Streaming};

use crate::identity::Identity;
use crate::proto::etcdserverpb::lease_server::Lease;
use crate::proto::etcdserverpb::{
    LeaseGrantRequest, LeaseGrantResponse, LeaseKeepAliveRequest, LeaseKeepAliveResponse, LeaseLeasesRequest,
    LeaseLeasesResponse, LeaseRevokeRequest, LeaseRevokeResponse, LeaseStatus, LeaseTimeToLiveRequest,
    LeaseTimeToLiveResponse, ResponseHeader,
};
use crate::proto::v3lockpb::lock_server::Lock;
use crate::proto::v3lockpb::{LockRequest, LockResponse, UnlockRequest, UnlockResponse};
use crate::registry::Registry;
use crate::status::{before_deadline, caller_deadline, status};

/// Constant ids in every header: there is one "member", and clients only compare them for equality.
const CLUSTER_ID: u64 = 0xfe1c_e10c;
const MEMBER_ID: u64 = 0xfe1c_e10d;

/// A response header; `revision` is the fencing token for lock calls and 0 otherwise.
pub fn header(revision: i64) -> Option<ResponseHeader> {
    Some(ResponseHeader { cluster_id: CLUSTER_ID, member_id: MEMBER_ID, revision, raft_term: 0 })
}

/// Tokens are u64 and revisions i64; tokens stay far below 2^63 (microsecond-seeded counters).
fn revision(fence: u64) -> i64 {
    i64::try_from(fence).unwrap_or(i64::MAX)
}

/// The `etcdserverpb.Lease` service.
#[derive(Debug, Clone)]
pub struct EtcdLeases(pub Arc<Registry>);

#[tonic::async_trait]
impl Lease for EtcdLeases {
    async fn lease_grant(&self, req: Request<LeaseGrantRequest>) -> Result<Response<LeaseGrantResponse>, Status> {
        let caller = Identity::of(&req)?;
        let req = req.into_inner();
        let lease = self.0.grant(req.ttl, req.id, caller)?;
        Ok(Response::new(LeaseGrantResponse {
            header: header(0),
            id: lease.id,
            ttl: lease.ttl.as_secs() as i64,
            error: String::new(),
        }))
    }

    async fn lease_revoke(&self, req: Request<LeaseRevokeRequest>) -> Result<Response<LeaseRevokeResponse>, Status> {
        let caller = Identity::of(&req)?;
        self.0.revoke(req.into_inner().id, &caller).await?;
        Ok(Response::new(LeaseRevokeResponse { header: header(0) }))
    }

    type LeaseKeepAliveStream = Pin<Box<dyn Stream<Item = Result<LeaseKeepAliveResponse, Status>> + Send>>;

    async fn lease_keep_alive(
        &self,
        req: Request<Streaming<LeaseKeepAliveRequest>>,
    ) -> Result<Response<Self::LeaseKeepAliveStream>, Status> {
        let registry = self.0.clone();
        let caller = Identity::of(&req)?;
        // Each request restarts its lease's TTL; like etcd, a lease that no longer exists is answered with TTL 0.
        // Another identity's lease ends the stream with PERMISSION_DENIED.
        let out = req
            .into_inner()
            .then(move |r| {
                let (registry, caller) = (registry.clone(), caller.clone());
                async move {
                    let r = r?;
                    let ttl = registry.keep_alive(r.id, &caller).await?.map_or(0, |t| t.as_secs() as i64);
                    if ttl == 0 {
                        tracing::debug!(
                            lease = format_args!("{:x}", r.id),
                            "keep-alive for a lease that no longer exists"
                        );
                    }
                    Ok(LeaseKeepAliveResponse { header: header(0), id: r.id, ttl })
                }
            })
            // Graceful shutdown waits for open streams, so they end when it starts.
            .take_until(self.0.shutting_down());
        Ok(Response::new(Box::pin(out)))
    }

    async fn lease_time_to_live(
        &self,
        req: Request<LeaseTimeToLiveRequest>,
    ) -> Result<Response<LeaseTimeToLiveResponse>, Status> {
        let caller = Identity::of(&req)?;
        let req = req.into_inner();
        let Some(lease) = self.0.etcd_lease(req.id, &caller)? else {
            // etcd answers an unknown lease with TTL -1, not an error.
            return Ok(Response::new(LeaseTimeToLiveResponse {
                header: header(0),
                id: req.id,
                ttl: -1,
                ..Default::default()
            }));
        };
        let keys = if req.keys { lease.keys().await.into_iter().map(String::into_bytes).collect() } else { Vec::new() };
        Ok(Response::new(LeaseTimeToLiveResponse {
            header: header(0),
            id: lease.id,
            ttl: lease.remaining().as_secs() as i64,
            granted_ttl: lease.ttl.as_secs() as i64,
            keys,
        }))
    }

    async fn lease_leases(&self, req: Request<LeaseLeasesRequest>) -> Result<Response<LeaseLeasesResponse>, Status> {
        let caller = Identity::of(&req)?;
        let leases = self.0.etcd_ids(&caller).into_iter().map(|id| LeaseStatus { id }).collect();
        Ok(Response::new(LeaseLeasesResponse { header: header(0), leases }))
    }
}

/// The `v3lockpb.Lock` service.
#[derive(Debug, Clone)]
pub struct EtcdLocks(pub Arc<Registry>);

fn utf8(bytes: Vec<u8>, what: &str) -> Result<String, Status> {
    String::from_utf8(bytes).map_err(|_| {
        status(ErrorKind::InvalidArgument, format!("{what} must be UTF-8 (fencelock lock names are text)"))
    })
}

#[tonic::async_trait]
impl Lock for EtcdLocks {
    async fn lock(&self, req: Request<LockRequest>) -> Result<Response<LockResponse>, Status> {
        let caller = Identity::of(&req)?;
        let deadline = caller_deadline(req.metadata());
        let req = req.into_inner();
        let name = utf8(req.name, "lock name")?;
        if req.lease == 0 {
            return Err(status(
                ErrorKind::InvalidArgument,
                format!("lock {name:?}: a lease is required (grant one first)"),
            ));
        }
        let (key, fence) = before_deadline(deadline, self.0.lock_for(req.lease, &name, &caller)).await?;
        Ok(Response::new(LockResponse { header: header(revision(fence)), key: key.into_bytes() }))
    }

    async fn unlock(&self, req: Request<UnlockRequest>) -> Result<Response<UnlockResponse>, Status> {
        let caller = Identity::of(&req)?;
        let key = utf8(req.into_inner().key, "lock key")?;
        let fence = self.0.unlock_key(&key, &caller).await?;
        Ok(Response::new(UnlockResponse { header: header(revision(fence)) }))
    }
}
