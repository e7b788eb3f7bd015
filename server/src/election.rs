//! etcd's `v3electionpb.Election` service over fencelock's elections, on the same etcd leases as the lock service.
//!
//! - Campaign on name N with lease L campaigns in the fencelock election N (so it excludes SDK campaigners on N) and
//!   returns the leader key `{name: N, key: "N/<L in hex>", rev: term, lease: L}`; the leadership ends with L.
//! - Leader answers etcd's KeyValue of the leader: the value, `create_revision` = `mod_revision` = the term, and the
//!   leader key and lease when the leader campaigned through this server (else the key is the name, lease 0);
//!   FAILED_PRECONDITION "etcdserver: election: no leader" when nobody leads, as etcd.
//! - Observe streams a LeaderResponse for the leader now and at each change (a new term or a proclaimed value). Unlike
//!   etcd, which stays silent, it also reports that nobody leads (any longer): a response whose `kv` is unset.
//! - Proclaim and Resign name the leader key; one that does not lead (any longer) is FAILED_PRECONDITION
//!   "etcdserver: election: not leader", as etcd.

use std::pin::Pin;
use std::sync::Arc;

use fencelock::{ErrorKind, Leader};
use futures::{Stream, StreamExt};
use tonic::{Request, Response, Status};

use crate::etcd::header;
use crate::identity::Identity;
use crate::proto::mvccpb::KeyValue;
use crate::proto::v3electionpb::election_server::Election;
use crate::proto::v3electionpb::{
    CampaignRequest, CampaignResponse, LeaderKey, LeaderRequest, LeaderResponse, ProclaimRequest, ProclaimResponse,
    ResignRequest, ResignResponse,
};
use crate::registry::Registry;
use crate::status::{before_deadline, caller_deadline, from_error, status};

/// The `v3electionpb.Election` service.
#[derive(Debug, Clone)]
pub struct EtcdElections(pub Arc<Registry>);

fn revision(term: u64) -> i64 {
    i64::try_from(term).unwrap_or(i64::MAX)
}

fn name_of(bytes: Vec<u8>) -> Result<String, Status> {
    String::from_utf8(bytes).map_err(|_| {
        status(ErrorKind::InvalidArgument, "election name must be UTF-8 (fencelock election names are text)")
    })
}

fn no_leader() -> Status {
    Status::failed_precondition("etcdserver: election: no leader")
}

/// The election name and lease of a leader key, checking that its key is the name's key for its lease.
fn leader_key(leader: Option<LeaderKey>) -> Result<(String, i64, i64), Status> {
    let leader = leader.ok_or_else(|| status(ErrorKind::InvalidArgument, "a leader key is required"))?;
    let name = name_of(leader.name)?;
    if leader.lease <= 0 {
        return Err(status(ErrorKind::InvalidArgument, format!("election {name:?}: the leader key has no lease")));
    }
    if !leader.key.is_empty() && leader.key != format!("{name}/{:x}", leader.lease).into_bytes() {
        return Err(Status::failed_precondition("etcdserver: election: not leader"));
    }
    Ok((name, leader.lease, leader.rev))
}

/// etcd's view of a leader: its key's KeyValue.
async fn kv(registry: &Registry, name: &str, leader: Leader) -> KeyValue {
    let lease = registry.leader_lease(name, leader.term).await;
    let key = match lease {
        Some(id) => format!("{name}/{id:x}"),
        None => name.to_string(),
    };
    KeyValue {
        key: key.into_bytes(),
        create_revision: revision(leader.term),
        mod_revision: revision(leader.term),
        version: 1,
        value: leader.value,
        lease: lease.unwrap_or(0),
    }
}

#[tonic::async_trait]
impl Election for EtcdElections {
    async fn campaign(&self, req: Request<CampaignRequest>) -> Result<Response<CampaignResponse>, Status> {
        let caller = Identity::of(&req)?;
        let deadline = caller_deadline(req.metadata());
        let req = req.into_inner();
        let name = name_of(req.name)?;
        if req.lease == 0 {
            return Err(status(
                ErrorKind::InvalidArgument,
                format!("election {name:?}: a lease is required (grant one first)"),
            ));
        }
        let term = before_deadline(deadline, self.0.campaign_for(req.lease, &name, &req.value, &caller)).await?;
        let leader = LeaderKey {
            key: format!("{name}/{:x}", req.lease).into_bytes(),
            name: name.into_bytes(),
            rev: revision(term),
            lease: req.lease,
        };
        Ok(Response::new(CampaignResponse { header: header(revision(term)), leader: Some(leader) }))
    }

    async fn proclaim(&self, req: Request<ProclaimRequest>) -> Result<Response<ProclaimResponse>, Status> {
        let caller = Identity::of(&req)?;
        let req = req.into_inner();
        let (name, lease, rev) = leader_key(req.leader)?;
        self.0.proclaim_for(&name, lease, rev, &req.value, &caller).await?;
        Ok(Response::new(ProclaimResponse { header: header(rev) }))
    }

    async fn leader(&self, req: Request<LeaderRequest>) -> Result<Response<LeaderResponse>, Status> {
        let name = name_of(req.into_inner().name)?;
        let leader = self.0.client().election(&name).leader().await.map_err(from_error)?.ok_or_else(no_leader)?;
        let term = revision(leader.term);
        Ok(Response::new(LeaderResponse { header: header(term), kv: Some(kv(&self.0, &name, leader).await) }))
    }

    type ObserveStream = Pin<Box<dyn Stream<Item = Result<LeaderResponse, Status>> + Send>>;

    async fn observe(&self, req: Request<LeaderRequest>) -> Result<Response<Self::ObserveStream>, Status> {
        let name = name_of(req.into_inner().name)?;
        let registry = self.0.clone();
        let changes = self.0.client().election(&name).observe();
        let out = changes
            .then(move |change| {
                let (registry, name) = (registry.clone(), name.clone());
                async move {
                    match change.map_err(from_error)? {
                        None => Ok(LeaderResponse { header: header(0), kv: None }),
                        Some(leader) => {
                            let term = revision(leader.term);
                            Ok(LeaderResponse { header: header(term), kv: Some(kv(&registry, &name, leader).await) })
                        }
                    }
                }
            })
            // Graceful shutdown waits for open streams, so they end when it starts.
            .take_until(self.0.shutting_down());
        Ok(Response::new(Box::pin(out)))
    }

    async fn resign(&self, req: Request<ResignRequest>) -> Result<Response<ResignResponse>, Status> {
        let caller = Identity::of(&req)?;
        let (name, lease, rev) = leader_key(req.into_inner().leader)?;
        self.0.resign_for(&name, lease, rev, &caller).await?;
        Ok(Response::new(ResignResponse { header: header(rev) }))
    }
}
