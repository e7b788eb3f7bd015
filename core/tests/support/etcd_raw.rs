//! A raw etcd client on the shared stubs (crate `fencelock-proto`), for reading and deleting keys behind fencelock's
//! back.

use std::time::Duration;

use fencelock_proto::etcdserverpb::kv_client::KvClient;
use fencelock_proto::etcdserverpb::lease_client::LeaseClient;
use fencelock_proto::etcdserverpb::maintenance_client::MaintenanceClient;
use fencelock_proto::etcdserverpb::range_request::{SortOrder, SortTarget};
use fencelock_proto::etcdserverpb::watch_client::WatchClient;
use fencelock_proto::etcdserverpb::{
    DeleteRangeRequest, LeaseGrantRequest, LeaseRevokeRequest, PutRequest, RangeRequest, RangeResponse, StatusRequest,
    WatchCreateRequest, WatchRequest, watch_request,
};
use fencelock_proto::mvccpb::KeyValue;
use fencelock_proto::prefix_end;
use futures::StreamExt;
use tonic::Status;
use tonic::transport::{Channel, Endpoint};

/// One channel balanced over `endpoints` (`host:port`).
#[derive(Debug, Clone)]
pub struct Raw {
    channel: Channel,
}

impl Raw {
    /// Connects lazily: a dead endpoint shows as an error of the first request that goes there.
    pub fn new(endpoints: &[impl AsRef<str>], timeout: Duration) -> Raw {
        let endpoints = endpoints.iter().map(|e| {
            let url = format!("http://{}", e.as_ref().trim_start_matches("http://"));
            Endpoint::from_shared(url).expect("an endpoint URL").connect_timeout(timeout).timeout(timeout)
        });
        Raw { channel: Channel::balance_list(endpoints) }
    }

    fn kv(&self) -> KvClient<Channel> {
        KvClient::new(self.channel.clone())
    }

    async fn range(&self, range: RangeRequest) -> Result<RangeResponse, Status> {
        Ok(self.kv().range(range).await?.into_inner())
    }

    /// The keys under `prefix`, first-created first.
    pub async fn keys(&self, prefix: &str) -> Result<Vec<KeyValue>, Status> {
        let range = RangeRequest {
            key: prefix.into(),
            range_end: prefix_end(prefix.as_bytes()),
            sort_target: SortTarget::Create as i32,
            sort_order: SortOrder::Ascend as i32,
            ..Default::default()
        };
        Ok(self.range(range).await?.kvs)
    }

    /// The keyspace's epoch, which fencelock's tokens add revisions to: `fencelock/epoch`, in unix µs.
    pub async fn epoch(&self) -> Result<u64, Status> {
        let found = self.range(RangeRequest { key: "fencelock/epoch".into(), ..Default::default() }).await?;
        let kv = found.kvs.first().ok_or_else(|| Status::not_found("fencelock/epoch is not set"))?;
        String::from_utf8_lossy(&kv.value).parse().map_err(|_| Status::internal("fencelock/epoch is no number"))
    }

    /// How many keys lie under `prefix`, and the revision of that count.
    pub async fn count(&self, prefix: &str) -> Result<(i64, i64), Status> {
        let range = RangeRequest {
            key: prefix.into(),
            range_end: prefix_end(prefix.as_bytes()),
            count_only: true,
            ..Default::default()
        };
        let found = self.range(range).await?;
        Ok((found.count, found.header.map_or(0, |h| h.revision)))
    }

    /// A lease of `ttl` seconds, not kept alive: the keys on it go once it runs out or is revoked.
    pub async fn grant(&self, ttl: i64) -> Result<i64, Status> {
        Ok(LeaseClient::new(self.channel.clone()).lease_grant(LeaseGrantRequest { ttl, id: 0 }).await?.into_inner().id)
    }

    pub async fn revoke(&self, id: i64) -> Result<(), Status> {
        LeaseClient::new(self.channel.clone()).lease_revoke(LeaseRevokeRequest { id }).await.map(drop)
    }

    /// Puts `key` on `lease` (0: none) and returns the revision of the put.
    pub async fn put(&self, key: &str, value: &[u8], lease: i64) -> Result<i64, Status> {
        let put = PutRequest { key: key.into(), value: value.to_vec(), lease, ..Default::default() };
        Ok(self.kv().put(put).await?.into_inner().header.map_or(0, |h| h.revision))
    }

    /// The key a Go `recipe.RWMutex` waits for (its `waitOnLastRev`): under `prefix`, the last modified before
    /// revision `below`.
    pub async fn last_modified_before(&self, prefix: &str, below: i64) -> Result<Option<String>, Status> {
        let range = RangeRequest {
            key: prefix.into(),
            range_end: prefix_end(prefix.as_bytes()),
            sort_target: SortTarget::Mod as i32,
            sort_order: SortOrder::Descend as i32,
            max_mod_revision: below - 1,
            limit: 1,
            ..Default::default()
        };
        let found = self.range(range).await?.kvs.into_iter().next();
        Ok(found.map(|kv| String::from_utf8(kv.key).unwrap()))
    }

    pub async fn delete(&self, key: &str) -> Result<(), Status> {
        self.kv().delete_range(DeleteRangeRequest { key: key.into(), ..Default::default() }).await.map(drop)
    }

    /// Waits for the first change under `prefix` after revision `after`.
    pub async fn next_change(&self, prefix: &str, after: i64) -> Result<(), Status> {
        let create = WatchCreateRequest {
            key: prefix.into(),
            range_end: prefix_end(prefix.as_bytes()),
            start_revision: after + 1,
            ..Default::default()
        };
        let request = WatchRequest { request_union: Some(watch_request::RequestUnion::CreateRequest(create)) };
        let requests = futures::stream::once(async { request }).chain(futures::stream::pending());
        let mut replies = WatchClient::new(self.channel.clone()).watch(requests).await?.into_inner();
        while let Some(reply) = replies.message().await? {
            if !reply.events.is_empty() || reply.canceled {
                return Ok(());
            }
        }
        Err(Status::unavailable("the watch ended"))
    }

    /// The answering member's own id and the leader it follows.
    pub async fn status(&self) -> Result<(u64, u64), Status> {
        let status = MaintenanceClient::new(self.channel.clone()).status(StatusRequest {}).await?.into_inner();
        Ok((status.header.map_or(0, |h| h.member_id), status.leader))
    }
}
