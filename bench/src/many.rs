//! Figure 3: the cost of holding many locks. One client takes 10,000 locks with the watchdog on, then the process's
//! RSS growth and CPU time are read over a quiet window while the watchdog keeps them alive.
//!
//! Each run happens in a fresh child process (this binary with `--many-child`): in the parent, memory freed by the
//! earlier figures would be reused and the RSS growth would read near zero.

use std::time::Duration;

use fencelock::{Client, Lease, LockOptions};
use tokio::time::Instant;

use crate::BoxResult;
use crate::procfs::{cpu_time, rss_bytes};
use crate::report::{Table, Target, dur, mb, rate};

const LOCKS: usize = 10_000;
pub const WINDOW: Duration = Duration::from_secs(10);
/// The targets hold at the default TTL; at short TTLs the figure shows what renewals cost.
const TARGET_TTL: Duration = Duration::from_secs(30);
const RSS_TARGET_MB: f64 = 20.0;
const CPU_TARGET_PCT: f64 = 5.0;

async fn acquire_all(client: &Client, opts: &LockOptions) -> BoxResult<Vec<Lease>> {
    let mut leases = Vec::with_capacity(LOCKS);
    for i in 0..LOCKS {
        let name = format!("bench-many-{i}");
        // try_lock: a name held by someone else (an interrupted earlier run) is an error, not a 30 s wait.
        let lease = client
            .try_lock(&name, opts)
            .await?
            .ok_or_else(|| format!("{name} is held by another client (an earlier run? it expires within its TTL)"))?;
        leases.push(lease);
    }
    Ok(leases)
}

/// The hidden flag that makes this binary run one measurement and print its table.
pub const CHILD_FLAG: &str = "--many-child";
const MISSES_PREFIX: &str = "misses: ";

/// Runs one measurement in a child process; returns its printed table and its number of missed targets.
pub async fn run_isolated(url: &str, ttl: Duration) -> BoxResult<(String, usize)> {
    let out = tokio::process::Command::new(std::env::current_exe()?)
        .args([CHILD_FLAG, url, &ttl.as_millis().to_string()])
        .stderr(std::process::Stdio::inherit())
        .output()
        .await?;
    if !out.status.success() {
        return Err(format!("the {LOCKS}-lock run (ttl {ttl:?}) failed: {}", out.status).into());
    }
    let text = String::from_utf8(out.stdout)?;
    let (table, misses) = text.rsplit_once(MISSES_PREFIX).ok_or("the child printed no miss count")?;
    Ok((table.to_string(), misses.trim().parse()?))
}

/// The child's side: `--many-child URL TTL_MS`.
pub async fn child_main(args: &[String]) -> BoxResult<()> {
    let [url, ms] = args else { return Err(format!("usage: {CHILD_FLAG} URL TTL_MS").into()) };
    let t = run(url, Duration::from_millis(ms.parse()?)).await?;
    print!("{}{MISSES_PREFIX}{}", t.render(), t.misses());
    Ok(())
}

async fn run(url: &str, ttl: Duration) -> BoxResult<Table> {
    let client = Client::connect(url).await?;
    let opts = LockOptions::default().ttl(ttl);
    let rss0 = rss_bytes()?;
    let t0 = Instant::now();
    let leases = acquire_all(&client, &opts).await?;
    let took = t0.elapsed();

    let cpu0 = cpu_time()?;
    let w0 = Instant::now();
    tokio::time::sleep(WINDOW).await;
    let cpu = cpu_time()? - cpu0;
    let window = w0.elapsed();
    let rss = rss_bytes()? as i64 - rss0 as i64;
    let lost = leases.iter().filter(|l| l.is_lost()).count();

    let t1 = Instant::now();
    for lease in &leases {
        lease.release().await?;
    }
    let freed = t1.elapsed();
    drop(leases);
    client.close().await;

    let pct = cpu.as_secs_f64() / window.as_secs_f64() * 100.0;
    let gated = ttl == TARGET_TTL;
    let mut t = Table::new(format!(
        "3. {LOCKS} held locks, watchdog on, ttl {} s (renewal every {} ms), {} s window",
        ttl.as_secs_f64(),
        (ttl / 3).as_millis(),
        WINDOW.as_secs()
    ));
    t.plain("acquire all", format!("{} ({})", dur(took), rate(LOCKS as f64 / took.as_secs_f64())), None);
    let rss_mb = rss as f64 / 1e6;
    t.plain("RSS growth while holding", mb(rss), gated.then(|| Target::at_most(rss_mb, RSS_TARGET_MB, "MB")));
    t.plain(
        "CPU while holding (% of one core)",
        format!("{pct:.1} %"),
        gated.then(|| Target::at_most(pct, CPU_TARGET_PCT, "%")),
    );
    t.plain("leases lost during the window", lost.to_string(), Some(Target::at_most(lost as f64, 0.0, "lost")));
    t.plain("release all", format!("{} ({})", dur(freed), rate(LOCKS as f64 / freed.as_secs_f64())), None);
    if gated {
        t.note("targets apply at ttl 30 s; renewals of the whole set fall inside the window once");
    }
    Ok(t)
}
