//! Values that must not be dropped in a `fork()`ed child: their connections and background tasks belong to the
//! parent's runtime, which has no threads in the child (TOOLCHAIN.md gotcha 7). A child leaks them instead, and
//! refuses to use them (using them would hang): it connects a client of its own.

use std::mem::ManuallyDrop;

use fencelock::{Error, ErrorKind, Result};

/// `T`, dropped only in the process that made it.
#[derive(Debug)]
pub(crate) struct ForkLocal<T> {
    pid: u32,
    value: ManuallyDrop<T>,
}

impl<T> ForkLocal<T> {
    pub(crate) fn new(value: T) -> Self {
        ForkLocal { pid: std::process::id(), value: ManuallyDrop::new(value) }
    }
}

impl<T> ForkLocal<T> {
    /// The value; `Closed` in a forked child.
    pub(crate) fn get(&self) -> Result<&T> {
        if self.pid != std::process::id() {
            return Err(Error::new(
                ErrorKind::Closed,
                "this fencelock object was made before fork(); connect a new client in the child process",
            ));
        }
        Ok(&self.value)
    }
}

impl<T> Drop for ForkLocal<T> {
    fn drop(&mut self) {
        if self.pid == std::process::id() {
            // SAFETY: dropped once, here, and never used again.
            unsafe { ManuallyDrop::drop(&mut self.value) }
        }
    }
}
