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

/// The refusal of `token` (`who`'s) by `register` after its server lost the register: the first calls after a
/// restart may find the old connection dead (and remake it), so an `Unavailable` is tried again, a few times.
/// Panics if the write is accepted or refused for another reason than the loss.
pub async fn refused_after_loss(register: &fencelock::Fence, token: u64, who: &str) {
    let mut tries = 0;
    let err = loop {
        tries += 1;
        match register.write(token, b"after the loss").await {
            Err(e) if e.kind() == fencelock::ErrorKind::Unavailable && tries < 5 => continue,
            other => break other.expect_err(&format!("{who}'s token {token} was accepted")),
        }
    };
    assert_eq!(err.kind(), fencelock::ErrorKind::Fenced, "{who}: {err}");
    assert!(err.message().contains("registers refuse tokens from before a loss of data"), "{err}");
}

/// Whether `program` runs (`--version`); without it a test skips with a note, unless FENCELOCK_REQUIRE_SERVICES=1.
pub fn installed(program: &str) -> bool {
    if std::process::Command::new(program).arg("--version").output().is_ok() {
        return true;
    }
    assert_ne!(std::env::var("FENCELOCK_REQUIRE_SERVICES").as_deref(), Ok("1"), "{program} is not installed");
    skipped(&format!("{program} is not installed"));
    false
}

pub mod etcd_raw;
pub mod members;
pub mod own_etcd;
pub mod own_redis;
pub mod redis_tls;
pub mod secured;
pub mod sentinel;
pub mod sql;
