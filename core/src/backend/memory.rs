//! `memory://NAME`: an in-process store for unit tests and examples. Clients that open the same NAME share it.
//! Its clock is tokio's, so tests can pause and advance time.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::Notify;
use tokio::time::Instant;

use self::shared::{RwRecord, SemRecord};
use super::record::{RecordAttempt, Records};
use super::{
    AcquireRequest, Attempt, Backend, Busy, Capability, Grant, HoldKind, LockInfo, Pending, Undo, fenced, lock_lost,
    not_held, unix_micros,
};
use crate::error::Result;
use crate::mutant;

mod shared;

#[derive(Debug, Default)]
struct Record {
    holder: Option<String>,
    expires: Option<Instant>,
    counter: u64,
}

impl Record {
    fn live_holder(&self, now: Instant) -> Option<&str> {
        match (self.holder.as_deref(), self.expires) {
            (Some(h), Some(e)) if e > now => Some(h),
            _ => None,
        }
    }
}

#[derive(Debug, Default)]
struct Store {
    locks: Mutex<HashMap<String, Record>>,
    rwlocks: Mutex<HashMap<String, RwRecord>>,
    semaphores: Mutex<HashMap<String, SemRecord>>,
    fences: Mutex<HashMap<String, (u64, Vec<u8>)>>,
    released: Notify,
}

static STORES: LazyLock<Mutex<HashMap<String, Arc<Store>>>> = LazyLock::new(Default::default);

/// The in-process backend.
#[derive(Debug)]
pub(crate) struct MemoryBackend {
    store: Arc<Store>,
    url: String,
}

impl MemoryBackend {
    /// The store called `name`, shared by every client in this process that opens it.
    pub(crate) fn named(name: &str) -> Self {
        let store = STORES.lock().unwrap().entry(name.to_string()).or_default().clone();
        MemoryBackend { store, url: format!("memory://{name}") }
    }

    fn locks(&self) -> std::sync::MutexGuard<'_, HashMap<String, Record>> {
        self.store.locks.lock().unwrap()
    }

    fn rwlocks(&self) -> std::sync::MutexGuard<'_, HashMap<String, RwRecord>> {
        self.store.rwlocks.lock().unwrap()
    }

    fn semaphores(&self) -> std::sync::MutexGuard<'_, HashMap<String, SemRecord>> {
        self.store.semaphores.lock().unwrap()
    }

    /// Wakes every waiter, then lets them run before the releasing task can take the lock straight back.
    async fn wake(&self) {
        self.store.released.notify_waiters();
        tokio::task::yield_now().await;
    }

    /// Renews or releases a read, write or permit hold with `op`; `false` if it is no longer ours.
    fn shared_hold(
        &self,
        grant: &Grant,
        rw: impl FnOnce(&mut RwRecord) -> bool,
        sem: impl FnOnce(&mut SemRecord) -> bool,
    ) -> bool {
        match grant.kind {
            HoldKind::Read | HoldKind::Write => self.rwlocks().get_mut(&grant.name).is_some_and(rw),
            _ => self.semaphores().get_mut(&grant.name).is_some_and(sem),
        }
    }
}

/// What a memory waiter keeps: whether its writer left a waiting mark.
#[derive(Debug, Default)]
pub(crate) struct MemoryWaiter {
    writer_mark: bool,
}

#[async_trait]
impl Backend for MemoryBackend {
    fn capability(&self) -> Capability {
        Capability {
            fencing: true,
            native_wait: true,
            fair: false,
            session_bound: false,
            rw_lock: true,
            semaphore: true,
            election: true,
        }
    }

    fn describe(&self) -> &str {
        &self.url
    }

    fn begin(self: Arc<Self>, req: AcquireRequest, undo: Undo) -> Box<dyn Pending> {
        RecordAttempt::begin(self, req, undo)
    }

    async fn renew(&self, grant: &Grant, ttl: Duration) -> Result<()> {
        let now = Instant::now();
        if grant.kind != HoldKind::Exclusive {
            let ok = self.shared_hold(grant, |r| r.renew(grant, now, ttl), |s| s.renew(grant, now, ttl));
            return if ok { Ok(()) } else { Err(lock_lost(grant, &self.url)) };
        }
        let mut locks = self.locks();
        match locks.get_mut(&grant.name) {
            Some(rec)
                if mutant::active("renew_extends_lost_lease")
                    || (rec.live_holder(now) == Some(&grant.holder) && rec.counter == grant.token) =>
            {
                rec.expires = Some(now + ttl);
                Ok(())
            }
            _ => Err(lock_lost(grant, &self.url)),
        }
    }

    async fn release(&self, grant: &Grant) -> Result<()> {
        if mutant::active("release_skips_holder_check") {
            return self.force_release(&grant.name).await.map(drop);
        }
        let now = Instant::now();
        if grant.kind != HoldKind::Exclusive {
            if !self.shared_hold(grant, |r| r.release(grant, now), |s| s.release(grant, now)) {
                return Err(not_held(grant, &self.url));
            }
            self.wake().await;
            return Ok(());
        }
        {
            let mut locks = self.locks();
            match locks.get_mut(&grant.name) {
                Some(rec) if rec.live_holder(now) == Some(&grant.holder) && rec.counter == grant.token => {
                    rec.holder = None;
                    rec.expires = None;
                }
                _ => return Err(not_held(grant, &self.url)),
            }
        }
        self.wake().await;
        Ok(())
    }

    async fn force_release(&self, name: &str) -> Result<bool> {
        let now = Instant::now();
        let freed = match self.locks().get_mut(name) {
            Some(rec) if rec.live_holder(now).is_some() => {
                rec.holder = None;
                rec.expires = None;
                true
            }
            _ => false,
        };
        self.store.released.notify_waiters();
        Ok(freed)
    }

    async fn inspect(&self, name: &str) -> Result<LockInfo> {
        let now = Instant::now();
        let locks = self.locks();
        let rec = locks.get(name);
        let holder = rec.and_then(|r| r.live_holder(now)).map(str::to_string);
        Ok(LockInfo {
            remaining: holder.as_ref().and(rec.and_then(|r| r.expires)).map(|e| e - now),
            holder,
            last_token: rec.map(|r| r.counter).filter(|&c| c > 0),
            waiters: None,
        })
    }

    async fn available(&self, name: &str, permits: u32) -> Result<u32> {
        self.semaphores().entry(name.to_string()).or_default().available(name, &self.url, permits, Instant::now())
    }

    async fn fence_write(&self, resource: &str, token: u64, value: &[u8]) -> Result<()> {
        let mut fences = self.store.fences.lock().unwrap();
        let slot = fences.entry(resource.to_string()).or_default();
        if token < slot.0 && !mutant::active("fence_accepts_older_token") {
            return Err(fenced(resource, &self.url, token, slot.0));
        }
        *slot = (token, value.to_vec());
        Ok(())
    }

    async fn fence_read(&self, resource: &str) -> Result<(u64, Vec<u8>)> {
        Ok(self.store.fences.lock().unwrap().get(resource).cloned().unwrap_or_default())
    }
}

#[async_trait]
impl Records for MemoryBackend {
    type Waiter = MemoryWaiter;

    async fn take(&self, req: &AcquireRequest, waiter: &mut MemoryWaiter) -> Result<Attempt> {
        let now = Instant::now();
        match req.kind {
            HoldKind::Exclusive | HoldKind::Leader => {}
            HoldKind::Read | HoldKind::Write => {
                return Ok(self.rwlocks().entry(req.name.clone()).or_default().take(req, now, &mut waiter.writer_mark));
            }
            HoldKind::Permit { permits } => {
                return self.semaphores().entry(req.name.clone()).or_default().take(req, &self.url, permits, now);
            }
        }
        let mut locks = self.locks();
        let rec = locks.entry(req.name.clone()).or_default();
        if rec.live_holder(now).is_some_and(|h| h != req.holder) {
            return Ok(Attempt::Busy(Busy { holder_ttl: rec.expires.map(|e| e - now) }));
        }
        // A missing counter starts at the clock, like the persistent backends.
        rec.counter = if rec.counter == 0 { unix_micros() } else { rec.counter + 1 };
        rec.holder = Some(req.holder.clone());
        rec.expires = Some(now + req.ttl);
        Ok(Attempt::Acquired(req.grant(rec.counter, None)))
    }

    async fn wait_free(
        &self,
        req: &AcquireRequest,
        busy: &Busy,
        _waiter: &mut MemoryWaiter,
        deadline: Option<Instant>,
    ) -> Result<()> {
        let notified = self.store.released.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        let now = Instant::now();
        let may_take = match req.kind {
            HoldKind::Read | HoldKind::Write => {
                self.rwlocks().get_mut(&req.name).is_none_or(|r| r.may_take(req.kind, now))
            }
            HoldKind::Permit { .. } => self.semaphores().get(&req.name).is_none_or(|s| s.may_take(now)),
            _ => self.locks().get(&req.name).and_then(|r| r.live_holder(now)).is_none(),
        };
        if may_take {
            return Ok(());
        }
        let mut until = Instant::now() + busy.holder_ttl.unwrap_or(Duration::from_secs(1));
        if let Some(d) = deadline {
            until = until.min(d);
        }
        let _ = tokio::time::timeout_at(until, notified).await;
        Ok(())
    }

    fn left_behind(waiter: &MemoryWaiter) -> bool {
        waiter.writer_mark
    }

    async fn abandon(&self, req: &AcquireRequest) -> Result<()> {
        match req.kind {
            HoldKind::Read | HoldKind::Write => {
                self.rwlocks().get_mut(&req.name).into_iter().for_each(|r| r.abandon(req))
            }
            HoldKind::Permit { .. } => self.semaphores().get_mut(&req.name).into_iter().for_each(|s| s.abandon(req)),
            _ => return self.abandon_lock(req).await,
        }
        self.wake().await;
        Ok(())
    }
}

impl MemoryBackend {
    async fn abandon_lock(&self, req: &AcquireRequest) -> Result<()> {
        let mut locks = self.locks();
        if let Some(rec) = locks.get_mut(&req.name).filter(|r| r.holder.as_deref() == Some(&req.holder)) {
            rec.holder = None;
            rec.expires = None;
        }
        drop(locks);
        self.store.released.notify_waiters();
        Ok(())
    }
}
