//! Raw MySQL / MariaDB: the two statements of an uncontended cycle in the shape fencelock's have — one upsert that
//! takes the row if free or expired (`INSERT … ON DUPLICATE KEY UPDATE`, the token through `LAST_INSERT_ID(expr)`),
//! and one `UPDATE` that frees it if ours — prepared once (mysql_async caches them), on one connection, in a table of
//! their own, `bench_raw`.

use std::time::Duration;

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts, OptsBuilder, params};
use tokio::sync::Mutex;
use tokio::time::Instant;

use crate::BoxResult;
use crate::stats::{Samples, timed};

const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS bench_raw (
    name VARBINARY(512) PRIMARY KEY, holder VARBINARY(600), expires_at BIGINT NOT NULL DEFAULT 0,
    fence BIGINT NOT NULL) ENGINE = InnoDB";

/// Server clock in unix µs, as fencelock's statements read it.
macro_rules! now_us {
    () => {
        "TIMESTAMPDIFF(MICROSECOND, '1970-01-01', UTC_TIMESTAMP(6))"
    };
}

macro_rules! free {
    () => {
        concat!("(holder IS NULL OR expires_at <= ", now_us!(), ")")
    };
}

/// :name, :holder, :ttl µs → 1 or 2 rows changed if taken, 0 if busy.
const ACQUIRE: &str = concat!(
    "INSERT INTO bench_raw (name, holder, expires_at, fence) VALUES (:name, :holder, ",
    now_us!(),
    " + :ttl, LAST_INSERT_ID(1))
    ON DUPLICATE KEY UPDATE fence = IF(",
    free!(),
    ", LAST_INSERT_ID(fence + 1), fence), holder = IF(",
    free!(),
    ", VALUES(holder), holder), expires_at = IF(holder = VALUES(holder), VALUES(expires_at), expires_at)"
);

const RELEASE: &str = "UPDATE bench_raw SET holder = NULL, expires_at = 0 WHERE name = :name AND holder = :holder";

const RTT: &str = "UPDATE bench_raw SET expires_at = :n WHERE name = 'rtt'";

const TTL_US: i64 = 30_000_000;

#[derive(Debug)]
pub struct MysqlRaw {
    conn: Mutex<Conn>,
}

impl MysqlRaw {
    pub async fn connect(url: &str) -> BoxResult<MysqlRaw> {
        let url = url.replacen("mariadb://", "mysql://", 1);
        let opts = OptsBuilder::from_opts(Opts::from_url(&url)?)
            .prefer_socket(false)
            .tcp_nodelay(true)
            .init(vec!["SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED"]);
        let mut conn = Conn::new(opts).await?;
        conn.query_drop(SCHEMA).await?;
        conn.query_drop("INSERT IGNORE INTO bench_raw (name, fence) VALUES ('rtt', 1)").await?;
        Ok(MysqlRaw { conn: Mutex::new(conn) })
    }

    pub async fn cycles(&self, span: Duration) -> BoxResult<Samples> {
        let (name, holder) = ("bench", "raw-holder");
        timed(span, || async {
            // Uncontended: the lock only hands the one connection to this loop, as a pipeline-less protocol needs.
            let mut conn = self.conn.lock().await;
            conn.exec_drop(ACQUIRE, params! { "name" => name, "holder" => holder, "ttl" => TTL_US }).await?;
            let took = conn.affected_rows() > 0;
            conn.exec_drop(RELEASE, params! { "name" => name, "holder" => holder }).await?;
            let freed = conn.affected_rows();
            if !took || freed != 1 {
                return Err(format!("raw MySQL cycle: acquired={took} released={freed}").into());
            }
            Ok(())
        })
        .await
    }

    /// One `UPDATE` of one row: one write transaction.
    pub async fn round_trips(&self, n: usize) -> BoxResult<Samples> {
        let mut conn = self.conn.lock().await;
        let start = Instant::now();
        let mut lat = Vec::with_capacity(n);
        for i in 0..n {
            let t = Instant::now();
            conn.exec_drop(RTT, params! { "n" => i as i64 }).await?;
            lat.push(t.elapsed());
        }
        Ok(Samples::from_vec(lat, start.elapsed()))
    }
}
