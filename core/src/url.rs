//! The default backend URL. Which backend a URL names is `backend::open`'s table.

/// The URL used when none is given and `FENCELOCK_URL` is unset: an embedded SQLite file in the working directory.
pub const DEFAULT_URL: &str = "sqlite:fencelock.db";

/// `url` without its secrets, for messages and logs: the user-info password and every secret-looking query
/// parameter (`password=`, `token=`, `key=`, …) become `***`; hosts, ports, paths and other parameters stay. Every
/// message fencelock makes shows URLs this way, and so do `Client::url()` and fencelockd's logs.
pub fn redact(url: &str) -> String {
    crate::redact::redact(url)
}

/// `FENCELOCK_URL`, else [`DEFAULT_URL`].
pub fn default_url() -> String {
    std::env::var("FENCELOCK_URL").ok().filter(|u| !u.is_empty()).unwrap_or_else(|| DEFAULT_URL.to_string())
}
