//! The signals `run` handles itself: SIGINT, SIGTERM and SIGHUP stop a wait cleanly, or are passed on to CMD.

use std::io;

use tokio::signal::unix::{Signal, SignalKind, signal};

/// Listeners for the termination signals; installed before the lock is requested so none is missed.
#[derive(Debug)]
pub struct Signals {
    interrupt: Signal,
    terminate: Signal,
    hangup: Signal,
}

impl Signals {
    /// Replaces the default action (exit at once, leaving the lock to expire) with delivery to [`Signals::recv`].
    pub fn install() -> io::Result<Self> {
        Ok(Signals {
            interrupt: signal(SignalKind::interrupt())?,
            terminate: signal(SignalKind::terminate())?,
            hangup: signal(SignalKind::hangup())?,
        })
    }

    /// The number of the next signal received.
    pub async fn recv(&mut self) -> i32 {
        tokio::select! {
            _ = self.interrupt.recv() => libc::SIGINT,
            _ = self.terminate.recv() => libc::SIGTERM,
            _ = self.hangup.recv() => libc::SIGHUP,
        }
    }
}
