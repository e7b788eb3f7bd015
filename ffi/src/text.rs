//! Strings the library hands out (`char **out`): made from Rust strings, freed with `fencelock_string_free`.

use std::ffi::{CString, c_char};

use fencelock::{Error, ErrorKind, Result};

/// `s` as a new C string for the caller to free with `fencelock_string_free`.
pub(crate) fn into_raw(s: String) -> Result<*mut c_char> {
    let s = CString::new(s)
        .map_err(|e| Error::new(ErrorKind::Internal, format!("a NUL byte at offset {}", e.nul_position())))?;
    Ok(s.into_raw())
}

/// Frees a string returned by the library (`fencelock_client_metrics_text`, `fencelock_client_metrics_json`). NULL
/// is ignored.
///
/// # Safety
/// `s` is NULL or a string the library returned, not used after this call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_string_free(s: *mut c_char) {
    if s.is_null() {
        return;
    }
    // SAFETY: made by CString::into_raw in into_raw, freed once by the caller's promise.
    drop(unsafe { CString::from_raw(s) });
}
