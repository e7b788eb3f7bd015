//! The one tokio runtime every binding in a process shares. Built on first use; rebuilt in a `fork()`ed child, whose
//! copy of the parent's runtime has no threads and must never be touched (TOOLCHAIN.md gotcha 7): it is leaked.

use std::future::Future;
use std::ptr;
use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicUsize, Ordering};

use fencelock::{Error, ErrorKind, Result};
use tokio::runtime::{Builder, Handle, Runtime};
use tokio::task::JoinHandle;

/// Environment variable giving the number of worker threads (default 2).
const THREADS_ENV: &str = "FENCELOCK_RUNTIME_THREADS";
const DEFAULT_THREADS: usize = 2;

/// A runtime and the process that built it. Never freed: a child keeps its parent's entry reachable through `prev`
/// (so leak checkers see no lost block) but never uses it.
struct Built {
    pid: u32,
    handle: Handle,
    // `None` when a host owns the runtime (see `build_for_host`).
    #[expect(dead_code, reason = "only keeps the runtime alive")]
    runtime: Option<Runtime>,
    #[expect(dead_code, reason = "only keeps the parent's runtime reachable")]
    prev: *mut Built,
}

static CURRENT: AtomicPtr<Built> = AtomicPtr::new(ptr::null_mut());
// The pid of the process whose thread is building a runtime (0: none). A pid, not a flag or a mutex, so a child
// forked in the middle of a build in its parent is not left waiting for a thread that does not exist in it.
static BUILDING: AtomicU32 = AtomicU32::new(0);
static WORKER_SEQ: AtomicUsize = AtomicUsize::new(1);

/// Worker threads the runtime is built with: `FENCELOCK_RUNTIME_THREADS` if it is a positive integer, else 2.
fn worker_threads() -> usize {
    threads_from(std::env::var(THREADS_ENV).ok().as_deref())
}

fn threads_from(value: Option<&str>) -> usize {
    value.and_then(|v| v.trim().parse().ok()).filter(|&n| n > 0).unwrap_or(DEFAULT_THREADS)
}

/// The shared runtime's handle, building the runtime on first use in this process.
pub fn handle() -> Result<Handle> {
    install(false).map(|(handle, _)| handle)
}

/// Builds this process's shared runtime for a host that insists on owning it, and keeps only its handle. napi-rs is
/// such a host: `create_custom_tokio_runtime` takes the `Runtime` by value (TOOLCHAIN.md gotcha 5), and only then
/// do its `async fn`s run on the same runtime as [`handle`] and [`spawn`]. `None` if this process already has one.
/// The host decides when the runtime shuts down (napi: when Node exits); fencelock calls after that fail.
pub fn build_for_host() -> Result<Option<Runtime>> {
    install(true).map(|(_, runtime)| runtime)
}

/// The handle of this process's runtime, building it if needed; with `for_host`, a runtime built here is handed back
/// instead of kept.
fn install(for_host: bool) -> Result<(Handle, Option<Runtime>)> {
    let pid = std::process::id();
    loop {
        let cur = CURRENT.load(Ordering::Acquire);
        // SAFETY: entries are leaked boxes, never freed, so a non-null pointer stays valid.
        if let Some(built) = unsafe { cur.as_ref() }
            && built.pid == pid
        {
            return Ok((built.handle.clone(), None));
        }
        let building = BUILDING.load(Ordering::Acquire);
        if building == pid {
            // Another thread of this process is building it.
            std::thread::yield_now();
            continue;
        }
        if BUILDING.compare_exchange(building, pid, Ordering::AcqRel, Ordering::Acquire).is_err() {
            continue;
        }
        let runtime = match build() {
            Ok(rt) => rt,
            Err(e) => {
                BUILDING.store(0, Ordering::Release);
                return Err(e);
            }
        };
        let handle = runtime.handle().clone();
        let (kept, given) = if for_host { (None, Some(runtime)) } else { (Some(runtime), None) };
        let entry = Box::into_raw(Box::new(Built { pid, handle: handle.clone(), runtime: kept, prev: cur }));
        CURRENT.store(entry, Ordering::Release);
        return Ok((handle, given));
    }
}

fn build() -> Result<Runtime> {
    Builder::new_multi_thread()
        .worker_threads(worker_threads())
        .thread_name_fn(|| format!("fencelock-worker-{}", WORKER_SEQ.fetch_add(1, Ordering::Relaxed)))
        .on_thread_start(crate::sigpipe::block_for_thread)
        .enable_all()
        .build()
        .map_err(|e| Error::new(ErrorKind::Internal, format!("could not start the fencelock runtime: {e}")))
}

/// Whether the calling thread is inside a tokio runtime (a worker of ours, or any runtime's `block_on`).
pub fn on_runtime_thread() -> bool {
    Handle::try_current().is_ok()
}

/// Runs `fut` to completion on the shared runtime, blocking the calling thread. Safe from any number of foreign
/// threads at once. From a runtime thread (e.g. inside a callback the runtime runs) it would deadlock or panic, so it
/// returns an `Internal` error instead.
pub fn block_on<F: Future>(fut: F) -> Result<F::Output> {
    if on_runtime_thread() {
        return Err(Error::new(
            ErrorKind::Internal,
            "a blocking fencelock call was made from a runtime thread (such as inside an on_lost callback); \
             call it from another thread",
        ));
    }
    let handle = handle()?;
    Ok(crate::sigpipe::blocked_while(|| handle.block_on(fut)))
}

/// Runs `fut` in the background on the shared runtime.
pub fn spawn<F>(fut: F) -> Result<JoinHandle<F::Output>>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    Ok(handle()?.spawn(fut))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thread_count_from_the_environment() {
        assert_eq!(threads_from(None), 2);
        assert_eq!(threads_from(Some(" 6 ")), 6);
        for bad in ["0", "-1", "two", ""] {
            assert_eq!(threads_from(Some(bad)), 2, "{bad}");
        }
    }

    #[test]
    fn one_runtime_with_named_workers() {
        let a = handle().unwrap();
        let b = handle().unwrap();
        assert_eq!(a.id(), b.id());
        let name = block_on(async { spawn(async { std::thread::current().name().map(str::to_owned) }).unwrap().await })
            .unwrap()
            .unwrap()
            .unwrap();
        assert!(name.starts_with("fencelock-worker-"), "{name}");
    }

    #[test]
    fn a_host_owned_runtime_is_the_shared_one() {
        // Other tests in this process may have built the runtime first; then there is nothing to hand over.
        if let Some(rt) = build_for_host().unwrap() {
            assert_eq!(rt.handle().id(), handle().unwrap().id());
            Box::leak(Box::new(rt)); // the "host" keeps it for the other tests
        }
        assert!(build_for_host().unwrap().is_none());
    }

    #[test]
    fn blocking_from_a_runtime_thread_is_refused() {
        let err = block_on(async { spawn(async { block_on(async {}).unwrap_err() }).unwrap().await }).unwrap().unwrap();
        assert_eq!(err.kind(), ErrorKind::Internal);
        assert!(err.message().contains("runtime thread"), "{err}");
    }

    #[test]
    fn many_threads_block_at_once() {
        let sum: u64 = (0..16u64)
            .map(|i| std::thread::spawn(move || block_on(async move { i }).unwrap()))
            .collect::<Vec<_>>()
            .into_iter()
            .map(|t| t.join().unwrap())
            .sum();
        assert_eq!(sum, 120);
    }
}
