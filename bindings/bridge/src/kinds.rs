//! Holds of every kind through one call: what a binding passes (a kind's name and a number of permits) becomes the
//! core's `HoldKind`, and the acquire goes through the core's public API for it (`lock`, `rw_lock(n).read`, …,
//! `semaphore(n, permits).acquire`), as core/tests/conformance.rs does.

use fencelock::{Client, Error, ErrorKind, HoldKind, Lease, LockOptions, MAX_PERMITS, Result};

/// The kind of hold a binding asks for by name: `"lock"` (a mutex), `"read"`, `"write"` (the read-write lock) or
/// `"permit"` (a semaphore of `permits` permits; ignored for the other kinds). A number of permits outside `u32` is
/// `InvalidArgument` naming it, as core's own check does for 0 and for more than [`MAX_PERMITS`].
pub fn hold_kind(name: &str, kind: &str, permits: i64) -> Result<HoldKind> {
    match kind {
        "lock" => Ok(HoldKind::Exclusive),
        "read" => Ok(HoldKind::Read),
        "write" => Ok(HoldKind::Write),
        "permit" => Ok(HoldKind::Permit { permits: permits_of(name, permits)? }),
        other => Err(Error::new(
            ErrorKind::InvalidArgument,
            format!("unknown kind of hold {other:?}: lock, read, write or permit"),
        )
        .with_lock(name)),
    }
}

/// `permits` as core takes it; out of `u32` range is `InvalidArgument` (core refuses 0 and too many itself).
pub fn permits_of(name: &str, permits: i64) -> Result<u32> {
    u32::try_from(permits).map_err(|_| {
        Error::new(ErrorKind::InvalidArgument, format!("a semaphore has 1 to {MAX_PERMITS} permits, not {permits}"))
            .with_lock(name)
    })
}

/// One hold of `kind` on `name`: one attempt (`None` if busy) when `once`, else waiting up to the options' timeout.
pub async fn hold(
    client: &Client,
    name: &str,
    kind: HoldKind,
    opts: &LockOptions,
    once: bool,
) -> Result<Option<Lease>> {
    match (kind, once) {
        (HoldKind::Read, false) => client.rw_lock(name).read(opts).await.map(Some),
        (HoldKind::Read, true) => client.rw_lock(name).try_read(opts).await,
        (HoldKind::Write, false) => client.rw_lock(name).write(opts).await.map(Some),
        (HoldKind::Write, true) => client.rw_lock(name).try_write(opts).await,
        (HoldKind::Permit { permits }, false) => client.semaphore(name, permits).acquire(opts).await.map(Some),
        (HoldKind::Permit { permits }, true) => client.semaphore(name, permits).try_acquire(opts).await,
        (_, false) => client.lock(name, opts).await.map(Some),
        (_, true) => client.try_lock(name, opts).await,
    }
}

/// Permits of the semaphore `name` (of `permits`) not held now.
pub async fn available(client: &Client, name: &str, permits: i64) -> Result<u32> {
    client.semaphore(name, permits_of(name, permits)?).available().await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_by_name() {
        assert_eq!(hold_kind("n", "lock", 0).unwrap(), HoldKind::Exclusive);
        assert_eq!(hold_kind("n", "read", 0).unwrap(), HoldKind::Read);
        assert_eq!(hold_kind("n", "write", 7).unwrap(), HoldKind::Write);
        assert_eq!(hold_kind("n", "permit", 3).unwrap(), HoldKind::Permit { permits: 3 });
        for (kind, permits, word) in [("permit", -1, "-1"), ("permit", 1 << 40, "1099511627776"), ("mutex", 1, "mutex")]
        {
            let err = hold_kind("n", kind, permits).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::InvalidArgument);
            assert!(err.message().contains(word), "{err}");
            assert_eq!(err.lock(), Some("n"));
        }
    }

    #[test]
    fn holds_of_every_kind() {
        crate::block_on(async {
            let a = Client::connect("memory://bridge-kinds").await.unwrap();
            let b = Client::connect("memory://bridge-kinds").await.unwrap();
            let opts = LockOptions::default();
            let read = hold(&a, "rw", HoldKind::Read, &opts, false).await.unwrap().unwrap();
            assert!(
                hold(&b, "rw", HoldKind::Read, &opts, true).await.unwrap().is_some_and(|r| r.fence() == read.fence())
            );
            assert!(hold(&b, "rw", HoldKind::Write, &opts, true).await.unwrap().is_none());
            let permit = hold(&a, "s", HoldKind::Permit { permits: 2 }, &opts, false).await.unwrap().unwrap();
            assert!(permit.slot().is_some_and(|s| s < 2));
            assert_eq!(available(&b, "s", 2).await.unwrap(), 1);
            assert_eq!(available(&b, "s", -2).await.unwrap_err().kind(), ErrorKind::InvalidArgument);
            a.close().await;
            b.close().await;
        })
        .unwrap();
    }
}
