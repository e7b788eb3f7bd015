//! The default backend URL. Which backend a URL names is `backend::open`'s table.

/// The URL used when none is given and `FENCELOCK_URL` is unset: an embedded SQLite file in the working directory.
pub const DEFAULT_URL: &str = "sqlite:fencelock.db";

/// `FENCELOCK_URL`, else [`DEFAULT_URL`].
pub fn default_url() -> String {
    std::env::var("FENCELOCK_URL").ok().filter(|u| !u.is_empty()).unwrap_or_else(|| DEFAULT_URL.to_string())
}
