//! Curator's layouts: where a lock's nodes live, what they are called, and their order. `InterProcessMutex` nodes
//! are `_c_<uuid>-lock-<seq10>`; `InterProcessReadWriteLock` puts `_c_<uuid>-__READ__<seq10>` and
//! `_c_<uuid>-__WRIT__<seq10>` in one directory (markers of one length, ordered by the sequence after them);
//! `LeaderLatch` nodes are `_c_<uuid>-latch-<seq10>` with the participant's value as data;
//! `InterProcessSemaphoreV2` keeps an `InterProcessMutex` in `<dir>/locks` and its leases in `<dir>/leases`.

use crate::backend::HoldKind;
use crate::error::{Error, Result};

/// The protected-mode prefix Curator puts before the attempt uuid.
pub(super) const PROTECTED: &str = "_c_";
/// Curator's lock node name; the queue is ordered by the text after its last occurrence.
pub(super) const LOCK_NAME: &str = "lock-";
/// Curator's read-write lock markers.
pub(super) const READ_NAME: &str = "__READ__";
pub(super) const WRITE_NAME: &str = "__WRIT__";
/// Curator `LeaderLatch`'s node name.
pub(super) const LATCH_NAME: &str = "latch-";
/// Curator's semaphore lease node name.
pub(super) const LEASE_NAME: &str = "lease-";

/// The node name marker of a hold of `kind` (a permit's internal mutex is a plain lock).
pub(super) fn marker(kind: HoldKind) -> &'static str {
    match kind {
        HoldKind::Read => READ_NAME,
        HoldKind::Write => WRITE_NAME,
        HoldKind::Leader => LATCH_NAME,
        _ => LOCK_NAME,
    }
}

/// Whether `node` is a read-write lock's writer.
pub(super) fn is_writer(node: &str) -> bool {
    node.contains(WRITE_NAME)
}

/// The lock directory of `name`: the name itself if absolute, else `/<name>`.
pub(super) fn lock_dir(name: &str) -> Result<String> {
    let dir = if name.starts_with('/') { name.to_string() } else { format!("/{name}") };
    if dir.ends_with('/') {
        return Err(Error::invalid(format!("lock {name:?}: a ZooKeeper lock path must not end with '/'")));
    }
    Ok(dir)
}

/// The semaphore's internal mutex and lease directories.
pub(super) fn semaphore_dirs(dir: &str) -> (String, String) {
    (format!("{dir}/locks"), format!("{dir}/leases"))
}

/// The nodes of `kind`'s family among `children`, in Curator's order (by the sequence after the marker). Other
/// children (a nested lock's directory) are no contenders; Curator would count them, which only makes it wait
/// longer, never hold alongside us.
pub(super) fn queue(children: Vec<String>, kind: HoldKind) -> Vec<String> {
    let markers = family(kind);
    let mut queue: Vec<String> = children.into_iter().filter(|c| markers.iter().any(|m| c.contains(m))).collect();
    queue.sort_by(|a, b| sequence(a, kind).cmp(sequence(b, kind)));
    queue
}

/// The markers of `kind`'s family: nodes with any of them queue together.
fn family(kind: HoldKind) -> &'static [&'static str] {
    match kind {
        HoldKind::Read | HoldKind::Write => &[READ_NAME, WRITE_NAME],
        HoldKind::Leader => &[LATCH_NAME],
        _ => &[LOCK_NAME],
    }
}

/// The text after `node`'s marker, by which Curator orders its family (empty without a marker).
pub(super) fn sequence(node: &str, kind: HoldKind) -> &str {
    family(kind).iter().find_map(|m| node.rsplit_once(m)).map_or("", |(_, seq)| seq)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;

    #[test]
    fn queue_follows_curator_order() {
        let children = ["_c_b-lock-0000000003", "dir", "_c_a-lock-0000000010", "x-lock-0000000001"];
        let q = queue(children.iter().map(|s| s.to_string()).collect(), HoldKind::Exclusive);
        assert_eq!(q, ["x-lock-0000000001", "_c_b-lock-0000000003", "_c_a-lock-0000000010"]);
        let rw = ["_c_b-__WRIT__0000000003", "_c_a-lock-0000000001", "_c_c-__READ__0000000002"];
        let q = queue(rw.iter().map(|s| s.to_string()).collect(), HoldKind::Read);
        assert_eq!(q, ["_c_c-__READ__0000000002", "_c_b-__WRIT__0000000003"]);
    }

    #[test]
    fn paths_follow_curator_layout() {
        assert_eq!(lock_dir("orders").unwrap(), "/orders");
        assert_eq!(lock_dir("/locks/orders").unwrap(), "/locks/orders");
        assert_eq!(lock_dir("/").unwrap_err().kind(), ErrorKind::InvalidArgument);
    }
}
