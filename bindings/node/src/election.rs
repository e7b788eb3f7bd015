//! Elections for JS (DESIGN.md §4b): the leader as `{ value, term }`, and the observer behind `election.observe()`.
//! Campaigns come back as a `NativeLease` whose fence is the term (see `NativeClient::campaign`); all election
//! behaviour is the bridge's (`fencelock_bridge::campaign`, `proclaim`, `leader`, `Observer`).

use std::fmt;
use std::sync::{Arc, Mutex};

use fencelock::{Error, ErrorKind, Leader};
use fencelock_bridge::Observer;
use napi::bindgen_prelude::{BigInt, Buffer, Env, PromiseRaw, Result};
use napi_derive::napi;

use crate::cancel;
use crate::error::{joined, to_napi};
use crate::runtime::spawn_task;

/// Who leads an election: the value it campaigned with or last proclaimed, and its term (its leadership's fence).
#[napi(object)]
pub struct LeaderInfo {
    pub value: Buffer,
    pub term: BigInt,
}

impl fmt::Debug for LeaderInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LeaderInfo").field("term", &self.term).field("len", &self.value.len()).finish()
    }
}

pub(crate) fn leader_info(leader: Option<Leader>) -> Option<LeaderInfo> {
    leader.map(|l| LeaderInfo { value: l.value.into(), term: BigInt::from(l.term) })
}

/// The changes of leader of one election, pulled one at a time by the JS iterator.
#[napi]
pub struct NativeObserver {
    /// `None` once closed: dropping the bridge's observer ends its polling of the backend.
    observer: Mutex<Option<Arc<Observer>>>,
    name: String,
}

impl fmt::Debug for NativeObserver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NativeObserver").field("name", &self.name).finish()
    }
}

impl NativeObserver {
    pub(crate) fn new(observer: Observer, name: String) -> Self {
        NativeObserver { observer: Mutex::new(Some(Arc::new(observer))), name }
    }

    fn observer(&self) -> Option<Arc<Observer>> {
        self.observer.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

#[napi]
impl NativeObserver {
    /// The next change: the leader, or null when nobody leads. It waits for a change as long as it takes;
    /// `cancel(cancelId)` aborts the wait (the observer stays usable: its stream resumes where it was).
    #[napi]
    pub fn next<'env>(&self, env: &'env Env, cancel_id: Option<u32>) -> Result<PromiseRaw<'env, Option<LeaderInfo>>> {
        let observer = self.observer().ok_or_else(|| {
            let message = format!("the observer of election {:?} is closed", self.name);
            to_napi(Error::new(ErrorKind::Closed, message).with_lock(&self.name))
        })?;
        let task = spawn_task(async move { observer.next().await })?;
        let registered = cancel::register(cancel_id, task.abort_handle());
        env.spawn_future(async move {
            let leader = joined(task.await, "observe")?;
            drop(registered);
            Ok(leader_info(leader))
        })
    }

    /// Drops the observer (a `next` still waiting should be cancelled first: it holds the observer until it ends).
    #[napi]
    pub fn close(&self) {
        self.observer.lock().unwrap_or_else(|p| p.into_inner()).take();
    }
}
