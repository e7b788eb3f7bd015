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
//!   mzxid). Readers share one token per run of overlapping reads. The epoch node lists the run's read nodes that
//!   may still stand; a reader joins the run if one of them stands, else starts a run. Either way it rewrites the
//!   node conditional on the version it read, so a join and a start never both succeed on one version: the start
//!   takes the new mzxid as its token, a join keeps the run's (written out as `token N`). zxids only rise, and holds
//!   that exclude each other are parted by a delete, so tokens rise per epoch.
//!
//! An uncontended read is three round trips (queue, epoch, rewrite) plus the release; a write one plus the release.

use tokio::time::Instant;
use zookeeper_client as zk;

use super::FENCELOCK_ROOT;
use super::layout::{is_writer, sequence};
use super::shared::Shared;
use crate::backend::{AcquireRequest, HoldKind};
use crate::error::{Error, Result};

/// The epoch line of a run started by a reader that downgraded.
const DOWNGRADE: &str = "downgrade";
/// The epoch line that carries a run's token once a joiner rewrote the node.
const TOKEN: &str = "token ";

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

/// What the epoch node says of the current run of reads: its read nodes (space-separated on the first line), then
/// `downgrade` and `token N` lines.
#[derive(Debug, Default, PartialEq)]
struct Epoch {
    /// The run's read nodes not known to be gone; the first started it.
    members: Vec<String>,
    /// The run's token, once a joiner rewrote the node; until then the node's mzxid, from the start.
    token: Option<u64>,
    /// The run was started by a reader that downgraded from the write lock.
    downgrade: bool,
}

impl Epoch {
    fn parse(data: &[u8]) -> Self {
        let text = String::from_utf8_lossy(data);
        let mut lines = text.lines();
        let members = lines.next().unwrap_or_default().split_whitespace().map(str::to_string).collect();
        let mut epoch = Epoch { members, ..Epoch::default() };
        for line in lines {
            if line == DOWNGRADE {
                epoch.downgrade = true;
            } else if let Some(n) = line.strip_prefix(TOKEN) {
                epoch.token = n.parse().ok();
            }
        }
        epoch
    }

    fn render(&self) -> String {
        let mut text = self.members.join(" ");
        if self.downgrade {
            text = format!("{text}\n{DOWNGRADE}");
        }
        if let Some(token) = self.token {
            text = format!("{text}\n{TOKEN}{token}");
        }
        text
    }
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
                let run = Epoch::parse(&data);
                if let Some(reader) = run.members.iter().find(|m| run.downgrade && *m != ours && queue.contains(m)) {
                    return Ok(Turn::Behind(reader.clone()));
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
    // Each lost race means another reader joined or started a run, so the readers as a whole move on; one reader
    // may lose many in a row when holds are short, so the bound is time, not a count.
    let until = Instant::now() + s.request_timeout;
    while Instant::now() < until {
        match s.rpc(zk.get_data(&epoch)).await {
            Ok((data, stat)) => {
                let run = Epoch::parse(&data);
                // A reader that downgraded passed writers, so the run before them is no run of its own.
                let standing =
                    if downgrade { Vec::new() } else { standing(s, zk, dir, queue, ours, &run.members).await? };
                let next = if standing.is_empty() {
                    Epoch { members: vec![ours.clone()], token: None, downgrade }
                } else {
                    let token = run.token.unwrap_or(stat.mzxid as u64);
                    Epoch { members: [standing, vec![ours.clone()]].concat(), token: Some(token), ..run }
                };
                match s.rpc(zk.set_data(&epoch, next.render().as_bytes(), Some(stat.version))).await {
                    Ok(stat) => return Ok(Turn::Held(next.token.unwrap_or(stat.mzxid as u64))),
                    Err(zk::Error::BadVersion) => continue,
                    Err(e) => return Err(s.err(e)),
                }
            }
            Err(zk::Error::NoNode) => {
                let first = Epoch { members: vec![ours.clone()], token: None, downgrade };
                match s.rpc(zk.create(&epoch, first.render().as_bytes(), &s.session.modes().persistent)).await {
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
        "{}: {epoch} kept changing: other readers joined or started runs faster than this one could",
        s.url
    )))
}

/// The run's `members` (but ours) that may still stand; empty if none does, so the run is over. One in `queue` (our
/// listing, made after our node) stood then; one before the end of the listing but not in it had gone; a later one
/// must be looked up while none is known to stand. A member that went since still parts no write hold from now: a
/// writer's node before ours keeps us waiting, one after ours waits for us.
async fn standing(
    s: &Shared,
    zk: &zk::Client,
    dir: &str,
    queue: &[String],
    ours: &str,
    members: &[String],
) -> Result<Vec<String>> {
    let last = queue.last().map_or("", |last| sequence(last, HoldKind::Read));
    let kept: Vec<String> = members
        .iter()
        .filter(|m| *m != ours && (queue.contains(m) || sequence(m, HoldKind::Read) > last))
        .cloned()
        .collect();
    if kept.iter().any(|m| queue.contains(m)) {
        return Ok(kept);
    }
    let mut checked = Vec::new();
    for m in kept {
        match s.rpc(zk.check_stat(&format!("{dir}/{m}"))).await {
            Ok(Some(_)) => checked.push(m),
            Ok(None) => {}
            Err(e) => return Err(s.err(e)),
        }
    }
    Ok(checked)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn epoch_marks_read_back() {
        let a = "_c_a-__READ__0000000001".to_string();
        let b = "_c_b-__READ__0000000002".to_string();
        assert_eq!(Epoch::parse(a.as_bytes()), Epoch { members: vec![a.clone()], token: None, downgrade: false });
        assert!(Epoch::parse(b"_c_a-__READ__0000000001\ndowngrade").downgrade);
        let joined = Epoch { members: vec![a, b], token: Some(42), downgrade: true };
        assert_eq!(Epoch::parse(joined.render().as_bytes()), joined);
        assert_eq!(Epoch::parse(b""), Epoch::default());
        assert_eq!(epoch_path("/locks/x"), "/fencelock/rwepochs/locks/x");
    }
}
