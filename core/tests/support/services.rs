//! Finding the test servers scripts/services.sh started; shared with the fencelockd tests (server/tests).

/// The URL of a test server from `var` (set by scripts/services.sh). `None` skips the test with a `SKIPPED` line,
/// unless `FENCELOCK_REQUIRE_SERVICES=1` (the test command and CI), where a missing server fails loudly.
pub fn service_url(var: &str) -> Option<String> {
    match std::env::var(var) {
        Ok(url) if !url.is_empty() => Some(url),
        _ if std::env::var("FENCELOCK_REQUIRE_SERVICES").as_deref() == Ok("1") => {
            panic!("{var} is not set but FENCELOCK_REQUIRE_SERVICES=1: start the servers with scripts/services.sh")
        }
        _ => {
            skipped(&format!("{var} is not set (start the servers with scripts/services.sh and source its env)"));
            None
        }
    }
}

/// Says on the terminal that the current test (or part of it) did not run. libtest captures `eprintln!` of a test
/// that passes, so the line goes to stderr directly: a skipped test must not read as a plain `ok`.
pub fn skipped(reason: &str) {
    use std::io::Write;
    let test = std::thread::current().name().unwrap_or("a test").to_string();
    let _ = writeln!(std::io::stderr(), "SKIPPED {test}: {reason}");
}

/// A name no other test run uses.
pub fn unique(prefix: &str) -> String {
    format!("{prefix}-{}", uuid::Uuid::new_v4().simple())
}
