//! `Fence`: the fenced register of a resource (write with a token, read the newest token and value).

use fencelock::Fence;
use pyo3::prelude::*;

use crate::error::to_py;
use crate::fork::ForkLocal;
use crate::runtime::{awaitable, wait};

/// A fenced register named by a resource.
#[pyclass(frozen, name = "Fence", module = "fencelock._native")]
pub(crate) struct PyFence {
    fence: ForkLocal<Fence>,
    resource: String,
}

impl PyFence {
    pub(crate) fn new(fence: Fence) -> Self {
        PyFence { resource: fence.resource().to_string(), fence: ForkLocal::new(fence) }
    }

    fn get(&self, py: Python<'_>) -> PyResult<Fence> {
        self.fence.get().cloned().map_err(|e| to_py(py, e))
    }
}

#[pymethods]
impl PyFence {
    /// The resource name.
    #[getter]
    fn resource(&self) -> &str {
        &self.resource
    }

    /// Stores `value` if `token` ≥ the highest token accepted so far; `Fenced` if older.
    fn write(&self, py: Python<'_>, token: u64, value: Vec<u8>) -> PyResult<()> {
        let fence = self.get(py)?;
        wait(py, async move { fence.write(token, &value).await })
    }

    /// `write` as an awaitable.
    fn write_async<'py>(&self, py: Python<'py>, token: u64, value: Vec<u8>) -> PyResult<Bound<'py, PyAny>> {
        let fence = self.get(py)?;
        awaitable(py, async move { fence.write(token, &value).await })
    }

    /// `(token, value)`: the highest accepted token and its value; `(0, b"")` if never written.
    fn read(&self, py: Python<'_>) -> PyResult<(u64, Vec<u8>)> {
        let fence = self.get(py)?;
        wait(py, async move { fence.read().await })
    }

    /// `read` as an awaitable.
    fn read_async<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let fence = self.get(py)?;
        awaitable(py, async move { fence.read().await })
    }
}
