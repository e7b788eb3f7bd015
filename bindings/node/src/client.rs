//! `Client` for JS: connect, lock (cancellable), tryLock, hold (cancellable) / tryHold for read-write locks and
//! semaphores by the kind's name, available, campaign (cancellable) / tryCampaign / proclaim / leader / observe for
//! elections, fence, inspect, forceRelease, metrics, close.

use std::fmt;

use fencelock::{Client, MetricsNames};
use napi::bindgen_prelude::{BigInt, Buffer, Env, PromiseRaw, Result};
use napi_derive::napi;

use crate::cancel;
use crate::election::{LeaderInfo, NativeObserver, leader_info};
use crate::error::joined;
use crate::fence::NativeFence;
use crate::lease::NativeLease;
use crate::options::{ConnectOpts, LockOpts, client_options, lock_options};
use crate::runtime::{spawn_promise, spawn_task};

/// Connects to `url` (see the README for the schemes); without one, to `FENCELOCK_URL`, else the SQLite file
/// `fencelock.db` in the working directory.
#[napi]
pub fn connect(env: &Env, url: Option<String>, opts: Option<ConnectOpts>) -> Result<PromiseRaw<'_, NativeClient>> {
    let opts = client_options(opts)?;
    let named = opts.metrics && opts.metrics_names != MetricsNames::None;
    let url = url.unwrap_or_else(fencelock::default_url);
    spawn_promise(env, async move { Ok(NativeClient { client: Client::connect_with(&url, &opts).await?, named }) })
}

/// What the backend can do.
#[napi(object)]
#[derive(Debug)]
pub struct Capability {
    pub fencing: bool,
    pub native_wait: bool,
    pub fair: bool,
    pub session_bound: bool,
    pub rw_lock: bool,
    pub semaphore: bool,
    pub election: bool,
}

/// What `inspect` finds about a lock.
#[napi(object)]
#[derive(Debug)]
pub struct LockInfo {
    pub holder: Option<String>,
    pub remaining_ms: Option<f64>,
    pub last_token: Option<BigInt>,
}

/// A connection to one lock backend.
#[napi]
pub struct NativeClient {
    client: Client,
    /// Whether lock names may get series of their own (`metricsNames` given, metrics on).
    named: bool,
}

impl fmt::Debug for NativeClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NativeClient").field("url", &self.client.url()).finish()
    }
}

#[napi]
impl NativeClient {
    /// The backend URL without secrets.
    #[napi(getter)]
    pub fn url(&self) -> String {
        self.client.url().to_string()
    }

    /// This client's id, the first half of every holder id it writes.
    #[napi(getter)]
    pub fn id(&self) -> String {
        self.client.id().to_string()
    }

    #[napi]
    pub fn capability(&self) -> Capability {
        let c = self.client.capability();
        Capability {
            fencing: c.fencing,
            native_wait: c.native_wait,
            fair: c.fair,
            session_bound: c.session_bound,
            rw_lock: c.rw_lock,
            semaphore: c.semaphore,
            election: c.election,
        }
    }

    /// Takes `name`, waiting up to `timeoutMs`; `cancel(cancelId)` aborts the wait and leaves no lock behind.
    #[napi]
    pub fn lock<'env>(
        &self,
        env: &'env Env,
        name: String,
        opts: Option<LockOpts>,
        cancel_id: Option<u32>,
    ) -> Result<PromiseRaw<'env, NativeLease>> {
        let client = self.client.clone();
        let opts = lock_options(opts)?;
        let task = spawn_task(async move { client.lock(&name, &opts).await })?;
        let registered = cancel::register(cancel_id, task.abort_handle());
        env.spawn_future(async move {
            let lease = joined(task.await, "lock")?;
            drop(registered);
            Ok(NativeLease::new(lease))
        })
    }

    /// One attempt: the lease, or null if someone else holds `name`.
    #[napi]
    pub fn try_lock<'env>(
        &self,
        env: &'env Env,
        name: String,
        opts: Option<LockOpts>,
    ) -> Result<PromiseRaw<'env, Option<NativeLease>>> {
        let client = self.client.clone();
        let opts = lock_options(opts)?;
        spawn_promise(env, async move { Ok(client.try_lock(&name, &opts).await?.map(NativeLease::new)) })
    }

    /// A hold of `kind` (`lock`, `read`, `write`, or `permit` of the semaphore of `permits`), waiting up to
    /// `timeoutMs`; `cancel(cancelId)` aborts the wait and leaves no hold behind.
    #[napi]
    pub fn hold<'env>(
        &self,
        env: &'env Env,
        name: String,
        kind: String,
        permits: i64,
        opts: Option<LockOpts>,
        cancel_id: Option<u32>,
    ) -> Result<PromiseRaw<'env, NativeLease>> {
        let client = self.client.clone();
        let opts = lock_options(opts)?;
        let task = spawn_task(async move {
            let kind = fencelock_bridge::hold_kind(&name, &kind, permits)?;
            let lease = fencelock_bridge::hold(&client, &name, kind, &opts, false).await?;
            Ok(lease.expect("a waiting acquire returns a lease or an error"))
        })?;
        let registered = cancel::register(cancel_id, task.abort_handle());
        env.spawn_future(async move {
            let lease = joined(task.await, "the acquire")?;
            drop(registered);
            Ok(NativeLease::new(lease))
        })
    }

    /// One attempt at a hold of `kind`: the lease, or null while it is taken.
    #[napi]
    pub fn try_hold<'env>(
        &self,
        env: &'env Env,
        name: String,
        kind: String,
        permits: i64,
        opts: Option<LockOpts>,
    ) -> Result<PromiseRaw<'env, Option<NativeLease>>> {
        let client = self.client.clone();
        let opts = lock_options(opts)?;
        spawn_promise(env, async move {
            let kind = fencelock_bridge::hold_kind(&name, &kind, permits)?;
            Ok(fencelock_bridge::hold(&client, &name, kind, &opts, true).await?.map(NativeLease::new))
        })
    }

    /// Permits of the semaphore `name` of `permits` not held now.
    #[napi]
    pub fn available<'env>(&self, env: &'env Env, name: String, permits: i64) -> Result<PromiseRaw<'env, u32>> {
        let client = self.client.clone();
        spawn_promise(env, async move { fencelock_bridge::available(&client, &name, permits).await })
    }

    /// Campaigns in the election `name` with `value`, waiting up to `timeoutMs` while another leads; the leadership
    /// is a lease whose fence is the term. `cancel(cancelId)` aborts the wait and leaves no candidate behind.
    #[napi]
    pub fn campaign<'env>(
        &self,
        env: &'env Env,
        name: String,
        value: Buffer,
        opts: Option<LockOpts>,
        cancel_id: Option<u32>,
    ) -> Result<PromiseRaw<'env, NativeLease>> {
        let (client, value) = (self.client.clone(), value.to_vec());
        let opts = lock_options(opts)?;
        let task = spawn_task(async move {
            let lease = fencelock_bridge::campaign(&client, &name, &value, &opts, false).await?;
            Ok(lease.expect("a waiting campaign returns a leadership or an error"))
        })?;
        let registered = cancel::register(cancel_id, task.abort_handle());
        env.spawn_future(async move {
            let lease = joined(task.await, "the campaign")?;
            drop(registered);
            Ok(NativeLease::new(lease))
        })
    }

    /// One attempt at a campaign: the leadership, or null while another leads.
    #[napi]
    pub fn try_campaign<'env>(
        &self,
        env: &'env Env,
        name: String,
        value: Buffer,
        opts: Option<LockOpts>,
    ) -> Result<PromiseRaw<'env, Option<NativeLease>>> {
        let (client, value) = (self.client.clone(), value.to_vec());
        let opts = lock_options(opts)?;
        spawn_promise(env, async move {
            Ok(fencelock_bridge::campaign(&client, &name, &value, &opts, true).await?.map(NativeLease::new))
        })
    }

    /// Replaces the value of `leadership` (a lease from `campaign` in the election `name`), keeping its term.
    #[napi]
    pub fn proclaim<'env>(
        &self,
        env: &'env Env,
        name: String,
        leadership: &NativeLease,
        value: Buffer,
    ) -> Result<PromiseRaw<'env, ()>> {
        let (client, lease, value) = (self.client.clone(), leadership.shared(), value.to_vec());
        spawn_promise(env, async move { fencelock_bridge::proclaim(&client, &name, &lease, &value).await })
    }

    /// Who leads the election `name` now, or null.
    #[napi]
    pub fn leader<'env>(&self, env: &'env Env, name: String) -> Result<PromiseRaw<'env, Option<LeaderInfo>>> {
        let client = self.client.clone();
        spawn_promise(env, async move { Ok(leader_info(fencelock_bridge::leader(&client, &name).await?)) })
    }

    /// An observer of the election `name`: its first `next` is the leader now, then each change in order.
    #[napi]
    pub fn observe(&self, name: String) -> NativeObserver {
        NativeObserver::new(fencelock_bridge::Observer::new(&self.client, &name), name)
    }

    /// The fenced register `resource`, stored in this client's backend.
    #[napi]
    pub fn fence(&self, resource: String) -> NativeFence {
        NativeFence::new(self.client.fence(&resource))
    }

    /// Who holds `name`, for how long, and the last token handed out.
    #[napi]
    pub fn inspect<'env>(&self, env: &'env Env, name: String) -> Result<PromiseRaw<'env, LockInfo>> {
        let client = self.client.clone();
        spawn_promise(env, async move {
            let info = client.inspect(&name).await?;
            Ok(LockInfo {
                holder: info.holder,
                remaining_ms: info.remaining.map(|d| d.as_secs_f64() * 1000.0),
                last_token: info.last_token.map(BigInt::from),
            })
        })
    }

    /// Deletes the record of `name` whoever holds it (an operator's tool); true if there was one.
    #[napi]
    pub fn force_release<'env>(&self, env: &'env Env, name: String) -> Result<PromiseRaw<'env, bool>> {
        let client = self.client.clone();
        spawn_promise(env, async move { client.force_release(&name).await })
    }

    /// Number of lock names this client holds or queues for locally.
    #[napi]
    pub fn local_entries(&self) -> u32 {
        self.client.local_entries() as u32
    }

    /// This client's metrics now: core's `MetricsSnapshot` as JSON.
    #[napi]
    pub fn metrics_json(&self) -> String {
        self.client.metrics().to_json()
    }

    /// Core's metric families of this client's snapshot now, as JSON (`fencelock::metrics::families_json`).
    #[napi]
    pub fn metrics_families_json(&self) -> String {
        crate::metrics::families(&self.client, self.named)
    }

    /// Releases every lease, waits for background cleanups and closes the connections.
    #[napi]
    pub fn close<'env>(&self, env: &'env Env) -> Result<PromiseRaw<'env, ()>> {
        let client = self.client.clone();
        spawn_promise(env, async move {
            client.close().await;
            Ok(())
        })
    }
}
