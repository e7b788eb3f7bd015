//! Raw SQLite: one upsert that takes the row if free or expired, and one UPDATE that frees it if ours, with the
//! pragmas fencelock sets. Statements run on one blocking thread with no hand-off between threads per call.

use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rusqlite::{Connection, params};

use crate::BoxResult;
use crate::stats::{Samples, timed_blocking};

const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS raw_locks (
    name TEXT PRIMARY KEY, holder TEXT, expires_at INTEGER NOT NULL DEFAULT 0, fence INTEGER NOT NULL)";

const ACQUIRE: &str = "INSERT INTO raw_locks (name, holder, expires_at, fence) VALUES (?1, ?2, ?3 + ?4, 1)
    ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at, fence = fence + 1
    WHERE holder IS NULL OR expires_at <= ?3";

const RELEASE: &str = "UPDATE raw_locks SET holder = NULL, expires_at = 0 WHERE name = ?1 AND holder = ?2";

const TTL_US: i64 = 30_000_000;

#[derive(Debug)]
pub struct SqliteRaw {
    path: PathBuf,
}

fn now_us() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_micros() as i64)
}

impl SqliteRaw {
    /// A baseline on its own file `path` (beside fencelock's, so both sit on the same filesystem).
    pub fn new(path: PathBuf) -> SqliteRaw {
        SqliteRaw { path }
    }

    fn open(&self) -> BoxResult<Connection> {
        let c = Connection::open(&self.path)?;
        c.busy_timeout(Duration::from_secs(5))?;
        c.pragma_update(None, "journal_mode", "WAL")?;
        c.pragma_update(None, "synchronous", "NORMAL")?;
        c.execute_batch(SCHEMA)?;
        Ok(c)
    }

    pub async fn cycles(&self, span: Duration) -> BoxResult<Samples> {
        let c = self.open()?;
        tokio::task::spawn_blocking(move || {
            timed_blocking(span, || {
                let took = c.prepare_cached(ACQUIRE)?.execute(params!["bench", "raw-holder", now_us(), TTL_US])?;
                let freed = c.prepare_cached(RELEASE)?.execute(params!["bench", "raw-holder"])?;
                if took != 1 || freed != 1 {
                    return Err(format!("raw SQLite cycle: acquire={took} release={freed}").into());
                }
                Ok(())
            })
        })
        .await?
    }

    pub async fn round_trips(&self, n: usize) -> BoxResult<Samples> {
        let c = self.open()?;
        c.execute("INSERT OR IGNORE INTO raw_locks (name, fence) VALUES ('rtt', 1)", [])?;
        tokio::task::spawn_blocking(move || {
            let start = std::time::Instant::now();
            let mut lat = Vec::with_capacity(n);
            for _ in 0..n {
                let t = std::time::Instant::now();
                c.prepare_cached("UPDATE raw_locks SET expires_at = ?1 WHERE name = 'rtt'")?.execute([now_us()])?;
                lat.push(t.elapsed());
            }
            Ok(Samples::from_vec(lat, start.elapsed()))
        })
        .await?
    }
}
