//! The baselines of figure 6, each a driver in its own language running the same loop as fencelock's (spawn a
//! leader process, wait for its "leading" line, start the standby's campaign, SIGKILL the leader, time the
//! takeover) and printing `result failover_ns=<n>,<n>,…` and `note <text>` lines on stdout:
//!
//! - etcd's `concurrency.Election`: `server/tests/go`, built here with `go build` (Go's build cache makes later
//!   builds quick) next to this binary, run as `-mode election-failover`;
//! - Curator's `LeaderLatch`: the Maven project `bench/java/failover`, run with `mvn … compile exec:exec`.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::process::Command;
use zookeeper_client as zk;

use super::Settings;
use crate::BoxResult;

/// A baseline's failovers and what its driver said about its settings.
#[derive(Debug)]
pub struct Peer {
    pub failovers: Vec<Duration>,
    pub notes: Vec<String>,
}

const REPO: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
const NAME_ETCD: &str = "bench-failover-etcd";
const NAME_CURATOR: &str = "/bench-failover-curator";
/// Room for a driver's start-up (Maven resolving, a JVM per leader) on top of its rounds.
const DRIVER_SLACK: Duration = Duration::from_secs(180);

/// `h1:p1,h2:p2[/chroot]` of a `scheme://` URL; the drivers take plain connections only.
fn hosts<'a>(url: &'a str, scheme: &str) -> BoxResult<&'a str> {
    let rest = url.strip_prefix(scheme).ok_or_else(|| format!("{url}: the baseline needs a plain {scheme} URL"))?;
    if rest.contains('@') || rest.contains('?') {
        return Err(format!("{url}: the baseline takes no credentials or options").into());
    }
    Ok(rest)
}

/// The session timeout a ZooKeeper server grants for `asked`, on a throwaway session.
pub async fn zk_session_timeout(url: &str, asked: Duration) -> BoxResult<Duration> {
    let rest = url.strip_prefix("zk://").ok_or("expected zk://")?;
    let rest = rest.rsplit_once('@').map_or(rest, |(_, h)| h);
    let hosts = rest.split(['/', '?']).next().unwrap_or(rest);
    let client = zk::Client::connector().with_session_timeout(asked).connect(hosts).await?;
    Ok(client.session_timeout())
}

/// etcd's own election on `url`.
pub async fn etcd_election(url: &str, s: Settings, spread: Duration) -> BoxResult<Peer> {
    let endpoints = hosts(url, "etcd://")?.trim_end_matches('/');
    let exe = build_goclient().await?;
    let mut cmd = Command::new(exe);
    let (ttl, kills, spread) = (s.ttl.as_millis().to_string(), s.kills.to_string(), spread.as_millis().to_string());
    cmd.args(["-mode", "election-failover", "-endpoint", endpoints, "-name", NAME_ETCD]).args([
        "-ttl-ms",
        &ttl,
        "-kills",
        &kills,
        "-hold-spread-ms",
        &spread,
    ]);
    drive(cmd, s, "the etcd Election driver").await
}

/// Curator's `LeaderLatch` on `url`.
pub async fn curator_latch(url: &str, s: Settings, spread: Duration) -> BoxResult<Peer> {
    let connect = hosts(url, "zk://")?;
    let pom = Path::new(REPO).join("bench/java/failover/pom.xml");
    let args = format!(
        "--zk {connect} --name {NAME_CURATOR} --ttl-ms {} --kills {} --hold-spread-ms {}",
        s.ttl.as_millis(),
        s.kills,
        spread.as_millis()
    );
    let mut cmd = Command::new("mvn");
    cmd.args(["-B", "-ntp", "-q", "-Dstyle.color=never", "-f"]).arg(pom);
    cmd.args(["compile", "exec:exec", &format!("-Dfailover.args={args}")]);
    drive(cmd, s, "the Curator LeaderLatch driver (mvn)").await
}

/// Runs a driver to its end, within a deadline, and reads its result lines.
async fn drive(mut cmd: Command, s: Settings, what: &str) -> BoxResult<Peer> {
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("{what}: cannot start it: {e}"))?;
    let deadline = (s.ttl * 20 + Duration::from_secs(30)) * s.kills as u32 + DRIVER_SLACK;
    let out = tokio::time::timeout(deadline, child.wait_with_output())
        .await
        .map_err(|_| format!("{what}: no result within {deadline:?}"))??;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let tail: Vec<&str> = stderr.lines().chain(stdout.lines()).rev().take(8).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        return Err(format!("{what} failed ({}): {}", out.status, tail.join(" / ")).into());
    }
    let mut peer = Peer { failovers: Vec::new(), notes: Vec::new() };
    for line in stdout.lines().map(without_colours) {
        if let Some(ns) = line.strip_prefix("result failover_ns=") {
            for n in ns.split(',').filter(|n| !n.is_empty()) {
                peer.failovers.push(Duration::from_nanos(n.parse().map_err(|_| format!("{what}: bad sample {n:?}"))?));
            }
        } else if let Some(note) = line.strip_prefix("note ") {
            peer.notes.push(note.to_string());
        }
    }
    if peer.failovers.len() != s.kills {
        return Err(format!("{what}: {} samples for {} kills", peer.failovers.len(), s.kills).into());
    }
    Ok(peer)
}

/// `line` without ANSI colour codes (Maven writes a reset code at the start of its output, even in batch mode).
fn without_colours(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(i) = rest.find("\x1b[") {
        out.push_str(&rest[..i]);
        rest = rest[i..].find('m').map_or("", |end| &rest[i + end + 1..]);
    }
    out.push_str(rest);
    out
}

/// `server/tests/go` built next to this binary (`GOTOOLCHAIN=local go build -buildvcs=false`).
async fn build_goclient() -> BoxResult<PathBuf> {
    let exe = std::env::current_exe()?;
    let out_path = exe.parent().ok_or("the benchmark's directory")?.join("fencelock-bench-goclient");
    let go = ["go", "/usr/local/go/bin/go"]
        .into_iter()
        .find(|g| std::process::Command::new(g).arg("version").output().is_ok_and(|o| o.status.success()))
        .ok_or("no Go toolchain (go on PATH or /usr/local/go/bin/go) to build server/tests/go")?;
    let mut cmd = Command::new(go);
    cmd.current_dir(Path::new(REPO).join("server/tests/go"))
        .args(["build", "-buildvcs=false", "-o"])
        .arg(&out_path)
        .arg(".");
    if std::env::var_os("GOTOOLCHAIN").is_none() {
        cmd.env("GOTOOLCHAIN", "local");
    }
    let out = cmd.output().await?;
    if !out.status.success() {
        return Err(
            format!("go build in server/tests/go failed: {}", String::from_utf8_lossy(&out.stderr).trim()).into()
        );
    }
    Ok(out_path)
}
