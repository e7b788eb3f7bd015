//! Figure 4 (`--backend fencelockd`): lock + unlock through fencelockd — etcd's LeaseGrant once, then v3lock Lock +
//! Unlock per cycle over gRPC — next to the same cycle straight through the SDK on the same backend, in alternating
//! slices of one run. The extra hop costs one loopback gRPC round trip per call; target ≥ 0.6 × direct.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use fencelock::{Client, LockOptions};
use fencelockd::proto::etcdserverpb::lease_client::LeaseClient;
use fencelockd::proto::etcdserverpb::{
    LeaseGrantRequest, LeaseKeepAliveRequest, LeaseRevokeRequest, LeaseTimeToLiveRequest,
};
use fencelockd::proto::v3lockpb::lock_client::LockClient;
use fencelockd::proto::v3lockpb::{LockRequest, UnlockRequest};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tonic::transport::Channel;

use crate::BoxResult;
use crate::report::{Table, Target, dur, rate};
use crate::stats::{SLICES, Samples, timed};
use crate::uncontended::{fencelock_timed, warm_up};

const NAME: &[u8] = b"bench-fencelockd";
/// Concurrent tasks of the throughput row, each on its own name (HTTP/2 carries them on one connection).
const TASKS: usize = 8;
const WARMUP: usize = 200;
/// The lease TTL; a keep-alive every third of it covers any phase length.
const LEASE_TTL: i64 = 30;

/// `fencelockd` next to this benchmark's own binary (both from `cargo build --release`), or `$FENCELOCKD`.
fn daemon_path() -> BoxResult<PathBuf> {
    if let Some(p) = std::env::var_os("FENCELOCKD") {
        return Ok(p.into());
    }
    let exe = std::env::current_exe()?;
    let path = exe.with_file_name("fencelockd");
    if !path.exists() {
        return Err(format!(
            "{} not found: build it with `cargo build --release -p fencelockd -p fencelock-bench`, or set FENCELOCKD",
            path.display()
        )
        .into());
    }
    Ok(path)
}

/// Starts fencelockd on a free port against `url`; returns the child (killed on drop) and its address.
async fn start(url: &str) -> BoxResult<(Child, String)> {
    let mut child = Command::new(daemon_path()?)
        .args(["--listen", "127.0.0.1:0", "--backend", url])
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()?;
    let mut lines = BufReader::new(child.stdout.take().ok_or("no stdout")?).lines();
    let line = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
        .await
        .map_err(|_| "fencelockd did not print its address within 30 s")??
        .ok_or("fencelockd exited before listening")?;
    let addr = line.strip_prefix("listening on ").ok_or_else(|| format!("unexpected fencelockd output {line:?}"))?;
    Ok((child, addr.to_string()))
}

async fn cycle(locks: &mut LockClient<Channel>, name: &[u8], lease: i64) -> BoxResult<()> {
    let key = locks.lock(LockRequest { name: name.to_vec(), lease }).await?.into_inner().key;
    locks.unlock(UnlockRequest { key }).await?;
    Ok(())
}

/// Cycles per second of `TASKS` concurrent tasks, each on its own name, for `span`: through fencelockd if `via`
/// is given, else through the SDK.
async fn parallel(client: &Client, via: Option<(&LockClient<Channel>, i64)>, span: Duration) -> BoxResult<f64> {
    let opts = &LockOptions::default();
    let runs = (0..TASKS).map(|i| {
        let name = format!("bench-fencelockd-{i}");
        async move {
            match via {
                Some((locks, lease)) => {
                    timed(span, || {
                        let (mut locks, name) = (locks.clone(), name.clone());
                        async move { cycle(&mut locks, name.as_bytes(), lease).await }
                    })
                    .await
                }
                None => timed(span, || async { Ok(client.lock(&name, opts).await?.release().await?) }).await,
            }
        }
    });
    let done = futures::future::try_join_all(runs).await?;
    Ok(done.iter().map(Samples::len).sum::<usize>() as f64 / span.as_secs_f64())
}

pub async fn run(label: &str, url: &str, span: Duration) -> BoxResult<Table> {
    let (_daemon, addr) = start(url).await?;
    let channel = Channel::from_shared(format!("http://{addr}"))?.connect().await?;
    let mut leases = LeaseClient::new(channel.clone());
    let lease = leases.lease_grant(LeaseGrantRequest { ttl: LEASE_TTL, id: 0 }).await?.into_inner().id;
    let keep_alive = tokio::spawn({
        let mut leases = leases.clone();
        async move {
            let every = tokio_stream::wrappers::IntervalStream::new(tokio::time::interval(Duration::from_secs(
                LEASE_TTL as u64 / 3,
            )));
            let requests = tokio_stream::StreamExt::map(every, move |_| LeaseKeepAliveRequest { id: lease });
            if let Ok(replies) = leases.lease_keep_alive(requests).await {
                let mut replies = replies.into_inner();
                while let Ok(Some(_)) = replies.message().await {}
            }
        }
    });
    let locks = LockClient::new(channel);
    let client = Client::connect(url).await?;

    warm_up(&client).await?;
    for _ in 0..WARMUP {
        cycle(&mut locks.clone(), NAME, lease).await?;
    }
    let slice = span / SLICES;
    let (mut direct, mut via) = (Vec::new(), Vec::new());
    for _ in 0..SLICES {
        direct.push(fencelock_timed(&client, slice).await?);
        via.push(
            timed(slice, || {
                let mut locks = locks.clone();
                async move { cycle(&mut locks, NAME, lease).await }
            })
            .await?,
        );
    }
    let (mut direct_n, mut via_n) = (Vec::new(), Vec::new());
    for _ in 0..SLICES {
        direct_n.push(parallel(&client, None, slice).await?);
        via_n.push(parallel(&client, Some((&locks, lease)), slice).await?);
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let (direct_n, via_n) = (mean(&direct_n), mean(&via_n));
    // The hop alone: a call fencelockd answers from memory (LeaseTimeToLive), two per cycle like Lock + Unlock.
    let hop = timed(slice, || {
        let mut leases = leases.clone();
        async move {
            for _ in 0..2 {
                leases.lease_time_to_live(LeaseTimeToLiveRequest { id: lease, keys: false }).await?;
            }
            Ok(())
        }
    })
    .await?;
    keep_alive.abort();
    leases.lease_revoke(LeaseRevokeRequest { id: lease }).await?;
    client.close().await;
    let (direct, via) = (Samples::merge(direct), Samples::merge(via));

    let mut t = Table::with_columns(
        format!("4. {label}: lock+unlock through fencelockd vs the SDK, 1 client, 1 task, {} s", span.as_secs_f64()),
        "fencelockd",
        "direct SDK",
    );
    let ratio = via.rate() / direct.rate();
    t.row("cycles/s", rate(via.rate()), rate(direct.rate()), Some(ratio), Some(Target::at_least(ratio, 0.6, "ratio")));
    for (what, p) in [("p50 cycle latency", 50.0), ("p99 cycle latency", 99.0)] {
        let (a, b) = (via.pct(p), direct.pct(p));
        t.row(what, dur(a), dur(b), Some(a.as_secs_f64() / b.as_secs_f64().max(1e-12)), None);
    }
    let ratio_n = via_n / direct_n;
    t.row(
        &format!("cycles/s, {TASKS} tasks on {TASKS} names"),
        rate(via_n),
        rate(direct_n),
        Some(ratio_n),
        Some(Target::at_least(ratio_n, 0.6, "ratio")),
    );
    t.row("2 in-memory gRPC calls (the hop)", dur(hop.pct(50.0)), "-".into(), None, None);
    t.note(format!(
        "fencelockd cycle: v3lock Lock + Unlock over loopback gRPC on one lease (etcd's protocol; the daemon takes the \
         lock through its own SDK client, watchdog on); direct: lock + release with the defaults; backend {url}"
    ));
    Ok(t)
}
