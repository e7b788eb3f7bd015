//! `fencelock_fence`: the fenced register that rejects stale tokens; write, read, free, and freeing read bytes.

use std::ptr;

use fencelock::{Error, ErrorKind, Fence};
use fencelock_bridge::block_on;

use crate::args;
use crate::status::{call, fencelock_status};

/// A fenced register named by a resource, stored in the client's backend. Thread-safe; keeps its client alive.
#[derive(Debug)]
pub struct fencelock_fence {
    fence: Fence,
}

pub(crate) fn into_raw(fence: Fence) -> *mut fencelock_fence {
    Box::into_raw(Box::new(fencelock_fence { fence }))
}

/// Stores `len` bytes at `value` if `token` is at least the highest token accepted so far (atomically raising it);
/// `FENCELOCK_FENCED` if it is older. `value` may be NULL only when `len` is 0.
///
/// # Safety
/// `fence` is NULL or a live fence; `value` is NULL or readable for `len` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_fence_write(
    fence: *const fencelock_fence,
    token: u64,
    value: *const u8,
    len: usize,
) -> fencelock_status {
    call("fencelock_fence_write", || {
        let fence = unsafe { args::handle(fence, "fence") }?;
        let value: &[u8] = match (value.is_null(), len) {
            (true, 0) => &[],
            (true, _) => {
                return Err(Error::new(ErrorKind::InvalidArgument, format!("value is NULL but len is {len}")));
            }
            // SAFETY: the caller's promise.
            (false, _) => unsafe { std::slice::from_raw_parts(value, len) },
        };
        block_on(fence.fence.write(token, value))??;
        Ok(fencelock_status::FENCELOCK_OK)
    })
}

/// Reads the highest accepted token and its value: `*token_out` (0 if never written), `*value_out` (a new buffer
/// to free with `fencelock_bytes_free(*value_out, *len_out)`, NULL when empty) and `*len_out`.
///
/// # Safety
/// `fence` is NULL or a live fence; the out-parameters are NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_fence_read(
    fence: *const fencelock_fence,
    token_out: *mut u64,
    value_out: *mut *mut u8,
    len_out: *mut usize,
) -> fencelock_status {
    call("fencelock_fence_read", || {
        let token_out = unsafe { args::out(token_out, "token_out", 0) }?;
        let value_out = unsafe { args::out(value_out, "value_out", ptr::null_mut()) }?;
        let len_out = unsafe { args::out(len_out, "len_out", 0) }?;
        let fence = unsafe { args::handle(fence, "fence") }?;
        let (token, value) = block_on(fence.fence.read())??;
        *token_out = token;
        *len_out = value.len();
        *value_out = bytes_into_raw(value);
        Ok(fencelock_status::FENCELOCK_OK)
    })
}

/// `value` as a buffer for the caller to free with `fencelock_bytes_free`; NULL when empty.
pub(crate) fn bytes_into_raw(value: Vec<u8>) -> *mut u8 {
    if value.is_empty() { ptr::null_mut() } else { Box::into_raw(value.into_boxed_slice()).cast::<u8>() }
}

/// Frees a buffer returned by `fencelock_fence_read` or `fencelock_leader`; `len` is the length it returned. NULL
/// is ignored.
///
/// # Safety
/// `value` is NULL or a buffer from `fencelock_fence_read` or `fencelock_leader` of `len` bytes, not used after
/// this call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_bytes_free(value: *mut u8, len: usize) {
    if value.is_null() {
        return;
    }
    // SAFETY: made by Box::into_raw of a boxed slice of exactly `len` bytes in bytes_into_raw.
    drop(unsafe { Box::from_raw(ptr::slice_from_raw_parts_mut(value, len)) });
}

/// Frees the fence handle. NULL is ignored.
///
/// # Safety
/// `fence` is NULL or a live fence not used after this call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_fence_free(fence: *mut fencelock_fence) {
    if fence.is_null() {
        return;
    }
    // SAFETY: made by Box::into_raw in into_raw, freed once by the caller's promise.
    let fence = unsafe { Box::from_raw(fence) };
    crate::status::quietly(move || crate::lease::drop_in_runtime(fence));
}
