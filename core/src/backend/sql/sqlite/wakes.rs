//! Wake-ups for SQLite waiters instead of blind polling: one [`Wakes`] per database file per process, shared by every
//! client of the process that opened the file.
//!
//! - Within the process, a release (or abandon, or force-release) wakes the file's waiters directly.
//! - Across processes, SQLite has no notifications, but `PRAGMA data_version` changes whenever another connection
//!   commits to the file; it reads the WAL index in shared memory, a few µs, with no I/O. While anyone waits, one
//!   watcher task per file and process reads it every [`WATCH_EVERY`] on a connection of its own (so it sees this
//!   process's commits as well) and wakes the waiters when it moves.
//!
//! A commit that changes nothing leaves `data_version` alone, so a busy attempt (an upsert whose WHERE fails) wakes no
//! one. Waiters compare generations, so a wake-up between an attempt and the wait is not missed; every wait is still
//! bounded by its caller, so a missed change costs at most one wait slice.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock, Mutex, Weak};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};
use tokio::sync::Notify;
use tokio::time::Instant;

/// How often the watcher reads `data_version` while someone waits: the cross-process hand-off delay it adds, on
/// average half of it.
pub(super) const WATCH_EVERY: Duration = Duration::from_millis(1);

/// The wake-ups of one database file in this process.
#[derive(Debug)]
pub(super) struct Wakes {
    path: PathBuf,
    generation: AtomicU64,
    notify: Notify,
    /// Tasks in [`Wakes::wait_until`] now.
    waiting: AtomicUsize,
    /// Whether a watcher task runs.
    watching: AtomicBool,
}

/// Every file's wake-ups, by canonical path; an entry lives while a client of the file does.
static FILES: LazyLock<Mutex<HashMap<PathBuf, Weak<Wakes>>>> = LazyLock::new(Mutex::default);

impl Wakes {
    /// The wake-ups of the file at `path` (opened already, so it can be canonicalised).
    pub(super) fn of(path: &str) -> Arc<Wakes> {
        let path = std::fs::canonicalize(path).unwrap_or_else(|_| PathBuf::from(path));
        let mut files = FILES.lock().unwrap_or_else(|p| p.into_inner());
        files.retain(|_, w| w.strong_count() > 0);
        if let Some(w) = files.get(&path).and_then(Weak::upgrade) {
            return w;
        }
        let w = Arc::new(Wakes {
            path: path.clone(),
            generation: AtomicU64::new(0),
            notify: Notify::new(),
            waiting: AtomicUsize::new(0),
            watching: AtomicBool::new(false),
        });
        files.insert(path, Arc::downgrade(&w));
        w
    }

    /// The wake-ups so far: take it before an attempt, and wait with it after a busy one.
    pub(super) fn generation(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }

    /// Something was freed or the file changed: every waiter of the file in this process looks again.
    pub(super) fn wake(&self) {
        self.generation.fetch_add(1, Ordering::SeqCst);
        self.notify.notify_waiters();
    }

    /// Resolves at the first wake-up after generation `seen`, or at `until`.
    pub(super) async fn wait_until(self: &Arc<Self>, seen: u64, until: Instant) {
        let notified = self.notify.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        self.waiting.fetch_add(1, Ordering::SeqCst);
        let _waiting = Waiting(self);
        self.watch();
        if self.generation() != seen {
            return;
        }
        let _ = tokio::time::timeout_at(until, notified).await;
    }

    /// Starts the watcher unless one runs.
    fn watch(self: &Arc<Self>) {
        if self.watching.swap(true, Ordering::SeqCst) {
            return;
        }
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            self.watching.store(false, Ordering::SeqCst);
            return;
        };
        let wakes = self.clone();
        handle.spawn(async move {
            let _running = Running(&wakes);
            // A watcher that cannot open the file leaves the waits to their bounds.
            if let Ok(conn) = open_watcher(&wakes.path) {
                wakes.run(conn).await;
            }
        });
    }

    /// Reads `data_version` every [`WATCH_EVERY`] until nobody waits.
    async fn run(&self, conn: Connection) {
        let version = |c: &Connection| c.query_row("PRAGMA data_version", [], |r| r.get::<_, i64>(0)).ok();
        let mut last = version(&conn);
        loop {
            tokio::time::sleep(WATCH_EVERY).await;
            if self.waiting.load(Ordering::SeqCst) == 0 {
                return;
            }
            let now = version(&conn);
            if now != last {
                last = now;
                self.wake();
            }
        }
    }
}

fn open_watcher(path: &Path) -> rusqlite::Result<Connection> {
    Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX)
}

/// One task in `wait_until`, counted while it waits.
struct Waiting<'a>(&'a Wakes);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.waiting.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The watcher task, however it ends (nobody waits, its runtime shut down): the next waiter starts another.
struct Running<'a>(&'a Arc<Wakes>);

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.0.watching.store(false, Ordering::SeqCst);
        // A waiter that came between the watcher's last look and this store found it still running: restart for it.
        if self.0.waiting.load(Ordering::SeqCst) > 0 && tokio::runtime::Handle::try_current().is_ok() {
            self.0.watch();
        }
    }
}
