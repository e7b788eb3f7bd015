//! Checked conversions of C arguments: NULL and invalid UTF-8 become `InvalidArgument` errors naming the argument.

use std::ffi::{CStr, c_char};

use fencelock::{Error, ErrorKind, Result};

fn invalid(message: String) -> Error {
    Error::new(ErrorKind::InvalidArgument, message)
}

/// A required NUL-terminated UTF-8 string.
///
/// # Safety
/// `p` is NULL or points to a NUL-terminated string that outlives `'a`.
pub(crate) unsafe fn string<'a>(p: *const c_char, arg: &str) -> Result<&'a str> {
    if p.is_null() {
        return Err(invalid(format!("{arg} is NULL")));
    }
    // SAFETY: non-NULL, and the caller promises NUL termination.
    let bytes = unsafe { CStr::from_ptr(p) };
    bytes.to_str().map_err(|e| invalid(format!("{arg} is not valid UTF-8 (bad byte at offset {})", e.valid_up_to())))
}

/// An optional string: NULL is `None`.
///
/// # Safety
/// As for [`string`].
pub(crate) unsafe fn opt_string<'a>(p: *const c_char, arg: &str) -> Result<Option<&'a str>> {
    if p.is_null() { Ok(None) } else { unsafe { string(p, arg) }.map(Some) }
}

/// A required handle.
///
/// # Safety
/// `p` is NULL or a live handle of this type.
pub(crate) unsafe fn handle<'a, T>(p: *const T, arg: &str) -> Result<&'a T> {
    // SAFETY: the caller promises a live handle when non-NULL.
    unsafe { p.as_ref() }.ok_or_else(|| invalid(format!("{arg} is NULL")))
}

/// A required out-parameter, set to `init` at once so a failing call leaves it NULL/0; the result goes through the
/// returned reference.
///
/// # Safety
/// `p` is NULL or valid for writes (it may point to uninitialised memory).
pub(crate) unsafe fn out<'a, T>(p: *mut T, arg: &str, init: T) -> Result<&'a mut T> {
    if p.is_null() {
        return Err(invalid(format!("{arg} is NULL")));
    }
    // SAFETY: writable by the caller's promise; `write` does not read or drop the old contents, and after it the
    // location is initialised, so the reference is sound.
    unsafe {
        p.write(init);
        Ok(&mut *p)
    }
}

/// Bytes the caller passes as a pointer and a length: NULL only with length 0.
///
/// # Safety
/// `p` is NULL or readable for `len` bytes that outlive `'a`.
pub(crate) unsafe fn bytes<'a>(p: *const u8, len: usize, arg: &str) -> Result<&'a [u8]> {
    match (p.is_null(), len) {
        (true, 0) => Ok(&[]),
        (true, _) => Err(invalid(format!("{arg} is NULL but {arg}_len is {len}"))),
        // SAFETY: the caller's promise.
        (false, _) => Ok(unsafe { std::slice::from_raw_parts(p, len) }),
    }
}
