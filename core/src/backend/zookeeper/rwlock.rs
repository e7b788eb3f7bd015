//! Read-write locks on Curator's `InterProcessReadWriteLock` layout (one directory, nodes `_c_<uuid>-__READ__<seq>`
//! and `_c_<uuid>-__WRIT__<seq>` ordered by their sequence), so Curator clients and fencelock exclude each other:
//!
//! - A writer waits for every earlier node, a reader for the nearest earlier writer only; so a waiting writer's node
//!   blocks every later reader. Each watches only the node in its way.
//! - Downgrade: a reader whose owner holds the write lock (the first node is a writer holding its holder id, as
//!   Curator's read lock asks of its own thread) reads at once, passing writers queued behind that write node.
//!   Such a writer would find nothing before its own node once the write hold ends, so the downgraded reader marks
//!   itself in the epoch node (below), and a writer that waited looks there before it takes the lock. A Curator
//!   writer does not know of the mark: it may pass a fencelock reader that downgraded (as it passes a Curator one).
//! - Tokens (fencelock's own, in `/fencelock/rwepochs/<dir>`, a persistent node outside the lock directory where
//!   Curator would count it): a writer granted at its first look takes its node's czxid (every hold before it had
//!   gone before the node was made); a writer that waited draws a fresh zxid by rewriting its own node's data (the
//!   mzxid). A reader shares the epoch node's mzxid if the read node named in it still stands (its run goes on),
//!   else it starts a run: it writes its own node name there, conditional on the version it read, and takes the new
//!   mzxid. zxids only rise, and holds that exclude each other are parted by a delete, so tokens rise per epoch.
//!
//! An uncontended read is three round trips (queue, epoch, draw) plus the release; a write one plus the release.

use tokio::time::Instant;
use zookeeper_client as zk;

use super::FENCELOCK_ROOT;
use super::layout::{is_writer, sequence};
use super::shared::Shared;
use crate::backend::{AcquireRequest, HoldKind};
use crate::error::{Error, Result};

/// The epoch mark of a reader that downgraded, after its node name.
const DOWNGRADE: &str = "downgrade";

/// Where a lock's epoch node lives.
fn epoch_path(dir: &str) -> String {
    format!("{FENCELOCK_ROOT}/rwepochs{dir}")
}

/// One look's verdict.
pub(super) enum Turn {
    /// Ours, with this token.
    Held(u64),
    /// The node to wait out.
    Behind(String),
}

/// The epoch node's reader and whether it downgraded.
fn parse_epoch(data: &[u8]) -> (String, bool) {
    let text = String::from_utf8_lossy(data);
    let mut lines = text.lines();
    let node = lines.next().unwrap_or_default().to_string();
    (node, lines.next() == Some(DOWNGRADE))
}

/// The turn of our node `mine` (path, czxid), at `i` in `queue` of `dir`; `waited`: an earlier look was busy.
#[allow(clippy::too_many_arguments)]
pub(super) async fn rw_turn(
    s: &Shared,
    zk: &zk::Client,
    req: &AcquireRequest,
    dir: &str,
    queue: &[String],
    i: usize,
    mine: (&str, u64),
    waited: bool,
) -> Result<Turn> {
    let (path, czxid) = mine;
    let ours = &queue[i];
    if req.kind == HoldKind::Write {
        if i > 0 {
            return Ok(Turn::Behind(queue[i - 1].clone()));
        }
        if !waited {
            return Ok(Turn::Held(czxid));
        }
        match s.rpc(zk.get_data(&epoch_path(dir))).await {
            Ok((data, _)) => {
                let (node, downgraded) = parse_epoch(&data);
                if downgraded && node != *ours && queue.contains(&node) {
                    return Ok(Turn::Behind(node));
                }
            }
            Err(zk::Error::NoNode) => {}
            Err(e) => return Err(s.err(e)),
        }
        // The same data: only the mzxid changes. Curator's waiters watching our node look again and wait on.
        let stat = s.rpc(zk.set_data(path, req.holder.as_bytes(), None)).await.map_err(|e| s.err(e))?;
        return Ok(Turn::Held(stat.mzxid as u64));
    }
    let mut downgrade = false;
    if let Some(writer) = queue[..i].iter().rev().find(|n| is_writer(n)) {
        let first = &queue[0];
        downgrade = is_writer(first)
            && match s.rpc(zk.get_data(&format!("{dir}/{first}"))).await {
                Ok((data, _)) => data == req.holder.as_bytes(),
                Err(zk::Error::NoNode) => false,
                Err(e) => return Err(s.err(e)),
            };
        if !downgrade {
            return Ok(Turn::Behind(writer.clone()));
        }
    }
    let epoch = epoch_path(dir);
    let mark = if downgrade { format!("{ours}\n{DOWNGRADE}") } else { ours.clone() };
    // Each lost race means another reader started a run, so the readers as a whole move on; one reader may lose
    // many in a row when holds are short, so the bound is time, not a count.
    let until = Instant::now() + s.request_timeout;
    while Instant::now() < until {
        match s.rpc(zk.get_data(&epoch)).await {
            Ok((data, stat)) => {
                let (node, _) = parse_epoch(&data);
                if !downgrade && node != *ours && run_goes_on(s, zk, dir, queue, &node).await? {
                    return Ok(Turn::Held(stat.mzxid as u64));
                }
                match s.rpc(zk.set_data(&epoch, mark.as_bytes(), Some(stat.version))).await {
                    Ok(stat) => return Ok(Turn::Held(stat.mzxid as u64)),
                    // Another reader started a run meanwhile: join it if it still goes on.
                    Err(zk::Error::BadVersion) => continue,
                    Err(e) => return Err(s.err(e)),
                }
            }
            Err(zk::Error::NoNode) => {
                match s.rpc(zk.create(&epoch, mark.as_bytes(), &s.session.modes.persistent)).await {
                    Ok((stat, _)) => return Ok(Turn::Held(stat.czxid as u64)),
                    Err(zk::Error::NodeExists) => continue,
                    Err(zk::Error::NoNode) => {
                        let parent = epoch.rsplit_once('/').map_or(FENCELOCK_ROOT, |(p, _)| p);
                        s.make_dirs(zk, parent).await.map_err(|e| s.err(e))?;
                    }
                    Err(e) => return Err(s.err(e)),
                }
            }
            Err(e) => return Err(s.err(e)),
        }
    }
    Err(Error::unavailable(format!(
        "{}: {epoch} kept changing: other readers started runs faster than this one could join one",
        s.url
    )))
}

/// Whether the read run named in the epoch node still holds: its reader's node stands. One in `queue` (our listing,
/// made after our node) stood then; a later one (its sequence after ours, so no writer could hold between its grant
/// and ours) must be looked up. Either way no write hold came between its token and now.
async fn run_goes_on(s: &Shared, zk: &zk::Client, dir: &str, queue: &[String], node: &str) -> Result<bool> {
    if node.is_empty() || queue.iter().any(|n| n == node) {
        return Ok(!node.is_empty());
    }
    let later = queue.last().is_some_and(|last| sequence(node, HoldKind::Read) > sequence(last, HoldKind::Read));
    if !later {
        return Ok(false);
    }
    match s.rpc(zk.check_stat(&format!("{dir}/{node}"))).await {
        Ok(stat) => Ok(stat.is_some()),
        Err(e) => Err(s.err(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn epoch_marks_read_back() {
        assert_eq!(parse_epoch(b"_c_a-__READ__0000000001"), ("_c_a-__READ__0000000001".to_string(), false));
        assert_eq!(parse_epoch(b"_c_a-__READ__0000000001\ndowngrade"), ("_c_a-__READ__0000000001".to_string(), true));
        assert_eq!(epoch_path("/locks/x"), "/fencelock/rwepochs/locks/x");
    }
}
