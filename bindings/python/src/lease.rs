//! `Lease`: fence token, renew, release and the lost signal (wait for it, blocking or awaitable, or register a
//! callback).

use std::sync::Arc;

use fencelock::{Lease, LeaseEnd};
use pyo3::prelude::*;

use crate::error::to_py;
use crate::fork::ForkLocal;
use crate::options::{seconds, wait_seconds};
use crate::runtime::{awaitable, wait};

/// A held lock.
#[pyclass(frozen, name = "Lease", module = "fencelock._native")]
pub(crate) struct PyLease {
    lease: ForkLocal<Arc<Lease>>,
    // Readable whatever happens to the lease (after release, in a forked child).
    name: String,
    fence: u64,
    holder: String,
    slot: Option<u32>,
}

impl PyLease {
    pub(crate) fn new(lease: Lease) -> Self {
        PyLease {
            name: lease.name().to_string(),
            fence: lease.fence(),
            holder: lease.holder().to_string(),
            slot: lease.slot(),
            lease: ForkLocal::new(Arc::new(lease)),
        }
    }

    pub(crate) fn get(&self, py: Python<'_>) -> PyResult<Arc<Lease>> {
        self.lease.get().cloned().map_err(|e| to_py(py, e))
    }
}

#[pymethods]
impl PyLease {
    /// The lock name.
    #[getter]
    fn name(&self) -> &str {
        &self.name
    }

    /// The fencing token (readable after release).
    #[getter]
    fn fence(&self) -> u64 {
        self.fence
    }

    /// The holder id written to the backend, `<client uuid>:<owner>`.
    #[getter]
    fn holder(&self) -> &str {
        &self.holder
    }

    /// A semaphore permit's slot, 0…permits−1; `None` for other holds.
    #[getter]
    fn slot(&self) -> Option<u32> {
        self.slot
    }

    /// Seconds left before the lease's validity ends unless renewed.
    fn remaining(&self, py: Python<'_>) -> PyResult<f64> {
        Ok(self.get(py)?.remaining().as_secs_f64())
    }

    /// Whether the lease is still ours by our own clock.
    fn is_valid(&self, py: Python<'_>) -> PyResult<bool> {
        Ok(self.get(py)?.is_valid())
    }

    /// Whether the lost signal has fired; core fires it here if the validity has passed without a renewal.
    fn is_lost(&self, py: Python<'_>) -> PyResult<bool> {
        Ok(self.get(py)?.is_lost())
    }

    /// Why the lease was lost, as core reports it; `None` while it is not.
    fn lost_reason(&self, py: Python<'_>) -> PyResult<Option<String>> {
        Ok(self.get(py)?.lost_reason())
    }

    /// Extends the lease to `ttl` seconds from now (its current TTL if `None`).
    fn renew(&self, py: Python<'_>, ttl: Option<f64>) -> PyResult<()> {
        let lease = self.get(py)?;
        wait(py, async move { lease.renew(ttl.map(|t| seconds("ttl", t)).transpose()?).await })
    }

    /// `renew` as an awaitable.
    fn renew_async<'py>(&self, py: Python<'py>, ttl: Option<f64>) -> PyResult<Bound<'py, PyAny>> {
        let lease = self.get(py)?;
        awaitable(py, async move { lease.renew(ttl.map(|t| seconds("ttl", t)).transpose()?).await })
    }

    /// Releases this hold.
    fn release(&self, py: Python<'_>) -> PyResult<()> {
        let lease = self.get(py)?;
        wait(py, async move { lease.release().await })
    }

    /// `release` as an awaitable.
    fn release_async<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let lease = self.get(py)?;
        awaitable(py, async move { lease.release().await })
    }

    /// Blocks until the lease is lost or released, or `timeout` seconds pass (`None`: no limit); whether it was lost.
    fn wait_lost(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<bool> {
        let lease = self.get(py)?;
        // As threading.Event.wait: a negative timeout does not wait (and NaN is still refused).
        let timeout = timeout
            .map(|t| wait_seconds("timeout", if t < 0.0 { 0.0 } else { t }))
            .transpose()
            .map_err(|e| to_py(py, e))?;
        let lost = lease.lost();
        wait(py, async move {
            Ok(match timeout {
                Some(t) => tokio::time::timeout(t, lost).await,
                None => Ok(lost.await),
            }
            .is_ok_and(|end| matches!(end, LeaseEnd::Lost(_))))
        })
    }

    /// Resolves to whether the lease was lost, once it is lost or released.
    fn wait_lost_async<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let lost = self.get(py)?.lost();
        awaitable(py, async move { Ok(matches!(lost.await, LeaseEnd::Lost(_))) })
    }

    /// Calls `callback()` once, on a runtime thread with the GIL, when the lease is lost; never if it is released
    /// first. The Python layer hands it on to a thread or event loop of its own.
    fn on_lost(&self, py: Python<'_>, callback: Py<PyAny>) -> PyResult<()> {
        let lost = self.get(py)?.lost();
        fencelock_bridge::spawn(async move {
            if let LeaseEnd::Lost(_) = lost.await {
                // The GIL may be busy: wait for it on a blocking-pool thread, not a worker.
                let _ = crate::runtime::spawn_python(move || {
                    Python::attach(|py| {
                        if let Err(e) = callback.call0(py) {
                            e.write_unraisable(py, Some(callback.bind(py)));
                        }
                    })
                })
                .await;
            }
        })
        .map_err(|e| to_py(py, e))?;
        Ok(())
    }
}
