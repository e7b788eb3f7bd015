//! The keyspace's epoch, so that fence tokens keep rising and registers fail closed when etcd loses its data
//! (DESIGN.md §3): members restarted with empty data dirs, or a new cluster in place of the old one.
//!
//! - `fencelock/epoch` holds the unix µs, as decimal text, at which the first fencelock client found it missing. It
//!   is created only if absent (a Txn on its create revision) and never changed.
//! - A token is the epoch plus an etcd revision: a key's create revision, or the store revision of a read-write
//!   lock's or semaphore's grant (see their modules).
//! - Within one data life the epoch stands and revisions only rise, so tokens rise.
//! - Across a loss: a token of the old life is E1 + r, r at most that life's last revision. etcd makes one revision
//!   per write and commits far fewer than one write per µs, so E1 + r stays below E1 + the µs that passed since E1
//!   was written, which is at most the new life's epoch E2. Tokens of the new life, E2 + r', exceed every old one,
//!   provided the clients' clocks agree to better than that margin (the clock assumption Redlock's seeds make too).
//! - A register takes a token only at or above both its stored token and the epoch, and its compare-and-swap also
//!   checks the epoch's create revision. A register lost with the data therefore refuses a holder paused across the
//!   loss (E1 + r < E2), and a loss between the register's read and its write fails the swap.
//! - Each kept lease reads the epoch just after its grant. A lease dies with the data, so every token made on it
//!   belongs to the life whose epoch it read: an acquire on a lease granted before a loss finds "lease not found"
//!   and takes a new lease, with a new read.
//! - Not covered: a snapshot restore rolls revisions back under the old epoch. Restore with `etcdutl snapshot
//!   restore --bump-revision N --mark-compacted`, N above the writes since the snapshot, as etcd advises for
//!   watchers. Deleting the key by hand fails closed: holders on leases that read the old epoch are fenced.

use std::time::{SystemTime, UNIX_EPOCH};

use fencelock_proto::mvccpb::KeyValue;

use super::ops;
use super::rpc::{EtcdError, Rpc};

/// The key that holds the epoch, outside every lock's and register's namespace.
pub(super) const EPOCH_KEY: &str = "fencelock/epoch";

/// The epoch of the data life a read was made in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Epoch {
    /// Unix µs when it began: the base of every token.
    pub(super) base: u64,
    /// The create revision of [`EPOCH_KEY`], which a compare-and-swap checks to stay within this life.
    pub(super) rev: i64,
}

impl Epoch {
    /// The token of a grant at revision `rev`.
    pub(super) fn token(self, rev: i64) -> u64 {
        self.base + rev.max(0) as u64
    }
}

/// The epoch in `kv`, the epoch key as read. A value that is no number is refused as an invalid argument, which
/// the backend reports as an internal error: the key was written by something other than fencelock.
pub(super) fn parse(kv: &KeyValue) -> Result<Epoch, EtcdError> {
    std::str::from_utf8(&kv.value)
        .ok()
        .and_then(|v| v.parse().ok())
        .map(|base| Epoch { base, rev: kv.create_revision })
        .ok_or_else(|| {
            EtcdError::invalid_argument(format!(
                "{EPOCH_KEY} holds {:?}, not unix µs",
                String::from_utf8_lossy(&kv.value)
            ))
        })
}

/// The epoch of a read of [`EPOCH_KEY`] that found `kvs`, begun now if the key is missing.
pub(super) async fn of(rpc: &Rpc, kvs: &[KeyValue]) -> Result<Epoch, EtcdError> {
    match kvs.first() {
        Some(kv) => parse(kv),
        None => ensure(rpc).await,
    }
}

/// The current epoch, begun now if the key is missing.
pub(super) async fn ensure(rpc: &Rpc) -> Result<Epoch, EtcdError> {
    // A read first: it is no raft write, and the key is there on all but the first call of a data life.
    if let Some(kv) = rpc.range(ops::get(EPOCH_KEY)).await?.kvs.first() {
        return parse(kv);
    }
    let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_micros() as u64);
    let txn = ops::txn(
        vec![ops::created_at(EPOCH_KEY, 0)],
        vec![ops::put(EPOCH_KEY, now.to_string().into_bytes(), 0)],
        vec![ops::read(ops::get(EPOCH_KEY))],
    );
    let mut resp = rpc.txn(txn).await?;
    if resp.succeeded {
        return Ok(Epoch { base: now, rev: ops::revision(resp.header.as_ref()) });
    }
    match ops::kvs(&mut resp, 0).first() {
        Some(kv) => parse(kv),
        // Deleted between the compare and the read: a Txn is atomic, so this cannot be.
        None => Err(EtcdError::unavailable(format!("{EPOCH_KEY} vanished while being read"))),
    }
}

/// The read of the epoch a Txn adds to learn the life it ran in.
pub(super) fn read() -> fencelock_proto::etcdserverpb::RequestOp {
    ops::read(ops::get(EPOCH_KEY))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_add_the_revision_to_the_epoch() {
        let kv = KeyValue { value: b"1796153583101195".to_vec(), create_revision: 9, ..Default::default() };
        let epoch = parse(&kv).unwrap();
        assert_eq!(epoch, Epoch { base: 1_796_153_583_101_195, rev: 9 });
        assert_eq!(epoch.token(42), 1_796_153_583_101_237);
        let bad = KeyValue { value: b"yesterday".to_vec(), ..Default::default() };
        assert!(parse(&bad).unwrap_err().message().contains("fencelock/epoch holds \"yesterday\""));
    }
}
