//! Boxed Rust values as Java `long` handles. Java guarantees a handle is live during every call that passes it and
//! is freed once (`dev.fencelock.NativeHandle`); a zero handle is refused rather than dereferenced.

use fencelock::{Error, ErrorKind};
use jni::sys::jlong;

/// Moves `value` to the heap; Java owns the returned handle until it calls the matching `free`.
pub(crate) fn into_handle<T>(value: T) -> jlong {
    Box::into_raw(Box::new(value)) as jlong
}

/// Borrows the value behind a live handle.
pub(crate) fn borrow<'a, T>(h: jlong) -> Result<&'a T, Error> {
    if h == 0 {
        return Err(Error::new(ErrorKind::Internal, "a null fencelock handle reached native code (a bug)"));
    }
    // SAFETY: non-zero handles come from `into_handle::<T>` and NativeHandle keeps them alive for this call.
    Ok(unsafe { &*(h as *const T) })
}

/// Drops the value behind a handle; zero is ignored.
pub(crate) fn free<T>(h: jlong) {
    if h != 0 {
        // SAFETY: as in `borrow`; NativeHandle frees each handle once, after its last call.
        drop(unsafe { Box::from_raw(h as *mut T) });
    }
}

/// A native method that reads one value off a live handle: `getter!(Java_…_leaseFence, JLease, |l| -> jlong { … })`,
/// or `-> String expr` for a Java string.
macro_rules! getter {
    ($sym:ident, $ty:ty, |$it:ident| -> String $body:expr) => {
        #[unsafe(no_mangle)]
        pub extern "system" fn $sym<'l>(
            mut env: jni::EnvUnowned<'l>,
            _class: jni::objects::JClass<'l>,
            h: jni::sys::jlong,
        ) -> jni::objects::JString<'l> {
            crate::error::shim(&mut env, |env| {
                let $it = crate::handle::borrow::<$ty>(h)?;
                Ok(env.new_string($body)?)
            })
        }
    };
    ($sym:ident, $ty:ty, |$it:ident| -> $ret:ty $body:block) => {
        #[unsafe(no_mangle)]
        pub extern "system" fn $sym<'l>(
            mut env: jni::EnvUnowned<'l>,
            _class: jni::objects::JClass<'l>,
            h: jni::sys::jlong,
        ) -> $ret {
            crate::error::shim(&mut env, |_| {
                let $it = crate::handle::borrow::<$ty>(h)?;
                Ok($body)
            })
        }
    };
}
pub(crate) use getter;
