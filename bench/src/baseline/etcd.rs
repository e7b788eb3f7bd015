//! Raw etcd: the two requests of an uncontended `concurrency.Mutex` cycle on the raw gRPC stubs and nothing around them —
//! one Txn that creates the key if its CreateRevision is 0, on a lease granted once before the loop, and one Delete.

use std::time::Duration;

use fencelock_proto::EtcdConn;
use fencelock_proto::etcdserverpb::compare::{CompareResult, CompareTarget, TargetUnion};
use fencelock_proto::etcdserverpb::{
    Compare, DeleteRangeRequest, LeaseGrantRequest, LeaseRevokeRequest, PutRequest, RequestOp, TxnRequest, request_op,
};
use tokio::time::Instant;
use tonic::transport::{Channel, Endpoint};

use crate::BoxResult;
use crate::stats::{Samples, timed};

const KEY: &str = "bench-raw-uncontended";
const RTT_KEY: &str = "bench-raw-rtt";
const LEASE_TTL_S: i64 = 30;

#[derive(Debug)]
pub struct EtcdRaw {
    conn: EtcdConn,
}

/// A user name and password.
type Credentials = (String, String);

/// `etcd://[user:password@]h1[:port],h2…` → endpoints and credentials, as fencelock reads it.
fn endpoints(url: &str) -> BoxResult<(Vec<String>, Option<Credentials>)> {
    let rest = url.split_once("://").map(|(_, r)| r).ok_or_else(|| format!("{url:?}: expected etcd://host:port"))?;
    let rest = rest.trim_end_matches('/');
    let (auth, hosts) = rest.rsplit_once('@').map_or((None, rest), |(a, h)| (Some(a), h));
    let user = match auth.map(|a| a.split_once(':')) {
        Some(Some((user, password))) => Some((user.to_string(), password.to_string())),
        Some(None) => return Err(format!("{url:?}: credentials need user:password").into()),
        None => None,
    };
    let endpoints = hosts
        .split(',')
        .map(|h| {
            if h.rsplit_once(':').is_some_and(|(_, p)| p.parse::<u16>().is_ok()) {
                h.into()
            } else {
                format!("{h}:2379")
            }
        })
        .map(|h| format!("http://{h}"))
        .collect();
    Ok((endpoints, user))
}

impl EtcdRaw {
    pub async fn connect(url: &str) -> BoxResult<EtcdRaw> {
        let (endpoints, user) = endpoints(url)?;
        let endpoints = endpoints.into_iter().map(Endpoint::from_shared).collect::<Result<Vec<_>, _>>()?;
        let channel = Channel::balance_list(endpoints.into_iter());
        let conn = match user {
            Some((name, password)) => EtcdConn::authenticate(channel, &name, &password).await?,
            None => EtcdConn::new(channel),
        };
        Ok(EtcdRaw { conn })
    }

    async fn delete(&self, key: &str) -> BoxResult<i64> {
        let request = DeleteRangeRequest { key: key.into(), ..Default::default() };
        Ok(self.conn.kv().delete_range(self.conn.req(request)).await?.into_inner().deleted)
    }

    pub async fn cycles(&self, span: Duration) -> BoxResult<Samples> {
        let lease = self.conn.lease().lease_grant(self.conn.req(LeaseGrantRequest { ttl: LEASE_TTL_S, id: 0 })).await?;
        let lease = lease.into_inner().id;
        let absent = Compare {
            result: CompareResult::Equal as i32,
            target: CompareTarget::Create as i32,
            key: KEY.into(),
            target_union: Some(TargetUnion::CreateRevision(0)),
            range_end: Vec::new(),
        };
        let put = PutRequest { key: KEY.into(), lease, ..Default::default() };
        let txn = TxnRequest {
            compare: vec![absent],
            success: vec![RequestOp { request: Some(request_op::Request::RequestPut(put)) }],
            failure: Vec::new(),
        };
        let result = timed(span, || async {
            let took = self.conn.kv().txn(self.conn.req(txn.clone())).await?.into_inner().succeeded;
            let freed = self.delete(KEY).await?;
            if !took || freed != 1 {
                return Err(format!("raw etcd cycle on {KEY}: created={took} deleted={freed}; is it in use?").into());
            }
            Ok(())
        })
        .await;
        let _ = self.conn.lease().lease_revoke(self.conn.req(LeaseRevokeRequest { id: lease })).await;
        result
    }

    /// One Put: a write, one raft commit, like each of the two requests of a hand-off.
    pub async fn round_trips(&self, n: usize) -> BoxResult<Samples> {
        let start = Instant::now();
        let mut lat = Vec::with_capacity(n);
        for _ in 0..n {
            let t = Instant::now();
            self.conn.kv().put(self.conn.req(PutRequest { key: RTT_KEY.into(), ..Default::default() })).await?;
            lat.push(t.elapsed());
        }
        self.delete(RTT_KEY).await?;
        Ok(Samples::from_vec(lat, start.elapsed()))
    }
}
