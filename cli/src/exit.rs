//! Exit statuses and the one-line failure every subcommand reports on stderr.

use std::fmt;

use fencelock::ErrorKind;

/// Any failure that is not one of the cases below.
pub const FAILURE: i32 = 1;
/// Bad arguments; clap uses the same status for syntax errors.
pub const USAGE: i32 = 2;
/// `fencelock leader`: nobody leads the election.
pub const NO_LEADER: i32 = 3;
/// The lock was lost while CMD ran (`EX_TEMPFAIL` of sysexits.h: trying again later may work).
pub const LOST: i32 = 75;
/// `--timeout` passed while waiting, as timeout(1) reports it.
pub const TIMED_OUT: i32 = 124;
/// CMD exists but could not be executed, as POSIX shells report it.
pub const CANNOT_EXECUTE: i32 = 126;
/// CMD was not found, as POSIX shells report it.
pub const NOT_FOUND: i32 = 127;

/// The shell convention for a process ended by signal `signo`.
pub fn signalled(signo: i32) -> i32 {
    128 + signo
}

/// A failure of fencelock itself: printed as one `fencelock: …` line, then the process exits with `code`.
#[derive(Debug)]
pub struct Failure {
    pub code: i32,
    pub message: String,
}

impl Failure {
    pub fn new(code: i32, message: impl Into<String>) -> Self {
        Failure { code, message: message.into() }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "fencelock: {}", self.message)
    }
}

/// Core errors: the user's mistakes (bad URL, unknown scheme) are usage errors, the rest plain failures.
impl From<fencelock::Error> for Failure {
    fn from(e: fencelock::Error) -> Self {
        let code = match e.kind() {
            ErrorKind::InvalidArgument | ErrorKind::Unsupported => USAGE,
            ErrorKind::Timeout => TIMED_OUT,
            ErrorKind::LockLost => LOST,
            _ => FAILURE,
        };
        Failure::new(code, e.to_string())
    }
}
