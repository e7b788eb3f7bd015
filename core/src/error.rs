//! One error type for every backend and every language binding (DESIGN.md §5).

use std::fmt;
use std::sync::Arc;

/// What went wrong, as a stable code shared by every language. Codes, not messages, are API.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// `lock` waited its timeout while someone else held the lock.
    Timeout,
    /// The lease expired, was taken, or could not be renewed in time; only fenced writes are safe now.
    LockLost,
    /// Renew or release of a lease that is no longer ours.
    NotHeld,
    /// A fenced write carried a token older than one already accepted.
    Fenced,
    /// The backend is unreachable, an RPC timed out, or there is no quorum.
    Unavailable,
    /// A bad URL, name, TTL or option.
    InvalidArgument,
    /// The backend lacks the capability asked for.
    Unsupported,
    /// The client was closed.
    Closed,
    /// The caller cancelled the operation.
    Cancelled,
    /// A bug or an unexpected reply.
    Internal,
}

impl ErrorKind {
    /// Every kind, in code order.
    pub const ALL: [ErrorKind; 10] = [
        ErrorKind::Timeout,
        ErrorKind::LockLost,
        ErrorKind::NotHeld,
        ErrorKind::Fenced,
        ErrorKind::Unavailable,
        ErrorKind::InvalidArgument,
        ErrorKind::Unsupported,
        ErrorKind::Closed,
        ErrorKind::Cancelled,
        ErrorKind::Internal,
    ];

    /// The numeric code of DESIGN.md §5 (1–10); C's `fencelock_status` uses the same numbers.
    pub fn code(self) -> u32 {
        match self {
            ErrorKind::Timeout => 1,
            ErrorKind::LockLost => 2,
            ErrorKind::NotHeld => 3,
            ErrorKind::Fenced => 4,
            ErrorKind::Unavailable => 5,
            ErrorKind::InvalidArgument => 6,
            ErrorKind::Unsupported => 7,
            ErrorKind::Closed => 8,
            ErrorKind::Cancelled => 9,
            ErrorKind::Internal => 10,
        }
    }

    /// The spelling every language shares: `TIMEOUT`, `LOCK_LOST`, …
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::Timeout => "TIMEOUT",
            ErrorKind::LockLost => "LOCK_LOST",
            ErrorKind::NotHeld => "NOT_HELD",
            ErrorKind::Fenced => "FENCED",
            ErrorKind::Unavailable => "UNAVAILABLE",
            ErrorKind::InvalidArgument => "INVALID_ARGUMENT",
            ErrorKind::Unsupported => "UNSUPPORTED",
            ErrorKind::Closed => "CLOSED",
            ErrorKind::Cancelled => "CANCELLED",
            ErrorKind::Internal => "INTERNAL",
        }
    }

    /// Parses the shared spelling (`"LOCK_LOST"`).
    pub fn from_name(s: &str) -> Option<ErrorKind> {
        ErrorKind::ALL.into_iter().find(|k| k.as_str() == s)
    }

    /// Whether trying the same call again later may succeed.
    pub fn retryable(self) -> bool {
        matches!(self, ErrorKind::Timeout | ErrorKind::Unavailable)
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An error: its kind, a message, and where it happened as fields of their own — the lock, the backend (its URL
/// without secrets) and the error underneath — so bindings and callers read them without parsing the message.
/// `Display` puts them together: `LOCK_LOST: lock "orders" on redis://127.0.0.1:6379: the record expired`.
#[derive(Debug, Clone)]
pub struct Error {
    kind: ErrorKind,
    message: String,
    lock: Option<String>,
    backend: Option<String>,
    source: Option<Arc<dyn std::error::Error + Send + Sync>>,
}

impl Error {
    /// An error of `kind` with `message`.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Error { kind, message: message.into(), lock: None, backend: None, source: None }
    }

    /// The kind (code) of this error.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The message alone: no kind, lock or backend (see [`Error::detail`] for those).
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The lock name the error is about, if any.
    pub fn lock(&self) -> Option<&str> {
        self.lock.as_deref()
    }

    /// The backend the error came from, as its URL without secrets, if known.
    pub fn backend(&self) -> Option<&str> {
        self.backend.as_deref()
    }

    /// Whether trying the same call again later may succeed.
    pub fn retryable(&self) -> bool {
        self.kind.retryable()
    }

    /// The lock and backend, then the message, without the kind: `lock "a" on redis://…: msg`. What a binding shows
    /// as its exception message (the kind travels apart, as a code).
    pub fn detail(&self) -> String {
        match (&self.lock, &self.backend) {
            (Some(lock), Some(backend)) => format!("lock {lock:?} on {backend}: {}", self.message),
            (Some(lock), None) => format!("lock {lock:?}: {}", self.message),
            (None, Some(backend)) => format!("{backend}: {}", self.message),
            (None, None) => self.message.clone(),
        }
    }

    /// Names the lock, unless the error already names one (the innermost site knows best).
    pub fn with_lock(mut self, name: impl Into<String>) -> Self {
        self.lock.get_or_insert_with(|| name.into());
        self
    }

    /// Names the backend (a URL already redacted), unless the error already names one.
    pub fn with_backend(mut self, redacted: impl Into<String>) -> Self {
        self.backend.get_or_insert_with(|| redacted.into());
        self
    }

    /// Keeps `source` as the error underneath ([`std::error::Error::source`]).
    pub fn with_source(mut self, source: impl std::error::Error + Send + Sync + 'static) -> Self {
        self.source = Some(Arc::new(source));
        self
    }

    /// Names the lock and the backend, each unless already named.
    pub(crate) fn at(self, lock: &str, backend: &str) -> Self {
        self.with_lock(lock).with_backend(backend)
    }

    /// Prefixes the message with what was being done (`preparing the tables: …`); the lock and the backend have
    /// fields of their own.
    pub fn context(mut self, doing: impl fmt::Display) -> Self {
        self.message = format!("{doing}: {}", self.message);
        self
    }

    /// This error with every secret of `url` masked in its message, lock and backend, and without an error underneath
    /// that quotes one (its text is all a caller could show of it).
    pub(crate) fn scrub(mut self, url: &str) -> Self {
        use crate::redact::scrub;
        self.message = scrub(&self.message, url);
        self.lock = self.lock.map(|l| scrub(&l, url));
        self.backend = self.backend.map(|b| scrub(&b, url));
        if let Some(source) = &self.source {
            let text = format!("{source} {source:?}");
            if scrub(&text, url) != text {
                self.source = None;
            }
        }
        self
    }

    pub(crate) fn invalid(message: impl Into<String>) -> Self {
        Error::new(ErrorKind::InvalidArgument, message)
    }

    pub(crate) fn unavailable(message: impl Into<String>) -> Self {
        Error::new(ErrorKind::Unavailable, message)
    }

    pub(crate) fn internal(message: impl Into<String>) -> Self {
        Error::new(ErrorKind::Internal, message)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind, self.detail())
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source.as_deref().map(|e| e as &(dyn std::error::Error + 'static))
    }
}

/// The result type of every fencelock operation.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_the_design_table() {
        let codes: Vec<u32> = ErrorKind::ALL.iter().map(|k| k.code()).collect();
        assert_eq!(codes, (1..=10).collect::<Vec<_>>());
        for k in ErrorKind::ALL {
            assert_eq!(ErrorKind::from_name(k.as_str()), Some(k));
        }
        assert!(ErrorKind::Timeout.retryable() && ErrorKind::Unavailable.retryable());
        assert!(!ErrorKind::LockLost.retryable());
    }

    #[test]
    fn lock_and_backend_are_fields_shown_once() {
        let e = Error::new(ErrorKind::LockLost, "the record expired").at("a", "redis://h:1").at("b", "redis://other");
        assert_eq!((e.lock(), e.backend(), e.message()), (Some("a"), Some("redis://h:1"), "the record expired"));
        assert_eq!(e.to_string(), "LOCK_LOST: lock \"a\" on redis://h:1: the record expired");
        assert_eq!(Error::new(ErrorKind::Closed, "closed").with_backend("sqlite:x").detail(), "sqlite:x: closed");
        assert_eq!(Error::new(ErrorKind::Internal, "m").context("doing").to_string(), "INTERNAL: doing: m");
    }

    #[test]
    fn the_source_is_kept() {
        use std::error::Error as _;
        let io = std::io::Error::other("reset by peer");
        let e = Error::unavailable("cannot reach").with_source(io);
        assert_eq!(e.source().map(|s| s.to_string()).as_deref(), Some("reset by peer"));
    }
}
