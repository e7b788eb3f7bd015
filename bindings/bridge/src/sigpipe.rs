//! SIGPIPE stays out of the host process. A write on a connection the peer has reset raises SIGPIPE, whose default
//! action ends the process. Rust programs ignore it from the start, and so do CPython, Node and the JVM, but a C
//! program keeps the default: a TCP reset killed a C client in the faults suite (a vectored write, which no
//! `MSG_NOSIGNAL` covers). The runtime's threads block SIGPIPE for their whole life; a blocking call blocks it on the
//! caller's thread for the call and consumes any SIGPIPE the call raised. The write then fails with EPIPE, as it
//! does under the other hosts, and the host's own disposition is never changed.

use std::mem::MaybeUninit;

fn sigpipe_set() -> libc::sigset_t {
    let mut set = MaybeUninit::<libc::sigset_t>::uninit();
    // SAFETY: sigemptyset initializes the set it is given; sigaddset adds a valid signal to it.
    unsafe {
        libc::sigemptyset(set.as_mut_ptr());
        libc::sigaddset(set.as_mut_ptr(), libc::SIGPIPE);
        set.assume_init()
    }
}

/// Blocks SIGPIPE on the calling thread for good: the runtime's `on_thread_start`.
pub(crate) fn block_for_thread() {
    let set = sigpipe_set();
    // SAFETY: changes the calling thread's own mask only.
    unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
}

fn pending_here() -> bool {
    let mut pending = MaybeUninit::<libc::sigset_t>::uninit();
    // SAFETY: sigpending fills the set it is given, which is then read.
    unsafe { libc::sigpending(pending.as_mut_ptr()) == 0 && libc::sigismember(pending.as_ptr(), libc::SIGPIPE) == 1 }
}

/// Runs `f` with SIGPIPE blocked on the calling thread, then consumes a SIGPIPE that `f` raised (one pending from
/// before is left for the host) and restores the thread's mask.
pub(crate) fn blocked_while<R>(f: impl FnOnce() -> R) -> R {
    let set = sigpipe_set();
    let mut old = MaybeUninit::<libc::sigset_t>::uninit();
    // SAFETY: changes the calling thread's own mask; `old` receives the previous one.
    let old = unsafe {
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, old.as_mut_ptr());
        old.assume_init()
    };
    // SAFETY: reads a set pthread_sigmask filled.
    let was_blocked = unsafe { libc::sigismember(&old, libc::SIGPIPE) } == 1;
    let was_pending = pending_here();
    let result = f();
    if !was_blocked {
        if !was_pending && pending_here() {
            let now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
            // SAFETY: takes the pending SIGPIPE without waiting; a standard signal is pending at most once.
            unsafe { libc::sigtimedwait(&set, std::ptr::null_mut(), &now) };
        }
        // SAFETY: puts back the mask read above.
        unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut()) };
    }
    result
}
