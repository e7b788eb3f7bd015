//! `fencelock-bench`: fencelock's figures per backend, each next to the backend's raw limit measured in the same
//! run, with the ratio and the target. Run on demand (`cargo run -p fencelock-bench --release -- --help`); misses
//! are printed, and only an operation that fails makes the exit status non-zero.

mod args;
mod baseline;
mod daemon;
mod failover;
mod handoff;
mod latency_proxy;
mod many;
mod metrics_cost;
mod primitives;
mod procfs;
mod report;
mod stats;
mod uncontended;
mod versus;

use std::path::PathBuf;
use std::time::Duration;

use args::{Args, SERVERS, Which};
use baseline::{Baseline, EtcdRaw, MemoryRaw, MysqlRaw, PostgresRaw, RedisRaw, RedlockRaw, SqliteRaw, ZkRaw};
use report::Table;

pub type BoxResult<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// Per-backend targets (DESIGN.md §7 and the benchmark issue); `None` where none is set.
#[derive(Debug, Default)]
pub struct Targets {
    /// fencelock cycles/s ÷ raw cycles/s, at least.
    pub cycle_ratio: Option<f64>,
    /// Hand-off gap p50 in raw round trips, at most.
    pub gap_rtts: Option<f64>,
    /// Hand-off gap p50, at most.
    pub gap_abs: Option<Duration>,
    /// Every contested hand-off goes to the worker that called `lock()` first.
    pub fifo: bool,
    /// Fewest ÷ most acquisitions per worker in the hand-off, at least (0.5 when unset).
    pub fairness: Option<f64>,
}

/// One backend to measure.
struct Run {
    label: String,
    url: String,
    raw: Baseline,
    targets: Targets,
    /// Whether figure 3 runs here (it needs a watchdog that talks to a server, or the memory reference).
    many: bool,
    /// Whether the backend serves both wait orders (`LockOptions::fair`): figures 1 and 2 then measure both.
    orders: bool,
}

fn print(t: &Table, misses: &mut usize) {
    *misses += t.misses();
    println!("{}", t.render());
}

async fn bench(run: &Run, args: &Args, misses: &mut usize) -> BoxResult<()> {
    println!("=== {} ({}) ===\n", run.label, run.url);
    print(&uncontended::run(&run.url, &run.raw, args.phase, &run.targets, run.orders).await?, misses);
    for table in primitives::run(&run.url, args.phase).await? {
        print(&table, misses);
    }
    if run.orders {
        // The fair queue with its targets, then the free-for-all for comparison (no targets: it is the old way).
        let fair = handoff::Order { label: Some("fair queue"), opts: fencelock::LockOptions::default().fair(true) };
        print(&handoff::run(&run.url, &run.raw, args.phase, &run.targets, &fair).await?, misses);
        let racing =
            handoff::Order { label: Some("free-for-all"), opts: fencelock::LockOptions::default().fair(false) };
        let none = Targets::default();
        print(&handoff::run(&run.url, &run.raw, args.phase, &none, &racing).await?, misses);
    } else {
        let default = handoff::Order { label: None, opts: fencelock::LockOptions::default() };
        print(&handoff::run(&run.url, &run.raw, args.phase, &run.targets, &default).await?, misses);
    }
    // Figure 3 on every backend that enables it, whichever hand-off orders it has.
    if run.many {
        for ttl in [Duration::from_secs(30), Duration::from_secs(3)] {
            let (table, missed) = many::run_isolated(&run.url, ttl).await?;
            *misses += missed;
            println!("{table}");
        }
    }
    Ok(())
}

/// A fresh directory for the SQLite files, so runs never see each other's rows.
fn scratch_dir() -> BoxResult<PathBuf> {
    let dir = std::env::temp_dir().join(format!("fencelock-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

/// Figure 6 on every backend asked for that can run it.
async fn failover_main(args: &Args, s: failover::Settings) -> BoxResult<()> {
    if matches!(args.which, Which::Memory | Which::Fencelockd) {
        return Err("--failover: memory:// lives in one process, and fencelockd has no election: \
                    pick a server backend, sqlite or all"
            .into());
    }
    let mut outcomes = Vec::new();
    if args.wants(Which::Sqlite) {
        let dir = scratch_dir()?;
        let url = format!("sqlite:{}", dir.join("failover.db").display());
        let result = failover::run("sqlite", &url, s).await;
        let _ = std::fs::remove_dir_all(&dir);
        let (table, outcome) = result?;
        println!("{}", table.render());
        outcomes.push(outcome);
    }
    for (which, name, var, _) in SERVERS {
        let Some(url) = args.wanted_url(which, name, var)? else { continue };
        let (table, outcome) = failover::run(name, url, s).await?;
        println!("{}", table.render());
        outcomes.push(outcome);
    }
    println!("{}", failover::summary(&outcomes, s));
    Ok(())
}

async fn main_inner(args: Args) -> BoxResult<usize> {
    let mut misses = 0;
    if let Some(s) = args.failover {
        failover_main(&args, s).await?;
        return Ok(misses);
    }
    if args.which == Which::Fencelockd {
        let dir = scratch_dir()?;
        let sqlite = format!("sqlite:{}", dir.join("fencelockd.db").display());
        let result = daemon::run("sqlite", &sqlite, args.phase).await;
        let _ = std::fs::remove_dir_all(&dir);
        print(&result?, &mut misses);
        // Every server backend with a URL: the hop weighs less as the backend's own round trips grow.
        for (which, name, var, _) in SERVERS {
            match args.url(which) {
                Some(url) => print(&daemon::run(name, url, args.phase).await?, &mut misses),
                None => println!("=== fencelockd on {name} skipped: no --{name} URL and {var} is unset ===\n"),
            }
        }
        return Ok(misses);
    }
    if args.wants(Which::Sqlite) {
        let dir = scratch_dir()?;
        let run = Run {
            label: "sqlite".into(),
            url: format!("sqlite:{}", dir.join("fencelock.db").display()),
            raw: Baseline::Sqlite(SqliteRaw::new(dir.join("raw.db"))),
            targets: Targets { gap_abs: Some(Duration::from_millis(5)), fairness: Some(0.9), ..Targets::default() },
            many: false,
            orders: true,
        };
        let result = bench(&run, &args, &mut misses).await;
        let _ = std::fs::remove_dir_all(&dir);
        result?;
    }
    if args.wants(Which::Memory) {
        let run = Run {
            label: "memory".into(),
            url: format!("memory://bench-{}", std::process::id()),
            raw: Baseline::Memory(MemoryRaw::default()),
            targets: Targets::default(),
            many: true,
            orders: false,
        };
        bench(&run, &args, &mut misses).await?;
        print(&metrics_cost::run("memory", &run.url, args.phase, None).await?, &mut misses);
    }
    for (which, name, var, _) in SERVERS {
        let Some(url) = args.wanted_url(which, name, var)? else { continue };
        let consensus = Targets { cycle_ratio: Some(0.7), gap_rtts: Some(3.0), fifo: true, ..Targets::default() };
        let throughput = Targets { cycle_ratio: Some(0.7), ..Targets::default() };
        let (raw, targets, many) = match which {
            Which::Redis => (
                Baseline::Redis(RedisRaw::connect(url).await?),
                Targets { cycle_ratio: Some(0.8), gap_rtts: Some(3.0), fairness: Some(0.9), ..Targets::default() },
                true,
            ),
            Which::Etcd => (Baseline::Etcd(EtcdRaw::connect(url).await?), consensus, false),
            Which::Zk => (Baseline::Zk(ZkRaw::connect(url).await?), consensus, false),
            Which::Postgres => (Baseline::Postgres(PostgresRaw::connect(url).await?), throughput, false),
            Which::Redlock => (Baseline::Redlock(RedlockRaw::connect(url).await?), throughput, false),
            Which::Mysql => (Baseline::Mysql(MysqlRaw::connect(url).await?), throughput, false),
            Which::Sqlite | Which::Memory | Which::All | Which::Fencelockd => unreachable!("not a server backend"),
        };
        let orders = which == Which::Redis;
        let own = if which == Which::Postgres { plaintext_postgres(url) } else { url.to_string() };
        let run = Run { label: name.into(), url: own, raw, targets, many, orders };
        bench(&run, &args, &mut misses).await?;
        match which {
            Which::Redis => {
                print(&metrics_cost::run(name, url, args.phase, Some(metrics_cost::REDIS_RATIO)).await?, &mut misses)
            }
            Which::Redlock => {
                for table in versus::run(url, args.phase).await? {
                    print(&table, &mut misses);
                }
            }
            _ => {}
        }
    }
    Ok(misses)
}

/// `url` with `sslmode=disable` unless it names a mode: the raw baseline's connection is plaintext, and
/// fencelock's default (`prefer`, as libpq's) would encrypt on a server that offers TLS, measuring rustls rather
/// than the backend. With `sslmode=` given, fencelock uses it and the comparison is the user's to read.
fn plaintext_postgres(url: &str) -> String {
    if url.contains("sslmode=") {
        return url.to_string();
    }
    let joint = if url.contains('?') { '&' } else { '?' };
    format!("{url}{joint}sslmode=disable")
}

#[tokio::main]
async fn main() {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    if argv.first().map(String::as_str) == Some(failover::CHILD_FLAG) {
        if let Err(e) = failover::child_main(&argv[1..]).await {
            eprintln!("fencelock-bench {}: {e}", failover::CHILD_FLAG);
            std::process::exit(1);
        }
        return;
    }
    if argv.first().map(String::as_str) == Some(many::CHILD_FLAG) {
        if let Err(e) = many::child_main(&argv[1..]).await {
            eprintln!("fencelock-bench {}: {e}", many::CHILD_FLAG);
            std::process::exit(1);
        }
        return;
    }
    let outcome = match Args::parse() {
        Ok(args) => main_inner(args).await,
        Err(e) => Err(e),
    };
    match outcome {
        Ok(misses) => println!("{misses} target(s) missed (reported only; the exit status is 0)"),
        Err(e) => {
            eprintln!("fencelock-bench: {e}");
            std::process::exit(1);
        }
    }
}
