//! One round: a request to every instance at once, counted as the answers arrive, and over as soon as the answers
//! still missing cannot change the outcome. The requests not yet answered go on in the background (each is a task of
//! its own, see `instance.rs`), so a slow instance never holds up the caller or a later call.

use futures::stream::{FuturesUnordered, StreamExt};
use tokio::task::JoinHandle;

use crate::error::{Error, Result};

/// One answer per instance, in URL order; `None` where none has arrived yet.
pub(super) type Answers<T> = Vec<Option<Result<T>>>;

/// Waits for answers to `requests` (one per instance, in URL order) until `decided` says the rest cannot change the
/// outcome, or every one is in.
pub(super) async fn gather<T>(
    requests: Vec<JoinHandle<Result<T>>>,
    mut decided: impl FnMut(&Answers<T>) -> bool,
) -> Answers<T> {
    let mut answers: Answers<T> = requests.iter().map(|_| None).collect();
    let mut pending: FuturesUnordered<_> =
        requests.into_iter().enumerate().map(|(i, request)| async move { (i, request.await) }).collect();
    while !decided(&answers) {
        let Some((i, joined)) = pending.next().await else { break };
        answers[i] = Some(joined.unwrap_or_else(|e| Err(Error::internal(format!("a Redlock request failed: {e}")))));
    }
    answers
}

/// How a round's answers stand: done (a grant, an extension, a delete, an accepted write, an answer), refused (a
/// definite no: busy, not ours, fenced), failed (no answer, or an error), and not in yet.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Count {
    pub(super) done: usize,
    pub(super) refused: usize,
    pub(super) failed: usize,
    pub(super) pending: usize,
}

impl Count {
    /// Counts `answers`, `refusal` telling a definite no from a failure among the errors (and among the answers, for
    /// a vote, where a busy reply is an `Ok`).
    pub(super) fn of<T>(answers: &Answers<T>, refusal: impl Fn(&Result<T>) -> bool) -> Count {
        let mut count = Count::default();
        for answer in answers {
            match answer {
                None => count.pending += 1,
                Some(a) if refusal(a) => count.refused += 1,
                Some(Ok(_)) => count.done += 1,
                Some(Err(_)) => count.failed += 1,
            }
        }
        count
    }

    fn answered(&self) -> usize {
        self.done + self.refused
    }
}

/// The size of the set and of its majority, and when each kind of round is decided. Each rule decides exactly what
/// waiting for every answer would: it stops only when no answer still missing could change the outcome.
#[derive(Debug, Clone, Copy)]
pub(super) struct Quorum {
    pub(super) instances: usize,
    pub(super) majority: usize,
}

impl Quorum {
    pub(super) fn of(instances: usize) -> Quorum {
        Quorum { instances, majority: instances / 2 + 1 }
    }

    /// The most instances that can refuse while a majority still does it.
    pub(super) fn minority(&self) -> usize {
        self.instances - self.majority
    }

    /// An acquire vote: granted by a majority; or not, and then either a majority answered (busy) or cannot
    /// (unavailable).
    pub(super) fn vote_decided(&self, c: Count) -> bool {
        let m = self.majority;
        c.done >= m || (c.done + c.pending < m && (c.answered() >= m || c.answered() + c.pending < m))
    }

    /// Renew, release, fenced write, counter raise: done by a majority, refused by too many for a majority, or
    /// neither whatever the missing answers say (unavailable).
    pub(super) fn majority_decided(&self, c: Count) -> bool {
        c.done >= self.majority
            || c.refused > self.minority()
            || (c.done + c.pending < self.majority && c.refused + c.pending <= self.minority())
    }

    /// A read: a majority answered, or cannot.
    pub(super) fn read_decided(&self, c: Count) -> bool {
        c.done >= self.majority || c.done + c.pending < self.majority
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(done: usize, refused: usize, failed: usize, pending: usize) -> Count {
        Count { done, refused, failed, pending }
    }

    /// Every rule, against every split of three and five instances: decided exactly when all completions of the
    /// missing answers give one outcome.
    #[test]
    fn rules_decide_when_the_missing_answers_cannot_matter() {
        for n in [3, 5] {
            let q = Quorum::of(n);
            let vote = |c: Count| match (c.done >= q.majority, c.answered() >= q.majority) {
                (true, _) => 0,
                (false, true) => 1,
                (false, false) => 2,
            };
            let majority = |c: Count| match (c.done >= q.majority, c.refused > q.minority()) {
                (true, _) => 0,
                (false, true) => 1,
                (false, false) => 2,
            };
            let read = |c: Count| usize::from(c.done >= q.majority);
            for done in 0..=n {
                for refused in 0..=n - done {
                    for failed in 0..=n - done - refused {
                        let pending = n - done - refused - failed;
                        let now = c(done, refused, failed, pending);
                        // Each missing answer may come back done, refused or failed.
                        let mut outcomes = (Vec::new(), Vec::new(), Vec::new());
                        for d in 0..=pending {
                            for r in 0..=pending - d {
                                let end = c(done + d, refused + r, failed + pending - d - r, 0);
                                outcomes.0.push(vote(end));
                                outcomes.1.push(majority(end));
                                outcomes.2.push(read(end));
                            }
                        }
                        let one = |v: &mut Vec<usize>| {
                            v.sort_unstable();
                            v.dedup();
                            v.len() == 1
                        };
                        assert_eq!(q.vote_decided(now), one(&mut outcomes.0), "vote {now:?} of {n}");
                        assert_eq!(q.majority_decided(now), one(&mut outcomes.1), "majority {now:?} of {n}");
                        assert_eq!(q.read_decided(now), one(&mut outcomes.2), "read {now:?} of {n}");
                    }
                }
            }
        }
    }
}
