//! The numeric codes every binding reports: 0 for success, the codes of DESIGN.md §5 for errors, 11 for a busy
//! `try_lock`.

use fencelock::Error;

/// A `try_lock` found the lock taken (not an error kind in core, where `try_lock` returns `None`).
pub const STATUS_BUSY: u32 = 11;

/// The code of `err`: `ErrorKind::code()`, 1–10.
pub fn status_code(err: &Error) -> u32 {
    err.kind().code()
}

#[cfg(test)]
mod tests {
    use super::*;
    use fencelock::ErrorKind;

    #[test]
    fn codes_follow_the_design_table() {
        for (i, kind) in ErrorKind::ALL.into_iter().enumerate() {
            assert_eq!(status_code(&Error::new(kind, "x")), i as u32 + 1);
        }
        assert!(ErrorKind::ALL.iter().all(|k| k.code() != 0 && k.code() != STATUS_BUSY));
    }
}
