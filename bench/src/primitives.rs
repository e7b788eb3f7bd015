//! Figure 5: the read-write lock and the semaphore next to the mutex, measured in the same alternating slices.
//! 5a: 8 tasks on 8 clients loop a hold + release of one name: read holds (which share) against mutex holds
//! (which take turns). 5b: one task's permit acquire + release against one task's mutex lock + release.

use std::time::Duration;

use fencelock::{Client, LockOptions};
use futures::future::try_join_all;

use crate::BoxResult;
use crate::report::{Table, dur, rate};
use crate::stats::{SLICES, Samples, timed};

/// Readers (and mutex contenders) of figure 5a.
const READERS: usize = 8;
/// Permits of figure 5b's semaphore: more than its one task ever holds, so it measures the cycle, not a wait.
const PERMITS: u32 = 4;

/// Which hold a figure times.
#[derive(Clone, Copy)]
enum Hold {
    Mutex,
    Read,
    Permit,
}

async fn cycle(client: &Client, hold: Hold, name: &str, opts: &LockOptions) -> BoxResult<()> {
    let lease = match hold {
        Hold::Mutex => client.lock(name, opts).await?,
        Hold::Read => client.rw_lock(name).read(opts).await?,
        Hold::Permit => client.semaphore(name, PERMITS).acquire(opts).await?,
    };
    lease.release().await?;
    Ok(())
}

/// Every client loops `hold` on `name` for `span` at once; the samples of all of them.
async fn together(clients: &[Client], hold: Hold, name: &str, span: Duration) -> BoxResult<Samples> {
    let opts = LockOptions::default();
    let runs = clients.iter().map(|c| timed(span, || cycle(c, hold, name, &opts)));
    Ok(Samples::concurrent(try_join_all(runs).await?))
}

fn ratio_rows(t: &mut Table, what: &str, ours: &Samples, mutex: &Samples) {
    t.row(&format!("{what}/s"), rate(ours.rate()), rate(mutex.rate()), Some(ours.rate() / mutex.rate()), None);
    let (a, b) = (ours.pct(50.0), mutex.pct(50.0));
    t.row("p50 cycle latency", dur(a), dur(b), Some(a.as_secs_f64() / b.as_secs_f64().max(1e-12)), None);
    let (a, b) = (ours.pct(99.0), mutex.pct(99.0));
    t.row("p99 cycle latency", dur(a), dur(b), Some(a.as_secs_f64() / b.as_secs_f64().max(1e-12)), None);
}

/// Figures 5a and 5b on `url`, where its backend has the primitive; `None` entries are skipped with a line.
pub async fn run(url: &str, span: Duration) -> BoxResult<Vec<Table>> {
    let probe = Client::connect(url).await?;
    let caps = probe.capability();
    let mut tables = Vec::new();
    let slice = span / SLICES;
    let tag = std::process::id();
    if caps.rw_lock {
        let mut clients = Vec::with_capacity(READERS);
        for _ in 0..READERS {
            clients.push(Client::connect(url).await?);
        }
        let (rw, mutex) = (format!("bench-rw-{tag}"), format!("bench-rw-mutex-{tag}"));
        together(&clients, Hold::Read, &rw, Duration::from_millis(200)).await?;
        together(&clients, Hold::Mutex, &mutex, Duration::from_millis(200)).await?;
        let (mut reads, mut locks) = (Vec::new(), Vec::new());
        for _ in 0..SLICES {
            reads.push(together(&clients, Hold::Read, &rw, slice).await?);
            locks.push(together(&clients, Hold::Mutex, &mutex, slice).await?);
        }
        for c in &clients {
            c.close().await;
        }
        let mut t = Table::with_columns(
            format!("5a. read-lock throughput: {READERS} clients on one name, {} s", span.as_secs_f64()),
            "read holds",
            "mutex",
        );
        ratio_rows(&mut t, "holds", &Samples::merge(reads), &Samples::merge(locks));
        t.note("each client loops read + release (left) or lock + release (right) of one name; ratio = read/mutex");
        t.note(format!("{SLICES} alternating slices of {} per side", dur(slice)));
        tables.push(t);
    }
    if caps.semaphore {
        let (sem, mutex) = (format!("bench-sem-{tag}"), format!("bench-sem-mutex-{tag}"));
        let one = [probe.clone()];
        together(&one, Hold::Permit, &sem, Duration::from_millis(200)).await?;
        together(&one, Hold::Mutex, &mutex, Duration::from_millis(200)).await?;
        let (mut permits, mut locks) = (Vec::new(), Vec::new());
        for _ in 0..SLICES {
            permits.push(together(&one, Hold::Permit, &sem, slice).await?);
            locks.push(together(&one, Hold::Mutex, &mutex, slice).await?);
        }
        let mut t = Table::with_columns(
            format!("5b. semaphore acquire+release: 1 client, 1 task, {PERMITS} permits, {} s", span.as_secs_f64()),
            "permit",
            "mutex",
        );
        ratio_rows(&mut t, "cycles", &Samples::merge(permits), &Samples::merge(locks));
        t.note("ratio = permit/mutex: the price of the slot and the count over a plain lock");
        t.note(format!("{SLICES} alternating slices of {} per side", dur(slice)));
        tables.push(t);
    }
    probe.close().await;
    Ok(tables)
}
