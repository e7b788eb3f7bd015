//! A C host keeps SIGPIPE's default action, which ends the process. A write on a connection whose peer is gone,
//! made inside fencelock (on a runtime thread, or on the caller's thread in a blocking call), must fail with EPIPE
//! and leave the process running. A test binary of its own: it sets the default action for the whole process.

use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;

/// A write on a socket whose peer was closed: what it returned and its errno.
fn write_to_a_closed_peer() -> (isize, Option<i32>) {
    let (ours, theirs) = UnixStream::pair().unwrap();
    drop(theirs);
    // SAFETY: writes one byte from a live buffer to a socket we own.
    let n = unsafe { libc::write(ours.as_raw_fd(), b"x".as_ptr().cast(), 1) };
    (n, std::io::Error::last_os_error().raw_os_error())
}

fn sigpipe_blocked_here() -> bool {
    let mut mask = std::mem::MaybeUninit::<libc::sigset_t>::uninit();
    // SAFETY: reads the calling thread's mask into a set we own, then tests it.
    unsafe {
        libc::pthread_sigmask(libc::SIG_BLOCK, std::ptr::null(), mask.as_mut_ptr());
        libc::sigismember(mask.as_ptr(), libc::SIGPIPE) == 1
    }
}

#[test]
fn a_write_on_a_reset_connection_does_not_end_a_host_with_the_default_sigpipe_action() {
    // SAFETY: sets this test process's disposition, as a C program has it.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    let on_runtime = fencelock_bridge::block_on(async {
        fencelock_bridge::spawn(async { write_to_a_closed_peer() }).unwrap().await.unwrap()
    });
    assert_eq!(on_runtime.unwrap(), (-1, Some(libc::EPIPE)), "on a runtime thread");
    let on_caller = fencelock_bridge::block_on(async { write_to_a_closed_peer() });
    assert_eq!(on_caller.unwrap(), (-1, Some(libc::EPIPE)), "on the caller's thread, in block_on");
    let interruptible = fencelock_bridge::block_interruptibly(async { Ok(write_to_a_closed_peer()) }, || false);
    assert_eq!(interruptible.unwrap(), (-1, Some(libc::EPIPE)), "in block_interruptibly");
    // The caller's thread is as it was: SIGPIPE not blocked, and nothing pending that would end it later.
    assert!(!sigpipe_blocked_here(), "the caller's mask was not restored");
    let mut pending = std::mem::MaybeUninit::<libc::sigset_t>::uninit();
    // SAFETY: reads the pending set into a set we own, then tests it.
    let left = unsafe {
        libc::sigpending(pending.as_mut_ptr()) == 0 && libc::sigismember(pending.as_ptr(), libc::SIGPIPE) == 1
    };
    assert!(!left, "a SIGPIPE the call raised was left pending");
}
