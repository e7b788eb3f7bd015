//! `fencelock._native`: the PyO3 glue behind the `fencelock` Python package (DESIGN.md §1, §4).
//!
//! It converts types, maps errors and bridges the runtime; the typed wrapper in `python/fencelock/` adds the Python
//! idioms (context managers, default owners, the `threading.Lock`-style mutex). Every blocking call releases the GIL
//! and stays interruptible by Ctrl-C; every `*_async` method returns an asyncio awaitable. Both run on the bridge's
//! one fork-safe runtime. Files mirror the core modules they wrap.

mod client;
mod election;
mod error;
mod fence;
mod fork;
mod lease;
mod options;
mod runtime;

use pyo3::prelude::*;

/// The native module. Private: use the `fencelock` package.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("NativeError", m.py().get_type::<error::NativeError>())?;
    m.add_function(wrap_pyfunction!(error::set_error_factory, m)?)?;
    m.add_function(wrap_pyfunction!(error::retryable, m)?)?;
    m.add_function(wrap_pyfunction!(client::connect, m)?)?;
    m.add_function(wrap_pyfunction!(client::connect_async, m)?)?;
    m.add_function(wrap_pyfunction!(client::default_url, m)?)?;
    m.add_function(wrap_pyfunction!(runtime::quiesce, m)?)?;
    m.add_class::<client::PyClient>()?;
    m.add_class::<lease::PyLease>()?;
    m.add_class::<fence::PyFence>()?;
    m.add_class::<election::PyElection>()?;
    m.add_class::<election::PyObserver>()?;
    m.add("DEFAULT_TTL", fencelock::DEFAULT_TTL.as_secs_f64())?;
    m.add("MAX_NAME_BYTES", fencelock::MAX_NAME_BYTES)?;
    m.add("MAX_PERMITS", fencelock::MAX_PERMITS)?;
    m.add("MAX_VALUE_BYTES", fencelock::MAX_VALUE_BYTES)?;
    Ok(())
}
