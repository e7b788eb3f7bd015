//! Panics stop at the binding boundary: unwinding into C, the JVM or Python is undefined behaviour or an abort.

use std::any::Any;
use std::panic::{AssertUnwindSafe, catch_unwind};

use fencelock::{Error, ErrorKind, Result};

/// Runs `f`; a panic inside it becomes an `Internal` error carrying the panic message.
pub fn catch_panic<T>(f: impl FnOnce() -> Result<T>) -> Result<T> {
    // AssertUnwindSafe: after a panic the caller only sees an error; nothing half-updated is handed back.
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|payload| {
        Err(Error::new(ErrorKind::Internal, format!("fencelock panicked (a bug): {}", panic_message(&*payload))))
    })
}

fn panic_message(payload: &(dyn Any + Send)) -> &str {
    if let Some(s) = payload.downcast_ref::<&str>() {
        s
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s
    } else {
        "a non-string panic payload"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_becomes_internal() {
        let err = catch_panic::<()>(|| panic!("boom {}", 7)).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Internal);
        assert!(err.message().contains("boom 7"), "{err}");
        assert_eq!(catch_panic(|| Ok(5)).unwrap(), 5);
    }
}
