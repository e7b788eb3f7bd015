//! Election behaviour that the conformance scenarios cannot time: on the in-process backend, whose records keep no
//! values, a leader's value follows its grant in the register `fencelock.leader/<name>`, and `observe` waits for it
//! up to a grace of one second (tokio's paused clock).

use std::time::Duration;

use fencelock::{Client, Leader, LockOptions};
use futures::StreamExt;
use tokio::time::Instant;

/// How long `observe` waits for a new leader's value (the README's "up to a second").
const GRACE: Duration = Duration::from_secs(1);

async fn memory_client(store: &str) -> Client {
    Client::connect(&format!("memory://{store}")).await.unwrap()
}

/// The register's layout as core writes it: `<holder length, u32 big-endian><holder><value>`.
fn packed(holder: &str, value: &[u8]) -> Vec<u8> {
    [&(holder.len() as u32).to_be_bytes()[..], holder.as_bytes(), value].concat()
}

#[tokio::test(start_paused = true)]
async fn a_plain_lock_is_observed_without_a_value_after_the_grace() {
    let (holder, watcher) = (memory_client("grace-lock").await, memory_client("grace-lock").await);
    let lease = holder.lock("job", &LockOptions::default()).await.unwrap();
    let start = Instant::now();
    let mut changes = Box::pin(watcher.election("job").observe());
    let first = changes.next().await.unwrap().unwrap();
    assert_eq!(first, Some(Leader { value: Vec::new(), term: lease.fence() }));
    assert!(start.elapsed() >= GRACE, "reported after {:?}, before the grace", start.elapsed());
    assert!(start.elapsed() < GRACE * 2, "reported after {:?}", start.elapsed());
    lease.release().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_leader_whose_value_comes_late_is_observed_once_with_it() {
    let (holder, watcher) = (memory_client("grace-late").await, memory_client("grace-late").await);
    let mut changes = Box::pin(watcher.election("job").observe());
    assert_eq!(changes.next().await.unwrap().unwrap(), None);
    // A leader granted the mutex whose value write is slow: it lands within the grace.
    let lease = holder.lock("job", &LockOptions::default()).await.unwrap();
    let register = holder.fence("fencelock.leader/job");
    let write = async {
        tokio::time::sleep(GRACE / 2).await;
        register.write(lease.fence(), &packed(lease.holder(), b"late")).await.unwrap();
    };
    let (first, ()) = tokio::join!(changes.next(), write);
    assert_eq!(first.unwrap().unwrap(), Some(Leader { value: b"late".to_vec(), term: lease.fence() }));
    lease.release().await.unwrap();
    assert_eq!(changes.next().await.unwrap().unwrap(), None);
}

#[tokio::test(start_paused = true)]
async fn a_campaign_is_observed_with_its_value_first() {
    let (leader, watcher) = (memory_client("grace-campaign").await, memory_client("grace-campaign").await);
    let mut changes = Box::pin(watcher.election("job").observe());
    assert_eq!(changes.next().await.unwrap().unwrap(), None);
    let start = Instant::now();
    let won = leader.election("job").campaign(b"v1", &LockOptions::default()).await.unwrap();
    let seen = changes.next().await.unwrap().unwrap();
    assert_eq!(seen, Some(Leader { value: b"v1".to_vec(), term: won.term() }));
    // Its value was there at once, so the watcher did not wait out the grace.
    assert!(start.elapsed() < GRACE, "reported after {:?}", start.elapsed());
    won.resign().await.unwrap();
}
