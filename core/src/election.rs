//! `Election`: leader election with fenced terms (DESIGN.md §4b), made by the lock engine with `HoldKind::Leader`.
//!
//! A leadership is a mutex hold whose record carries the leader's value, and its token is the term: TTL, watchdog,
//! lost signal, reentrancy and the cancel path are the lock's. Where the backend's records keep values (etcd's
//! `concurrency.Election` key, Curator `LeaderLatch` node data), the backend stores and reads the value itself.
//! Elsewhere the leadership is the mutex of the election's name and the value lives in the fence register
//! `fencelock.leader/<name>`, written with the term: a deposed leader's `proclaim` is refused by the register once a
//! newer term wrote it, and a reader takes the register's value as the leader's only while its term is the one the
//! mutex last handed out.

use std::ops::Deref;
use std::time::Duration;

use futures::Stream;

use crate::backend::{HoldKind, Leader};
use crate::client::Client;
use crate::error::{Error, ErrorKind, Result};
use crate::lease::Lease;
use crate::options::{LockOptions, validate_name};

/// The largest value a candidate may campaign or proclaim with (etcd and ZooKeeper keep it in one request).
pub const MAX_VALUE_BYTES: usize = 64 * 1024;

/// How often `observe` reads the leader.
const OBSERVE_EVERY: Duration = Duration::from_millis(50);

/// Reads of the register and the mutex that may disagree while a new leader writes its value, before `leader`
/// reports the new term without it.
const LEADER_READS: usize = 3;

/// How long `observe` waits for a new leader's value before it reports the leader without one (a plain lock on the
/// name never writes one): a new leader's value follows its grant by one write.
const VALUE_GRACE: Duration = Duration::from_secs(1);

/// One election: at most one leader at a time, with a term that rises with every new leader.
#[derive(Debug, Clone)]
pub struct Election {
    client: Client,
    name: String,
}

// Here rather than in client.rs, so that the client's module does not depend on its primitives'.
impl Client {
    /// The election `name` (DESIGN.md §4b).
    pub fn election(&self, name: &str) -> Election {
        Election { client: self.clone(), name: name.to_string() }
    }
}

/// What the register stores: the holder id, so a reader can tell the current holder's value from an earlier one's,
/// then the value (`<holder length, 4 bytes big-endian><holder><value>`).
fn pack(holder: &str, value: &[u8]) -> Vec<u8> {
    [&(holder.len() as u32).to_be_bytes()[..], holder.as_bytes(), value].concat()
}

/// The holder and value of a stored register; a register of another shape has no holder.
fn unpack(stored: &[u8]) -> (&[u8], &[u8]) {
    let Some((len, rest)) = stored.split_first_chunk::<4>() else { return (&[], stored) };
    let len = u32::from_be_bytes(*len) as usize;
    if len == 0 || len > rest.len() { (&[], stored) } else { rest.split_at(len) }
}

/// The register beside the mutex of an election on a backend whose records keep no values.
fn register(name: &str) -> String {
    format!("fencelock.leader/{name}")
}

fn check_value(name: &str, value: &[u8]) -> Result<()> {
    if value.len() <= MAX_VALUE_BYTES {
        return Ok(());
    }
    Err(Error::new(
        ErrorKind::InvalidArgument,
        format!("an election value is at most {MAX_VALUE_BYTES} bytes, not {}", value.len()),
    )
    .with_lock(name))
}

impl Election {
    /// The election's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Campaigns with `value`, waiting up to `opts.timeout` while another leads. A campaign that times out or is
    /// cancelled leaves no candidate record behind.
    pub async fn campaign(&self, value: &[u8], opts: &LockOptions) -> Result<Leadership> {
        let won = self.campaign_once(value, opts, false).await?;
        Ok(won.expect("a waiting campaign returns a leadership or an error"))
    }

    /// One attempt: the leadership, or `None` while another leads.
    pub async fn try_campaign(&self, value: &[u8], opts: &LockOptions) -> Result<Option<Leadership>> {
        self.campaign_once(value, opts, true).await
    }

    async fn campaign_once(&self, value: &[u8], opts: &LockOptions, once: bool) -> Result<Option<Leadership>> {
        check_value(&self.name, value)?;
        let Some(lease) = self.client.acquire_with(&self.name, HoldKind::Leader, value, opts, once).await? else {
            return Ok(None);
        };
        let won = Leadership { lease, election: self.clone() };
        if !self.client.backend().keeps_leader_values() {
            // The value is the leader's only once written: a failed write ends the leadership it belongs to.
            if let Err(e) = write_value(self, &won.lease, value).await {
                let _ = won.lease.release().await;
                return Err(e);
            }
        }
        Ok(Some(won))
    }

    /// [`Leadership::proclaim`] for a leadership a binding keeps as its [`Lease`] (from [`Leadership::into_lease`]).
    /// `InvalidArgument` if the lease is not a leadership of this election.
    pub async fn proclaim(&self, lease: &Lease, value: &[u8]) -> Result<()> {
        // Where the records keep no values a leadership is held as a mutex, and its lease says so.
        let generic = !self.client.backend().keeps_leader_values();
        let leads = lease.kind() == HoldKind::Leader || (generic && lease.kind() == HoldKind::Exclusive);
        if !leads || lease.name() != self.name {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!("a {} hold on {:?} is not a leadership of this election", lease.kind().label(), lease.name()),
            )
            .with_lock(&self.name));
        }
        check_value(&self.name, value)?;
        lease.check_unreleased()?;
        if let Some(e) = lease.lost_error() {
            return Err(e);
        }
        let backend = self.client.backend();
        if backend.keeps_leader_values() {
            return backend.proclaim(lease.grant(), value).await.map_err(|e| e.at(&self.name, backend.describe()));
        }
        // Still ours now, then the value at our term: a newer leader's write fences it off.
        lease.renew(None).await?;
        write_value(self, lease, value).await
    }

    /// The current leader's value and term, or `None` if nobody leads.
    pub async fn leader(&self) -> Result<Option<Leader>> {
        Ok(self.read_leader().await?.0)
    }

    /// [`leader`](Self::leader), and whether the leader has yet to write its value.
    async fn read_leader(&self) -> Result<(Option<Leader>, bool)> {
        self.client.check_open()?;
        validate_name(&self.name)?;
        self.client.check_election(&self.name)?;
        let backend = self.client.backend();
        let at = |e: Error| e.at(&self.name, backend.describe());
        if backend.keeps_leader_values() {
            return Ok((backend.leader(&self.name).await.map_err(at)?, false));
        }
        let mut info = None;
        for _ in 0..LEADER_READS {
            // The register first: a value read before the mutex that names its term was the leader's then.
            let (term, stored) = backend.fence_read(&register(&self.name)).await.map_err(at)?;
            let now = backend.inspect(&self.name).await.map_err(at)?;
            let (holder, value) = unpack(&stored);
            match &now.holder {
                None => return Ok((None, false)),
                // The holder wrote it: its value, at its term (Redlock's `last_token` may count a minority's grants).
                Some(h) if h.as_bytes() == holder => return Ok((Some(Leader { value: value.to_vec(), term }), false)),
                _ => info = Some(now),
            }
        }
        // A leader that has not written its value yet (or a plain lock on the name): its term, no value.
        Ok((info.and_then(|i| i.last_token).map(|term| Leader { value: Vec::new(), term }), true))
    }

    /// Every change of leader, in order, starting with the current one: a new leader, a proclaimed value, or `None`
    /// when nobody leads. A term lower than one already reported never follows it; an error is reported and the
    /// stream goes on (a reconnect resumes it). Reads the leader every 50 ms.
    pub fn observe(&self) -> impl Stream<Item = Result<Option<Leader>>> + Send + 'static {
        let state = Observed { election: self.clone(), last: None, highest: 0, pending: None };
        futures::stream::unfold(state, |mut state| async move {
            let item = state.next().await;
            Some((item, state))
        })
    }
}

/// What `observe` has reported so far.
struct Observed {
    election: Election,
    // `None` before the first report.
    last: Option<Option<Leader>>,
    highest: u64,
    // A leader seen without its value yet: its term, and when it was first seen so.
    pending: Option<(u64, tokio::time::Instant)>,
}

impl Observed {
    /// The next change, or the next error.
    async fn next(&mut self) -> Result<Option<Leader>> {
        loop {
            if self.last.is_some() {
                tokio::time::sleep(OBSERVE_EVERY).await;
            }
            let (now, unwritten) = match self.election.read_leader().await {
                Err(e) if e.kind() == ErrorKind::Closed => return Err(e),
                other => other?,
            };
            // A new leader between its grant and its value's write: report it once the value is there, so that
            // watchers see its value, not an empty one first (or without one after the grace: a plain lock).
            match (&now, unwritten) {
                (Some(l), true) => {
                    let since = match self.pending {
                        Some((term, since)) if term == l.term => since,
                        _ => self.pending.insert((l.term, tokio::time::Instant::now())).1,
                    };
                    if since.elapsed() < VALUE_GRACE {
                        if self.last.is_none() {
                            tokio::time::sleep(OBSERVE_EVERY).await; // the first report waits too
                        }
                        continue;
                    }
                }
                _ => self.pending = None,
            }
            let older = now.as_ref().is_some_and(|l| l.term < self.highest);
            if older || self.last.as_ref() == Some(&now) {
                continue;
            }
            if let Some(l) = &now {
                self.highest = l.term;
            }
            self.last = Some(now.clone());
            return Ok(now);
        }
    }
}

/// The leadership of one election: a [`Lease`] (TTL, watchdog, lost signal, `release`) whose token is its term.
#[derive(Debug)]
pub struct Leadership {
    lease: Lease,
    election: Election,
}

impl Deref for Leadership {
    type Target = Lease;

    fn deref(&self) -> &Lease {
        &self.lease
    }
}

impl Leadership {
    /// The term: the fencing token of this leadership, higher than every earlier leader's of the election.
    pub fn term(&self) -> u64 {
        self.lease.fence()
    }

    /// The lease behind the leadership.
    pub fn lease(&self) -> &Lease {
        &self.lease
    }

    /// The lease behind the leadership, without the election's calls.
    pub fn into_lease(self) -> Lease {
        self.lease
    }

    /// Replaces the leader's value, keeping the term. `LockLost` if the leadership was lost.
    pub async fn proclaim(&self, value: &[u8]) -> Result<()> {
        self.election.proclaim(&self.lease, value).await
    }

    /// Gives up the leadership; the next candidate takes over.
    pub async fn resign(&self) -> Result<()> {
        self.lease.release().await
    }
}

/// Writes `value` at the term of `lease` into the register beside the election's mutex.
async fn write_value(election: &Election, lease: &Lease, value: &[u8]) -> Result<()> {
    let backend = election.client.backend();
    let name = &election.name;
    match backend.fence_write(&register(name), lease.fence(), &pack(lease.holder(), value)).await {
        Err(e) if e.kind() == ErrorKind::Fenced => Err(Error::new(
            ErrorKind::LockLost,
            format!("term {} is over: a newer leader wrote its value", lease.fence()),
        )
        .at(name, backend.describe())),
        other => other.map_err(|e| e.at(name, backend.describe())),
    }
}
