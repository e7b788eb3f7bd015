//! Raw etcd: the two requests of an uncontended `concurrency.Mutex` cycle with etcd-client and nothing around them —
//! one Txn that creates the key if its CreateRevision is 0, on a lease granted once before the loop, and one Delete.

use std::time::Duration;

use etcd_client::{Client, Compare, CompareOp, ConnectOptions, KvClient, PutOptions, Txn, TxnOp};
use tokio::time::Instant;

use crate::BoxResult;
use crate::stats::{Samples, timed};

const KEY: &str = "bench-raw-uncontended";
const RTT_KEY: &str = "bench-raw-rtt";
const LEASE_TTL_S: i64 = 30;

pub struct EtcdRaw {
    client: Client,
    kv: KvClient,
}

impl std::fmt::Debug for EtcdRaw {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("EtcdRaw")
    }
}

/// `etcd://[user:password@]h1[:port],h2…` → endpoints and credentials, as fencelock reads it.
fn endpoints(url: &str) -> BoxResult<(Vec<String>, Option<ConnectOptions>)> {
    let rest = url.split_once("://").map(|(_, r)| r).ok_or_else(|| format!("{url:?}: expected etcd://host:port"))?;
    let rest = rest.trim_end_matches('/');
    let (auth, hosts) = rest.rsplit_once('@').map_or((None, rest), |(a, h)| (Some(a), h));
    let options = match auth.map(|a| a.split_once(':')) {
        Some(Some((user, password))) => Some(ConnectOptions::new().with_user(user, password)),
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
    Ok((endpoints, options))
}

impl EtcdRaw {
    pub async fn connect(url: &str) -> BoxResult<EtcdRaw> {
        let (endpoints, options) = endpoints(url)?;
        let client = Client::connect(&endpoints, options).await?;
        let kv = client.kv_client();
        Ok(EtcdRaw { client, kv })
    }

    pub async fn cycles(&self, span: Duration) -> BoxResult<Samples> {
        let lease = self.client.lease_client().grant(LEASE_TTL_S, None).await?.id();
        let result = timed(span, || async {
            let txn = Txn::new().when([Compare::create_revision(KEY, CompareOp::Equal, 0)]).and_then([TxnOp::put(
                KEY,
                "",
                Some(PutOptions::new().with_lease(lease)),
            )]);
            let took = self.kv.clone().txn(txn).await?.succeeded();
            let freed = self.kv.clone().delete(KEY, None).await?.deleted();
            if !took || freed != 1 {
                return Err(format!("raw etcd cycle on {KEY}: created={took} deleted={freed}; is it in use?").into());
            }
            Ok(())
        })
        .await;
        let _ = self.client.lease_client().revoke(lease).await;
        result
    }

    /// One Put: a write, one raft commit, like each of the two requests of a hand-off.
    pub async fn round_trips(&self, n: usize) -> BoxResult<Samples> {
        let start = Instant::now();
        let mut lat = Vec::with_capacity(n);
        for _ in 0..n {
            let t = Instant::now();
            self.kv.clone().put(RTT_KEY, "", None).await?;
            lat.push(t.elapsed());
        }
        self.kv.clone().delete(RTT_KEY, None).await?;
        Ok(Samples::from_vec(lat, start.elapsed()))
    }
}
