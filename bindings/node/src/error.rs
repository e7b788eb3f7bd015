//! Core errors → napi errors. napi-rs cannot carry a custom code out of an async call, so the reason is the error's
//! structured fields as one JSON object (`{"code","message","lock","backend","retryable"}`); node/errors.js builds
//! `LockError` from those fields in one place. The codes are core's `ErrorKind::as_str` spellings.

use fencelock::{Error, ErrorKind};
use napi_derive::napi;
use tokio::task::JoinError;

/// A core error as JS receives it: the same fields `LockError` has.
#[napi(object)]
#[derive(Debug, serde::Serialize)]
pub struct ErrorFields {
    /// `TIMEOUT`, `LOCK_LOST`, … (DESIGN.md §5).
    pub code: String,
    /// The message, naming the lock and backend when known.
    pub message: String,
    pub lock: Option<String>,
    /// The backend URL without secrets.
    pub backend: Option<String>,
    pub retryable: bool,
}

impl From<&Error> for ErrorFields {
    fn from(e: &Error) -> Self {
        ErrorFields {
            code: e.kind().as_str().to_string(),
            message: e.detail(),
            lock: e.lock().map(str::to_string),
            backend: e.backend().map(str::to_string),
            retryable: e.retryable(),
        }
    }
}

/// The napi error carrying `err`'s fields as its JSON reason.
pub(crate) fn to_napi(err: Error) -> napi::Error {
    let fields = ErrorFields::from(&err);
    match serde_json::to_string(&fields) {
        Ok(json) => napi::Error::from_reason(json),
        Err(_) => napi::Error::from_reason(fields.message),
    }
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
