//! Helpers shared by the integration tests: finding the test servers the test command started.
#![allow(dead_code, reason = "each test binary uses a different subset")]

mod services;
#[allow(unused_imports, reason = "each test binary uses a different subset")]
pub use services::{service_url, skipped, unique};

/// A SQLite URL of a fresh file in a directory of its own under the temporary directory.
pub fn sqlite_url(prefix: &str) -> String {
    let dir = std::env::temp_dir().join(unique(prefix));
    std::fs::create_dir_all(&dir).unwrap();
    format!("sqlite:{}", dir.join("locks.db").display())
}

pub mod etcd_raw;
pub mod members;
pub mod own_etcd;
pub mod own_redis;
pub mod redis_tls;
pub mod secured;
pub mod sentinel;
pub mod sql;
