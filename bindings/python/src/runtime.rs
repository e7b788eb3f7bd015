//! Waiting for core futures from Python, on the bridge's one runtime (no runtime of our own: the bridge's is
//! rebuilt after `fork()`, TOOLCHAIN.md gotchas 4, 6 and 7).
//!
//! - [`wait`]: blocking calls, through the bridge's sliced wait: the future runs on the calling thread with the GIL
//!   released, and signal handlers run between slices, so Ctrl-C interrupts a `lock()` promptly. On an exception the
//!   future is dropped; core futures are cancel-safe, so an interrupted acquire leaves no lock behind.
//! - [`awaitable`]: asyncio. pyo3-async-runtimes' generic adapter over [`BridgeRuntime`]; cancelling the asyncio future
//!   drops the Rust future, with the same cancel safety.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use pyo3::IntoPyObjectExt;
use pyo3::prelude::*;
use pyo3_async_runtimes::TaskLocals;
use pyo3_async_runtimes::generic::{self, ContextExt, JoinError, Runtime};

use crate::error::to_py;

/// Runtime threads inside (or about to enter) Python right now: asyncio completions and lost callbacks.
static IN_PYTHON: AtomicUsize = AtomicUsize::new(0);

/// Runs `f`, which takes the GIL, on the blocking pool, counted so that [`quiesce`] can wait for it.
pub(crate) fn spawn_python<F: FnOnce() + Send + 'static>(f: F) -> tokio::task::JoinHandle<()> {
    struct Leave;
    impl Drop for Leave {
        fn drop(&mut self) {
            IN_PYTHON.fetch_sub(1, Ordering::SeqCst);
        }
    }
    IN_PYTHON.fetch_add(1, Ordering::SeqCst);
    let leave = Leave;
    runtime().spawn_blocking(move || {
        let _leave = leave;
        f()
    })
}

/// Called at interpreter exit (`atexit`): waits, without the GIL and for at most a second, until no runtime thread
/// is inside Python. A completion that posts the last result to asyncio is still inside Python when `asyncio.run`
/// returns; if the interpreter began finalizing then, that thread would abort the process.
#[pyfunction]
pub(crate) fn quiesce(py: Python<'_>) {
    py.detach(|| {
        let deadline = std::time::Instant::now() + Duration::from_secs(1);
        while IN_PYTHON.load(Ordering::SeqCst) > 0 && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
    });
}

/// Runs `fut` to its end without the GIL, running signal handlers every [`fencelock_bridge::SLICE`]; the exception
/// a handler raises (KeyboardInterrupt) ends the wait and drops the future.
pub(crate) fn wait<F, T>(py: Python<'_>, fut: F) -> PyResult<T>
where
    F: Future<Output = fencelock::Result<T>> + Send + 'static,
    T: Send + 'static,
{
    let mut raised = None;
    let result = py.detach(|| {
        fencelock_bridge::block_interruptibly(fut, || {
            raised = Python::attach(|py| py.check_signals()).err();
            raised.is_some()
        })
    });
    match raised {
        Some(e) => Err(e),
        None => result.map_err(|e| to_py(py, e)),
    }
}

/// A core result on its way to asyncio: converted to a Python value, or to the mapped exception, under the GIL.
pub(crate) struct Outcome<T>(fencelock::Result<T>);

impl<'py, T: IntoPyObject<'py>> IntoPyObject<'py> for Outcome<T> {
    type Target = PyAny;
    type Output = Bound<'py, PyAny>;
    type Error = PyErr;

    fn into_pyobject(self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        match self.0 {
            Ok(v) => v.into_bound_py_any(py),
            Err(e) => Err(to_py(py, e)),
        }
    }
}

/// An asyncio awaitable for `fut`, run on the shared runtime.
pub(crate) fn awaitable<'py, F, T>(py: Python<'py>, fut: F) -> PyResult<Bound<'py, PyAny>>
where
    F: Future<Output = fencelock::Result<T>> + Send + 'static,
    T: for<'a> IntoPyObject<'a> + Send + 'static,
{
    // Build the runtime now, so that BridgeRuntime::spawn cannot fail.
    fencelock_bridge::handle().map_err(|e| to_py(py, e))?;
    generic::future_into_py::<BridgeRuntime, _, _>(py, async move { Ok(Outcome(fut.await)) })
}

/// pyo3-async-runtimes' view of the bridge runtime.
pub(crate) struct BridgeRuntime;

/// A finished task's failure, for pyo3-async-runtimes.
pub(crate) struct TaskFailure(tokio::task::JoinError);

impl JoinError for TaskFailure {
    fn is_panic(&self) -> bool {
        self.0.is_panic()
    }

    fn into_panic(self) -> Box<dyn std::any::Any + Send + 'static> {
        self.0.into_panic()
    }
}

/// The handle of a spawned task, for pyo3-async-runtimes.
pub(crate) struct Joined(tokio::task::JoinHandle<()>);

impl Future for Joined {
    type Output = Result<(), TaskFailure>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<Self::Output> {
        Pin::new(&mut self.0).poll(cx).map(|r| r.map_err(TaskFailure))
    }
}

fn runtime() -> tokio::runtime::Handle {
    // `awaitable` built it first; a failure here means the process cannot start threads at all.
    fencelock_bridge::handle().expect("the fencelock runtime was built before use")
}

impl Runtime for BridgeRuntime {
    type JoinError = TaskFailure;
    type JoinHandle = Joined;

    fn spawn<F>(fut: F) -> Joined
    where
        F: Future<Output = ()> + Send + 'static,
    {
        Joined(runtime().spawn(fut))
    }

    fn spawn_blocking<F>(f: F) -> Joined
    where
        F: FnOnce() + Send + 'static,
    {
        // pyo3-async-runtimes runs every completion here, under the GIL.
        Joined(spawn_python(f))
    }
}

tokio::task_local! {
    static LOCALS: TaskLocals;
}

impl ContextExt for BridgeRuntime {
    fn scope<F, R>(locals: TaskLocals, fut: F) -> Pin<Box<dyn Future<Output = R> + Send>>
    where
        F: Future<Output = R> + Send + 'static,
    {
        Box::pin(LOCALS.scope(locals, fut))
    }

    fn get_task_locals() -> Option<TaskLocals> {
        LOCALS.try_with(TaskLocals::clone).ok()
    }
}
