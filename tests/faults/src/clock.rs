//! The one clock of the history: CLOCK_MONOTONIC read through the raw syscall.
//!
//! libfaketime intercepts libc's `clock_gettime` (and so `std::time::Instant`) in the clients it is preloaded into,
//! CLOCK_MONOTONIC included; it does not intercept the syscall itself, so every event of every process is stamped
//! on the same, unfaked clock.

const LIBFAKETIME: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";

/// The environment that gives a process (a client or a server) libfaketime with the offset in `file`, which the
/// nemesis rewrites (`+4`, `-4`, `+0`): read again at every call, so a jump takes effect at once.
pub fn faketime_env(file: &std::path::Path) -> [(&'static str, std::ffi::OsString); 3] {
    [
        ("LD_PRELOAD", LIBFAKETIME.into()),
        ("FAKETIME_TIMESTAMP_FILE", file.as_os_str().to_owned()),
        ("FAKETIME_NO_CACHE", "1".into()),
    ]
}

/// Nanoseconds of the raw CLOCK_MONOTONIC.
pub fn t_ref() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: the syscall writes one timespec into the buffer we own.
    let rc = unsafe { libc::syscall(libc::SYS_clock_gettime, libc::CLOCK_MONOTONIC, &mut ts as *mut libc::timespec) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_MONOTONIC) failed");
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

#[cfg(test)]
mod tests {
    #[test]
    fn raw_clock_is_monotonic_and_matches_instant_scale() {
        let a = super::t_ref();
        std::thread::sleep(std::time::Duration::from_millis(20));
        let b = super::t_ref();
        assert!(b - a >= 20_000_000, "{a} {b}");
    }
}
