//! `fencelock run [--read|--write|--permits N] NAME -- CMD…`: take the lock (or a read-write lock's side, or a
//! semaphore's permit), run CMD with the watchdog renewing the lease, release, and exit
//! with CMD's status. Silent unless it fails or `-v` is given; CMD's stdio is CMD's own.

use std::fmt;
use std::process::ExitStatus;
use std::time::Duration;

use fencelock::{Client, ErrorKind, HoldKind, Lease, LockOptions};
use tokio::time::Instant;

use crate::args::RunArgs;
use crate::child::{self, Cmd, HoldEnv};
use crate::exit::{self, Failure};
use crate::signals::Signals;

/// How long CMD may take to exit after the SIGTERM sent on loss before it gets SIGKILL.
const KILL_AFTER: Duration = Duration::from_secs(10);
/// Longest wait for the clean-up of an acquire cut short by a signal.
const SETTLE_WITHIN: Duration = Duration::from_secs(2);

pub async fn run(args: RunArgs) -> Result<i32, Failure> {
    // Before anything else, so that a signal during connect or wait is ours to handle, not a silent death.
    let mut signals =
        Signals::install().map_err(|e| Failure::new(exit::FAILURE, format!("cannot handle signals: {e}")))?;
    let client = Client::connect(&args.backend.url()).await?;
    let result = run_locked(&client, &args, &mut signals).await;
    client.close().await;
    result
}

/// Progress lines on stderr, only with `-v`.
pub(crate) struct Progress(pub(crate) bool);

impl Progress {
    pub(crate) fn say(&self, line: fmt::Arguments<'_>) {
        if self.0 {
            eprintln!("fencelock: {line}");
        }
    }
}

async fn run_locked(client: &Client, args: &RunArgs, signals: &mut Signals) -> Result<i32, Failure> {
    let progress = Progress(args.verbose);
    let name = args.name.as_str();
    let lease = tokio::select! {
        lease = acquire(client, args, &progress) => lease?,
        signo = signals.recv() => {
            settle_cancelled(client, name).await;
            progress.say(format_args!("signal {signo} while waiting for lock {name:?}; gave up"));
            return Ok(exit::signalled(signo));
        }
    };
    match lease.slot() {
        Some(slot) => progress.say(format_args!("acquired {} with token {} in slot {slot}", what(args), lease.fence())),
        None => progress.say(format_args!("acquired {} with token {}", what(args), lease.fence())),
    }

    let cmd = match child::spawn(&args.command, name, lease.fence(), HoldEnv { slot: lease.slot(), term: None }) {
        Ok(cmd) => cmd,
        Err(failure) => {
            let _ = lease.release().await;
            return Err(failure);
        }
    };
    let ended = supervise(cmd, &lease, signals).await;
    let released = lease.release().await;
    let Ended { status, lost: lost_while_running, .. } = ended?;
    let code = child::exit_code(status);
    match released {
        _ if lost_while_running => Err(Failure::new(
            exit::LOST,
            format!(
                "lost lock {name:?} while the command ran ({}); sent it SIGTERM, exit status {code}",
                reason(released)
            ),
        )),
        Err(e) if matches!(e.kind(), ErrorKind::LockLost | ErrorKind::NotHeld) => Err(Failure::new(
            exit::LOST,
            format!("lost lock {name:?} before the command finished ({}); exit status {code}", e.message()),
        )),
        Err(e) => {
            // The command ran protected; only the clean-up failed, and the record expires by itself.
            eprintln!("fencelock: could not release lock {name:?}, it expires after its TTL: {e}");
            Ok(code)
        }
        Ok(()) => {
            progress.say(format_args!("released lock {name:?}"));
            Ok(code)
        }
    }
}

/// Why a lost lease was lost, as the core reports it on release.
fn reason(released: fencelock::Result<()>) -> String {
    match released {
        Err(e) => e.message().to_string(),
        Ok(()) => "the lease expired or was taken".to_string(),
    }
}

/// What the run holds, for messages: `lock "x"`, `read lock "x"`, `a permit of semaphore "x" (3 permits)`.
fn what(args: &RunArgs) -> String {
    let name = args.name.as_str();
    match args.kind() {
        HoldKind::Read => format!("read lock {name:?}"),
        HoldKind::Write => format!("write lock {name:?}"),
        HoldKind::Permit { permits } => format!("a permit of semaphore {name:?} ({permits} permits)"),
        _ => format!("lock {name:?}"),
    }
}

/// Takes the hold: one attempt first, so `-v` can say whom it waits for, then waits up to `--timeout`.
async fn acquire(client: &Client, args: &RunArgs, progress: &Progress) -> Result<Lease, Failure> {
    let mut opts = LockOptions::default().ttl(args.ttl).owner(owner_id());
    opts.fair = args.fair();
    if let Some(lease) = take(client, args, &opts, false).await? {
        return Ok(lease);
    }
    if progress.0 {
        progress.say(format_args!("waiting for {}, {}", what(args), busy(client, args).await));
    }
    let opts = match args.timeout {
        Some(t) => opts.timeout(t),
        None => opts.wait_forever(),
    };
    match take(client, args, &opts, true).await {
        Ok(lease) => Ok(lease.expect("a wait ends with a lease or an error")),
        Err(e) if e.kind() == ErrorKind::Timeout => Err(Failure::new(
            exit::TIMED_OUT,
            format!(
                "timed out after {}s waiting for {} on {}",
                args.timeout.unwrap_or_default().as_secs_f64(),
                what(args),
                client.url()
            ),
        )),
        Err(e) => Err(e.into()),
    }
}

/// One attempt (`wait` false) or a wait within `opts`' timeout, for the kind of hold asked for.
async fn take(client: &Client, args: &RunArgs, opts: &LockOptions, wait: bool) -> fencelock::Result<Option<Lease>> {
    let name = args.name.as_str();
    match (args.kind(), wait) {
        (HoldKind::Read, false) => client.rw_lock(name).try_read(opts).await,
        (HoldKind::Read, true) => client.rw_lock(name).read(opts).await.map(Some),
        (HoldKind::Write, false) => client.rw_lock(name).try_write(opts).await,
        (HoldKind::Write, true) => client.rw_lock(name).write(opts).await.map(Some),
        (HoldKind::Permit { permits }, false) => client.semaphore(name, permits).try_acquire(opts).await,
        (HoldKind::Permit { permits }, true) => client.semaphore(name, permits).acquire(opts).await.map(Some),
        (_, false) => client.try_lock(name, opts).await,
        (_, true) => client.lock(name, opts).await.map(Some),
    }
}

/// Who keeps the run waiting, for `-v`: a mutex's holder; a read-write lock has no single one.
async fn busy(client: &Client, args: &RunArgs) -> String {
    match args.kind() {
        HoldKind::Exclusive => format!("held by {}", holder(client, &args.name).await),
        HoldKind::Permit { .. } => "all its permits are held".to_string(),
        _ => "held on the other side".to_string(),
    }
}

/// The current holder of `name`, for messages.
async fn holder(client: &Client, name: &str) -> String {
    match client.inspect(name).await {
        Ok(info) => info.holder.unwrap_or_else(|| "nobody now".to_string()),
        Err(e) => format!("unknown ({e})"),
    }
}

/// The owner part of our holder id: which process on which host holds the lock, for `fencelock status`.
pub(crate) fn owner_id() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most `buf.len()` bytes into `buf`.
    let ok = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) } == 0;
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    let host = if ok && end > 0 { String::from_utf8_lossy(&buf[..end]).into_owned() } else { "unknown-host".into() };
    format!("run-{}@{host}", std::process::id())
}

/// How CMD ended under supervision.
pub(crate) struct Ended {
    pub(crate) status: ExitStatus,
    /// The lease was lost while CMD ran (CMD was then sent SIGTERM).
    pub(crate) lost: bool,
    /// The last signal we received and passed on to CMD, if any.
    pub(crate) signalled: Option<i32>,
}

/// Runs CMD to its end, passing our signals on to it. Returns its status and whether the lease was lost meanwhile
/// (CMD was then sent SIGTERM, and SIGKILL if it outlived `KILL_AFTER`).
pub(crate) async fn supervise(mut cmd: Cmd, lease: &Lease, signals: &mut Signals) -> Result<Ended, Failure> {
    let lost = lease.lost();
    tokio::pin!(lost);
    let mut kill_at: Option<Instant> = None;
    let mut killed = false;
    let mut ended = false;
    let mut signalled = None;
    loop {
        tokio::select! {
            status = cmd.child.wait() => {
                let status = status.map_err(|e| Failure::new(exit::FAILURE, format!("cannot wait for the command: {e}")))?;
                return Ok(Ended { status, lost: kill_at.is_some(), signalled });
            }
            end = &mut lost, if !ended => {
                ended = true;
                if let fencelock::LeaseEnd::Lost(_) = end {
                    cmd.pid.signal(libc::SIGTERM);
                    kill_at = Some(Instant::now() + KILL_AFTER);
                }
            }
            signo = signals.recv() => {
                signalled = Some(signo);
                cmd.pid.signal(signo);
            }
            () = tokio::time::sleep_until(kill_at.unwrap_or_else(Instant::now)), if kill_at.is_some() && !killed => {
                cmd.pid.signal(libc::SIGKILL);
                killed = true;
            }
        }
    }
}

/// A lock future dropped in flight leaves a clean-up task (the core's cancel safety) that must finish before the
/// process exits, or the lock would stay taken until its TTL: wait, within bounds, until no record of ours is left.
pub(crate) async fn settle_cancelled(client: &Client, name: &str) {
    let deadline = Instant::now() + SETTLE_WITHIN;
    while Instant::now() < deadline {
        match client.inspect(name).await {
            Ok(info) if info.holder.as_deref().is_some_and(|h| h.starts_with(client.id())) => {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            _ => return,
        }
    }
}
