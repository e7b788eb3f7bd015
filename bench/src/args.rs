//! Command line: `[--backend sqlite|redis|memory|all] [--seconds N] [--redis URL]`, hand-parsed to keep the
//! benchmark's dependencies to the crates it measures.

use std::time::Duration;

use crate::BoxResult;

/// Which backends to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Which {
    Sqlite,
    Memory,
    Redis,
    All,
}

#[derive(Debug)]
pub struct Args {
    pub which: Which,
    /// Length of each timed phase (uncontended, hand-off, and the raw baselines).
    pub phase: Duration,
    /// Redis URL; `None` when neither the flag nor the environment gives one.
    pub redis: Option<String>,
}

const USAGE: &str = "usage: fencelock-bench [--backend sqlite|redis|memory|all] [--seconds N] [--redis URL]
  --redis defaults to FENCELOCK_TEST_REDIS, else FENCELOCK_URL if it is a redis:// URL";

impl Args {
    pub fn parse() -> BoxResult<Args> {
        let mut which = Which::All;
        let mut secs = 3.0_f64;
        let mut redis = None;
        let mut it = std::env::args().skip(1);
        while let Some(flag) = it.next() {
            if flag == "-h" || flag == "--help" {
                println!("{USAGE}");
                std::process::exit(0);
            }
            let value = it.next().ok_or_else(|| format!("{flag} needs a value\n{USAGE}"))?;
            match flag.as_str() {
                "--backend" => {
                    which = match value.as_str() {
                        "sqlite" => Which::Sqlite,
                        "memory" => Which::Memory,
                        "redis" => Which::Redis,
                        "all" => Which::All,
                        other => {
                            return Err(format!("--backend {other:?}: expected sqlite, redis, memory or all").into());
                        }
                    }
                }
                "--seconds" => {
                    secs = value.parse().map_err(|_| format!("--seconds {value:?}: expected a number of seconds"))?;
                    if !(secs > 0.0 && secs <= 3600.0) {
                        return Err(format!("--seconds {value}: expected more than 0 and at most 3600").into());
                    }
                }
                "--redis" => redis = Some(value),
                other => return Err(format!("unknown argument {other:?}\n{USAGE}").into()),
            }
        }
        let redis = redis.or_else(|| env_redis("FENCELOCK_TEST_REDIS")).or_else(|| env_redis("FENCELOCK_URL"));
        Ok(Args { which, phase: Duration::from_secs_f64(secs), redis })
    }

    pub fn wants(&self, w: Which) -> bool {
        self.which == w || self.which == Which::All
    }
}

// FENCELOCK_URL may name any backend; only a Redis one is a default for --redis.
fn env_redis(var: &str) -> Option<String> {
    std::env::var(var).ok().filter(|u| u.starts_with("redis://") || u.starts_with("rediss://"))
}
