//! The cancel protocol as the client drives it, on a scripted backend whose attempts suspend where a test says.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::Notify;
use tokio::time::Instant;

use super::Client;
use crate::backend::record::{RecordAttempt, Records};
use crate::backend::{AcquireRequest, Attempt, Backend, Capability, Grant, LockInfo, Pending, Undo};
use crate::error::{Error, ErrorKind, Result};
use crate::options::{ClientOptions, LockOptions};

/// Owner `hang` never gets an answer, owner `bad` is refused up front, anyone else is granted. Abandons wait for
/// `finish_abandon`. Every call is logged as `<what> <owner>`.
#[derive(Debug, Default)]
struct Scripted {
    log: Mutex<Vec<String>>,
    finish_abandon: Notify,
}

impl Scripted {
    fn note(&self, what: &str, req: &AcquireRequest) {
        let owner = req.holder.rsplit(':').next().unwrap_or_default();
        self.log.lock().unwrap().push(format!("{what} {owner}"));
    }

    fn log(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }
}

#[async_trait]
impl Records for Scripted {
    type Waiter = ();

    async fn take(&self, req: &AcquireRequest, _waiter: &mut ()) -> Result<Attempt> {
        self.note("take", req);
        match req.holder.rsplit(':').next() {
            Some("hang") => std::future::pending().await,
            Some("bad") => Err(Error::invalid("refused up front")),
            _ => Ok(Attempt::Acquired(req.grant(1, None))),
        }
    }

    async fn abandon(&self, req: &AcquireRequest) -> Result<()> {
        self.note("abandon", req);
        self.finish_abandon.notified().await;
        self.note("abandoned", req);
        Ok(())
    }
}

#[async_trait]
impl Backend for Scripted {
    fn capability(&self) -> Capability {
        Capability::default()
    }

    fn describe(&self) -> &str {
        "scripted://"
    }

    fn begin(self: Arc<Self>, req: AcquireRequest, undo: Undo) -> Box<dyn Pending> {
        RecordAttempt::begin(self, req, undo)
    }

    async fn renew(&self, _grant: &Grant, _ttl: Duration) -> Result<()> {
        Ok(())
    }

    async fn release(&self, _grant: &Grant) -> Result<()> {
        Ok(())
    }

    async fn force_release(&self, _name: &str) -> Result<bool> {
        Ok(false)
    }

    async fn inspect(&self, _name: &str) -> Result<LockInfo> {
        Ok(LockInfo { holder: None, remaining: None, last_token: None, waiters: None })
    }

    async fn fence_write(&self, _resource: &str, _token: u64, _value: &[u8]) -> Result<()> {
        Ok(())
    }

    async fn fence_read(&self, _resource: &str) -> Result<(u64, Vec<u8>)> {
        Ok((0, Vec::new()))
    }
}

fn scripted() -> (Arc<Scripted>, Client) {
    let backend = Arc::new(Scripted::default());
    (backend.clone(), Client::over(backend, &ClientOptions::default(), crate::tasks::Tasks::new()))
}

fn owner(name: &str) -> LockOptions {
    LockOptions::default().owner(name).watchdog(false)
}

// c912de5: the abandon of an attempt cut short keeps the name's local queue place, so it cannot delete the record
// of the next acquire of this client, which carries the same holder on most backends.
#[tokio::test(start_paused = true)]
async fn an_abandon_runs_before_the_next_local_acquire() {
    let (backend, client) = scripted();
    let hang = owner("hang");
    let mut cut = Box::pin(client.lock("L", &hang));
    assert!(futures::poll!(&mut cut).is_pending());
    drop(cut);
    let next = tokio::spawn({
        let client = client.clone();
        async move { client.lock("L", &owner("next")).await }
    });
    // Paused time advances only once every task is idle: the next acquire has had every chance to run.
    tokio::time::sleep_until(Instant::now() + Duration::from_secs(1)).await;
    assert_eq!(backend.log(), ["take hang", "abandon hang"]);
    backend.finish_abandon.notify_one();
    let lease = next.await.unwrap().unwrap();
    assert_eq!(backend.log(), ["take hang", "abandon hang", "abandoned hang", "take next"]);
    lease.release().await.unwrap();
}

// 319e9e8: an attempt the backend refused up front left nothing, so it gives up its queue place at once, unabandoned.
#[tokio::test]
async fn a_refused_attempt_leaves_at_once_without_an_abandon() {
    let (backend, client) = scripted();
    let err = client.lock("L", &owner("bad")).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert_eq!(client.local_entries(), 0);
    let lease = client.try_lock("L", &owner("next")).await.unwrap().expect("the queue place is free");
    assert_eq!(backend.log(), ["take bad", "take next"]);
    lease.release().await.unwrap();
}
