//! Command-line syntax: the clap definitions and the parsers that check values before anything connects.

use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use fencelock::{HoldKind, MAX_NAME_BYTES, MAX_PERMITS, MAX_TTL, MAX_VALUE_BYTES};

/// Run a command while holding a distributed lock, or inspect a lock.
#[derive(Debug, Parser)]
#[command(name = "fencelock", version, about)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run CMD while holding lock NAME, then release it; exits with CMD's status.
    #[command(after_help = RUN_EXIT_CODES)]
    Run(RunArgs),
    /// Print who holds lock NAME, for how long, the last fencing token handed out and its waiters; with --watch,
    /// again every --interval seconds until interrupted.
    Status(StatusArgs),
    /// Delete lock NAME whoever holds it (an operator's tool; the holder loses its lease).
    Release(ReleaseArgs),
    /// Campaign in election NAME and run CMD while leader, then resign; exits with CMD's status.
    #[command(after_help = ELECT_EXIT_CODES)]
    Elect(ElectArgs),
    /// Print the value and term of election NAME's leader, tab-separated; exit 3 if nobody leads.
    Leader(LeaderArgs),
}

const ELECT_EXIT_CODES: &str = "\
Exit status:
  CMD's own status, or 128+N if CMD was killed by signal N
  2    bad arguments (URL, name, TTL, timeout, value)
  75   the leadership was lost while CMD ran (CMD was sent SIGTERM); with --again, a new campaign instead
  124  --timeout passed while another candidate led
  126  CMD could not be executed;  127  CMD was not found
  130/143/129  interrupted by SIGINT/SIGTERM/SIGHUP while campaigning
  1    any other failure (backend unavailable, ...)

CMD sees FENCELOCK_NAME, FENCELOCK_TERM (the leadership's term, its fencing token) and FENCELOCK_TOKEN (the same
number) in its environment.";

const RUN_EXIT_CODES: &str = "\
Exit status:
  CMD's own status, or 128+N if CMD was killed by signal N
  2    bad arguments (URL, name, TTL, timeout)
  75   the lock was lost while CMD ran (CMD was sent SIGTERM)
  124  --timeout passed while another holder kept the lock
  126  CMD could not be executed;  127  CMD was not found
  130/143/129  interrupted by SIGINT/SIGTERM/SIGHUP while waiting for the lock
  1    any other failure (backend unavailable, ...)

CMD sees FENCELOCK_NAME and FENCELOCK_TOKEN (the fencing token) in its environment; with --permits also
FENCELOCK_SLOT, the permit's slot (0 to N-1), whose own counter the token is.";

/// Where the lock lives; shared by every subcommand.
#[derive(Debug, Args)]
pub struct Backend {
    /// Backend URL [default: $FENCELOCK_URL, else sqlite:fencelock.db]
    #[arg(long, value_name = "URL")]
    pub url: Option<String>,
}

impl Backend {
    /// The URL to connect to: `--url`, else `FENCELOCK_URL`, else the embedded SQLite file.
    pub fn url(&self) -> String {
        self.url.clone().unwrap_or_else(fencelock::default_url)
    }
}

#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub backend: Backend,
    /// Lease time to live in seconds (decimals allowed); renewed every third of it while CMD runs
    #[arg(long, value_name = "S", default_value = "30", value_parser = parse_ttl, allow_negative_numbers = true)]
    pub ttl: Duration,
    /// Give up after waiting this many seconds for another holder (decimals allowed; 0 = one attempt)
    #[arg(long, value_name = "S", value_parser = parse_timeout, allow_negative_numbers = true)]
    pub timeout: Option<Duration>,
    /// Wait in arrival order among all clients where the backend offers both orders (Redis); default: the
    /// backend's (on Redis, the URL's fair=)
    #[arg(long, conflicts_with = "no_fair")]
    pub fair: bool,
    /// Do not queue in arrival order (a free-for-all on each release) where the backend offers both orders
    #[arg(long)]
    pub no_fair: bool,
    /// Hold the read side of read-write lock NAME: shared with other --read runs, never with a --write one
    #[arg(long, conflicts_with_all = ["write", "permits"])]
    pub read: bool,
    /// Hold the write side of read-write lock NAME: alone, and a waiting writer blocks new readers
    #[arg(long, conflicts_with = "permits")]
    pub write: bool,
    /// Hold one of N permits of semaphore NAME (every run on NAME must give the same N); sets FENCELOCK_SLOT
    #[arg(long, value_name = "N", value_parser = parse_permits, allow_negative_numbers = true)]
    pub permits: Option<u32>,
    /// Print progress (waiting, acquired with token, released) on stderr
    #[arg(short, long)]
    pub verbose: bool,
    /// Lock name (of the read-write lock with --read/--write, of the semaphore with --permits)
    #[arg(value_parser = parse_name)]
    pub name: String,
    /// The command to run and its arguments (after `--`)
    #[arg(value_name = "CMD", required = true, trailing_var_arg = true)]
    pub command: Vec<String>,
}

impl RunArgs {
    /// The wait order asked for; `None`: the backend's default.
    pub fn fair(&self) -> Option<bool> {
        (self.fair || self.no_fair).then_some(self.fair)
    }

    /// The kind of hold asked for: a mutex unless --read, --write or --permits.
    pub fn kind(&self) -> HoldKind {
        match (self.read, self.write, self.permits) {
            (true, _, _) => HoldKind::Read,
            (_, true, _) => HoldKind::Write,
            (_, _, Some(permits)) => HoldKind::Permit { permits },
            _ => HoldKind::Exclusive,
        }
    }
}

#[derive(Debug, Args)]
pub struct StatusArgs {
    #[command(flatten)]
    pub backend: Backend,
    /// Refresh until interrupted: redrawn in place on a terminal, else one tab-separated line per refresh
    #[arg(long)]
    pub watch: bool,
    /// Seconds between refreshes with --watch (decimals allowed)
    #[arg(long, value_name = "S", default_value = "1", requires = "watch", value_parser = parse_interval)]
    pub interval: Duration,
    /// Lock name
    #[arg(value_parser = parse_name)]
    pub name: String,
}

#[derive(Debug, Args)]
pub struct ReleaseArgs {
    #[command(flatten)]
    pub backend: Backend,
    /// Required: this deletes the lock whoever holds it
    #[arg(long, required = true)]
    pub force: bool,
    /// Lock name
    #[arg(value_parser = parse_name)]
    pub name: String,
}

#[derive(Debug, Args)]
pub struct ElectArgs {
    #[command(flatten)]
    pub backend: Backend,
    /// The value to lead with, as `fencelock leader` and etcdctl elect -l show it [default: run-<pid>@<host>]
    #[arg(long, value_name = "V", value_parser = parse_value)]
    pub value: Option<String>,
    /// Campaign again when CMD ends or the leadership is lost, until a signal ends the run (a hot standby)
    #[arg(long)]
    pub again: bool,
    /// Lease time to live in seconds (decimals allowed); renewed every third of it while leading
    #[arg(long, value_name = "S", default_value = "30", value_parser = parse_ttl, allow_negative_numbers = true)]
    pub ttl: Duration,
    /// Give up after campaigning this many seconds while another leads (decimals allowed)
    #[arg(long, value_name = "S", value_parser = parse_timeout, allow_negative_numbers = true)]
    pub timeout: Option<Duration>,
    /// Print progress (campaigning, leading with term, resigned) on stderr
    #[arg(short, long)]
    pub verbose: bool,
    /// Election name
    #[arg(value_parser = parse_name)]
    pub name: String,
    /// The command to run while leader, and its arguments (after `--`)
    #[arg(value_name = "CMD", required = true, trailing_var_arg = true)]
    pub command: Vec<String>,
}

#[derive(Debug, Args)]
pub struct LeaderArgs {
    #[command(flatten)]
    pub backend: Backend,
    /// Election name
    #[arg(value_parser = parse_name)]
    pub name: String,
}

/// An election value within the core's limit, checked before connecting.
fn parse_value(s: &str) -> Result<String, String> {
    match s.len() {
        n if n > MAX_VALUE_BYTES => Err(format!("the value is {n} bytes, longer than {MAX_VALUE_BYTES}")),
        _ => Ok(s.to_string()),
    }
}

/// A lock name as the core accepts it (1–512 bytes; argv cannot carry NUL), checked before connecting.
fn parse_name(s: &str) -> Result<String, String> {
    match s.len() {
        0 => Err("the lock name is empty".into()),
        n if n > MAX_NAME_BYTES => Err(format!("the lock name is {n} bytes, longer than {MAX_NAME_BYTES}")),
        _ => Ok(s.to_string()),
    }
}

/// A semaphore's number of permits, 1 to the core's limit, checked before connecting.
fn parse_permits(s: &str) -> Result<u32, String> {
    match s.trim().parse::<u64>() {
        Ok(n) if (1..=u64::from(MAX_PERMITS)).contains(&n) => Ok(n as u32),
        _ => Err(format!("the number of permits must be a whole number from 1 to {MAX_PERMITS}, got {s:?}")),
    }
}

/// A non-negative, finite number of seconds such as `2`, `0.5` or `1e-3`.
fn parse_seconds(s: &str) -> Result<Duration, String> {
    let secs: f64 =
        s.trim().parse().map_err(|_| format!("expected a number of seconds such as 5 or 0.5, got {s:?}"))?;
    Duration::try_from_secs_f64(secs).map_err(|_| format!("expected a non-negative number of seconds, got {s:?}"))
}

/// A TTL between 1 ms and 24 h (the core's limits).
fn parse_ttl(s: &str) -> Result<Duration, String> {
    let ttl = parse_seconds(s)?;
    if ttl < Duration::from_millis(1) {
        return Err(format!("the TTL must be at least 0.001 s, got {s}"));
    }
    if ttl > MAX_TTL {
        return Err(format!("the TTL must be at most {} s (24 h), got {s}", MAX_TTL.as_secs()));
    }
    Ok(ttl)
}

/// A refresh interval: at least 10 ms, at most a day.
fn parse_interval(s: &str) -> Result<Duration, String> {
    let interval = parse_seconds(s)?;
    if !(Duration::from_millis(10)..=Duration::from_secs(86_400)).contains(&interval) {
        return Err(format!("the interval must be between 0.01 and 86400 s, got {s}"));
    }
    Ok(interval)
}

/// A wait timeout: any non-negative number of seconds, capped so deadline arithmetic cannot overflow.
fn parse_timeout(s: &str) -> Result<Duration, String> {
    let timeout = parse_seconds(s)?;
    const LONGEST: Duration = Duration::from_secs(100 * 365 * 24 * 3600);
    if timeout > LONGEST {
        return Err(format!("the timeout must be at most 100 years, got {s}; omit --timeout to wait forever"));
    }
    Ok(timeout)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_accept_decimals_and_reject_nonsense() {
        assert_eq!(parse_ttl("0.5"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_ttl("30"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_timeout("0"), Ok(Duration::ZERO));
        for bad in ["0", "-1", "abc", "", "NaN", "inf", "86401", "0.0001"] {
            assert!(parse_ttl(bad).is_err(), "ttl {bad:?} was accepted");
        }
        for bad in ["-0.5", "x", "1e30"] {
            assert!(parse_timeout(bad).is_err(), "timeout {bad:?} was accepted");
        }
        assert_eq!(parse_interval("0.2"), Ok(Duration::from_millis(200)));
        for bad in ["0", "0.001", "-1", "x", "1e9"] {
            assert!(parse_interval(bad).is_err(), "interval {bad:?} was accepted");
        }
    }

    #[test]
    fn names_are_checked_before_connecting() {
        assert!(parse_name("").unwrap_err().contains("empty"));
        assert!(parse_name(&"n".repeat(513)).unwrap_err().contains("513 bytes"));
        assert_eq!(parse_name("jobs/nightly").as_deref(), Ok("jobs/nightly"));
    }

    #[test]
    fn interval_needs_watch_and_defaults_to_a_second() {
        let cli = Cli::try_parse_from(["fencelock", "status", "--watch", "x"]).unwrap();
        let Command::Status(status) = cli.command else { panic!("not status") };
        assert!(status.watch);
        assert_eq!(status.interval, Duration::from_secs(1));
        assert!(Cli::try_parse_from(["fencelock", "status", "--interval", "2", "x"]).is_err());
    }

    #[test]
    fn run_takes_the_command_after_the_name() {
        let cli = Cli::try_parse_from(["fencelock", "run", "--ttl", "2", "x", "--", "sh", "-c", "exit 3"]).unwrap();
        let Command::Run(run) = cli.command else { panic!("not run") };
        assert_eq!((run.name.as_str(), run.ttl), ("x", Duration::from_secs(2)));
        assert_eq!(run.command, ["sh", "-c", "exit 3"]);
        // Without `--`, everything from CMD on is CMD's, flags included.
        let cli = Cli::try_parse_from(["fencelock", "run", "x", "ls", "-l", "--ttl"]).unwrap();
        let Command::Run(run) = cli.command else { panic!("not run") };
        assert_eq!(run.command, ["ls", "-l", "--ttl"]);
        assert_eq!(run.fair(), None);
    }

    #[test]
    fn run_takes_a_wait_order() {
        for (flag, fair) in [("--fair", Some(true)), ("--no-fair", Some(false))] {
            let cli = Cli::try_parse_from(["fencelock", "run", flag, "x", "--", "true"]).unwrap();
            let Command::Run(run) = cli.command else { panic!("not run") };
            assert_eq!((run.fair(), run.name.as_str()), (fair, "x"), "{flag}");
        }
        assert!(Cli::try_parse_from(["fencelock", "run", "--fair", "--no-fair", "x", "--", "true"]).is_err());
    }

    #[test]
    fn run_takes_one_kind_of_hold() {
        let kind = |flags: &[&str]| {
            let argv = [&["fencelock", "run"], flags, &["x", "--", "true"]].concat();
            Cli::try_parse_from(argv).map(|cli| match cli.command {
                Command::Run(run) => run.kind(),
                _ => panic!("not run"),
            })
        };
        assert_eq!(kind(&[]).unwrap(), HoldKind::Exclusive);
        assert_eq!(kind(&["--read"]).unwrap(), HoldKind::Read);
        assert_eq!(kind(&["--write"]).unwrap(), HoldKind::Write);
        assert_eq!(kind(&["--permits", "3"]).unwrap(), HoldKind::Permit { permits: 3 });
        for both in [&["--read", "--write"][..], &["--read", "--permits", "2"], &["--write", "--permits", "2"]] {
            assert!(kind(both).is_err(), "{both:?} was accepted");
        }
        for bad in ["0", "-1", "65537", "two", ""] {
            let err = kind(&["--permits", bad]).unwrap_err().to_string();
            assert!(err.contains("permits must be a whole number from 1 to 65536"), "{bad:?}: {err}");
        }
    }
}
