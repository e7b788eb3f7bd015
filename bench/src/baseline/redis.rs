//! Raw Redis: two EVALSHA per cycle on the connection type fencelock uses, with the smallest scripts that still
//! take a lock with a TTL and release it only if it is ours.

use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{Client, Script};
use tokio::time::Instant;

use crate::BoxResult;
use crate::stats::{Samples, timed};

/// SET NX PX: take the key if free. KEYS: lock. ARGV: holder, ttl ms.
const ACQUIRE: &str = "if redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 1 end return 0";

/// Compare-and-delete. KEYS: lock. ARGV: holder.
const RELEASE: &str = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0";

const KEY: &str = "bench-raw-uncontended";

#[derive(Debug)]
pub struct RedisRaw {
    conn: ConnectionManager,
    acquire: Script,
    release: Script,
}

impl RedisRaw {
    pub async fn connect(url: &str) -> BoxResult<RedisRaw> {
        // The same settings as fencelock's manager (one retry, 5 s timeouts), so only the layers above differ.
        let config = ConnectionManagerConfig::new()
            .set_number_of_retries(1)
            .set_connection_timeout(Some(Duration::from_secs(5)))
            .set_response_timeout(Some(Duration::from_secs(5)));
        let conn = ConnectionManager::new_with_config(Client::open(url)?, config).await?;
        Ok(RedisRaw { conn, acquire: Script::new(ACQUIRE), release: Script::new(RELEASE) })
    }

    /// One take + compare-and-delete of `key`.
    pub async fn cycle(&self, key: &str) -> BoxResult<()> {
        let took = self.take(key).await?;
        let freed = self.free(key).await?;
        if !(took && freed) {
            return Err(
                format!("raw Redis cycle on {key}: took={took} freed={freed}; is someone else using it?").into()
            );
        }
        Ok(())
    }

    /// The first half of `cycle`: whether `key` was taken. A clone of the manager per call, as fencelock does: it
    /// is a handle to one multiplexed connection.
    pub async fn take(&self, key: &str) -> BoxResult<bool> {
        let took: i64 =
            self.acquire.key(key).arg("raw-holder").arg(30_000).invoke_async(&mut self.conn.clone()).await?;
        Ok(took == 1)
    }

    /// The second half of `cycle`: whether `key` was ours and is deleted.
    pub async fn free(&self, key: &str) -> BoxResult<bool> {
        let freed: i64 = self.release.key(key).arg("raw-holder").invoke_async(&mut self.conn.clone()).await?;
        Ok(freed == 1)
    }

    pub async fn cycles(&self, span: Duration) -> BoxResult<Samples> {
        timed(span, || self.cycle(KEY)).await
    }

    /// One `PING`.
    pub async fn ping(&self) -> BoxResult<()> {
        let _: String = redis::cmd("PING").query_async(&mut self.conn.clone()).await?;
        Ok(())
    }

    pub async fn round_trips(&self, n: usize) -> BoxResult<Samples> {
        let start = Instant::now();
        let mut lat = Vec::with_capacity(n);
        for _ in 0..n {
            let t = Instant::now();
            self.ping().await?;
            lat.push(t.elapsed());
        }
        Ok(Samples::from_vec(lat, start.elapsed()))
    }
}
