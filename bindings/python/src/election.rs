//! `Election` and its `Observer`: campaign (a leadership comes back as a `Lease` whose fence is the term), proclaim,
//! leader and observe, each blocking and as an awaitable, over the bridge's election helpers.

use std::sync::Arc;
use std::time::Duration;

use fencelock::{Client, Error, ErrorKind, Leader, Result};
use fencelock_bridge::Observer;
use pyo3::prelude::*;

use crate::error::to_py;
use crate::fork::ForkLocal;
use crate::lease::PyLease;
use crate::options::{lock_options, wait_seconds};
use crate::runtime::{awaitable, wait};

/// A leader as Python gets it: `(value, term)`.
type LeaderTuple = (Vec<u8>, u64);

fn tuple(leader: Option<Leader>) -> Option<LeaderTuple> {
    leader.map(|l| (l.value, l.term))
}

/// The election `name` of one client.
#[pyclass(frozen, name = "Election", module = "fencelock._native")]
pub(crate) struct PyElection {
    client: ForkLocal<Client>,
    name: String,
}

impl PyElection {
    pub(crate) fn new(client: Client, name: String) -> Self {
        PyElection { client: ForkLocal::new(client), name }
    }

    fn get(&self, py: Python<'_>) -> PyResult<(Client, String)> {
        let client = self.client.get().cloned().map_err(|e| to_py(py, e))?;
        Ok((client, self.name.clone()))
    }
}

async fn campaign(
    client: Client,
    name: String,
    value: Vec<u8>,
    opts: Result<fencelock::LockOptions>,
    once: bool,
) -> Result<Option<PyLease>> {
    Ok(fencelock_bridge::campaign(&client, &name, &value, &opts?, once).await?.map(PyLease::new))
}

#[pymethods]
impl PyElection {
    /// The election's name.
    #[getter]
    fn name(&self) -> &str {
        &self.name
    }

    /// Campaigns with `value`, waiting up to `timeout` seconds (`None`: forever) while another leads; one attempt
    /// (`None` while another leads) when `once`.
    #[allow(clippy::too_many_arguments)] // one per keyword of the Python method
    fn campaign(
        &self,
        py: Python<'_>,
        value: Vec<u8>,
        ttl: f64,
        timeout: Option<f64>,
        watchdog: bool,
        owner: Option<String>,
        once: bool,
    ) -> PyResult<Option<PyLease>> {
        let (client, name) = self.get(py)?;
        let opts = lock_options(ttl, timeout, watchdog, owner, None);
        wait(py, campaign(client, name, value, opts, once))
    }

    /// `campaign` as an awaitable.
    #[allow(clippy::too_many_arguments)] // one per keyword of the Python method
    fn campaign_async<'py>(
        &self,
        py: Python<'py>,
        value: Vec<u8>,
        ttl: f64,
        timeout: Option<f64>,
        watchdog: bool,
        owner: Option<String>,
        once: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let (client, name) = self.get(py)?;
        let opts = lock_options(ttl, timeout, watchdog, owner, None);
        awaitable(py, campaign(client, name, value, opts, once))
    }

    /// Replaces the value of `leadership` (a lease this election's campaign returned), keeping its term.
    fn proclaim(&self, py: Python<'_>, leadership: &PyLease, value: Vec<u8>) -> PyResult<()> {
        let ((client, name), lease) = (self.get(py)?, leadership.get(py)?);
        wait(py, async move { fencelock_bridge::proclaim(&client, &name, &lease, &value).await })
    }

    /// `proclaim` as an awaitable.
    fn proclaim_async<'py>(
        &self,
        py: Python<'py>,
        leadership: &PyLease,
        value: Vec<u8>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let ((client, name), lease) = (self.get(py)?, leadership.get(py)?);
        awaitable(py, async move { fencelock_bridge::proclaim(&client, &name, &lease, &value).await })
    }

    /// `(value, term)` of the current leader, or `None`.
    fn leader(&self, py: Python<'_>) -> PyResult<Option<LeaderTuple>> {
        let (client, name) = self.get(py)?;
        wait(py, async move { fencelock_bridge::leader(&client, &name).await.map(tuple) })
    }

    /// `leader` as an awaitable.
    fn leader_async<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let (client, name) = self.get(py)?;
        awaitable(py, async move { fencelock_bridge::leader(&client, &name).await.map(tuple) })
    }

    /// A new observer of the changes of leader, starting with the current one.
    fn observe(&self, py: Python<'_>) -> PyResult<PyObserver> {
        let (client, name) = self.get(py)?;
        let observer = Observer::new(&client, &name);
        Ok(PyObserver { observer: ForkLocal::new(Arc::new(observer)), name })
    }
}

/// The changes of leader of one election, in order; `next` takes the next one.
#[pyclass(frozen, name = "Observer", module = "fencelock._native")]
pub(crate) struct PyObserver {
    observer: ForkLocal<Arc<Observer>>,
    name: String,
}

impl PyObserver {
    fn get(&self, py: Python<'_>) -> PyResult<Arc<Observer>> {
        self.observer.get().cloned().map_err(|e| to_py(py, e))
    }
}

/// The observer's next change within `limit`; `Timeout` naming the election after it. Dropping the wait loses no
/// change: the stream keeps its place.
async fn next(observer: Arc<Observer>, name: String, limit: Option<Duration>) -> Result<Option<LeaderTuple>> {
    let Some(limit) = limit else {
        return observer.next().await.map(tuple);
    };
    match tokio::time::timeout(limit, observer.next()).await {
        Ok(change) => change.map(tuple),
        Err(_) => Err(Error::new(
            ErrorKind::Timeout,
            format!("no change of leader of election {name:?} within {:.3}s", limit.as_secs_f64()),
        )),
    }
}

#[pymethods]
impl PyObserver {
    /// The next change, `(value, term)` or `None` for no leader, waiting up to `timeout` seconds (`None`: no limit).
    fn next(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Option<LeaderTuple>> {
        let observer = self.get(py)?;
        // As queue.Queue.get: a negative timeout does not wait (and NaN is still refused).
        let limit = timeout
            .map(|t| wait_seconds("timeout", if t < 0.0 { 0.0 } else { t }))
            .transpose()
            .map_err(|e| to_py(py, e))?;
        wait(py, next(observer, self.name.clone(), limit))
    }

    /// The next change as an awaitable (asyncio's own timeouts bound it).
    fn next_async<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let observer = self.get(py)?;
        awaitable(py, next(observer, self.name.clone(), None))
    }
}
