//! `Client`: connect, lock, try_lock, hold / try_hold (read-write locks and semaphores by the kind's name), available,
//! election, fence, inspect, force_release, metrics, close — each blocking (GIL released, interruptible) and as an
//! asyncio awaitable (`*_async`).

use fencelock::{Client, HoldKind, LockInfo, MetricsNames, Result};
use pyo3::prelude::*;

use crate::election::PyElection;
use crate::error::to_py;
use crate::fence::PyFence;
use crate::fork::ForkLocal;
use crate::lease::PyLease;
use crate::options::{client_options, lock_options, names_policy};
use crate::runtime::{awaitable, wait};

/// `inspect` as a tuple: `(holder, remaining seconds, last token)`.
type Info = (Option<String>, Option<f64>, Option<u64>);

fn info(i: LockInfo) -> Info {
    (i.holder, i.remaining.map(|d| d.as_secs_f64()), i.last_token)
}

/// `capability` as a tuple, in `Capability`'s field order.
type Caps = (bool, bool, bool, bool, bool, bool, bool);

/// `connect`'s options as Python passes them (the package validated their types).
pub(crate) struct Connect {
    url: Option<String>,
    connect_timeout: Option<f64>,
    request_timeout: Option<f64>,
    metrics: bool,
    metrics_names: MetricsNames,
}

async fn open(c: Connect) -> Result<PyClient> {
    let Connect { url, connect_timeout, request_timeout, metrics, metrics_names } = c;
    let opts = client_options(connect_timeout, request_timeout)?.metrics(metrics).metrics_names(metrics_names);
    let url = url.unwrap_or_else(fencelock::default_url);
    let client = Client::connect_with(&url, &opts).await?;
    Ok(PyClient { client: ForkLocal::new(client) })
}

/// Connects to `url` (`FENCELOCK_URL`, else `sqlite:fencelock.db`, if `None`). Timeouts in seconds;
/// `metrics_names`: `None` for no per-name series, else the names, all of them if `all_names`.
#[pyfunction]
#[pyo3(signature = (url, connect_timeout, request_timeout, metrics, metrics_names, all_names))]
pub(crate) fn connect(
    py: Python<'_>,
    url: Option<String>,
    connect_timeout: Option<f64>,
    request_timeout: Option<f64>,
    metrics: bool,
    metrics_names: Option<Vec<String>>,
    all_names: bool,
) -> PyResult<PyClient> {
    let metrics_names = names_policy(metrics_names, all_names);
    wait(py, open(Connect { url, connect_timeout, request_timeout, metrics, metrics_names }))
}

/// `connect` as an awaitable.
#[pyfunction]
#[pyo3(signature = (url, connect_timeout, request_timeout, metrics, metrics_names, all_names))]
pub(crate) fn connect_async(
    py: Python<'_>,
    url: Option<String>,
    connect_timeout: Option<f64>,
    request_timeout: Option<f64>,
    metrics: bool,
    metrics_names: Option<Vec<String>>,
    all_names: bool,
) -> PyResult<Bound<'_, PyAny>> {
    let metrics_names = names_policy(metrics_names, all_names);
    awaitable(py, open(Connect { url, connect_timeout, request_timeout, metrics, metrics_names }))
}

/// The URL `connect(None)` uses.
#[pyfunction]
pub(crate) fn default_url() -> String {
    fencelock::default_url()
}

/// A connection to one lock backend.
#[pyclass(frozen, name = "Client", module = "fencelock._native")]
pub(crate) struct PyClient {
    client: ForkLocal<Client>,
}

impl PyClient {
    fn get(&self, py: Python<'_>) -> PyResult<Client> {
        self.client.get().cloned().map_err(|e| to_py(py, e))
    }
}

async fn acquire(
    client: Client,
    name: String,
    opts: Result<fencelock::LockOptions>,
    once: bool,
) -> Result<Option<PyLease>> {
    Ok(fencelock_bridge::hold(&client, &name, HoldKind::Exclusive, &opts?, once).await?.map(PyLease::new))
}

/// A hold of the kind named `kind` (`lock`, `read`, `write`, `permit` of `permits`): one attempt when `once`.
async fn hold(
    client: Client,
    name: String,
    kind: String,
    permits: i64,
    opts: Result<fencelock::LockOptions>,
    once: bool,
) -> Result<Option<PyLease>> {
    let kind = fencelock_bridge::hold_kind(&name, &kind, permits)?;
    Ok(fencelock_bridge::hold(&client, &name, kind, &opts?, once).await?.map(PyLease::new))
}

#[pymethods]
impl PyClient {
    /// This client's id (the first half of every holder id it writes).
    #[getter]
    fn id(&self, py: Python<'_>) -> PyResult<String> {
        Ok(self.get(py)?.id().to_string())
    }

    /// The backend URL without secrets.
    #[getter]
    fn url(&self, py: Python<'_>) -> PyResult<String> {
        Ok(self.get(py)?.url().to_string())
    }

    /// `(fencing, native_wait, fair, session_bound, rw_lock, semaphore, election)`.
    fn capability(&self, py: Python<'_>) -> PyResult<Caps> {
        let c = self.get(py)?.capability();
        Ok((c.fencing, c.native_wait, c.fair, c.session_bound, c.rw_lock, c.semaphore, c.election))
    }

    /// This client's metrics snapshot as core's JSON (the package parses it into a dict).
    fn metrics_json(&self, py: Python<'_>) -> PyResult<String> {
        Ok(self.get(py)?.metrics().to_json())
    }

    /// The snapshot as core's metric families, JSON: what exporter adapters loop over.
    fn metrics_families_json(&self, py: Python<'_>) -> PyResult<String> {
        Ok(fencelock::metrics::families_json(&self.get(py)?.metrics().families()))
    }

    /// Lock names this client holds or queues for locally.
    fn local_entries(&self, py: Python<'_>) -> PyResult<usize> {
        Ok(self.get(py)?.local_entries())
    }

    /// Takes `name`, waiting up to `timeout` seconds (`None`: forever).
    #[allow(clippy::too_many_arguments)] // one per keyword of the Python method
    fn lock(
        &self,
        py: Python<'_>,
        name: String,
        ttl: f64,
        timeout: Option<f64>,
        watchdog: bool,
        owner: Option<String>,
        fair: Option<bool>,
    ) -> PyResult<PyLease> {
        let (client, opts) = (self.get(py)?, lock_options(ttl, timeout, watchdog, owner, fair));
        let lease = wait(py, acquire(client, name, opts, false))?;
        Ok(lease.expect("a waiting acquire returns a lease or an error"))
    }

    /// `lock` as an awaitable.
    #[allow(clippy::too_many_arguments)] // one per keyword of the Python method
    fn lock_async<'py>(
        &self,
        py: Python<'py>,
        name: String,
        ttl: f64,
        timeout: Option<f64>,
        watchdog: bool,
        owner: Option<String>,
        fair: Option<bool>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let (client, opts) = (self.get(py)?, lock_options(ttl, timeout, watchdog, owner, fair));
        awaitable(py, async move { Ok(acquire(client, name, opts, false).await?.expect("a lease or an error")) })
    }

    /// One attempt: the lease, or `None` if another holds `name`.
    fn try_lock(
        &self,
        py: Python<'_>,
        name: String,
        ttl: f64,
        watchdog: bool,
        owner: Option<String>,
        fair: Option<bool>,
    ) -> PyResult<Option<PyLease>> {
        let (client, opts) = (self.get(py)?, lock_options(ttl, None, watchdog, owner, fair));
        wait(py, acquire(client, name, opts, true))
    }

    /// `try_lock` as an awaitable.
    fn try_lock_async<'py>(
        &self,
        py: Python<'py>,
        name: String,
        ttl: f64,
        watchdog: bool,
        owner: Option<String>,
        fair: Option<bool>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let (client, opts) = (self.get(py)?, lock_options(ttl, None, watchdog, owner, fair));
        awaitable(py, acquire(client, name, opts, true))
    }

    /// A hold of `kind` (`lock`, `read`, `write`, or `permit` of the semaphore of `permits`), waiting up to
    /// `timeout` seconds (`None`: forever).
    #[allow(clippy::too_many_arguments)] // one per keyword of the Python method
    fn hold(
        &self,
        py: Python<'_>,
        name: String,
        kind: String,
        permits: i64,
        ttl: f64,
        timeout: Option<f64>,
        watchdog: bool,
        owner: Option<String>,
        fair: Option<bool>,
    ) -> PyResult<PyLease> {
        let (client, opts) = (self.get(py)?, lock_options(ttl, timeout, watchdog, owner, fair));
        let lease = wait(py, hold(client, name, kind, permits, opts, false))?;
        Ok(lease.expect("a waiting acquire returns a lease or an error"))
    }

    /// `hold` as an awaitable.
    #[allow(clippy::too_many_arguments)] // one per keyword of the Python method
    fn hold_async<'py>(
        &self,
        py: Python<'py>,
        name: String,
        kind: String,
        permits: i64,
        ttl: f64,
        timeout: Option<f64>,
        watchdog: bool,
        owner: Option<String>,
        fair: Option<bool>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let (client, opts) = (self.get(py)?, lock_options(ttl, timeout, watchdog, owner, fair));
        awaitable(
            py,
            async move { Ok(hold(client, name, kind, permits, opts, false).await?.expect("a lease or an error")) },
        )
    }

    /// One attempt at a hold of `kind`: the lease, or `None` while it is taken.
    #[allow(clippy::too_many_arguments)] // one per keyword of the Python method
    fn try_hold(
        &self,
        py: Python<'_>,
        name: String,
        kind: String,
        permits: i64,
        ttl: f64,
        watchdog: bool,
        owner: Option<String>,
        fair: Option<bool>,
    ) -> PyResult<Option<PyLease>> {
        let (client, opts) = (self.get(py)?, lock_options(ttl, None, watchdog, owner, fair));
        wait(py, hold(client, name, kind, permits, opts, true))
    }

    /// `try_hold` as an awaitable.
    #[allow(clippy::too_many_arguments)] // one per keyword of the Python method
    fn try_hold_async<'py>(
        &self,
        py: Python<'py>,
        name: String,
        kind: String,
        permits: i64,
        ttl: f64,
        watchdog: bool,
        owner: Option<String>,
        fair: Option<bool>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let (client, opts) = (self.get(py)?, lock_options(ttl, None, watchdog, owner, fair));
        awaitable(py, hold(client, name, kind, permits, opts, true))
    }

    /// Permits of the semaphore `name` of `permits` not held now.
    fn available(&self, py: Python<'_>, name: String, permits: i64) -> PyResult<u32> {
        let client = self.get(py)?;
        wait(py, async move { fencelock_bridge::available(&client, &name, permits).await })
    }

    /// `available` as an awaitable.
    fn available_async<'py>(&self, py: Python<'py>, name: String, permits: i64) -> PyResult<Bound<'py, PyAny>> {
        let client = self.get(py)?;
        awaitable(py, async move { fencelock_bridge::available(&client, &name, permits).await })
    }

    /// The fenced register `resource` in this client's backend.
    fn fence(&self, py: Python<'_>, resource: &str) -> PyResult<PyFence> {
        Ok(PyFence::new(self.get(py)?.fence(resource)))
    }

    /// The election `name` in this client's backend.
    fn election(&self, py: Python<'_>, name: String) -> PyResult<PyElection> {
        Ok(PyElection::new(self.get(py)?, name))
    }

    /// `(holder, remaining seconds, last token)` of `name`.
    fn inspect(&self, py: Python<'_>, name: String) -> PyResult<Info> {
        let client = self.get(py)?;
        wait(py, async move { client.inspect(&name).await.map(info) })
    }

    /// `inspect` as an awaitable.
    fn inspect_async<'py>(&self, py: Python<'py>, name: String) -> PyResult<Bound<'py, PyAny>> {
        let client = self.get(py)?;
        awaitable(py, async move { client.inspect(&name).await.map(info) })
    }

    /// Deletes the record of `name` whoever holds it; whether there was one.
    fn force_release(&self, py: Python<'_>, name: String) -> PyResult<bool> {
        let client = self.get(py)?;
        wait(py, async move { client.force_release(&name).await })
    }

    /// `force_release` as an awaitable.
    fn force_release_async<'py>(&self, py: Python<'py>, name: String) -> PyResult<Bound<'py, PyAny>> {
        let client = self.get(py)?;
        awaitable(py, async move { client.force_release(&name).await })
    }

    /// Releases every lease of this client and closes its connections.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let client = self.get(py)?;
        wait(py, async move {
            client.close().await;
            Ok(())
        })
    }

    /// `close` as an awaitable.
    fn close_async<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let client = self.get(py)?;
        awaitable(py, async move {
            client.close().await;
            Ok(())
        })
    }
}
