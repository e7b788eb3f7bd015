//! Redis behind Sentinel: one master, two replicas and three sentinels watching them (quorum 2), their command lines,
//! and what the nemesis asks the sentinels (who is master now, has a failover happened). Questions go through
//! `redis-cli` straight to a sentinel's port, never through a fault proxy.

use std::net::SocketAddr;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

/// The master name the sentinels monitor and the clients' URL names.
pub const MASTER: &str = "fencelock-master";
/// Well under the 2 s TTL, so a failover happens within the life of a lease.
pub const DOWN_AFTER: Duration = Duration::from_millis(1000);
const FAILOVER_TIMEOUT_MS: u64 = 3000;
/// How long the nemesis waits for the sentinels to promote a replica before it gives up on this failover.
pub const PROMOTION_BOUND: Duration = Duration::from_secs(10);

/// A data node's command line; a replica of `master` when given. No persistence, like the single Redis: a killed
/// node comes back empty and resyncs from the master the sentinels name.
pub fn data_args(port: u16, dir: &Path, master: Option<u16>) -> Vec<String> {
    let mut args: Vec<String> =
        ["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
            .iter()
            .map(|s| s.to_string())
            .collect();
    args.extend(["--dir".into(), dir.to_string_lossy().into_owned()]);
    // Sentinel hands clients the address a replica announces: loopback, which is where it listens.
    args.extend(["--replica-announce-ip".into(), "127.0.0.1".into()]);
    // A (re)started replica syncs at once: Redis's default waits 5 s for more replicas to share the transfer, and
    // until it has synced, grants that wait for a majority of replicas fail.
    args.extend(["--repl-diskless-sync-delay".into(), "0".into()]);
    if let Some(m) = master {
        args.extend(["--replicaof".into(), "127.0.0.1".into(), m.to_string()]);
    }
    args
}

/// Writes a sentinel's configuration into `dir` and returns its command line. The sentinel rewrites the file with
/// what it learns, so a restarted sentinel resumes with the current master.
pub fn sentinel_args(port: u16, dir: &Path, master: u16) -> std::io::Result<Vec<String>> {
    std::fs::create_dir_all(dir)?;
    let conf = dir.join("sentinel.conf");
    let text = format!(
        "bind 127.0.0.1\nport {port}\ndir {}\nsentinel monitor {MASTER} 127.0.0.1 {master} 2\n\
         sentinel down-after-milliseconds {MASTER} {}\n\
         sentinel failover-timeout {MASTER} {FAILOVER_TIMEOUT_MS}\nsentinel parallel-syncs {MASTER} 2\n",
        dir.display(),
        DOWN_AFTER.as_millis()
    );
    std::fs::write(&conf, text)?;
    Ok(vec![conf.to_string_lossy().into_owned(), "--sentinel".into()])
}

/// Runs `redis-cli` against `addr` (a sentinel or a data node); its stdout lines, or why not.
pub async fn cli(addr: SocketAddr, args: &[&str]) -> Result<Vec<String>, String> {
    let run = tokio::process::Command::new("redis-cli")
        .args(["-h", &addr.ip().to_string(), "-p", &addr.port().to_string()])
        .args(args)
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(2), run)
        .await
        .map_err(|_| format!("redis-cli {addr}: no answer within 2 s"))?
        .map_err(|e| format!("redis-cli: {e}"))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() || stdout.starts_with("ERR") || stdout.starts_with("Could not connect") {
        return Err(format!("redis-cli {addr} {args:?}: {} {}", stdout.trim(), String::from_utf8_lossy(&out.stderr)));
    }
    Ok(stdout.lines().map(str::to_string).collect())
}

/// The master's address as the first answering sentinel names it.
pub async fn master(sentinels: &[SocketAddr]) -> Option<SocketAddr> {
    for s in sentinels {
        if let Ok(lines) = cli(*s, &["SENTINEL", "get-master-addr-by-name", MASTER]).await
            && let [ip, port, ..] = lines.as_slice()
            && let Ok(addr) = format!("{ip}:{port}").parse()
        {
            return Some(addr);
        }
    }
    None
}

/// Waits (within `bound`) until a majority of the sentinels name a master other than `old`; returns it.
pub async fn promoted(sentinels: &[SocketAddr], old: SocketAddr, bound: Duration) -> Option<SocketAddr> {
    let deadline = Instant::now() + bound;
    while Instant::now() < deadline {
        let mut named = Vec::new();
        for s in sentinels {
            if let Ok(lines) = cli(*s, &["SENTINEL", "get-master-addr-by-name", MASTER]).await
                && let [ip, port, ..] = lines.as_slice()
                && let Ok(addr) = format!("{ip}:{port}").parse::<SocketAddr>()
            {
                named.push(addr);
            }
        }
        let new = named.iter().find(|a| **a != old && named.iter().filter(|b| b == a).count() * 2 > sentinels.len());
        if let Some(new) = new {
            return Some(*new);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    None
}

/// Waits until every sentinel knows the master, both replicas and the other sentinels, and every replica has synced:
/// before that a failover could not promote anyone.
pub async fn wait_ready(sentinels: &[SocketAddr], replicas: &[SocketAddr], bound: Duration) -> Result<(), String> {
    let deadline = Instant::now() + bound;
    let mut last = String::new();
    while Instant::now() < deadline {
        match ready(sentinels, replicas).await {
            Ok(()) => return Ok(()),
            Err(e) => last = e,
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Err(format!("sentinels not ready within {}s: {last}", bound.as_secs()))
}

/// Waits until every replica reports its link to the master up.
pub async fn wait_synced(replicas: &[SocketAddr], bound: Duration) -> Result<(), String> {
    let deadline = Instant::now() + bound;
    let mut last = String::new();
    while Instant::now() < deadline {
        match synced(replicas).await {
            Ok(()) => return Ok(()),
            Err(e) => last = e,
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Err(format!("replicas not synced within {}s: {last}", bound.as_secs()))
}

async fn synced(replicas: &[SocketAddr]) -> Result<(), String> {
    for r in replicas {
        let info = cli(*r, &["INFO", "replication"]).await?;
        if !info.iter().any(|l| l.trim() == "master_link_status:up") {
            return Err(format!("replica {r} not synced"));
        }
    }
    Ok(())
}

async fn ready(sentinels: &[SocketAddr], replicas: &[SocketAddr]) -> Result<(), String> {
    for s in sentinels {
        let lines = cli(*s, &["SENTINEL", "master", MASTER]).await?;
        // Alternating field and value lines.
        let field = |name: &str| lines.iter().position(|l| l == name).and_then(|i| lines.get(i + 1)).cloned();
        let (slaves, others) = (field("num-slaves"), field("num-other-sentinels"));
        if slaves.as_deref() != Some(&replicas.len().to_string())
            || others.as_deref() != Some(&(sentinels.len() - 1).to_string())
        {
            return Err(format!("sentinel {s}: num-slaves {slaves:?}, num-other-sentinels {others:?}"));
        }
    }
    synced(replicas).await
}
