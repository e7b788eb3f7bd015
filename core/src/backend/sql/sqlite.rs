//! `sqlite:PATH`: the embedded default, the table algorithm of [`super`] on a file that several processes on
//! one host share. Every step is one statement, so SQLite's own locking makes it atomic; times are this host's clock
//! in unix µs, and a new file seeds the fence counter from it, so tokens never go backwards while the file lives.
//!
//! Mutex waiters queue in the file (`queue.rs`), so hand-off is first come, first served across processes, and
//! every waiter is woken by a release in its own process or by a commit to the file in another (`wakes.rs`).

mod queue;
mod wakes;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use async_trait::async_trait;
use rusqlite::{Connection, ErrorCode, OptionalExtension, params};
use tokio::time::Instant;

use self::wakes::Wakes;
use super::{
    Head, HoldRow, Param, SQLITE, Script, Write, abandon_script, holder_ttl, is_hold, lock_info, micros,
    release_script, renew_script, semaphore, stored_token, take_script,
};
use crate::backend::record::{RecordAttempt, Records};
use crate::backend::{
    AcquireRequest, Attempt, Backend, Busy, Capability, Grant, HoldKind, LockInfo, Pending, Undo, fenced, lock_lost,
    not_held, permits_mismatch, unix_micros,
};
use crate::error::{Error, Result};
use crate::mutant;
use crate::options::ClientOptions;

// Free, expired or already ours (a grant whose reply was lost) → take it with the next token, whoever waits
// (`fair(false)`; `queue::ACQUIRE_IN_TURN` is the fair one).
const ACQUIRE: &str = "
    INSERT INTO fencelock_locks (name, holder, count, expires_at, fence) VALUES (?1, ?2, 1, ?3 + ?4, ?3)
    ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, count = 1, expires_at = excluded.expires_at,
        fence = fence + 1
    WHERE holder IS NULL OR expires_at <= ?3 OR holder = ?2
    RETURNING fence";

// Statements shared with PostgreSQL, in SQLite's placeholders.
static FENCE_WRITE: LazyLock<String> = LazyLock::new(|| SQLITE.fence_write());
static FENCE_READ: LazyLock<String> = LazyLock::new(|| SQLITE.fence_read());
static FENCE_FLOOR: LazyLock<String> = LazyLock::new(|| SQLITE.fence_floor());

/// Every how many statements one runs on a blocking thread and checkpoints the WAL after it (this connection's
/// automatic checkpoints are off, so that no statement run inline pays a checkpoint's fsync).
const CHECKPOINT_EVERY: u64 = 1000;

/// The first and the longest pause before a statement that found the file busy runs again.
const BUSY_PAUSE_MIN: Duration = Duration::from_micros(50);
const BUSY_PAUSE_MAX: Duration = Duration::from_millis(8);

/// The embedded SQLite backend.
#[derive(Debug)]
pub(crate) struct SqliteBackend {
    // A fair (FIFO) lock, taken before a statement runs: statements run in the order they were issued, so the abandon
    // of an acquire dropped in flight always runs after that acquire's upsert, never before it.
    conn: Arc<tokio::sync::Mutex<Connection>>,
    url: String,
    busy_deadline: Duration,
    // Statements run so far, for `CHECKPOINT_EVERY`.
    runs: AtomicU64,
    wakes: Arc<Wakes>,
}

/// What one acquire keeps between its attempts.
#[derive(Debug, Default)]
pub(crate) struct Waiting {
    /// A waiting writer's mark of this attempt may be in the file (read-write locks).
    marked: bool,
    /// The attempt has a place in the mutex's queue, to refresh at this instant.
    refresh_at: Option<Instant>,
    /// The file's wake-ups when the last attempt began.
    seen: u64,
}

/// How long a wait lasts at most without a wake-up: a backstop, since every release wakes the waiters.
const WAIT_SLICE: Duration = queue::REFRESH;

/// Whether `req` waits in the mutex's queue: a mutex acquire that did not ask for `fair(false)`.
fn queues(req: &AcquireRequest) -> bool {
    req.kind == HoldKind::Exclusive && req.fair != Some(false)
}

/// Runs a hold script (`super::Script`) in one `BEGIN IMMEDIATE` transaction, which has the file to itself from its
/// first statement: `(answer, rows written)`.
fn run_script<R>(c: &Connection, s: &Script<R>) -> rusqlite::Result<(R, usize)> {
    c.execute_batch("BEGIN IMMEDIATE")?;
    let done = script_body(c, s).and_then(|out| c.execute_batch("COMMIT").map(|()| out));
    if done.is_err() && !c.is_autocommit() {
        let _ = c.execute_batch("ROLLBACK");
    }
    done
}

fn script_body<R>(c: &Connection, s: &Script<R>) -> rusqlite::Result<(R, usize)> {
    if let Some(w) = &s.ensure {
        exec(c, w)?;
    }
    let head = c
        .prepare_cached(&s.head)?
        .query_row([&s.name], |r| Ok(Head { a: r.get(0)?, b: r.get(1)?, now: r.get(2)? }))
        .optional()?;
    let rows = match &s.rows {
        Some(q) => c
            .prepare_cached(q)?
            .query_map([&s.name], |r| {
                Ok(HoldRow { key: r.get(0)?, holder: r.get(1)?, expires_at: r.get(2)?, token: r.get(3)? })
            })?
            .collect::<rusqlite::Result<Vec<_>>>()?,
        None => Vec::new(),
    };
    let (writes, answer) = (s.decide)(head, &rows);
    let mut written = 0;
    for w in &writes {
        written += exec(c, w)?;
    }
    Ok((answer, written))
}

fn exec(c: &Connection, w: &Write) -> rusqlite::Result<usize> {
    use rusqlite::types::Value;
    let params = w.params.iter().map(|p| match p {
        Param::Int(i) => Value::Integer(*i),
        Param::Text(t) => Value::Text(t.clone()),
    });
    c.prepare_cached(&w.sql)?.execute(rusqlite::params_from_iter(params))
}

fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(e.sqlite_error_code(), Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked))
}

impl SqliteBackend {
    pub(crate) async fn open(path: &str, opts: &ClientOptions) -> Result<Self> {
        let url = super::super::redact(&format!("sqlite:{path}"));
        let owned = path.to_string();
        let conn = tokio::task::spawn_blocking(move || -> rusqlite::Result<Connection> {
            let conn = Connection::open(&owned)?;
            // No waiting inside SQLite: a busy file is `run`'s to wait for, off the async threads.
            conn.busy_timeout(Duration::ZERO)?;
            Ok(conn)
        })
        .await
        .map_err(|e| Error::internal(e.to_string()))?
        .map_err(|e| Error::unavailable(format!("{url}: cannot open the database file: {e}")))?;
        let backend = SqliteBackend {
            conn: Arc::new(tokio::sync::Mutex::new(conn)),
            url,
            busy_deadline: opts.connect_timeout,
            runs: AtomicU64::new(0),
            wakes: Wakes::of(path),
        };
        // WAL lets readers and one writer overlap; switching needs an exclusive moment, so it is retried on BUSY.
        backend
            .run(|c| {
                c.pragma_update(None, "journal_mode", "WAL")?;
                c.pragma_update(None, "synchronous", "NORMAL")?;
                c.pragma_update(None, "wal_autocheckpoint", 0)?;
                c.execute_batch(&SQLITE.schema())?;
                c.execute_batch(queue::SCHEMA)?;
                c.execute(&SQLITE.epoch("?1"), params![unix_micros() as i64]).map(drop)
            })
            .await?;
        Ok(backend)
    }

    /// Runs a hold script: `(answer, rows written)`.
    async fn script<R: Send + 'static>(&self, s: Script<R>) -> Result<(R, usize)> {
        let s = Arc::new(s);
        self.run(move |c| run_script(c, &s)).await
    }

    /// Runs `f` on the connection, retrying BUSY/LOCKED until the busy deadline.
    ///
    /// It runs `f` here first, on the async thread: with WAL and `synchronous=NORMAL` a statement on a file nobody
    /// else writes is microseconds of work and a `write` to the page cache (no fsync), far less than the hop to a
    /// blocking thread and back, which cost more than the statements themselves. A BUSY answer (another connection
    /// is writing) moves it to a blocking thread, which waits and retries there; so does every
    /// `CHECKPOINT_EVERY`-th statement, which then checkpoints the WAL.
    async fn run<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: Fn(&Connection) -> rusqlite::Result<T> + Send + 'static,
    {
        let conn = self.conn.clone().lock_owned().await;
        let checkpoint = self.runs.fetch_add(1, Ordering::Relaxed) % CHECKPOINT_EVERY == CHECKPOINT_EVERY - 1;
        if !checkpoint {
            match f(&conn) {
                Err(e) if is_busy(&e) => {}
                done => return done.map_err(|e| Error::internal(format!("{}: {e}", self.url))),
            }
        }
        let deadline = Instant::now() + self.busy_deadline;
        let url = self.url.clone();
        tokio::task::spawn_blocking(move || {
            // Another connection's write transaction on this file is one or two statements long: look again soon,
            // and back off (jittered, doubling up to BUSY_PAUSE_MAX) only while it stays busy.
            let mut pause = BUSY_PAUSE_MIN;
            let done = loop {
                match f(&conn) {
                    Err(e) if is_busy(&e) && Instant::now() < deadline => {
                        std::thread::sleep(pause.mul_f64(rand::random_range(0.5..1.5)));
                        pause = (pause * 2).min(BUSY_PAUSE_MAX);
                    }
                    Err(e) if is_busy(&e) => break Err(Error::unavailable(format!("{url}: database busy: {e}"))),
                    Err(e) => break Err(Error::internal(format!("{url}: {e}"))),
                    Ok(v) => break Ok(v),
                }
            };
            if checkpoint {
                // PASSIVE: copies what no reader still needs, never waits; a busy file is checkpointed next time.
                let _ = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()));
            }
            done
        })
        .await
        .map_err(|e| Error::internal(e.to_string()))?
    }
}

#[async_trait]
impl Backend for SqliteBackend {
    fn capability(&self) -> Capability {
        Capability {
            fencing: true,
            // Woken by releases and file changes, but found by a read of the file's change counter: not native.
            native_wait: false,
            fair: true,
            session_bound: false,
            rw_lock: true,
            semaphore: true,
            election: true,
        }
    }

    fn fair_choice(&self) -> bool {
        true
    }

    fn describe(&self) -> &str {
        &self.url
    }

    fn begin(self: Arc<Self>, req: AcquireRequest, undo: Undo) -> Box<dyn Pending> {
        RecordAttempt::begin(self, req, undo)
    }

    async fn renew(&self, grant: &Grant, ttl: Duration) -> Result<()> {
        if is_hold(grant.kind) {
            let (_, n) = self.script(renew_script(&SQLITE, grant, ttl)).await?;
            return if n == 0 { Err(lock_lost(grant, &self.url)) } else { Ok(()) };
        }
        let (name, holder, token, ttl) = (grant.name.clone(), grant.holder.clone(), grant.token as i64, micros(ttl));
        let n = self
            .run(move |c| {
                let now = unix_micros() as i64;
                c.prepare_cached(
                    "UPDATE fencelock_locks SET expires_at = ?4 + ?5
                     WHERE name = ?1 AND holder = ?2 AND fence = ?3 AND expires_at > ?4",
                )?
                .execute(params![name, holder, token, now, ttl])
            })
            .await?;
        if n == 0 && !mutant::active("renew_extends_lost_lease") { Err(lock_lost(grant, &self.url)) } else { Ok(()) }
    }

    async fn release(&self, grant: &Grant) -> Result<()> {
        if is_hold(grant.kind) {
            let (_, n) = self.script(release_script(&SQLITE, grant)).await?;
            self.wakes.wake();
            return if n == 1 { Ok(()) } else { Err(not_held(grant, &self.url)) };
        }
        if mutant::active("release_skips_holder_check") {
            return self.force_release(&grant.name).await.map(drop);
        }
        let (name, holder, token) = (grant.name.clone(), grant.holder.clone(), grant.token as i64);
        // An expired row of ours is already free for others, so only a live one counts as released.
        let n = self
            .run(move |c| {
                c.prepare_cached(
                    "UPDATE fencelock_locks SET holder = NULL, count = 0, expires_at = 0
                     WHERE name = ?1 AND holder = ?2 AND fence = ?3 AND expires_at > ?4",
                )?
                .execute(params![name, holder, token, unix_micros() as i64])
            })
            .await?;
        if n == 1 {
            self.wakes.wake();
            Ok(())
        } else {
            Err(not_held(grant, &self.url))
        }
    }

    async fn force_release(&self, name: &str) -> Result<bool> {
        let name = name.to_string();
        let n = self
            .run(move |c| {
                c.prepare_cached(
                    "UPDATE fencelock_locks SET holder = NULL, count = 0, expires_at = 0
                     WHERE name = ?1 AND holder IS NOT NULL AND expires_at > ?2",
                )?
                .execute(params![name, unix_micros() as i64])
            })
            .await?;
        if n > 0 {
            self.wakes.wake();
        }
        Ok(n > 0)
    }

    async fn inspect(&self, name: &str) -> Result<LockInfo> {
        let name = name.to_string();
        let (row, waiters) = self
            .run(move |c| {
                let now = unix_micros() as i64;
                let row = c
                    .prepare_cached("SELECT holder, expires_at - ?2, fence FROM fencelock_locks WHERE name = ?1")?
                    .query_row(params![name, now], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
                    .optional()?;
                let waiters: i64 = c.prepare_cached(queue::COUNT)?.query_row(params![name, now], |r| r.get(0))?;
                Ok((row, waiters))
            })
            .await?;
        Ok(LockInfo { waiters: Some(waiters as u64), ..lock_info(row) })
    }

    async fn available(&self, name: &str, permits: u32) -> Result<u32> {
        let (count, _) = self.script(semaphore::available(&SQLITE, name, permits)).await?;
        count.map_err(|stored| permits_mismatch(name, &self.url, permits, stored as u32))
    }

    async fn fence_write(&self, resource: &str, token: u64, value: &[u8]) -> Result<()> {
        let (r, v, signed) = (resource.to_string(), value.to_vec(), stored_token(resource, &self.url, token)?);
        let outcome = self
            .run(move |c| {
                let ok: Option<i64> =
                    c.prepare_cached(&FENCE_WRITE)?.query_row(params![r, signed, v], |row| row.get(0)).optional()?;
                if ok.is_some() {
                    return Ok(None);
                }
                c.prepare_cached(&FENCE_FLOOR)?.query_row(params![r], |row| row.get::<_, i64>(0)).map(Some)
            })
            .await?;
        match outcome {
            Some(highest) if !mutant::active("fence_accepts_older_token") => {
                Err(fenced(resource, &self.url, token, highest as u64))
            }
            _ => Ok(()),
        }
    }

    async fn fence_read(&self, resource: &str) -> Result<(u64, Vec<u8>)> {
        let r = resource.to_string();
        let row: Option<(i64, Vec<u8>)> = self
            .run(move |c| {
                c.prepare_cached(&FENCE_READ)?.query_row(params![r], |row| Ok((row.get(0)?, row.get(1)?))).optional()
            })
            .await?;
        Ok(row.map(|(t, v)| (t as u64, v)).unwrap_or_default())
    }
}

#[async_trait]
impl Records for SqliteBackend {
    type Waiter = Waiting;

    async fn take(&self, req: &AcquireRequest, waiting: &mut Waiting) -> Result<Attempt> {
        waiting.seen = self.wakes.generation();
        if is_hold(req.kind) {
            let (plan, _) = self.script(take_script(&SQLITE, req)).await?;
            let plan = plan?;
            waiting.marked = plan.marked;
            return plan.attempt(req, &self.url);
        }
        let (name, holder, ttl) = (req.name.clone(), req.holder.clone(), micros(req.ttl));
        let acquire: &'static str = if queues(req) { &queue::ACQUIRE_IN_TURN } else { ACQUIRE };
        let queued = waiting.refresh_at.is_some();
        // A call that will wait takes its place with its busy answer, so a release right after it already counts it.
        let join = req.waits && queues(req) && waiting.refresh_at.is_none_or(|t| Instant::now() >= t);
        if join {
            // Set before the write: an acquire cancelled during it still leaves the queue in its abandon.
            waiting.refresh_at = Some(Instant::now() + queue::REFRESH);
        }
        let outcome = self
            .run(move |c| {
                let now = unix_micros() as i64;
                // Every waiter wakes at every release; only the first in line goes on to the write.
                let mine = !queued || c.prepare_cached(&queue::MY_TURN)?.exists(params![name, holder, now])?;
                let token: Option<i64> = if mine {
                    c.prepare_cached(acquire)?.query_row(params![name, holder, now, ttl], |r| r.get(0)).optional()?
                } else {
                    None
                };
                if let Some(t) = token {
                    if queued || join {
                        c.prepare_cached(queue::LEAVE)?.execute(params![name, holder])?;
                    }
                    return Ok(Ok(t as u64));
                }
                if join {
                    queue::join(c, &name, &holder, now)?;
                }
                let left: Option<i64> = c
                    .prepare_cached("SELECT expires_at - ?2 FROM fencelock_locks WHERE name = ?1")?
                    .query_row(params![name, now], |r| r.get(0))
                    .optional()?;
                Ok(Err(holder_ttl(left)))
            })
            .await?;
        Ok(match outcome {
            Ok(token) => {
                waiting.refresh_at = None;
                Attempt::Acquired(req.grant(token, None))
            }
            Err(holder_ttl) => Attempt::Busy(Busy { holder_ttl }),
        })
    }

    /// Sleeps (the queue place was taken or refreshed by the attempt before) until a wake-up, the holder's expiry, the
    /// refresh, the deadline or the wait slice, whichever comes first.
    async fn wait_free(
        &self,
        _req: &AcquireRequest,
        busy: &Busy,
        waiting: &mut Waiting,
        deadline: Option<Instant>,
    ) -> Result<()> {
        let now = Instant::now();
        let until = [busy.holder_ttl.map(|t| now + t), deadline, waiting.refresh_at]
            .into_iter()
            .flatten()
            .fold(now + WAIT_SLICE, Instant::min);
        self.wakes.wait_until(waiting.seen, until).await;
        Ok(())
    }

    fn left_behind(waiting: &Waiting) -> bool {
        waiting.marked || waiting.refresh_at.is_some()
    }

    async fn abandon(&self, req: &AcquireRequest) -> Result<()> {
        if is_hold(req.kind) {
            self.script(abandon_script(&SQLITE, req)).await?;
            self.wakes.wake();
            return Ok(());
        }
        let (name, holder) = (req.name.clone(), req.holder.clone());
        self.run(move |c| {
            c.prepare_cached(
                "UPDATE fencelock_locks SET holder = NULL, count = 0, expires_at = 0 WHERE name = ?1 AND holder = ?2",
            )?
            .execute(params![name, holder])?;
            c.prepare_cached(queue::LEAVE)?.execute(params![name, holder])
        })
        .await?;
        self.wakes.wake();
        Ok(())
    }
}
