//! Waiting the way every binding waits: blocking waits that a host's interrupt (Ctrl-C in Python,
//! `Thread.interrupt()` in Java) can end. The acquire calls of every kind are `kinds::hold`.

use std::future::Future;
use std::time::Duration;

use fencelock::{Error, ErrorKind, Result};

use crate::runtime::{handle, on_runtime_thread};

/// How long a blocking call waits before it asks the host whether it was interrupted.
pub const SLICE: Duration = Duration::from_millis(50);

/// Runs `fut` to completion on the calling thread, asking `interrupted()` between slices of [`SLICE`]. When it says
/// so, the future is dropped (inside the runtime, so the cleanup a cancel-safe core future spawns has one to run on)
/// and the call fails with `Cancelled`. An acquire that completed in the same slice wins: its lease is returned, as
/// no caller has been told otherwise yet. From a runtime thread it fails with `Internal` (it would deadlock).
pub fn block_interruptibly<F, T>(fut: F, mut interrupted: impl FnMut() -> bool) -> Result<T>
where
    F: Future<Output = Result<T>>,
{
    if on_runtime_thread() {
        return Err(Error::new(
            ErrorKind::Internal,
            "a blocking fencelock call was made from a runtime thread (such as inside an on_lost callback); \
             call it from another thread",
        ));
    }
    let handle = handle()?;
    let mut fut = Box::pin(fut);
    loop {
        // The timer is made inside block_on: it needs the runtime context.
        let slice = || handle.block_on(async { tokio::time::timeout(SLICE, &mut fut).await });
        if let Ok(result) = crate::sigpipe::blocked_while(slice) {
            return result;
        }
        if interrupted() {
            crate::sigpipe::blocked_while(|| handle.block_on(async move { drop(fut) }));
            return Err(Error::new(ErrorKind::Cancelled, "the waiting thread was interrupted"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hold;
    use fencelock::{Client, HoldKind, LockOptions};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn a_finished_future_is_returned() {
        assert_eq!(block_interruptibly(async { Ok(7) }, || panic!("no slice passed")).unwrap(), 7);
    }

    #[test]
    fn an_interrupt_drops_the_future_and_cancels() {
        struct Dropped(Arc<AtomicUsize>);
        impl Drop for Dropped {
            fn drop(&mut self) {
                self.0.fetch_add(1, Ordering::SeqCst);
            }
        }
        let dropped = Arc::new(AtomicUsize::new(0));
        let guard = Dropped(dropped.clone());
        let mut asked = 0;
        let fut = async move {
            let _guard = guard;
            std::future::pending::<Result<()>>().await
        };
        let err = block_interruptibly(fut, || {
            asked += 1;
            asked == 2
        })
        .unwrap_err();
        assert_eq!((err.kind(), asked, dropped.load(Ordering::SeqCst)), (ErrorKind::Cancelled, 2, 1));
    }

    #[test]
    fn acquire_once_or_waiting() {
        crate::block_on(async {
            let client = Client::connect("memory://bridge-acquire").await.unwrap();
            let opts = LockOptions::default();
            let acquire = |c, n, o, once| hold(c, n, HoldKind::Exclusive, o, once);
            let held = acquire(&client, "n", &opts, false).await.unwrap().expect("lock returns a lease");
            let other = Client::connect("memory://bridge-acquire").await.unwrap();
            assert!(acquire(&other, "n", &opts, true).await.unwrap().is_none(), "busy: try_lock");
            let timed = opts.clone().timeout(Duration::from_millis(10));
            assert_eq!(acquire(&other, "n", &timed, false).await.unwrap_err().kind(), ErrorKind::Timeout);
            held.release().await.unwrap();
        })
        .unwrap();
    }
}
