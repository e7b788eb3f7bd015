//! Each backend's raw limit: the same work fencelock does per step, written directly against the backend's client
//! library with none of fencelock's layers, and run in the same process right before the fencelock figures.

mod memory;
mod redis;
mod sqlite;

use std::time::Duration;

use crate::BoxResult;
use crate::stats::Samples;

pub use self::memory::MemoryRaw;
pub use self::redis::RedisRaw;
pub use self::sqlite::SqliteRaw;

#[derive(Debug)]
pub enum Baseline {
    Memory(MemoryRaw),
    Redis(RedisRaw),
    Sqlite(SqliteRaw),
}

impl Baseline {
    /// Back-to-back take + compare-and-delete cycles on one key for `span`.
    pub async fn cycles(&self, span: Duration) -> BoxResult<Samples> {
        match self {
            Baseline::Memory(m) => m.cycles(span).await,
            Baseline::Redis(r) => r.cycles(span).await,
            Baseline::Sqlite(s) => s.cycles(span).await,
        }
    }

    /// `n` single round trips: the unit a hand-off gap is measured in.
    pub async fn round_trips(&self, n: usize) -> BoxResult<Samples> {
        match self {
            Baseline::Memory(m) => m.round_trips(n).await,
            Baseline::Redis(r) => r.round_trips(n).await,
            Baseline::Sqlite(s) => s.round_trips(n).await,
        }
    }

    /// What one cycle of `cycles` is, for the table.
    pub fn cycle_desc(&self) -> &'static str {
        match self {
            Baseline::Memory(_) => "Mutex<HashMap> insert + remove",
            Baseline::Redis(_) => "2 EVALSHA (SET NX PX; GET == → DEL) on a ConnectionManager",
            Baseline::Sqlite(_) => "INSERT … ON CONFLICT upsert + UPDATE, WAL, synchronous=NORMAL",
        }
    }

    /// What one of `round_trips` is, for the table.
    pub fn round_trip_desc(&self) -> &'static str {
        match self {
            Baseline::Memory(_) => "task → task → task wake-up over tokio mpsc",
            Baseline::Redis(_) => "PING",
            Baseline::Sqlite(_) => "one UPDATE statement (one write transaction)",
        }
    }
}
