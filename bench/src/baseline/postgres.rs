//! Raw PostgreSQL: the two statements of an uncontended cycle in the shape fencelock's have — one upsert that takes
//! the row if free or expired and returns its fence (`INSERT … ON CONFLICT DO UPDATE … RETURNING`), and one `UPDATE`
//! that frees it if ours — prepared once, on one tokio-postgres connection, in a table of their own, `bench_raw`.

use std::time::Duration;

use tokio::time::Instant;
use tokio_postgres::{Client, NoTls, Statement};

use crate::BoxResult;
use crate::stats::{Samples, timed};

const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS bench_raw (
    name TEXT PRIMARY KEY, holder TEXT, expires_at BIGINT NOT NULL DEFAULT 0, fence BIGINT NOT NULL)";

/// Server clock in unix µs, as fencelock's statements read it.
macro_rules! now_us {
    () => {
        "(extract(epoch FROM clock_timestamp()) * 1000000)::bigint"
    };
}

/// $1 name, $2 holder, $3 ttl µs → the fence if taken, no row if busy.
const ACQUIRE: &str = concat!(
    "INSERT INTO bench_raw AS r (name, holder, expires_at, fence) VALUES ($1, $2, ",
    now_us!(),
    " + $3, 1)
    ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at, fence = r.fence + 1
    WHERE r.holder IS NULL OR r.expires_at <= ",
    now_us!(),
    " RETURNING fence"
);

/// $1 name, $2 holder.
const RELEASE: &str = "UPDATE bench_raw SET holder = NULL, expires_at = 0 WHERE name = $1 AND holder = $2";

const RTT: &str = "UPDATE bench_raw SET expires_at = $1 WHERE name = 'rtt'";

const TTL_US: i64 = 30_000_000;

#[derive(Debug)]
pub struct PostgresRaw {
    client: Client,
    acquire: Statement,
    release: Statement,
    rtt: Statement,
}

impl PostgresRaw {
    pub async fn connect(url: &str) -> BoxResult<PostgresRaw> {
        let (client, conn) = tokio_postgres::connect(url, NoTls).await?;
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                eprintln!("raw postgres connection: {e}");
            }
        });
        client.batch_execute(SCHEMA).await?;
        client.execute("INSERT INTO bench_raw (name, fence) VALUES ('rtt', 1) ON CONFLICT DO NOTHING", &[]).await?;
        let acquire = client.prepare(ACQUIRE).await?;
        let release = client.prepare(RELEASE).await?;
        let rtt = client.prepare(RTT).await?;
        Ok(PostgresRaw { client, acquire, release, rtt })
    }

    pub async fn cycles(&self, span: Duration) -> BoxResult<Samples> {
        let name = "bench";
        let holder = "raw-holder";
        timed(span, || async {
            let took = self.client.query_opt(&self.acquire, &[&name, &holder, &TTL_US]).await?.is_some();
            let freed = self.client.execute(&self.release, &[&name, &holder]).await?;
            if !took || freed != 1 {
                return Err(format!("raw PostgreSQL cycle: acquired={took} released={freed}").into());
            }
            Ok(())
        })
        .await
    }

    /// One `UPDATE` of one row: one write transaction.
    pub async fn round_trips(&self, n: usize) -> BoxResult<Samples> {
        let start = Instant::now();
        let mut lat = Vec::with_capacity(n);
        for i in 0..n {
            let t = Instant::now();
            self.client.execute(&self.rtt, &[&(i as i64)]).await?;
            lat.push(t.elapsed());
        }
        Ok(Samples::from_vec(lat, start.elapsed()))
    }
}
