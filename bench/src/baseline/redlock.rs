//! Raw Redlock: the single-Redis raw cycle on every instance at once — all `SET NX PX` scripts in parallel
//! (`join_all`), then all compare-and-delete scripts in parallel — with none of Redlock's validity arithmetic,
//! quorum bookkeeping or fence-token round. Each instance is a [`RedisRaw`], configured like fencelock's.

use std::time::Duration;

use futures::future::join_all;
use tokio::time::Instant;

use super::RedisRaw;
use crate::BoxResult;
use crate::stats::{Samples, timed};

const KEY: &str = "bench-raw-redlock";

#[derive(Debug)]
pub struct RedlockRaw {
    instances: Vec<RedisRaw>,
}

/// `redlock://[user:password@]h1:port,h2:port,…[/db][?…]` → one `redis://` URL per instance, as fencelock reads it.
pub fn instance_urls(url: &str) -> BoxResult<Vec<String>> {
    let rest = url.split_once("://").map(|(_, r)| r).ok_or_else(|| format!("{url:?}: expected redlock://h1,h2,h3"))?;
    let rest = rest.split_once('?').map_or(rest, |(r, _)| r);
    let (rest, db) = rest.split_once('/').map_or((rest, None), |(r, db)| (r, Some(db)));
    let (auth, hosts) = rest.rsplit_once('@').map_or((None, rest), |(a, h)| (Some(a), h));
    let auth = auth.map(|a| format!("{a}@")).unwrap_or_default();
    let db = db.filter(|d| !d.is_empty()).map(|d| format!("/{d}")).unwrap_or_default();
    Ok(hosts
        .split(',')
        .map(str::trim)
        .map(|host| {
            let port = if host.rfind(':').is_some_and(|i| !host[i..].contains(']')) { "" } else { ":6379" };
            format!("redis://{auth}{host}{port}{db}")
        })
        .collect())
}

impl RedlockRaw {
    pub async fn connect(url: &str) -> BoxResult<RedlockRaw> {
        let mut instances = Vec::new();
        for u in instance_urls(url)? {
            instances.push(RedisRaw::connect(&u).await?);
        }
        Ok(RedlockRaw { instances })
    }

    pub fn len(&self) -> usize {
        self.instances.len()
    }

    pub async fn cycles(&self, span: Duration) -> BoxResult<Samples> {
        timed(span, || async {
            let took = join_all(self.instances.iter().map(|i| i.take(KEY))).await;
            let freed = join_all(self.instances.iter().map(|i| i.free(KEY))).await;
            for (t, f) in took.into_iter().zip(freed) {
                if !(t? && f?) {
                    return Err(format!("raw Redlock cycle on {KEY}: an instance found it taken; is it in use?").into());
                }
            }
            Ok(())
        })
        .await
    }

    /// One `PING` to every instance at once: a Redlock round.
    pub async fn round_trips(&self, n: usize) -> BoxResult<Samples> {
        let start = Instant::now();
        let mut lat = Vec::with_capacity(n);
        for _ in 0..n {
            let t = Instant::now();
            for r in join_all(self.instances.iter().map(RedisRaw::ping)).await {
                r?;
            }
            lat.push(t.elapsed());
        }
        Ok(Samples::from_vec(lat, start.elapsed()))
    }
}
