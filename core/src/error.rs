//! One error type for every backend and every language binding (DESIGN.md §5).

use std::fmt;

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

/// An error with its kind and a message naming the lock, the backend and the bad value.
#[derive(Debug, Clone)]
pub struct Error {
    kind: ErrorKind,
    message: String,
}

impl Error {
    /// An error of `kind` with `message`.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Error { kind, message: message.into() }
    }

    /// The kind (code) of this error.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The message without the kind prefix.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Whether trying the same call again later may succeed.
    pub fn retryable(&self) -> bool {
        self.kind.retryable()
    }

    /// Prefixes the message with context, e.g. the lock and backend, unless it already starts with it.
    pub fn context(mut self, ctx: impl fmt::Display) -> Self {
        let ctx = ctx.to_string();
        if !self.message.starts_with(&ctx) {
            self.message = format!("{ctx}: {}", self.message);
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
        write!(f, "{}: {}", self.kind, self.message)
    }
}

impl std::error::Error for Error {}

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
}
