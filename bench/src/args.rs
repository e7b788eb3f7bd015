//! Command line: `[--backend sqlite|memory|redis|etcd|zk|postgres|mysql|redlock|all] [--seconds N] [--redis URL]
//! [--etcd URL] [--zk URL] [--postgres URL] [--redlock URL] [--mysql URL] [--failover [--kills N]
//! [--failover-ttl-ms T]]`, hand-parsed to keep the benchmark's dependencies to
//! the crates it measures.

use std::time::Duration;

use crate::BoxResult;

/// Which backends to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Which {
    Sqlite,
    Memory,
    Redis,
    Etcd,
    Zk,
    Postgres,
    Mysql,
    Redlock,
    All,
    /// Figure 4 only (not part of `all`: it needs the release `fencelockd` binary).
    Fencelockd,
}

/// The backends that need a server: the flag, the environment variable that defaults it, and the URL schemes
/// `FENCELOCK_URL` may carry to default it as well.
pub const SERVERS: [(Which, &str, &str, &[&str]); 6] = [
    (Which::Redis, "redis", "FENCELOCK_TEST_REDIS", &["redis://", "rediss://"]),
    (Which::Etcd, "etcd", "FENCELOCK_TEST_ETCD", &["etcd://"]),
    (Which::Zk, "zk", "FENCELOCK_TEST_ZK", &["zk://"]),
    (Which::Postgres, "postgres", "FENCELOCK_TEST_POSTGRES", &["postgres://", "postgresql://"]),
    (Which::Redlock, "redlock", "FENCELOCK_TEST_REDLOCK", &["redlock://"]),
    (Which::Mysql, "mysql", "FENCELOCK_TEST_MYSQL", &["mysql://", "mariadb://"]),
];

#[derive(Debug)]
pub struct Args {
    pub which: Which,
    /// Length of each timed phase (uncontended, hand-off, and the raw baselines).
    pub phase: Duration,
    /// Server URLs by backend, in the order of `SERVERS`; `None` when neither the flag nor the environment gives one.
    urls: [Option<String>; SERVERS.len()],
    /// `--failover`: figure 6 only, with these settings.
    pub failover: Option<crate::failover::Settings>,
}

const USAGE: &str =
    "usage: fencelock-bench [--backend sqlite|memory|redis|etcd|zk|postgres|mysql|redlock|all|fencelockd] [--seconds N]
                       [--redis URL] [--etcd URL] [--zk URL] [--postgres URL] [--redlock URL] [--mysql URL]
                       [--failover [--kills N] [--failover-ttl-ms T]]
  each server URL defaults to FENCELOCK_TEST_<BACKEND> (REDIS, ETCD, ZK, POSTGRES, REDLOCK, MYSQL), else to FENCELOCK_URL
  when it has that backend's scheme; `all` skips a server backend that has no URL;
  `fencelockd` runs figure 4 (lock+unlock through fencelockd vs the SDK) on SQLite and each server with a URL;
  `--failover` runs figure 6 only: SIGKILL of a leader process to the standby's new leadership, N kills (default 10)
  at TTL T ms (default 2000), next to etcd's Election on etcd and Curator's LeaderLatch on ZooKeeper";

impl Args {
    pub fn parse() -> BoxResult<Args> {
        let mut which = Which::All;
        let mut secs = 3.0_f64;
        let mut urls: [Option<String>; SERVERS.len()] = Default::default();
        let (mut failover, mut kills, mut ttl_ms) = (false, 10_usize, 2000_u64);
        let mut it = std::env::args().skip(1);
        while let Some(flag) = it.next() {
            if flag == "-h" || flag == "--help" {
                println!("{USAGE}");
                std::process::exit(0);
            }
            if flag == "--failover" {
                failover = true;
                continue;
            }
            let value = it.next().ok_or_else(|| format!("{flag} needs a value\n{USAGE}"))?;
            if let Some(i) = SERVERS.iter().position(|(_, name, _, _)| flag.strip_prefix("--") == Some(name)) {
                urls[i] = Some(value);
                continue;
            }
            match flag.as_str() {
                "--backend" => {
                    which = match value.as_str() {
                        "sqlite" => Which::Sqlite,
                        "memory" => Which::Memory,
                        "all" => Which::All,
                        "fencelockd" => Which::Fencelockd,
                        other => match SERVERS.iter().find(|(_, name, _, _)| *name == other) {
                            Some((w, _, _, _)) => *w,
                            None => {
                                return Err(format!(
                                    "--backend {other:?}: expected sqlite, memory, redis, etcd, zk, postgres, mysql, redlock, \
                                     all or fencelockd"
                                )
                                .into());
                            }
                        },
                    }
                }
                "--seconds" => {
                    secs = value.parse().map_err(|_| format!("--seconds {value:?}: expected a number of seconds"))?;
                    if !(secs > 0.0 && secs <= 3600.0) {
                        return Err(format!("--seconds {value}: expected more than 0 and at most 3600").into());
                    }
                }
                "--kills" => {
                    kills = value
                        .parse()
                        .ok()
                        .filter(|k| (1..=1000).contains(k))
                        .ok_or_else(|| format!("--kills {value:?}: expected a whole number from 1 to 1000"))?;
                }
                "--failover-ttl-ms" => {
                    ttl_ms = value.parse().ok().filter(|t| (100..=600_000).contains(t)).ok_or_else(|| {
                        format!("--failover-ttl-ms {value:?}: expected milliseconds from 100 to 600000")
                    })?;
                }
                other => return Err(format!("unknown argument {other:?}\n{USAGE}").into()),
            }
        }
        for (url, (_, _, var, schemes)) in urls.iter_mut().zip(SERVERS) {
            if url.is_none() {
                *url = env_url(var, schemes).or_else(|| env_url("FENCELOCK_URL", schemes));
            }
        }
        let failover = failover.then(|| crate::failover::Settings { kills, ttl: Duration::from_millis(ttl_ms) });
        Ok(Args { which, phase: Duration::from_secs_f64(secs), urls, failover })
    }

    pub fn wants(&self, w: Which) -> bool {
        self.which == w || (self.which == Which::All && w != Which::Fencelockd)
    }

    /// The URL of a server backend, if known.
    pub fn url(&self, w: Which) -> Option<&str> {
        let i = SERVERS.iter().position(|(s, _, _, _)| *s == w)?;
        self.urls[i].as_deref()
    }

    /// The URL of server backend `w` (`name`, from `var`) to run, if it is wanted: `None` if it is not, or (with a
    /// note) if its URL is unknown and `all` asked for it; an error if it was asked for by name without a URL.
    pub fn wanted_url(&self, w: Which, name: &str, var: &str) -> Result<Option<&str>, String> {
        if !self.wants(w) {
            return Ok(None);
        }
        match self.url(w) {
            Some(url) => Ok(Some(url)),
            None if self.which == w => Err(format!("no {name} URL: pass --{name} URL or set {var}")),
            None => {
                println!("=== {name} skipped: no --{name} URL and {var} is unset ===\n");
                Ok(None)
            }
        }
    }
}

// FENCELOCK_URL may name any backend; only one with a matching scheme is a default.
fn env_url(var: &str, schemes: &[&str]) -> Option<String> {
    std::env::var(var).ok().filter(|u| schemes.iter().any(|s| u.starts_with(s)))
}
