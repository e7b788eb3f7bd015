//! Core errors → Python exceptions. The class for each code lives in ONE table in `fencelock/errors.py`, which
//! registers a factory here at import; this side passes the core error's fields: the code (DESIGN.md §5), the
//! message (naming the lock and backend), the lock, the backend and whether a retry may help.

use std::sync::OnceLock;

use fencelock::{Error, ErrorKind};
use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;

create_exception!(
    _native,
    NativeError,
    PyException,
    "A fencelock error as `(code, message)`, raised only before `fencelock.errors` registers its factory."
);

static FACTORY: OnceLock<Py<PyAny>> = OnceLock::new();

/// Registers `factory(code: int, message: str, lock: str | None, backend: str | None, retryable: bool)
/// -> BaseException`, which builds the exception raised for an error. The first registration wins.
#[pyfunction]
pub(crate) fn set_error_factory(factory: Py<PyAny>) {
    let _ = FACTORY.set(factory);
}

/// The Python exception for a core error, built by the registered factory.
pub(crate) fn to_py(py: Python<'_>, err: Error) -> PyErr {
    let (code, message) = (err.kind().code(), err.detail());
    match FACTORY.get() {
        Some(factory) => match factory.call1(py, (code, message, err.lock(), err.backend(), err.retryable())) {
            Ok(exc) => PyErr::from_value(exc.into_bound(py)),
            Err(e) => e,
        },
        None => NativeError::new_err((code, message)),
    }
}

/// Whether an error of kind `code` may succeed if retried (core's table; unknown codes: no).
#[pyfunction]
pub(crate) fn retryable(code: u32) -> bool {
    ErrorKind::ALL.into_iter().find(|k| k.code() == code).is_some_and(ErrorKind::retryable)
}

/// An `InvalidArgument` error, for values the core never sees (negative durations, non-finite floats).
pub(crate) fn invalid(message: impl Into<String>) -> Error {
    Error::new(ErrorKind::InvalidArgument, message)
}
