//! Figure 6 (`--failover`): the time from a leader's death to the next leader. The leader is a separate process,
//! this binary re-executed in [`CHILD_FLAG`] mode, that campaigns, prints `leading <term>` and then does nothing
//! until it is SIGKILLed: an in-process leader would either release cleanly when dropped or keep its watchdog alive,
//! and a crash is what a standby has to survive. The standby campaigns in this process; the kill is timed just
//! before `kill(2)`, the new leader when its `campaign` returns, on one monotonic clock. Each round starts a fresh
//! leader; the standby resigns at the end of its round.
//!
//! The TTL dominates the figure (nobody can take over a crashed leader's record before it expires), so it is printed
//! beside it, and "beyond the TTL" (failover − TTL) is what detection and hand-off add. The leader is killed as soon
//! as it says it leads, so its record has all of its TTL left (a crash later, between two renewals at a third of the
//! TTL, leaves up to a third less): every side is measured at that same worst case. On etcd and ZooKeeper, whose
//! servers expire leases on a timer, the kill is instead held back by steps spread over one period of it (`hold`).
//!
//! Baselines in the same run, same loop (child leader killed, standby in the driver): etcd's own
//! `concurrency.Election` (Go, `server/tests/go -mode election-failover`) on etcd and Curator's `LeaderLatch`
//! (`bench/java/failover`) on ZooKeeper; see `peers.rs`.

mod peers;

use std::process::Stdio;
use std::time::Duration;

use fencelock::{Client, LockOptions};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::time::{Instant, timeout};

use crate::BoxResult;
use crate::report::{Table, dur};
use crate::stats::Samples;

/// The hidden flag of the leader process: `--campaign-child URL NAME TTL_MS`.
pub const CHILD_FLAG: &str = "--campaign-child";
const NAME: &str = "bench-failover";
/// How often etcd's lessor looks for expired leases (`revokeExpiredLeases`, every 500 ms): its revocations fall on
/// that timer.
const ETCD_EXPIRY_CHECK: Duration = Duration::from_millis(500);
/// How long a fresh leader process may take to connect and win an uncontested election.
const STARTUP: Duration = Duration::from_secs(30);

/// What `--failover` measures with.
#[derive(Debug, Clone, Copy)]
pub struct Settings {
    pub kills: usize,
    pub ttl: Duration,
}

/// One backend's row of the summary.
#[derive(Debug)]
pub struct Outcome {
    label: String,
    /// The TTL as the backend applies it (ZooKeeper: the session timeout the server granted).
    effective: Duration,
    effective_desc: String,
    /// The kills are held back after "leading" by steps over this span (zero: killed at once).
    spread: Duration,
    ours: Samples,
    /// The baseline's name, and its failovers with its driver's notes.
    peer: Option<(&'static str, BoxResult<PeerRun>)>,
}

/// A baseline's failovers and its driver's notes.
type PeerRun = (Samples, Vec<String>);

/// Figure 6 on one backend: fencelock's failovers, then its peer's if it has one.
pub async fn run(label: &str, url: &str, s: Settings) -> BoxResult<(Table, Outcome)> {
    let (effective, effective_desc) = effective_ttl(url, s.ttl).await?;
    let scheme = url.split_once("://").map(|(scheme, _)| scheme);
    // Servers that expire on a timer (ZooKeeper's session buckets of one tick, at most half the granted session;
    // etcd's lessor) would phase-lock the kills to it, through each side's leader start-up time: the kills are
    // spread over one period instead, in the same steps on both sides.
    let spread = match scheme {
        Some("zk") => effective / 2,
        Some("etcd") => ETCD_EXPIRY_CHECK,
        _ => Duration::ZERO,
    };
    let ours = samples(fencelock_failovers(url, s, spread).await?);
    let peer = match scheme {
        Some("etcd") => Some(("etcd Election", peers::etcd_election(url, s, spread).await.map(peer_samples))),
        Some("zk") => Some(("Curator LeaderLatch", peers::curator_latch(url, s, spread).await.map(peer_samples))),
        _ => None,
    };
    let outcome = Outcome { label: label.to_string(), effective, effective_desc, spread, ours, peer };
    Ok((outcome.table(s), outcome))
}

fn peer_samples(p: peers::Peer) -> PeerRun {
    (samples(p.failovers), p.notes)
}

fn samples(v: Vec<Duration>) -> Samples {
    let total = v.iter().sum();
    Samples::from_vec(v, total)
}

/// The lease lifetime a crashed leader leaves behind. ZooKeeper clamps the session timeout fencelock asks for (the
/// TTL, at least 1 s: see core's zookeeper backend) to the server's 2–20 ticks; that is asked here the same way.
async fn effective_ttl(url: &str, ttl: Duration) -> BoxResult<(Duration, String)> {
    if !url.starts_with("zk://") {
        return Ok((ttl, dur(ttl)));
    }
    let asked = ttl.max(Duration::from_secs(1));
    let granted = peers::zk_session_timeout(url, asked).await?;
    Ok((granted, format!("{} (session {})", dur(ttl), dur(granted))))
}

/// `kills` rounds of: start a leader process, start the standby's campaign, SIGKILL the leader, time the takeover.
/// How long round `round` (from 0) keeps its leader before the kill: the midpoints of `kills` equal steps over
/// `spread` (the baselines' drivers compute the same).
fn hold(spread: Duration, round: usize, kills: usize) -> Duration {
    spread * (2 * round as u32 + 1) / (2 * kills as u32)
}

async fn fencelock_failovers(url: &str, s: Settings, spread: Duration) -> BoxResult<Vec<Duration>> {
    let standby = Client::connect(url).await?;
    if !standby.capability().election {
        return Err(format!("{url}: the backend has no elections").into());
    }
    let election = standby.election(NAME);
    // Bounded, so a takeover that never comes is an error rather than a hung benchmark.
    let opts = LockOptions::default().ttl(s.ttl).timeout(s.ttl * 10 + STARTUP);
    let mut failovers = Vec::with_capacity(s.kills);
    for round in 0..s.kills {
        let (mut leader, term) = spawn_leader(url, s.ttl).await?;
        if !spread.is_zero() {
            // Not a synchronisation: the kill's offset from the server's expiry timer (see `run`).
            tokio::time::sleep(hold(spread, round, s.kills)).await;
        }
        let campaign = {
            let (election, opts) = (election.clone(), opts.clone());
            tokio::spawn(async move {
                let won = election.campaign(b"standby", &opts).await;
                (won, Instant::now())
            })
        };
        // No wait for the standby to queue first: the dead leader's record outlives the kill by up to the TTL,
        // so the standby is waiting long before it can win either way.
        let killed_at = Instant::now();
        leader.start_kill()?; // SIGKILL
        let (won, led_at) = campaign.await?;
        let won = won.map_err(|e| format!("round {}: the standby's campaign: {e}", round + 1))?;
        if won.term() <= term {
            return Err(
                format!("round {}: new term {} not above the killed leader's {term}", round + 1, won.term()).into()
            );
        }
        failovers.push(led_at - killed_at);
        won.resign().await?;
        leader.wait().await?;
    }
    standby.close().await;
    Ok(failovers)
}

/// Starts a leader process and waits for its `leading <term>` line.
async fn spawn_leader(url: &str, ttl: Duration) -> BoxResult<(Child, u64)> {
    let mut child = Command::new(std::env::current_exe()?)
        .args([CHILD_FLAG, url, NAME, &ttl.as_millis().to_string()])
        // The child exits when its stdin closes, so a benchmark killed mid-run leaves no leader behind.
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()?;
    let stdout = child.stdout.take().ok_or("the leader's stdout")?;
    let mut lines = BufReader::new(stdout).lines();
    let line = timeout(STARTUP, lines.next_line())
        .await
        .map_err(|_| format!("the leader process did not lead within {STARTUP:?}"))??
        .ok_or("the leader process exited before leading")?;
    let term = line.strip_prefix("leading ").and_then(|t| t.parse().ok());
    let term = term.ok_or_else(|| format!("the leader process printed {line:?}, expected \"leading <term>\""))?;
    Ok((child, term))
}

/// The leader process: campaign, say so, then hold (the watchdog renews) until killed or orphaned.
pub async fn child_main(args: &[String]) -> BoxResult<()> {
    let [url, name, ms] = args else { return Err(format!("usage: {CHILD_FLAG} URL NAME TTL_MS").into()) };
    let client = Client::connect(url).await?;
    let opts = LockOptions::default().ttl(Duration::from_millis(ms.parse()?)).timeout(STARTUP);
    let won = client.election(name).campaign(b"leader", &opts).await?;
    println!("leading {}", won.term());
    // Stdin closes only when the parent is gone (a blocking read: tokio's stdin is not among the features built).
    tokio::task::spawn_blocking(|| std::io::copy(&mut std::io::stdin(), &mut std::io::sink())).await??;
    drop(won);
    Ok(())
}

/// `+1.23 s`, `−150 ms`: a signed difference of durations.
fn signed(secs: f64) -> String {
    let sign = if secs < 0.0 { "−" } else { "+" };
    format!("{sign}{}", dur(Duration::from_secs_f64(secs.abs())))
}

fn beyond(d: Duration, ttl: Duration) -> String {
    signed(d.as_secs_f64() - ttl.as_secs_f64())
}

fn ratio(a: Duration, b: Duration) -> f64 {
    a.as_secs_f64() / b.as_secs_f64().max(1e-12)
}

impl Outcome {
    fn peer_ok(&self) -> Option<(&'static str, &Samples)> {
        self.peer.as_ref().and_then(|(n, r)| r.as_ref().ok().map(|(s, _)| (*n, s)))
    }

    fn table(&self, s: Settings) -> Table {
        let peer = self.peer_ok();
        let mut t = Table::with_columns(
            format!(
                "6. leader failover on {}: SIGKILL of the leader process → standby's campaign returns, {} kills, \
                 ttl {}",
                self.label,
                self.ours.len(),
                self.effective_desc
            ),
            "fencelock",
            peer.map_or("", |(n, _)| n),
        );
        let (ttl, ours) = (self.effective, &self.ours);
        for p in [50.0, 99.0] {
            let (a, b) = (ours.pct(p), peer.map(|(_, s)| s.pct(p)));
            t.row(&format!("failover p{p}"), dur(a), b.map_or_else(String::new, dur), b.map(|b| ratio(a, b)), None);
        }
        for p in [50.0, 99.0] {
            let b = peer.map(|(_, s)| beyond(s.pct(p), ttl));
            t.row(&format!("beyond the TTL p{p}"), beyond(ours.pct(p), ttl), b.unwrap_or_default(), None, None);
        }
        for (label, p) in [("failover min", 0.0), ("failover max", 100.0)] {
            t.row(label, dur(ours.pct(p)), peer.map(|(_, s)| dur(s.pct(p))).unwrap_or_default(), None, None);
        }
        t.note(format!("ratio = fencelock ÷ peer; beyond the TTL = failover − {}", dur(ttl)));
        if !self.spread.is_zero() {
            t.note(format!(
                "each leader is killed {}–{} after it leads (steps over {}, the same on both sides), so the kills \
                 do not lock to the server's expiry timer",
                dur(hold(self.spread, 0, s.kills)),
                dur(hold(self.spread, s.kills - 1, s.kills)),
                dur(self.spread)
            ));
        }
        if self.effective != s.ttl {
            t.note(format!(
                "ZooKeeper grants sessions of 2–20 ticks: the {} TTL gives a {} session, for fencelock and Curator \
                 alike",
                dur(s.ttl),
                dur(self.effective)
            ));
        }
        match &self.peer {
            Some((name, Err(e))) => t.note(format!("{name} skipped: {e}")),
            Some((name, Ok((_, notes)))) => notes.iter().for_each(|n| t.note(format!("{name}: {n}"))),
            None => t.note("no baseline on this backend"),
        }
        t
    }
}

/// The summary of every backend measured: `backend | TTL | fencelock p50 / p99 | beyond TTL | peer … | ratio`.
pub fn summary(outcomes: &[Outcome], s: Settings) -> String {
    let mut out = format!("6. leader failover, summary ({} kills per side)\n", s.kills);
    let head = ["backend", "TTL", "fencelock p50 / p99", "beyond TTL p50", "baseline", "baseline p50 / p99", "ratio"];
    let mut rows = vec![head.map(String::from)];
    for o in outcomes {
        let pair = |s: &Samples| format!("{} / {}", dur(s.pct(50.0)), dur(s.pct(99.0)));
        let (name, theirs, r) = match (&o.peer, o.peer_ok()) {
            (_, Some((n, s))) => (n.to_string(), pair(s), format!("{:.2}", ratio(o.ours.pct(50.0), s.pct(50.0)))),
            (Some((n, _)), None) => (n.to_string(), "skipped".into(), String::new()),
            (None, None) => ("—".into(), String::new(), String::new()),
        };
        let beyond50 = beyond(o.ours.pct(50.0), o.effective);
        rows.push([o.label.clone(), o.effective_desc.clone(), pair(&o.ours), beyond50, name, theirs, r]);
    }
    let widths: Vec<usize> =
        (0..head.len()).map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0)).collect();
    for r in &rows {
        let cells: Vec<String> =
            r.iter().zip(&widths).map(|(c, w)| format!("{c}{}", " ".repeat(w - c.chars().count()))).collect();
        out.push_str(&format!("  {}\n", cells.join(" | ").trim_end()));
    }
    out.push_str("  note: ratio = fencelock p50 ÷ baseline p50, both measured in this run with the same TTL\n");
    out
}
