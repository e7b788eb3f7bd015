//! Finding the test servers scripts/services.sh started; shared with the fencelockd tests (server/tests).

/// The URL of a test server from `var` (set by scripts/services.sh). `None` skips the test with a note, unless
/// `FENCELOCK_REQUIRE_SERVICES=1` (the test command and CI), where a missing server fails loudly.
pub fn service_url(var: &str) -> Option<String> {
    match std::env::var(var) {
        Ok(url) if !url.is_empty() => Some(url),
        _ if std::env::var("FENCELOCK_REQUIRE_SERVICES").as_deref() == Ok("1") => {
            panic!("{var} is not set but FENCELOCK_REQUIRE_SERVICES=1: start the servers with scripts/services.sh")
        }
        _ => {
            eprintln!("skipped: {var} is not set (run the tests through scripts/test.sh to start the servers)");
            None
        }
    }
}

/// A name no other test run uses.
pub fn unique(prefix: &str) -> String {
    format!("{prefix}-{}", uuid::Uuid::new_v4().simple())
}
