//! Curator's `InterProcessMutex` layout: where a lock's nodes live, what they are called, and their order.

use crate::error::{Error, Result};

/// The protected-mode prefix Curator puts before the attempt uuid.
pub(super) const PROTECTED: &str = "_c_";
/// Curator's lock node name; the queue is ordered by the text after its last occurrence.
pub(super) const LOCK_NAME: &str = "lock-";

/// The lock directory of `name`: the name itself if absolute, else `/<name>`.
pub(super) fn lock_dir(name: &str) -> Result<String> {
    let dir = if name.starts_with('/') { name.to_string() } else { format!("/{name}") };
    if dir.ends_with('/') {
        return Err(Error::invalid(format!("lock {name:?}: a ZooKeeper lock path must not end with '/'")));
    }
    Ok(dir)
}

/// The lock nodes among `children`, in Curator's order. Other children (a nested lock's directory) are no
/// contenders; Curator would count them, which only makes it wait longer, never hold alongside us.
pub(super) fn queue(children: Vec<String>) -> Vec<String> {
    let key = |node: &str| node.rsplit_once(LOCK_NAME).map_or(String::new(), |(_, seq)| seq.to_string());
    let mut queue: Vec<String> = children.into_iter().filter(|c| c.contains(LOCK_NAME)).collect();
    queue.sort_by_cached_key(|node| key(node));
    queue
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;

    #[test]
    fn queue_follows_curator_order() {
        let children = ["_c_b-lock-0000000003", "dir", "_c_a-lock-0000000010", "x-lock-0000000001"];
        let q = queue(children.iter().map(|s| s.to_string()).collect());
        assert_eq!(q, ["x-lock-0000000001", "_c_b-lock-0000000003", "_c_a-lock-0000000010"]);
    }

    #[test]
    fn paths_follow_curator_layout() {
        assert_eq!(lock_dir("orders").unwrap(), "/orders");
        assert_eq!(lock_dir("/locks/orders").unwrap(), "/locks/orders");
        assert_eq!(lock_dir("/").unwrap_err().kind(), ErrorKind::InvalidArgument);
    }
}
