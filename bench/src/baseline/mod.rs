//! Each backend's raw limit: the same work fencelock does per step, written directly against the backend's client
//! library with none of fencelock's layers, and run in the same process right before the fencelock figures.

mod etcd;
mod memory;
mod mysql;
mod postgres;
mod redis;
mod redlock;
mod sqlite;
mod zookeeper;

use std::time::Duration;

use crate::BoxResult;
use crate::stats::Samples;

pub use self::etcd::EtcdRaw;
pub use self::memory::MemoryRaw;
pub use self::mysql::MysqlRaw;
pub use self::postgres::PostgresRaw;
pub use self::redis::RedisRaw;
pub use self::redlock::{RedlockRaw, instance_urls};
pub use self::sqlite::SqliteRaw;
pub use self::zookeeper::ZkRaw;

#[derive(Debug)]
pub enum Baseline {
    Memory(MemoryRaw),
    Redis(RedisRaw),
    Sqlite(SqliteRaw),
    Etcd(EtcdRaw),
    Zk(ZkRaw),
    Postgres(PostgresRaw),
    Mysql(MysqlRaw),
    Redlock(RedlockRaw),
}

impl Baseline {
    /// Back-to-back take + compare-and-delete cycles on one key for `span`.
    pub async fn cycles(&self, span: Duration) -> BoxResult<Samples> {
        match self {
            Baseline::Memory(m) => m.cycles(span).await,
            Baseline::Redis(r) => r.cycles(span).await,
            Baseline::Sqlite(s) => s.cycles(span).await,
            Baseline::Etcd(e) => e.cycles(span).await,
            Baseline::Zk(z) => z.cycles(span).await,
            Baseline::Postgres(p) => p.cycles(span).await,
            Baseline::Mysql(m) => m.cycles(span).await,
            Baseline::Redlock(r) => r.cycles(span).await,
        }
    }

    /// `n` single round trips: the unit a hand-off gap is measured in.
    pub async fn round_trips(&self, n: usize) -> BoxResult<Samples> {
        match self {
            Baseline::Memory(m) => m.round_trips(n).await,
            Baseline::Redis(r) => r.round_trips(n).await,
            Baseline::Sqlite(s) => s.round_trips(n).await,
            Baseline::Etcd(e) => e.round_trips(n).await,
            Baseline::Zk(z) => z.round_trips(n).await,
            Baseline::Postgres(p) => p.round_trips(n).await,
            Baseline::Mysql(m) => m.round_trips(n).await,
            Baseline::Redlock(r) => r.round_trips(n).await,
        }
    }

    /// What one cycle of `cycles` is, for the table.
    pub fn cycle_desc(&self) -> String {
        match self {
            Baseline::Memory(_) => "Mutex<HashMap> insert + remove".into(),
            Baseline::Redis(_) => "2 EVALSHA (SET NX PX; GET == → DEL) on a ConnectionManager".into(),
            Baseline::Sqlite(_) => "INSERT … ON CONFLICT upsert + UPDATE, WAL, synchronous=NORMAL".into(),
            Baseline::Etcd(_) => "Txn (put with lease if CreateRevision == 0) + Delete, lease granted once".into(),
            Baseline::Zk(_) => "create EPHEMERAL_SEQUENTIAL + delete, one session".into(),
            Baseline::Postgres(_) => {
                "prepared INSERT … ON CONFLICT DO UPDATE … RETURNING + UPDATE, one connection, table bench_raw; both \
                 sides plaintext"
                    .into()
            }
            Baseline::Mysql(_) => {
                "prepared INSERT … ON DUPLICATE KEY UPDATE (token via LAST_INSERT_ID) + UPDATE, one connection, \
                 table bench_raw"
                    .into()
            }
            Baseline::Redlock(r) => {
                format!(
                    "the Redis cycle on {} instances in parallel (join_all SET NX PX, then join_all GET == → DEL)",
                    r.len()
                )
            }
        }
    }

    /// What one of `round_trips` is, for the table.
    pub fn round_trip_desc(&self) -> String {
        match self {
            Baseline::Memory(_) => "task → task → task wake-up over tokio mpsc".into(),
            Baseline::Redis(_) => "PING".into(),
            Baseline::Sqlite(_) => "one UPDATE statement (one write transaction)".into(),
            Baseline::Etcd(_) => "one Put (a write: one raft commit)".into(),
            Baseline::Zk(_) => "one setData (a write: one quorum commit)".into(),
            Baseline::Postgres(_) | Baseline::Mysql(_) => "one prepared UPDATE (one write transaction)".into(),
            Baseline::Redlock(r) => format!("PING to {} instances in parallel", r.len()),
        }
    }
}
