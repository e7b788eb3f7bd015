//! Core errors → napi errors whose reason is `"<KIND>: <message>"` (e.g. `"LOCK_LOST: lock \"a\" on redis://…: …"`).
//! node/errors.js parses the prefix into `LockError.code`; the kinds are core's `ErrorKind::as_str` spellings.

use fencelock::{Error, ErrorKind};
use tokio::task::JoinError;

/// The napi error carrying `err`'s kind in its reason.
pub(crate) fn to_napi(err: Error) -> napi::Error {
    napi::Error::from_reason(format!("{}: {}", err.kind().as_str(), err.message()))
}

/// An `InvalidArgument` napi error.
pub(crate) fn invalid(message: impl Into<String>) -> napi::Error {
    to_napi(Error::new(ErrorKind::InvalidArgument, message))
}

/// The outcome of a task spawned on the runtime: an aborted task was cancelled by the caller, a panicked one is a bug.
pub(crate) fn joined<T>(r: Result<fencelock::Result<T>, JoinError>, what: &str) -> napi::Result<T> {
    match r {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(to_napi(e)),
        Err(e) if e.is_cancelled() => Err(to_napi(Error::new(ErrorKind::Cancelled, format!("{what} was cancelled")))),
        Err(e) => Err(to_napi(Error::new(ErrorKind::Internal, format!("{what} panicked (a bug): {e}")))),
    }
}
