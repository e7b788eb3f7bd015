//! The checker (SAFETY-TESTING.md §5): reads a history and computes the figures of §6, per property.

use crate::history::Event;
use crate::nemesis::Fault;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};

/// One hold of the lock as the worker saw it.
#[derive(Debug, Clone, Default)]
pub struct Session {
    pub id: String,
    pub client: String,
    pub token: u64,
    pub t_invoke: u64,
    pub t_ok: u64,
    /// The first of: release invoked, lost notification, process killed, end of test.
    pub t_end: u64,
    /// Release invoked, process killed or end of test (a notification does not end the hold for loss detection).
    pub t_let_go: u64,
    pub killed: bool,
    /// The first sign from the SDK that the lock was lost: the lost event, or LOCK_LOST / NOT_HELD from renew or
    /// release (a client whose clock was slow learns it there, before its watchdog does).
    pub t_notify: Option<u64>,
    pub t_lost_event: Option<u64>,
    /// `read`, `write` or `permit` in the rw and semaphore workloads; none for the mutex.
    pub hold: Option<String>,
    /// A permit's semaphore slot.
    pub slot: Option<u32>,
}

impl Session {
    fn is_read(&self) -> bool {
        self.hold.as_deref() == Some("read")
    }
}

/// Whether two holds exclude each other: any two of a mutex, a writer with anyone, two permits of one slot.
fn conflicts(a: &Session, b: &Session) -> bool {
    !(a.is_read() && b.is_read()) && a.slot == b.slot
}

#[derive(Debug, Default, Serialize, Deserialize, Clone)]
pub struct PolicyFigures {
    pub interleave: u64,
    pub stale_accepted: u64,
    pub lost_updates: i64,
    pub accepted_writes: u64,
}

impl PolicyFigures {
    pub fn total(&self) -> i64 {
        (self.interleave + self.stale_accepted) as i64 + self.lost_updates.max(0)
    }
}

#[derive(Debug, Default, Serialize, Deserialize, Clone)]
#[serde(default)]
pub struct Report {
    pub run: String,
    pub duration_s: f64,
    pub clients: BTreeMap<String, String>,
    pub acquire_ok: u64,
    /// Successful acquisitions per worker language.
    pub acquire_ok_by_lang: BTreeMap<String, u64>,
    pub acquire_fail: u64,
    pub acquire_info: u64,
    pub release_ok: u64,
    pub release_fail: u64,
    pub nested: u64,
    pub renew_ok: u64,
    pub renew_fail: u64,
    pub faults: BTreeMap<String, u64>,
    pub fenced: PolicyFigures,
    pub shadow: PolicyFigures,
    pub cas: PolicyFigures,
    pub overlap_pairs: u64,
    pub overlap_total_s: f64,
    pub overlap_max_s: f64,
    pub token_duplicates: u64,
    pub token_regressions: u64,
    pub losses: u64,
    pub losses_notified: u64,
    /// Losses of clients that were not killed and had let go before the end, yet got no notification.
    pub losses_unnotified: Vec<String>,
    /// The same, of sessions whose own client's clock a `clock-jump` moved during the hold (measured, not failed).
    pub losses_unnotified_clock_moved: Vec<String>,
    pub notify_latency_p50_ms: Option<i64>,
    pub notify_latency_max_ms: Option<i64>,
    pub stale_attempts_after_notify: u64,
    /// Sessions that attempted a fenced write after losing the lock and before the SDK told them (P5 as designed:
    /// the notification must come before the next write).
    pub writes_before_notify: Vec<String>,
    pub notified_without_competitor: u64,
    pub resurrections: u64,
    pub unsafe_releases: u64,
    pub reentrancy_violations: u64,
    pub recovery_p50_s: Option<f64>,
    pub recovery_max_s: Option<f64>,
    pub final_phase_s: Option<f64>,
    pub final_phase_missing: Vec<String>,
    pub false_alarms: u64,
    /// Workers that exited on their own (a crash, a signal the nemesis did not send): `client (pid): status`.
    pub worker_crashes: Vec<String>,
    pub false_alarm_examples: Vec<String>,
    /// The backend serves waiters in arrival order (`capability().fair`, recorded by the run): P11 applies.
    pub fair: bool,
    /// P11: acquire waits with no fault active (nor within 2×TTL after one), and those longer than
    /// 3 × (grants to others during the wait + 1) × TTL.
    pub fair_waits_checked: u64,
    pub fair_wait_violations: u64,
    pub fair_wait_examples: Vec<String>,
    /// The longest checked wait as a fraction of its bound.
    pub fair_wait_max_ratio: Option<f64>,
    /// Believed overlaps that began while the sentinels failed over (sentinel-failover, master-pause, and 2×TTL
    /// after), the older holder under no client fault: two holders made by the failover itself.
    pub failover_overlaps: u64,
    /// Of those, the ones where the older holder still got a fenced op accepted after the newer one was granted.
    pub failover_unfenced: u64,
    pub failover_examples: Vec<String>,
    /// `mutex`, `rwlock`, `semaphore` or `election` (from the run's label), and the semaphore's permits.
    pub workload: String,
    pub permits: Option<u32>,
    /// rwlock: pairs of sessions whose fenced-accepted operations interleave, one of them a writer.
    pub rw_writer_overlaps: u64,
    /// rwlock: readers whose two fenced-accepted reads saw different values (a write inside a read hold).
    pub rw_reads_changed: u64,
    /// semaphore: the most sessions whose fenced-accepted operations (on any slot) spanned one moment, and how many
    /// times that exceeded the permits.
    pub permit_holders_max: u64,
    pub permit_holders_over: u64,
    /// semaphore: pairs of sessions of one slot whose fenced-accepted operations interleave.
    pub slot_overlaps: u64,
    /// semaphore: permits granted with no slot or one ≥ the permits.
    pub slot_out_of_range: u64,
    /// The most sessions that believed they held at once (measured: a paused holder believes past its lease).
    pub believed_holders_max: u64,
    /// Every workload: the holders' writes of their tokens to the SDK's own Fence registers on the backend, as the
    /// registers answered them (a semaphore has one register per slot).
    pub fence_writes_accepted: u64,
    pub fence_writes_refused: u64,
    /// Accepted fence writes whose token is below one the same register had accepted before the write began.
    pub stale_fence_writes: u64,
    pub stale_fence_examples: Vec<String>,
    pub canary: bool,
    /// The run's build carries a register that accepts older tokens: the stale-write check must catch it.
    pub broken_fence: bool,
    /// The run must show a believed overlap (`Expect::double_grant`).
    pub double_grant: bool,
    pub failures: Vec<String>,
}

/// What a run must show beyond the must-be-zero figures.
#[derive(Debug, Default, Clone, Copy)]
pub struct Expect {
    /// The canary profile: violations without fencing, or the faults did not bite.
    pub canary: bool,
    /// A build with the `fence_accepts_older_token` mutant (tests/faults/run.sh): stale writes accepted by the
    /// SDK fence, or the check cannot fail. They are this run's evidence, not its failure.
    pub broken_fence: bool,
    /// A known-bad run that must grant the lock twice (a majority of Redlock instances skewed): two sessions that
    /// believed they held at once, or the faults did not bite. With it, the canary asks for that, not for
    /// violations without fencing.
    pub double_grant: bool,
}

fn secs(ns: u64) -> f64 {
    ns as f64 / 1e9
}

fn percentile(sorted: &[i64], p: f64) -> Option<i64> {
    if sorted.is_empty() {
        return None;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    Some(sorted[i])
}

/// The run's phase marks: `start`, `faults`, `heal`, `end` (missing ones are taken from the history's bounds).
struct Phases {
    start: u64,
    faults: u64,
    heal: u64,
    end: u64,
}

fn phases(h: &[Event]) -> Phases {
    let first = h.first().map_or(0, |e| e.t_ref);
    let last = h.last().map_or(0, |e| e.t_ref);
    let mark = |name: &str| h.iter().find(|e| e.is("run", "phase", name)).map(|e| e.t_ref);
    let start = mark("start").unwrap_or(first);
    let end = mark("end").unwrap_or(last);
    let first_fault = h.iter().find(|e| e.src == "nemesis" && e.kind == "start").map(|e| e.t_ref);
    Phases { start, faults: mark("faults").or(first_fault).unwrap_or(end), heal: mark("heal").unwrap_or(end), end }
}

/// A fault's span: from its start to its stop (the end of the run if it never stopped).
struct Window<'a> {
    f: &'a str,
    targets: &'a [String],
    from: u64,
    to: u64,
}

fn fault_windows(h: &[Event], end: u64) -> Vec<Window<'_>> {
    let nemesis = |e: &&Event, kind: &str| e.src == "nemesis" && e.kind == kind;
    let mut out = Vec::new();
    for (i, e) in h.iter().enumerate().filter(|(_, e)| nemesis(e, "start")) {
        let stop = h[i + 1..].iter().find(|x| nemesis(x, "stop") && x.f == e.f);
        out.push(Window {
            f: e.f.as_deref().unwrap_or(""),
            targets: e.targets.as_deref().unwrap_or(&[]),
            from: e.t_ref,
            to: stop.map_or(end, |x| x.t_ref),
        });
    }
    out
}

/// The faults after which a lost hold's end is visible on its client's own clock (P5: notified before the next
/// write).
const CLOCK_VISIBLE: [&str; 6] =
    ["client-pause", "client-kill", "proxy-delay", "proxy-freeze", "proxy-lossy", "server-pause"];

/// ` (a b c)` after a count, or nothing for an empty list.
fn listed(items: &[String], sep: &str) -> String {
    if items.is_empty() { String::new() } else { format!(" ({})", items.join(sep)) }
}

/// The TTL from the run's label (`ttl=2000ms`); 2 s, the suite's default, for a history without one.
fn ttl_ns(label: &str) -> u64 {
    let ms = label.split_whitespace().find_map(|w| w.strip_prefix("ttl=")?.strip_suffix("ms")?.parse::<u64>().ok());
    ms.unwrap_or(2000) * 1_000_000
}

/// Builds the sessions from the worker events.
pub fn sessions(h: &[Event]) -> Vec<Session> {
    let end = phases(h).end;
    let mut last_invoke: HashMap<(String, u32), u64> = HashMap::new();
    let mut out: Vec<Session> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    // A killed worker's hold ends at the kill (the nemesis names the pid it killed).
    let kills: HashMap<u32, u64> = h
        .iter()
        .filter(|e| e.is("nemesis", "start", "client-kill"))
        .filter_map(|e| e.pid.map(|p| (p, e.t_ref)))
        .collect();
    for e in h.iter().filter(|e| e.src == "worker") {
        let key = (e.client.clone().unwrap_or_default(), e.pid.unwrap_or(0));
        match (e.kind.as_str(), e.f.as_deref()) {
            ("invoke", Some("acquire")) => {
                last_invoke.insert(key, e.t_ref);
            }
            ("ok", Some("acquire")) => {
                let id = e.session.clone().unwrap_or_default();
                let t_kill = kills.get(&key.1).copied();
                let t_let_go = t_kill.unwrap_or(end).max(e.t_ref);
                index.insert(id.clone(), out.len());
                out.push(Session {
                    id,
                    client: key.0.clone(),
                    token: e.token.unwrap_or(0),
                    t_invoke: last_invoke.get(&key).copied().unwrap_or(e.t_ref),
                    t_ok: e.t_ref,
                    t_end: t_let_go,
                    t_let_go,
                    killed: t_kill.is_some(),
                    hold: e.hold.clone(),
                    slot: e.slot,
                    ..Session::default()
                });
            }
            (kind, f) => {
                let Some(&i) = e.session.as_ref().and_then(|s| index.get(s)) else { continue };
                let s = &mut out[i];
                let lost_code = matches!(e.error.as_deref(), Some("LOCK_LOST" | "NOT_HELD"));
                match (kind, f) {
                    ("invoke", Some("release")) if e.t_ref < s.t_let_go => {
                        s.t_let_go = e.t_ref;
                        s.killed = false;
                    }
                    ("lost", _) => {
                        s.t_lost_event.get_or_insert(e.t_ref);
                        s.t_notify = Some(s.t_notify.map_or(e.t_ref, |t| t.min(e.t_ref)));
                    }
                    ("fail", Some("renew" | "release")) if lost_code => {
                        s.t_notify = Some(s.t_notify.map_or(e.t_ref, |t| t.min(e.t_ref)));
                    }
                    _ => {}
                }
            }
        }
    }
    for s in &mut out {
        s.t_end = s.t_let_go.min(s.t_lost_event.unwrap_or(u64::MAX));
    }
    out
}

/// The violations without fencing so far: what the canary waits for while its faults run.
/// The pairs of conflicting sessions that believed they held at once, `by_ok` sorted by acquisition.
fn overlapping<'a>(by_ok: &[&'a Session]) -> Vec<(&'a Session, &'a Session)> {
    let mut out = Vec::new();
    for (a, sa) in by_ok.iter().enumerate() {
        for sb in by_ok[a + 1..].iter().take_while(|sb| sb.t_ok < sa.t_end) {
            if sb.t_ok < sb.t_end && conflicts(sa, sb) {
                out.push((*sa, *sb));
            }
        }
    }
    out
}

/// How many pairs of sessions of the history so far believed they held at once (the double-grant canary's bite).
pub fn believed_overlaps(h: &[Event]) -> usize {
    let mut h = h.to_vec();
    h.sort_by_key(|e| e.t_ref);
    let ss = sessions(&h);
    let mut by_ok: Vec<&Session> = ss.iter().collect();
    by_ok.sort_by_key(|s| s.t_ok);
    overlapping(&by_ok).len()
}

pub fn unfenced_violations(h: &[Event]) -> i64 {
    let ops: Vec<&Event> = h.iter().filter(|e| e.src == "referee").collect();
    policy(&ops, 1).total()
}

/// The register a referee op went to (one per semaphore slot; the mutex and rw workloads have one).
fn key(e: &Event) -> &str {
    e.detail.as_deref().unwrap_or("")
}

/// A session's span of accepted operations on one register under a policy: first and last op index, and whether
/// the session was a reader.
#[derive(Debug, Clone)]
struct Span {
    from: usize,
    to: usize,
    read: bool,
}

/// The spans per register under policy `p`, each register's sorted by start.
fn spans<'a>(ops: &[&'a Event], p: usize) -> BTreeMap<&'a str, Vec<Span>> {
    let mut by: BTreeMap<(&str, &str), Span> = BTreeMap::new();
    for (i, e) in ops.iter().enumerate().filter(|(_, e)| e.ok.is_some_and(|ok| ok[p])) {
        let session = e.session.as_deref().unwrap_or("");
        let read = e.hold.as_deref() == Some("read");
        by.entry((key(e), session)).or_insert(Span { from: i, to: i, read }).to = i;
    }
    let mut out: BTreeMap<&str, Vec<Span>> = BTreeMap::new();
    for ((k, _), sp) in by {
        out.entry(k).or_default().push(sp);
    }
    for v in out.values_mut() {
        v.sort_by_key(|s| s.from);
    }
    out
}

/// The pairs of spans on one register that interleave, two readers excepted (they share a run's token).
fn interleaving(spans: &[Span]) -> Vec<(&Span, &Span)> {
    let mut out = Vec::new();
    for (a, sa) in spans.iter().enumerate() {
        for sb in spans[a + 1..].iter().take_while(|sb| sb.from < sa.to) {
            if !(sa.read && sb.read) {
                out.push((sa, sb));
            }
        }
    }
    out
}

/// The figures of policy `p`, summed over the registers.
fn policy(ops: &[&Event], p: usize) -> PolicyFigures {
    let mut f = PolicyFigures::default();
    let mut keys: BTreeMap<&str, Vec<&Event>> = BTreeMap::new();
    for e in ops {
        keys.entry(key(e)).or_default().push(e);
    }
    for reg in keys.values() {
        let g = register(reg, p);
        f.stale_accepted += g.stale_accepted;
        f.accepted_writes += g.accepted_writes;
        f.lost_updates += g.lost_updates;
    }
    f.interleave = spans(ops, p).values().map(|v| interleaving(v).len() as u64).sum();
    f
}

/// Stale acceptances, accepted writes and lost updates of one register.
fn register(ops: &[&Event], p: usize) -> PolicyFigures {
    let mut f = PolicyFigures::default();
    let mut max_token = 0u64;
    let mut final_value = 0i64;
    for e in ops {
        let ok = e.ok.is_some_and(|ok| ok[p]);
        if let Some(after) = e.after {
            final_value = after[p];
        }
        if !ok {
            continue;
        }
        let token = e.token.unwrap_or(0);
        if token < max_token {
            f.stale_accepted += 1;
        }
        max_token = max_token.max(token);
        if e.f.as_deref() == Some("write") {
            f.accepted_writes += 1;
        }
    }
    f.lost_updates = f.accepted_writes as i64 - final_value;
    f
}

/// Checks a history against the must-be-zero figures and what `expect` adds.
pub fn check(h: &[Event], expect: Expect) -> Report {
    let mut h: Vec<Event> = h.to_vec();
    h.sort_by_key(|e| e.t_ref);
    let ph = phases(&h);
    let mut r = Report {
        canary: expect.canary,
        broken_fence: expect.broken_fence,
        double_grant: expect.double_grant,
        ..Report::default()
    };
    r.run = h.iter().find(|e| e.is("run", "phase", "start")).and_then(|e| e.detail.clone()).unwrap_or_default();
    r.duration_s = secs(ph.end.saturating_sub(ph.start));
    let ss = sessions(&h);

    for e in h.iter().filter(|e| e.src == "worker") {
        if let (Some(c), Some(l)) = (&e.client, &e.lang) {
            r.clients.entry(c.clone()).or_insert_with(|| l.clone());
        }
        match (e.kind.as_str(), e.f.as_deref().unwrap_or("")) {
            ("ok", "acquire") => {
                r.acquire_ok += 1;
                *r.acquire_ok_by_lang.entry(e.lang.clone().unwrap_or_default()).or_default() += 1;
            }
            ("fail", "acquire") => r.acquire_fail += 1,
            ("info", "acquire") => r.acquire_info += 1,
            ("ok", "release") => r.release_ok += 1,
            ("fail", "release") => r.release_fail += 1,
            ("ok", "nested-acquire") => r.nested += 1,
            ("ok", "renew") => r.renew_ok += 1,
            ("fail", "renew") => r.renew_fail += 1,
            _ => {}
        }
    }
    for e in h.iter().filter(|e| e.src == "nemesis" && e.kind == "start") {
        *r.faults.entry(e.f.clone().unwrap_or_default()).or_default() += 1;
    }

    // P1 / P3: the referee's decisions per policy.
    let ops: Vec<&Event> = h.iter().filter(|e| e.src == "referee").collect();
    r.fenced = policy(&ops, 0);
    r.shadow = policy(&ops, 1);
    r.cas = policy(&ops, 2);

    // P4: believed overlap.
    let mut by_ok: Vec<&Session> = ss.iter().collect();
    by_ok.sort_by_key(|s| s.t_ok);
    let overlaps = overlapping(&by_ok);
    for (sa, sb) in &overlaps {
        let len = sa.t_end.min(sb.t_end) - sb.t_ok;
        r.overlap_pairs += 1;
        r.overlap_total_s += secs(len);
        r.overlap_max_s = r.overlap_max_s.max(secs(len));
    }

    // P2: tokens.
    // Per semaphore slot (each has its own counter); readers of one run share a token.
    let mut by_token: HashMap<(Option<u32>, u64), (u64, bool)> = HashMap::new();
    for s in &ss {
        let t = by_token.entry((s.slot, s.token)).or_insert((0, true));
        t.0 += 1;
        t.1 &= s.is_read();
    }
    r.token_duplicates = by_token.values().filter(|&&(n, reads)| n > 1 && !reads).map(|(n, _)| n - 1).sum();
    let regressed =
        |j: &Session, i: &Session| j.token < i.token || (j.token == i.token && !(i.is_read() && j.is_read()));
    r.token_regressions = ss
        .iter()
        .filter(|j| ss.iter().any(|i| i.id != j.id && i.slot == j.slot && i.t_ok < j.t_invoke && regressed(j, i)))
        .count() as u64;

    // A fault's effects outlast its stop: a killed holder's record expires a TTL later, clients reconnect and find
    // the new master. Within this grace after a fault the fault still counts as active.
    let ttl = ttl_ns(&r.run);
    let grace = 2 * ttl;
    let spans = fault_windows(&h, ph.end);

    for e in h.iter().filter(|e| e.is("run", "exit", "worker-exit")) {
        let (client, pid) = (e.client.as_deref().unwrap_or("?"), e.pid.unwrap_or(0));
        r.worker_crashes.push(format!("{client} ({pid}): {}", e.detail.as_deref().unwrap_or("exited")));
    }

    // P5: losses and notifications.
    let fence_invokes: Vec<&Event> = h.iter().filter(|e| e.is("worker", "invoke", "fence-write")).collect();
    let fenced_rejections: Vec<&Event> = ops.iter().copied().filter(|e| e.ok.is_some_and(|ok| !ok[0])).collect();
    let mut latencies: Vec<i64> = Vec::new();
    for i in &ss {
        let competitor = ss.iter().filter(|j| supersedes(j, i) && j.t_ok < i.t_let_go).map(|j| j.t_ok).min();
        let rejected = fenced_rejections.iter().filter(|e| e.session.as_deref() == Some(&i.id)).map(|e| e.t_ref).min();
        let t_lost = match (competitor, rejected) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        match (t_lost, i.t_notify) {
            (Some(t), notify) => {
                r.losses += 1;
                if let Some(n) = notify {
                    r.losses_notified += 1;
                    latencies.push((n as i64 - t as i64) / 1_000_000);
                } else if !i.killed && i.t_let_go < ph.end {
                    // libfaketime moves CLOCK_MONOTONIC too: a client whose clock went back believes in a validity
                    // the servers never gave, and its way back to +0 fires every timer it had at once. No real
                    // monotonic clock jumps, so such a loss is counted, not failed.
                    let own_clock_moved = spans.iter().any(|w| {
                        w.f == "clock-jump" && w.targets.contains(&i.client) && w.from < i.t_let_go && i.t_ok < w.to
                    });
                    if own_clock_moved {
                        r.losses_unnotified_clock_moved.push(i.id.clone());
                    } else {
                        r.losses_unnotified.push(i.id.clone());
                    }
                }
            }
            (None, Some(_)) => r.notified_without_competitor += 1,
            (None, None) => {}
        }
        // Held to it where the loss is one the client's own clock can see: the hold outlived its validity (a pause,
        // a frozen or slow network). A server that forgot the record (a restart, a failover, a dropped connection
        // holding a session lock) or a moved clock takes it before the validity ends; the SDK learns at its next
        // renewal, and until then the register refusing the write is the protection (P1).
        let excused =
            |to: u64| spans.iter().any(|w| !CLOCK_VISIBLE.contains(&w.f) && w.from < to && i.t_ok < w.to + grace);
        if let Some(t) = t_lost
            && let Some(w) = fence_invokes
                .iter()
                .filter(|e| e.session.as_deref() == Some(&i.id) && e.t_ref > t)
                .map(|e| e.t_ref)
                .min()
            && i.t_notify.is_none_or(|n| n > w)
            && !excused(w)
        {
            r.writes_before_notify.push(i.id.clone());
        }
        if let Some(n) = i.t_notify {
            r.stale_attempts_after_notify +=
                ops.iter().filter(|e| e.session.as_deref() == Some(&i.id) && e.t_ref > n).count() as u64;
        }
    }
    latencies.sort();
    r.notify_latency_p50_ms = percentile(&latencies, 0.5);
    r.notify_latency_max_ms = latencies.last().copied();

    // P6 / P7: renewals and releases that succeeded after another session acquired (and, for releases, still held).
    let session = |id: &str| ss.iter().find(|s| s.id == id);
    let mut invoked: HashMap<(String, &str), u64> = HashMap::new();
    for e in h.iter().filter(|e| e.src == "worker") {
        let (Some(id), Some(f)) = (e.session.as_deref(), e.f.as_deref()) else { continue };
        if e.kind == "invoke" {
            invoked.insert((id.to_string(), f), e.t_ref);
            continue;
        }
        if e.kind != "ok" || !(f == "renew" || f == "release") {
            continue;
        }
        let (Some(i), Some(&t_inv)) = (session(id), invoked.get(&(id.to_string(), f))) else { continue };
        let newer = |j: &&Session| supersedes(j, i) && j.t_ok < t_inv;
        if f == "renew" && ss.iter().any(|j| newer(&j)) {
            r.resurrections += 1;
        }
        if f == "release" && ss.iter().any(|j| newer(&j) && j.t_end > t_inv) {
            r.unsafe_releases += 1;
        }
    }

    // P8: a nested acquire returns the outer grant's token.
    for e in h.iter().filter(|e| e.is("worker", "ok", "nested-acquire")) {
        if let Some(s) = e.session.as_deref().and_then(session)
            && e.token != Some(s.token)
        {
            r.reentrancy_violations += 1;
        }
    }

    // P9: recovery after each heal of a fault, and the final phase.
    let oks: Vec<&Session> = by_ok.clone();
    let next_ok = |t: u64| oks.iter().find(|s| s.t_ok >= t).map(|s| s.t_ok - t);
    let mut rec: Vec<i64> = h
        .iter()
        .filter(|e| e.src == "nemesis" && e.kind == "stop")
        .filter_map(|e| next_ok(e.t_ref))
        .map(|d| d as i64)
        .collect();
    rec.sort();
    r.recovery_p50_s = percentile(&rec, 0.5).map(|d| secs(d as u64));
    r.recovery_max_s = rec.last().map(|&d| secs(d as u64));
    let mut last_per_client: BTreeMap<&str, Option<u64>> = BTreeMap::new();
    for c in r.clients.keys() {
        let first = ss.iter().filter(|s| &s.client == c && s.t_ok >= ph.heal).map(|s| s.t_ok).min();
        last_per_client.insert(c, first);
    }
    r.final_phase_missing = last_per_client.iter().filter(|(_, t)| t.is_none()).map(|(c, _)| c.to_string()).collect();
    if r.final_phase_missing.is_empty() {
        r.final_phase_s = last_per_client.values().flatten().max().map(|t| secs(t - ph.heal));
    }

    // P11: with a fair backend and no fault active, a wait is bounded by the grants served before it.
    r.fair = h.iter().any(|e| {
        e.is("run", "capability", "capability")
            && e.detail.as_deref().is_some_and(|d| d.split(' ').any(|w| w == "fair"))
    });
    if r.fair {
        let mut invoked: HashMap<(&str, u32), u64> = HashMap::new();
        let mut worst: Option<f64> = None;
        for e in h.iter().filter(|e| e.src == "worker" && e.f.as_deref() == Some("acquire")) {
            let key = (e.client.as_deref().unwrap_or(""), e.pid.unwrap_or(0));
            if e.kind == "invoke" {
                invoked.insert(key, e.t_ref);
                continue;
            }
            // A wait that ended in an error other than TIMEOUT (`info`) was cut short by the backend, not served.
            let Some(from) = invoked.remove(&key).filter(|_| e.kind == "ok" || e.kind == "fail") else { continue };
            let to = e.t_ref;
            if spans.iter().any(|w| w.from < to && from < w.to + grace) {
                continue;
            }
            r.fair_waits_checked += 1;
            let others = ss.iter().filter(|s| s.client != key.0 && s.t_ok > from && s.t_ok < to).count() as u64;
            let bound = 3 * (others + 1) * ttl;
            let ratio = (to - from) as f64 / bound as f64;
            worst = Some(worst.map_or(ratio, |w| w.max(ratio)));
            if to - from > bound {
                r.fair_wait_violations += 1;
                if r.fair_wait_examples.len() < 5 {
                    r.fair_wait_examples.push(format!(
                        "{} waited {:.1}s while others got {others} grant(s) (bound {:.1}s)",
                        key.0,
                        secs(to - from),
                        secs(bound)
                    ));
                }
            }
        }
        r.fair_wait_max_ratio = worst;
    }

    // Two holders made by a failover: an overlap that began during one, the older holder under no client fault of
    // its own (a paused or clock-jumped holder outlives its lease whatever the backend does). With replica-synced
    // grants the newer one must not happen; if it does, the older holder must be fenced from then on.
    let client_fault = |f: &str| matches!(f, "client-pause" | "client-kill" | "clock-jump");
    for (a, b) in &overlaps {
        let t = b.t_ok;
        let failing_over = spans.iter().any(|w| Fault::fails_over(w.f) && w.from <= t && t <= w.to + grace);
        let own_fault = spans
            .iter()
            .any(|w| client_fault(w.f) && w.targets.contains(&a.client) && w.from < t && a.t_ok < w.to + grace);
        if !supersedes(b, a) || !failing_over || own_fault {
            continue;
        }
        r.failover_overlaps += 1;
        let stale =
            ops.iter().find(|e| e.session.as_deref() == Some(&a.id) && e.t_ref > t && e.ok.is_some_and(|ok| ok[0]));
        if let Some(op) = stale {
            r.failover_unfenced += 1;
            if r.failover_examples.len() < 5 {
                r.failover_examples.push(format!(
                    "{} (token {}) got a fenced {} accepted {:.2}s after {} (token {}) was granted",
                    a.id,
                    a.token,
                    op.f.as_deref().unwrap_or("op"),
                    secs(op.t_ref - t),
                    b.id,
                    b.token
                ));
            }
        }
    }

    // P10: false alarms in the quiet windows (warm-up, after the heal).
    let windows = [(ph.start, ph.faults), (ph.heal, ph.end)];
    let quiet = |s: &Session| windows.iter().any(|&(a, b)| s.t_invoke >= a && s.t_let_go <= b && b > a);
    let alarm = |r: &mut Report, what: String| {
        r.false_alarms += 1;
        if r.false_alarm_examples.len() < 5 {
            r.false_alarm_examples.push(what);
        }
    };
    for s in ss.iter().filter(|s| quiet(s)) {
        if s.t_notify.is_some() {
            alarm(&mut r, format!("lock-lost notification in a quiet period: session {}", s.id));
        }
        if fenced_rejections.iter().any(|e| e.session.as_deref() == Some(&s.id)) {
            alarm(&mut r, format!("fenced rejection in a quiet period: session {}", s.id));
        }
    }
    for (a, b) in &overlaps {
        if quiet(a) && quiet(b) {
            alarm(&mut r, format!("believed overlap in a quiet period: sessions {} and {}", a.id, b.id));
        }
    }

    workload_checks(&mut r, &h, &ops, &ss);
    r.failures = failures(&r);
    r
}

/// A `name=value` word of the run's label.
fn label_word<'a>(label: &'a str, name: &str) -> Option<&'a str> {
    label.split_whitespace().find_map(|w| w.strip_prefix(name)?.strip_prefix('='))
}

/// The rw lock's, the semaphore's and the election's own properties, on the fenced registers (what a paused holder cannot fake) and,
/// measured, on the believed holds.
fn workload_checks(r: &mut Report, h: &[Event], ops: &[&Event], ss: &[Session]) {
    r.workload = label_word(&r.run, "workload").unwrap_or("mutex").to_string();
    r.permits = label_word(&r.run, "permits").and_then(|p| p.parse().ok());
    // The believed holders at once: a sweep over the sessions' [ok, end).
    let mut marks: Vec<(u64, i64)> =
        ss.iter().filter(|s| s.t_ok < s.t_end).flat_map(|s| [(s.t_ok, 1), (s.t_end, -1)]).collect();
    marks.sort_by_key(|&(t, d)| (t, d)); // an end before a start at the same instant
    let mut now = 0i64;
    for (_, d) in marks {
        now += d;
        r.believed_holders_max = r.believed_holders_max.max(now as u64);
    }
    let fenced = spans(ops, 0);
    match r.workload.as_str() {
        "rwlock" => {
            r.rw_writer_overlaps = fenced.values().map(|v| interleaving(v).len() as u64).sum();
            // A reader's accepted reads must all see one value: a write in between came from a writer inside the
            // read hold.
            let mut seen: HashMap<&str, i64> = HashMap::new();
            for e in ops.iter().filter(|e| e.hold.as_deref() == Some("read") && e.ok.is_some_and(|ok| ok[0])) {
                let (Some(session), Some(after)) = (e.session.as_deref(), e.after) else { continue };
                if *seen.entry(session).or_insert(after[0]) != after[0] {
                    r.rw_reads_changed += 1;
                    seen.insert(session, after[0]);
                }
            }
        }
        "semaphore" => {
            let permits = r.permits.unwrap_or(u32::MAX);
            let permit = |s: &&Session| s.hold.as_deref() == Some("permit");
            r.slot_out_of_range =
                ss.iter().filter(permit).filter(|s| s.slot.is_none_or(|n| n >= permits)).count() as u64;
            r.slot_overlaps = fenced.values().map(|v| interleaving(v).len() as u64).sum();
            // Holders at once across the slots, in the referee's decision order.
            let mut marks: Vec<(usize, i64)> =
                fenced.values().flatten().flat_map(|sp| [(sp.from, 1), (sp.to, -1)]).collect();
            marks.sort_by_key(|&(i, d)| (i, -d)); // a one-op span counts at its op
            let mut now = 0i64;
            for (_, d) in marks {
                now += d;
                if d > 0 && now as u64 > u64::from(permits) {
                    r.permit_holders_over += 1;
                }
                r.permit_holders_max = r.permit_holders_max.max(now as u64);
            }
        }
        _ => {}
    }
    stale_fence_writes(r, h);
}

/// The stale writes the SDK fence accepted so far: what a run on a broken register waits for while its faults run.
pub fn stale_fence_count(h: &[Event]) -> u64 {
    let mut r = Report::default();
    stale_fence_writes(&mut r, h);
    r.stale_fence_writes
}

/// The SDK registers' answers to the holders' writes (`fence-write`): an accepted write whose token is below one the
/// same register accepted before it was invoked is a stale holder's write let through. Real time, not the referee's
/// order: the register itself decides, and only answers that completed before the write began are known to it.
fn stale_fence_writes(r: &mut Report, h: &[Event]) {
    let writes: Vec<&Event> = h.iter().filter(|e| e.src == "worker" && e.f.as_deref() == Some("fence-write")).collect();
    let answered = |kind: &'static str| writes.iter().copied().filter(move |e| e.kind == kind);
    r.fence_writes_accepted = answered("ok").count() as u64;
    r.fence_writes_refused = answered("fail").count() as u64;
    let mut registers: Vec<Option<u32>> = writes.iter().map(|e| e.slot).collect();
    registers.sort_unstable();
    registers.dedup();
    for slot in registers {
        stale_writes_to(r, writes.iter().copied().filter(|e| e.slot == slot));
    }
}

/// `stale_fence_writes` for the writes to one register.
fn stale_writes_to<'a>(r: &mut Report, writes: impl Iterator<Item = &'a Event>) {
    // Each accepted write with its own invoke (a session's writes alternate invoke, answer): (invoked, done, term).
    let mut pending: HashMap<&str, u64> = HashMap::new();
    let mut spans: Vec<(u64, u64, u64, &str)> = Vec::new();
    for e in writes {
        let (Some(session), Some(token)) = (e.session.as_deref(), e.token) else { continue };
        match e.kind.as_str() {
            "invoke" => {
                pending.insert(session, e.t_ref);
            }
            "ok" => spans.push((pending.remove(session).unwrap_or(e.t_ref), e.t_ref, token, session)),
            _ => {
                pending.remove(session);
            }
        }
    }
    let mut accepted: Vec<(u64, u64, &str)> = spans.iter().map(|&(_, done, t, s)| (done, t, s)).collect();
    accepted.sort_unstable();
    // Sweep the writes by invoke; each is checked against the highest term accepted before it began.
    let mut by_invoke: Vec<(u64, u64, &str)> = spans.iter().map(|&(from, _, t, s)| (from, t, s)).collect();
    by_invoke.sort_unstable();
    let (mut i, mut highest): (usize, Option<(u64, &str)>) = (0, None);
    for (from, token, session) in by_invoke {
        while i < accepted.len() && accepted[i].0 < from {
            if highest.is_none_or(|(t, _)| accepted[i].1 > t) {
                highest = Some((accepted[i].1, accepted[i].2));
            }
            i += 1;
        }
        if let Some((newer, by)) = highest.filter(|&(t, _)| token < t) {
            r.stale_fence_writes += 1;
            if r.stale_fence_examples.len() < 5 {
                r.stale_fence_examples.push(format!(
                    "{session} wrote token {token} and the register accepted it after accepting token {newer} of {by}"
                ));
            }
        }
    }
}

/// Whether grant `j` came after grant `i` and so could have taken the lock from it: seen later, with a higher
/// token. A grant seen later with a lower token was made before `i`'s (tokens rise per grant; P2 checks that) and
/// only reached its client late, say one paused while its reply was on the way: it took nothing from `i`.
fn supersedes(j: &Session, i: &Session) -> bool {
    j.id != i.id && j.slot == i.slot && j.t_ok > i.t_ok && j.token > i.token
}

/// The must-be-zero figures and the liveness checks (SAFETY-TESTING.md §6 "CI assertions").
fn failures(r: &Report) -> Vec<String> {
    let mut f = Vec::new();
    let mut must_be_zero = |what: &str, n: i64| {
        if n != 0 {
            f.push(format!("{what} = {n} (must be 0)"));
        }
    };
    must_be_zero("P1 fenced interleave", r.fenced.interleave as i64);
    must_be_zero("P1 fenced stale-accepted", r.fenced.stale_accepted as i64);
    must_be_zero("P1 fenced lost-updates", r.fenced.lost_updates);
    must_be_zero("P2 token duplicates", r.token_duplicates as i64);
    must_be_zero("P2 token regressions", r.token_regressions as i64);
    must_be_zero("P5 losses not notified", r.losses_unnotified.len() as i64);
    // The canary's workers write without a lost check (`--careless`), so the SDK cannot have told them first.
    if !r.canary {
        must_be_zero("P5 writes after a loss, before its notification", r.writes_before_notify.len() as i64);
    }
    must_be_zero("P6 renewals after another acquired", r.resurrections as i64);
    must_be_zero("P7 releases while another held", r.unsafe_releases as i64);
    must_be_zero("P8 nested acquires with another token", r.reentrancy_violations as i64);
    must_be_zero("P10 false alarms in quiet periods", r.false_alarms as i64);
    must_be_zero("workers that exited on their own", r.worker_crashes.len() as i64);
    must_be_zero("P11 fair waits over the bound", r.fair_wait_violations as i64);
    must_be_zero("failover double grants not fenced", r.failover_unfenced as i64);
    must_be_zero("rwlock writer with another hold (fenced)", r.rw_writer_overlaps as i64);
    must_be_zero("rwlock reads that saw a write", r.rw_reads_changed as i64);
    must_be_zero("semaphore holders over the permits (fenced)", r.permit_holders_over as i64);
    must_be_zero("semaphore slot held twice (fenced)", r.slot_overlaps as i64);
    if !r.broken_fence {
        must_be_zero("stale writes accepted by the SDK fence", r.stale_fence_writes as i64);
    }
    must_be_zero("semaphore slot out of range", r.slot_out_of_range as i64);
    if r.acquire_ok == 0 {
        f.push("no acquisition at all".into());
    }
    if !r.final_phase_missing.is_empty() {
        f.push(format!("P9 final phase: no acquisition after the heal by {}", r.final_phase_missing.join(", ")));
    }
    if r.broken_fence && r.stale_fence_writes == 0 {
        f.push("broken register: no stale write accepted by the SDK fence — the check missed the mutant".into());
    }
    if r.double_grant && r.overlap_pairs == 0 {
        f.push("double-grant canary: no two sessions believed they held at once — the faults did not bite".into());
    } else if r.canary && !r.double_grant && r.shadow.total() == 0 {
        f.push("canary: no violation without fencing — the faults did not bite".into());
    }
    f
}

fn opt_s(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{v:.1}s"))
}

fn verdict(ok: bool) -> &'static str {
    if ok { "[PASS]" } else { "[FAIL]" }
}

/// One Markdown row per run, for the README's Safety table.
pub fn table(reports: &[Report]) -> String {
    let mut s = String::from(
        "| run | clients | acquisitions ok (of them go) | faults | violations with fencing | SDK fence writes ok/refused (stale ok) | without fencing (interleave/stale/lost) | \
         cas-unique | token dup/regress | losses notified | renew after other (P6) | unsafe release (P7) | \
         recovery p50/max | final phase | false alarms | fair waits over bound (P11) | failover double grants (unfenced) | \
         result |\n",
    );
    s += "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
    for r in reports {
        let faults: u64 = r.faults.values().sum();
        let pol = |p: &PolicyFigures| format!("{}/{}/{}", p.interleave, p.stale_accepted, p.lost_updates);
        let mut run = r.run.replace("backend=", "").replace(" profile=", " ").replace(" seed=", " seed ");
        if r.broken_fence {
            run += " (broken register: stale writes must show)";
        }
        if r.double_grant {
            run += " (a majority skewed: a double grant must show)";
        }
        s += &format!(
            "| {run} | {} | {} ({}) | {faults} | {} | {}/{} ({}) | {} | {} | {}/{} | {}/{} | {} | {} | {}/{} | {}/{} in {} | {} | {} | {} | {} |\n",
            langs(r),
            r.acquire_ok,
            r.acquire_ok_by_lang.get("go").map_or("-".into(), |n| n.to_string()),
            r.fenced.total(),
            r.fence_writes_accepted,
            r.fence_writes_refused,
            r.stale_fence_writes,
            pol(&r.shadow),
            pol(&r.cas),
            r.token_duplicates,
            r.token_regressions,
            r.losses_notified,
            r.losses,
            r.resurrections,
            r.unsafe_releases,
            opt_s(r.recovery_p50_s),
            opt_s(r.recovery_max_s),
            r.clients.len() - r.final_phase_missing.len(),
            r.clients.len(),
            opt_s(r.final_phase_s),
            r.false_alarms,
            if r.fair { format!("{}/{}", r.fair_wait_violations, r.fair_waits_checked) } else { "-".into() },
            if r.faults.keys().any(|f| Fault::fails_over(f)) {
                format!("{} ({})", r.failover_overlaps, r.failover_unfenced)
            } else {
                "-".into()
            },
            if r.failures.is_empty() { "PASS" } else { "FAIL" },
        );
    }
    s
}

/// The clients per language: `go×1, node×1, python×2, rust×2`.
fn langs(r: &Report) -> String {
    let mut langs: BTreeMap<&str, usize> = BTreeMap::new();
    for l in r.clients.values() {
        *langs.entry(l).or_default() += 1;
    }
    let langs: Vec<String> = langs.iter().map(|(l, n)| format!("{l}×{n}")).collect();
    langs.join(", ")
}

/// The §6 layout.
pub fn render(r: &Report) -> String {
    let faults: Vec<String> = r.faults.iter().map(|(f, n)| format!("{f}×{n}")).collect();
    let pol = |p: &PolicyFigures| {
        format!("interleave={} stale-accepted={} lost-updates={}", p.interleave, p.stale_accepted, p.lost_updates)
    };
    let mut s = String::new();
    s += &format!("{} duration={:.1}s clients={} ({})\n", r.run, r.duration_s, r.clients.len(), langs(r));
    s += &format!(
        "acquisitions: ok={} fail={} info={}   releases: ok={} fail={}   nested: {}\n",
        r.acquire_ok, r.acquire_fail, r.acquire_info, r.release_ok, r.release_fail, r.nested
    );
    s += &format!("faults: {}\n", if faults.is_empty() { "none".into() } else { faults.join(" ") });
    s += &format!("violations with fencing:    {}   {}\n", pol(&r.fenced), verdict(r.fenced.total() == 0));
    let canary = if r.canary && !r.double_grant { verdict(r.shadow.total() > 0) } else { "(measured)" };
    s += &format!("violations without fencing: {}   {}\n", pol(&r.shadow), canary);
    s += &format!("           cas-unique:      {}   (measured)\n", pol(&r.cas));
    s += &format!(
        "believed-overlap: pairs={} total={:.1}s max={:.1}s   {}\n",
        r.overlap_pairs,
        r.overlap_total_s,
        r.overlap_max_s,
        if r.double_grant { verdict(r.overlap_pairs > 0) } else { "(measured)" }
    );
    s += &format!(
        "tokens: duplicates={} regressions={}   {}\n",
        r.token_duplicates,
        r.token_regressions,
        verdict(r.token_duplicates + r.token_regressions == 0)
    );
    s += &format!(
        "lock-lost notifications: losses={} delivered={} (p50 {:+}ms, max {:+}ms) undelivered={}{}   {}\n",
        r.losses,
        r.losses_notified,
        r.notify_latency_p50_ms.unwrap_or(0),
        r.notify_latency_max_ms.unwrap_or(0),
        r.losses_unnotified.len(),
        listed(&r.losses_unnotified, " "),
        verdict(r.losses_unnotified.is_empty())
    );
    s += &format!(
        "                         unnotified while the client's own clock was moved={}{}   (measured)\n",
        r.losses_unnotified_clock_moved.len(),
        listed(&r.losses_unnotified_clock_moved, " ")
    );
    s += &format!(
        "                         writes before the notification={}{}   {}\n",
        r.writes_before_notify.len(),
        listed(&r.writes_before_notify, " "),
        if r.canary { "(measured: careless workers)" } else { verdict(r.writes_before_notify.is_empty()) }
    );
    s += &format!(
        "                         stale attempts after notify={} notified without a competitor={}\n",
        r.stale_attempts_after_notify, r.notified_without_competitor
    );
    s += &format!(
        "watchdog: renewals ok={} fail={} resurrections={}   unsafe releases={}   reentrancy={}   {}\n",
        r.renew_ok,
        r.renew_fail,
        r.resurrections,
        r.unsafe_releases,
        r.reentrancy_violations,
        verdict(r.resurrections + r.unsafe_releases + r.reentrancy_violations == 0)
    );
    s += &format!(
        "recovery after heal: p50={} max={}; final phase: {}/{} clients acquired in {}   {}\n",
        opt_s(r.recovery_p50_s),
        opt_s(r.recovery_max_s),
        r.clients.len() - r.final_phase_missing.len(),
        r.clients.len(),
        opt_s(r.final_phase_s),
        verdict(r.final_phase_missing.is_empty())
    );
    s += &format!("false alarms in quiet periods: {}   {}\n", r.false_alarms, verdict(r.false_alarms == 0));
    s += &format!(
        "workers that exited on their own: {}{}   {}\n",
        r.worker_crashes.len(),
        listed(&r.worker_crashes, ", "),
        verdict(r.worker_crashes.is_empty())
    );
    for ex in &r.false_alarm_examples {
        s += &format!("    {ex}\n");
    }
    if r.fair {
        s += &format!(
            "fair wait bound (3 × (grants to others + 1) × TTL): checked={} over={} worst={}   {}\n",
            r.fair_waits_checked,
            r.fair_wait_violations,
            r.fair_wait_max_ratio.map_or("-".into(), |w| format!("{:.0}%", w * 100.0)),
            verdict(r.fair_wait_violations == 0)
        );
        for ex in &r.fair_wait_examples {
            s += &format!("    {ex}\n");
        }
    }
    if r.faults.keys().any(|f| Fault::fails_over(f)) {
        s += &format!(
            "failover: double grants={} of them not fenced={}   {}\n",
            r.failover_overlaps,
            r.failover_unfenced,
            verdict(r.failover_unfenced == 0)
        );
        for ex in &r.failover_examples {
            s += &format!("    {ex}\n");
        }
    }
    match r.workload.as_str() {
        "rwlock" => {
            s += &format!(
                "rwlock: writer with another hold (fenced)={} reads that saw a write={} believed holders max={}   {}\n",
                r.rw_writer_overlaps,
                r.rw_reads_changed,
                r.believed_holders_max,
                verdict(r.rw_writer_overlaps + r.rw_reads_changed == 0)
            );
        }
        "semaphore" => {
            s += &format!(
                "semaphore({}): holders max (fenced)={} over the permits={} slot held twice={} slot out of range={} \
                 believed holders max={}   {}\n",
                r.permits.map_or("?".into(), |p| p.to_string()),
                r.permit_holders_max,
                r.permit_holders_over,
                r.slot_overlaps,
                r.slot_out_of_range,
                r.believed_holders_max,
                verdict(r.permit_holders_over + r.slot_overlaps + r.slot_out_of_range == 0)
            );
        }
        "election" => s += &format!("election: believed leaders max={}\n", r.believed_holders_max),
        _ => {}
    }
    let stale = match r.broken_fence {
        true => format!("{} (a broken register: must be caught)", verdict(r.stale_fence_writes > 0)),
        false => verdict(r.stale_fence_writes == 0).to_string(),
    };
    s += &format!(
        "SDK fence writes: accepted={} refused={} stale accepted={}   {stale}\n",
        r.fence_writes_accepted, r.fence_writes_refused, r.stale_fence_writes,
    );
    for ex in &r.stale_fence_examples {
        s += &format!("    {ex}\n");
    }
    for f in &r.failures {
        s += &format!("FAIL: {f}\n");
    }
    s
}

#[cfg(test)]
mod tests {
    //! Known-bad histories: each must trip exactly the property it breaks; the clean one trips none.
    use super::*;

    const S: u64 = 1_000_000_000;

    #[derive(Default)]
    struct H(Vec<Event>);

    impl H {
        fn run(mut self, start: u64, faults: u64, heal: u64, end: u64) -> Self {
            for (f, t) in [("start", start), ("faults", faults), ("heal", heal), ("end", end)] {
                self.0.push(Event::new("run", "phase", f, t));
            }
            self
        }
        fn w(mut self, t: u64, kind: &str, f: &str, client: &str, session: Option<&str>, token: Option<u64>) -> Self {
            let mut e = Event::new("worker", kind, f, t);
            e.client = Some(client.into());
            e.lang = Some("rust".into());
            e.pid = Some(client.len() as u32);
            e.session = session.map(Into::into);
            e.token = token;
            if kind == "fail" && f != "acquire" {
                e.error = Some("LOCK_LOST".into());
            }
            self.0.push(e);
            self
        }
        /// A whole hold: acquire invoke/ok at `t`, release invoke/ok at `t2`.
        fn hold(self, t: u64, t2: u64, client: &str, session: &str, token: u64) -> Self {
            self.w(t, "invoke", "acquire", client, None, None)
                .w(t + 1, "ok", "acquire", client, Some(session), Some(token))
                .w(t2, "invoke", "release", client, Some(session), Some(token))
                .w(t2 + 1, "ok", "release", client, Some(session), Some(token))
        }
        fn op(
            mut self,
            t: u64,
            f: &str,
            session: &str,
            token: u64,
            ok: [bool; 3],
            (before, after): (i64, i64),
        ) -> Self {
            let mut e = Event::new("referee", "op", f, t);
            e.session = Some(session.into());
            e.token = Some(token);
            e.ok = Some(ok);
            e.before = Some([before; 3]);
            e.after = Some([after; 3]);
            self.0.push(e);
            self
        }
        fn fault(mut self, t: u64, kind: &str, f: &str) -> Self {
            self.0.push(Event::new("nemesis", kind, f, t));
            self
        }
        fn check(&self, canary: bool) -> Report {
            check(&self.0, Expect { canary, ..Expect::default() })
        }
        /// The run's label names the workload (`workload=semaphore permits=2`).
        fn workload(mut self, words: &str) -> Self {
            if let Some(start) = self.0.iter_mut().find(|e| e.is("run", "phase", "start")) {
                start.detail = Some(format!("backend=redis profile=ci seed=1 ttl=2000ms {words}"));
            }
            self
        }
        /// A whole hold of the rw or semaphore workload: `hold` on its acquire events, `slot` on its ok.
        #[allow(clippy::too_many_arguments)]
        fn hold_as(
            self,
            t: u64,
            t2: u64,
            client: &str,
            session: &str,
            token: u64,
            hold: &str,
            slot: Option<u32>,
        ) -> Self {
            let mut h = self.hold(t, t2, client, session, token);
            for e in h.0.iter_mut().filter(|e| e.session.as_deref() == Some(session) || e.t_ref == t) {
                if e.f.as_deref() == Some("acquire") {
                    e.hold = Some(hold.into());
                    e.slot = slot;
                }
            }
            h
        }
        /// A referee op on register `key` by a `hold`.
        #[allow(clippy::too_many_arguments)]
        fn op_on(
            self,
            t: u64,
            f: &str,
            key: &str,
            hold: &str,
            session: &str,
            token: u64,
            ok: [bool; 3],
            v: (i64, i64),
        ) -> Self {
            let mut h = self.op(t, f, session, token, ok, v);
            let e = h.0.last_mut().expect("the op");
            e.detail = Some(key.into());
            e.hold = Some(hold.into());
            h
        }
    }

    /// Two readers of one run (token 30) overlap, then a writer (31) after them; all after the heal is quiet.
    fn rw_clean() -> H {
        clean()
            .workload("workload=rwlock")
            .hold_as(10 * S, 13 * S, "a", "r1", 30, "read", None)
            .hold_as(11 * S, 14 * S, "b", "r2", 30, "read", None)
            .op_on(10 * S + 10, "read", "register", "read", "r1", 30, ALL, (0, 0))
            .op_on(11 * S + 10, "read", "register", "read", "r2", 30, ALL, (0, 0))
            .op_on(12 * S + 10, "read", "register", "read", "r1", 30, ALL, (0, 0))
            .op_on(13 * S + 10, "read", "register", "read", "r2", 30, ALL, (0, 0))
            .hold_as(15 * S, 16 * S, "a", "w1", 31, "write", None)
            .op_on(15 * S + 10, "read", "register", "write", "w1", 31, ALL, (0, 0))
            .op_on(15 * S + 20, "write", "register", "write", "w1", 31, ALL, (0, 1))
    }

    #[test]
    fn readers_of_one_run_share_a_token_and_overlap_without_a_violation() {
        let r = rw_clean().check(false);
        assert_eq!(r.failures, Vec::<String>::new(), "{}", render(&r));
        assert_eq!((r.workload.as_str(), r.overlap_pairs, r.token_duplicates), ("rwlock", 0, 0));
        assert_eq!((r.rw_writer_overlaps, r.rw_reads_changed, r.fenced.interleave), (0, 0, 0));
        assert_eq!(r.believed_holders_max, 2);
        assert!(render(&r).contains("rwlock: writer with another hold (fenced)=0"), "{}", render(&r));
    }

    #[test]
    fn a_writer_whose_fenced_ops_interleave_with_a_reader_is_caught() {
        // A writer granted r1's token (a backend that handed one token to a write and a read run) writes while r1
        // reads: the fence cannot tell them apart, the checker must.
        let r = rw_clean()
            .hold_as(12 * S, 12 * S + 500, "c", "w0", 30, "write", None)
            .op_on(12 * S + 20, "read", "register", "write", "w0", 30, ALL, (0, 0))
            .op_on(12 * S + 30, "write", "register", "write", "w0", 30, ALL, (0, 1))
            .op_on(12 * S + 40, "read", "register", "read", "r2", 30, ALL, (1, 1))
            .check(false);
        assert!(r.rw_writer_overlaps >= 1, "{}", render(&r));
        assert!(r.failures.iter().any(|f| f.starts_with("rwlock writer with another hold")), "{:?}", r.failures);
        assert!(r.overlap_pairs >= 1 && r.token_duplicates >= 1, "{}", render(&r));
        // Its write landed between r2's reads: they saw different values.
        assert!(r.rw_reads_changed >= 1, "{}", render(&r));
    }

    #[test]
    fn a_reader_that_saw_a_write_during_its_hold_is_caught() {
        let mut h = rw_clean();
        let last = h.0.iter_mut().rfind(|e| e.session.as_deref() == Some("r2") && e.src == "referee");
        last.expect("r2's second read").after = Some([5; 3]);
        let r = h.check(false);
        assert_eq!(r.rw_reads_changed, 1, "{}", render(&r));
        assert!(r.failures.iter().any(|f| f.starts_with("rwlock reads that saw a write")), "{:?}", r.failures);
    }

    /// Two permits: slot 0 (tokens 40, 41 in turn) and slot 1 (token 7) at once; one register per slot.
    fn sem_clean() -> H {
        clean()
            .workload("workload=semaphore permits=2")
            .hold_as(10 * S, 12 * S, "a", "p1", 40, "permit", Some(0))
            .hold_as(11 * S, 14 * S, "b", "p2", 7, "permit", Some(1))
            .hold_as(13 * S, 15 * S, "c", "p3", 41, "permit", Some(0))
            .op_on(10 * S + 10, "read", "register.slot0", "permit", "p1", 40, ALL, (0, 0))
            .op_on(11 * S + 10, "read", "register.slot1", "permit", "p2", 7, ALL, (0, 0))
            .op_on(11 * S + 20, "write", "register.slot0", "permit", "p1", 40, ALL, (0, 1))
            .op_on(13 * S + 10, "read", "register.slot0", "permit", "p3", 41, ALL, (1, 1))
            .op_on(13 * S + 20, "write", "register.slot1", "permit", "p2", 7, ALL, (0, 1))
            .op_on(14 * S + 20, "write", "register.slot0", "permit", "p3", 41, ALL, (1, 2))
            .hold_as(25 * S, 26 * S, "c", "p9", 42, "permit", Some(0))
    }

    #[test]
    fn permits_of_two_slots_overlap_and_their_tokens_are_per_slot() {
        let r = sem_clean().check(false);
        assert_eq!(r.failures, Vec::<String>::new(), "{}", render(&r));
        // Token 7 on slot 1 after 40 on slot 0 is no regression or stale write: another register, another counter.
        assert_eq!((r.token_regressions, r.fenced.stale_accepted, r.fenced.lost_updates), (0, 0, 0));
        assert_eq!((r.permit_holders_max, r.permit_holders_over, r.slot_overlaps), (2, 0, 0));
        assert_eq!((r.overlap_pairs, r.believed_holders_max), (0, 2));
    }

    #[test]
    fn a_stale_write_to_a_slot_the_fence_accepted_is_p1() {
        // p1 (40), paused, writes slot 0 after p3 (41) read it, and the fence took it.
        let r = sem_clean().op_on(13 * S + 30, "write", "register.slot0", "permit", "p1", 40, ALL, (1, 2)).check(false);
        assert_eq!(r.fenced.stale_accepted, 1, "{}", render(&r));
        assert!(r.failures.iter().any(|f| f.starts_with("P1 fenced stale")), "{:?}", r.failures);
        assert!(r.failures.iter().any(|f| f.starts_with("semaphore slot held twice")), "{:?}", r.failures);
        // Refused, it is what fencing is for.
        let r = sem_clean()
            .op_on(13 * S + 30, "write", "register.slot0", "permit", "p1", 40, [false, true, false], (1, 1))
            .check(false);
        assert_eq!((r.fenced.stale_accepted, r.slot_overlaps), (0, 0), "{}", render(&r));
    }

    #[test]
    fn more_holders_than_permits_are_caught() {
        // d holds slot 1 with p2's token (a duplicate grant) while p1 and p2 hold: three holders of two permits.
        let r = sem_clean()
            .hold_as(11 * S + 12, 12 * S + 50, "d", "p4", 7, "permit", Some(1))
            .op_on(11 * S + 14, "read", "register.slot1", "permit", "p4", 7, ALL, (0, 0))
            .op_on(11 * S + 16, "write", "register.slot1", "permit", "p4", 7, ALL, (0, 1))
            .check(false);
        assert_eq!((r.permit_holders_max, r.permit_holders_over), (3, 1), "{}", render(&r));
        assert!(r.failures.iter().any(|f| f.starts_with("semaphore holders over the permits")), "{:?}", r.failures);
        assert!(r.slot_overlaps >= 1 && r.token_duplicates == 1, "{}", render(&r));
    }

    #[test]
    fn a_permit_outside_the_slots_is_caught() {
        let r = sem_clean().hold_as(16 * S, 17 * S, "d", "p5", 1, "permit", Some(2)).check(false);
        assert_eq!(r.slot_out_of_range, 1, "{}", render(&r));
        assert!(r.failures.iter().any(|f| f.starts_with("semaphore slot out of range")), "{:?}", r.failures);
    }

    const ALL: [bool; 3] = [true, true, true];

    /// Two clients taking turns, a fault in the middle, both acquiring after the heal.
    fn clean() -> H {
        H::default()
            .run(0, 3 * S, 20 * S, 30 * S)
            .hold(S, 2 * S, "a", "a1", 10)
            .op(S + 10, "read", "a1", 10, ALL, (0, 0))
            .op(S + 20, "write", "a1", 10, ALL, (0, 1))
            .hold(4 * S, 5 * S, "b", "b1", 11)
            .op(4 * S + 10, "read", "b1", 11, ALL, (1, 1))
            .op(4 * S + 20, "write", "b1", 11, ALL, (1, 2))
            .fault(6 * S, "start", "client-pause")
            .fault(8 * S, "stop", "client-pause")
            .hold(21 * S, 22 * S, "a", "a2", 100)
            .hold(23 * S, 24 * S, "b", "b2", 200)
    }

    #[test]
    fn a_clean_history_passes() {
        let r = clean().check(false);
        assert_eq!(r.failures, Vec::<String>::new(), "{}", render(&r));
        assert_eq!(r.acquire_ok, 4);
        assert_eq!(r.faults.get("client-pause"), Some(&1));
        assert!(r.final_phase_s.is_some_and(|t| (t - 3.0).abs() < 1e-6), "{:?}", r.final_phase_s);
    }

    /// The Go worker (etcd's clients through fencelockd): its own language, no nested acquires; the table counts its
    /// acquisitions.
    #[test]
    fn a_go_worker_is_one_more_client_and_the_table_counts_it() {
        let mut h = clean()
            .w(25 * S, "invoke", "acquire", "c6", None, None)
            .w(25 * S + 1, "ok", "acquire", "c6", Some("g1"), Some(300))
            .w(26 * S, "invoke", "release", "c6", Some("g1"), Some(300))
            .w(26 * S + 1, "ok", "release", "c6", Some("g1"), Some(300));
        for e in h.0.iter_mut().filter(|e| e.client.as_deref() == Some("c6")) {
            e.lang = Some("go".into());
        }
        let r = h.check(false);
        assert_eq!(r.failures, Vec::<String>::new(), "{}", render(&r));
        assert_eq!(r.clients.get("c6").map(String::as_str), Some("go"));
        assert_eq!(r.acquire_ok_by_lang.get("go"), Some(&1));
        assert!(render(&r).contains("(go×1, rust×2)"), "{}", render(&r));
        let table = table(&[r]);
        assert!(table.contains("| go×1, rust×2 | 5 (1) |"), "{table}");
        assert_eq!(unfenced_violations(&h.0), 0);
        assert_eq!(unfenced_violations(&stale_write(false).0), 3);
    }

    #[test]
    fn the_canary_fails_when_the_faults_did_not_bite() {
        let r = clean().check(true);
        assert!(r.failures.iter().any(|f| f.starts_with("canary")), "{:?}", r.failures);
    }

    /// A paused stale holder (token 10) writes after b (11) read: fenced and cas reject, the shadow takes it.
    fn stale_write(fenced_accepts: bool) -> H {
        clean()
            .hold(10 * S, 15 * S, "a", "a9", 20)
            .hold(12 * S, 13 * S, "b", "b9", 21)
            .op(10 * S + 10, "read", "a9", 20, ALL, (2, 2))
            .op(12 * S + 10, "read", "b9", 21, ALL, (2, 2))
            .op(12 * S + 20, "write", "b9", 21, ALL, (2, 3))
            .op(14 * S, "write", "a9", 20, [fenced_accepts, true, false], (3, 3))
    }

    #[test]
    fn a_stale_write_counts_without_fencing_and_passes_the_canary() {
        let r = stale_write(false).w(13 * S, "lost", "lost", "a", Some("a9"), Some(20)).check(true);
        assert_eq!(r.failures, Vec::<String>::new(), "{}", render(&r));
        assert_eq!((r.shadow.interleave, r.shadow.stale_accepted, r.shadow.lost_updates), (1, 1, 1));
        assert_eq!((r.fenced.interleave, r.fenced.stale_accepted, r.fenced.lost_updates), (0, 0, 0));
        assert_eq!(r.cas.total(), 0);
        assert_eq!(r.overlap_pairs, 1);
        assert_eq!(r.losses, 1);
    }

    #[test]
    fn a_stale_write_the_fence_accepted_is_p1() {
        let r = stale_write(true).check(false);
        assert_eq!((r.fenced.interleave, r.fenced.stale_accepted), (1, 1));
        assert!(r.failures.iter().any(|f| f.starts_with("P1 fenced stale")), "{:?}", r.failures);
    }

    #[test]
    fn a_loss_without_notification_fails_and_a_notified_one_passes() {
        let r = stale_write(false).check(false);
        assert_eq!(r.losses_unnotified, vec!["a9".to_string()]);
        let r = stale_write(false).w(12 * S + 500_000_000, "lost", "lost", "a", Some("a9"), Some(20)).check(false);
        assert!(r.losses_unnotified.is_empty());
        assert_eq!(r.losses_notified, 1);
        assert_eq!(r.notify_latency_p50_ms, Some(499));
        // It wrote after the notification.
        assert_eq!(r.stale_attempts_after_notify, 1);
    }

    #[test]
    fn the_double_grant_canary_needs_two_believed_holders() {
        let expect = Expect { canary: true, double_grant: true, ..Expect::default() };
        let r = check(&stale_write(false).w(13 * S, "lost", "lost", "a", Some("a9"), Some(20)).0, expect);
        assert_eq!(r.overlap_pairs, 1);
        assert!(r.failures.is_empty(), "{:?}", r.failures);
        let r = check(&clean().0, expect);
        assert!(r.failures.iter().any(|f| f.starts_with("double-grant canary")), "{:?}", r.failures);
        assert!(!r.failures.iter().any(|f| f.starts_with("canary:")), "it asks for the double grant instead");
    }

    #[test]
    fn an_unnotified_loss_under_a_moved_own_clock_is_counted_not_failed() {
        let mut h = stale_write(false);
        let mut start = Event::new("nemesis", "start", "clock-jump", 11 * S);
        start.targets = Some(vec!["a".into()]);
        let mut stop = Event::new("nemesis", "stop", "clock-jump", 13 * S);
        stop.targets = Some(vec!["a".into()]);
        h.0.extend([start, stop]);
        let r = h.check(false);
        assert!(r.losses_unnotified.is_empty(), "{}", render(&r));
        assert_eq!(r.losses_unnotified_clock_moved, vec!["a9".to_string()]);
        // Another client's clock excuses nothing.
        let mut h = stale_write(false);
        let mut start = Event::new("nemesis", "start", "clock-jump", 11 * S);
        start.targets = Some(vec!["b".into()]);
        let mut stop = Event::new("nemesis", "stop", "clock-jump", 13 * S);
        stop.targets = Some(vec!["b".into()]);
        h.0.extend([start, stop]);
        assert_eq!(h.check(false).losses_unnotified, vec!["a9".to_string()]);
    }

    #[test]
    fn a_worker_that_exits_on_its_own_fails_the_run() {
        let mut h = clean();
        let mut e = Event::new("run", "exit", "worker-exit", 12 * S);
        (e.client, e.pid, e.detail) = (Some("c4".into()), Some(77), Some("signal: 13 (SIGPIPE)".into()));
        h.0.push(e);
        let r = h.check(false);
        assert_eq!(r.worker_crashes, vec!["c4 (77): signal: 13 (SIGPIPE)".to_string()]);
        assert!(r.failures.iter().any(|f| f.starts_with("workers that exited")), "{:?}", r.failures);
        assert!(clean().check(false).worker_crashes.is_empty());
    }

    #[test]
    fn a_fenced_write_before_the_loss_was_notified_fails_p5() {
        // a lost the lock at 12 s (b acquired), wrote at 14 s, and heard of the loss only at 14.5 s.
        let late = |h: H| {
            h.w(14 * S - 10, "invoke", "fence-write", "a", Some("a9"), Some(20)).w(
                14 * S + 500_000_000,
                "lost",
                "lost",
                "a",
                Some("a9"),
                Some(20),
            )
        };
        let r = late(stale_write(false)).check(false);
        assert_eq!(r.writes_before_notify, vec!["a9".to_string()]);
        assert!(r.failures.iter().any(|f| f.starts_with("P5 writes after a loss")), "{:?}", r.failures);
        // Told at 13 s, before the write: fine (the write itself is then a stale attempt after notify).
        let r = stale_write(false)
            .w(13 * S, "lost", "lost", "a", Some("a9"), Some(20))
            .w(14 * S - 10, "invoke", "fence-write", "a", Some("a9"), Some(20))
            .check(false);
        assert!(r.writes_before_notify.is_empty(), "{}", render(&r));
        // Held to it across a pause; not where a clock jump or a server restart took the hold early.
        for (fault, excused) in [("client-pause", false), ("clock-jump", true), ("server-kill", true)] {
            let mut h = late(stale_write(false));
            h.0.push(Event::new("nemesis", "start", fault, 11 * S));
            h.0.push(Event::new("nemesis", "stop", fault, 12 * S));
            assert_eq!(h.check(false).writes_before_notify.is_empty(), excused, "{fault}");
        }
    }

    #[test]
    fn not_held_from_a_release_tells_a_client_whose_clock_was_slow() {
        let mut h = stale_write(false);
        let e =
            h.0.iter_mut()
                .find(|e| e.session.as_deref() == Some("a9") && e.kind == "ok" && e.f.as_deref() == Some("release"));
        let e = e.expect("a9's release");
        e.kind = "fail".into();
        e.error = Some("NOT_HELD".into());
        let r = h.check(false);
        assert!(r.losses_unnotified.is_empty(), "{}", render(&r));
        assert_eq!(r.losses_notified, 1);
    }

    #[test]
    fn duplicate_and_regressed_tokens_are_p2() {
        let r = clean().hold(10 * S, 11 * S, "b", "b5", 11).check(false);
        assert_eq!(r.token_duplicates, 1);
        assert_eq!(r.token_regressions, 1);
        assert!(r.failures.iter().any(|f| f.starts_with("P2 token duplicates")));
        let r = clean().hold(10 * S, 11 * S, "b", "b5", 3).check(false);
        assert_eq!((r.token_duplicates, r.token_regressions), (0, 1));
        // Concurrent acquisitions may take tokens in either order.
        let r = H::default().run(0, 0, S, 2 * S).hold(10, 20, "a", "a1", 5).hold(9, 30, "b", "b1", 4).check(false);
        assert_eq!(r.token_regressions, 0);
    }

    #[test]
    fn a_renewal_after_another_acquired_is_p6() {
        let r = clean()
            .hold(10 * S, 15 * S, "a", "a9", 20)
            .hold(12 * S, 13 * S, "b", "b9", 21)
            .w(14 * S, "invoke", "renew", "a", Some("a9"), Some(20))
            .w(14 * S + 5, "ok", "renew", "a", Some("a9"), Some(20))
            .w(14 * S + 6, "lost", "lost", "a", Some("a9"), Some(20))
            .check(false);
        assert_eq!(r.resurrections, 1);
        assert!(r.failures.iter().any(|f| f.starts_with("P6")), "{:?}", r.failures);
        // A failed renewal is what should happen.
        let r = clean()
            .hold(10 * S, 15 * S, "a", "a9", 20)
            .hold(12 * S, 13 * S, "b", "b9", 21)
            .w(14 * S, "invoke", "renew", "a", Some("a9"), Some(20))
            .w(14 * S + 5, "fail", "renew", "a", Some("a9"), Some(20))
            .check(false);
        assert_eq!(r.resurrections, 0);
        assert!(r.losses_unnotified.is_empty(), "LOCK_LOST from renew is a notification");
    }

    #[test]
    fn an_older_grant_seen_late_takes_nothing_from_the_holder() {
        // b's grant (token 19) was made before a's (20) but reached b only at 12 s, after a pause; b lost it at
        // once. a's renewal at 14 s is no resurrection, and a lost nothing.
        let r = clean()
            .w(9 * S, "invoke", "acquire", "b", None, None)
            .w(10 * S, "invoke", "acquire", "a", None, None)
            .w(10 * S + 1, "ok", "acquire", "a", Some("a9"), Some(20))
            .w(12 * S, "ok", "acquire", "b", Some("b8"), Some(19))
            .w(12 * S + 1, "lost", "lost", "b", Some("b8"), Some(19))
            .w(12 * S + 2, "invoke", "release", "b", Some("b8"), Some(19))
            .w(12 * S + 3, "fail", "release", "b", Some("b8"), Some(19))
            .w(14 * S, "invoke", "renew", "a", Some("a9"), Some(20))
            .w(14 * S + 5, "ok", "renew", "a", Some("a9"), Some(20))
            .w(15 * S, "invoke", "release", "a", Some("a9"), Some(20))
            .w(15 * S + 1, "ok", "release", "a", Some("a9"), Some(20))
            .check(false);
        assert_eq!((r.resurrections, r.unsafe_releases, r.token_regressions), (0, 0, 0), "{}", render(&r));
        assert!(r.losses_unnotified.is_empty(), "{}", render(&r));
    }

    #[test]
    fn a_release_that_succeeds_while_another_holds_is_p7() {
        let r = clean().hold(10 * S, 14 * S, "a", "a9", 20).hold(12 * S, 16 * S, "b", "b9", 21).check(false);
        assert_eq!(r.unsafe_releases, 1);
        assert!(r.failures.iter().any(|f| f.starts_with("P7")), "{:?}", r.failures);
        // b had let go before a released: a's release found nobody to hurt.
        let r = clean().hold(10 * S, 14 * S, "a", "a9", 20).hold(12 * S, 13 * S, "b", "b9", 21).check(false);
        assert_eq!(r.unsafe_releases, 0);
    }

    #[test]
    fn a_nested_acquire_with_another_token_is_p8() {
        let r = clean().w(S + 5, "ok", "nested-acquire", "a", Some("a1"), Some(10)).check(false);
        assert_eq!((r.nested, r.reentrancy_violations), (1, 0));
        let r = clean().w(S + 5, "ok", "nested-acquire", "a", Some("a1"), Some(99)).check(false);
        assert_eq!(r.reentrancy_violations, 1);
    }

    #[test]
    fn alarms_in_quiet_periods_are_p10_but_not_during_faults() {
        // A notification in the warm-up.
        let r = clean().w(S + 100, "lost", "lost", "a", Some("a1"), Some(10)).check(false);
        assert_eq!(r.false_alarms, 1, "{}", render(&r));
        // A fenced rejection after the heal.
        let r = clean().op(23 * S + 10, "read", "b2", 200, [false, true, true], (2, 2)).check(false);
        assert_eq!(r.false_alarms, 1);
        // The same notification in the fault phase is no false alarm.
        let r = clean()
            .hold(9 * S, 11 * S, "a", "a5", 14)
            .w(10 * S, "lost", "lost", "a", Some("a5"), Some(14))
            .check(false);
        assert_eq!(r.false_alarms, 0, "{}", render(&r));
    }

    #[test]
    fn a_client_that_never_acquires_after_the_heal_fails_liveness() {
        let r = clean().hold(21 * S + 5, 21 * S + 9, "c", "c1", 150).hold(5 * S, 6 * S, "d", "d1", 12).check(false);
        assert_eq!(r.final_phase_missing, vec!["d".to_string()]);
        assert!(r.failures.iter().any(|f| f.starts_with("P9")));
    }

    #[test]
    fn a_killed_holder_ends_its_session_at_the_kill() {
        let mut h = clean().w(10 * S, "invoke", "acquire", "a", None, None).w(
            10 * S + 1,
            "ok",
            "acquire",
            "a",
            Some("a7"),
            Some(20),
        );
        let mut kill = Event::new("nemesis", "start", "client-kill", 11 * S);
        kill.pid = Some(1);
        h.0.push(kill);
        let h = h.hold(13 * S, 14 * S, "b", "b7", 21);
        let r = h.check(false);
        assert_eq!(r.overlap_pairs, 0, "{}", render(&r));
        assert!(r.losses_unnotified.is_empty());
    }

    /// The run's record of a fair backend, and its TTL (2 s) in the label.
    fn fair(mut h: H) -> H {
        let mut e = Event::new("run", "capability", "capability", 1);
        e.detail = Some("fencing native_wait fair".into());
        h.0.push(e);
        if let Some(start) = h.0.iter_mut().find(|e| e.is("run", "phase", "start")) {
            start.detail = Some("backend=etcd(3) profile=ci seed=1 ttl=2000ms".into());
        }
        h
    }

    #[test]
    fn a_fair_backend_must_not_keep_a_waiter_past_the_bound() {
        // c waits from `from` until 31 s; a2 (21 s) and b2 (23 s) are the grants to others after the heal.
        let waiter = |from: u64| {
            clean()
                .w(from, "invoke", "acquire", "c", None, None)
                .w(31 * S, "ok", "acquire", "c", Some("c1"), Some(300))
                .w(31 * S + 5, "invoke", "release", "c", Some("c1"), Some(300))
                .w(31 * S + 6, "ok", "release", "c", Some("c1"), Some(300))
        };
        // From 24 s: 7 s with no grant to anyone else, over the bound of 3 × 1 × 2 s.
        let r = fair(waiter(24 * S)).check(false);
        assert_eq!((r.fair_waits_checked, r.fair_wait_violations), (5, 1), "{}", render(&r));
        assert!(r.failures.iter().any(|f| f.starts_with("P11")), "{:?}", r.failures);
        assert_eq!(r.fair_wait_examples, vec!["c waited 7.0s while others got 0 grant(s) (bound 6.0s)".to_string()]);
        assert!(r.fair_wait_max_ratio.is_some_and(|w| w > 1.0), "{r:?}");
        // From 20.5 s: 10.5 s, but two grants to others came first, so the bound is 3 × 3 × 2 s = 18 s.
        let r = fair(waiter(20 * S + S / 2)).check(false);
        assert_eq!((r.fair_waits_checked, r.fair_wait_violations), (5, 0), "{}", render(&r));
        // An unfair backend is not held to it.
        let r = waiter(24 * S).check(false);
        assert_eq!((r.fair, r.fair_waits_checked, r.fair_wait_violations), (false, 0, 0));
        assert!(r.failures.is_empty(), "{:?}", r.failures);
        // Nor is a wait during a fault, or within 2×TTL after one.
        let r = fair(waiter(24 * S).fault(20 * S, "start", "server-kill").fault(21 * S, "stop", "server-kill"));
        let r = r.check(false);
        assert_eq!(r.fair_wait_violations, 0, "{}", render(&r));
        assert!(r.failures.is_empty(), "{:?}", r.failures);
        // 2×TTL after the stop, the fault is over.
        let r = fair(waiter(24 * S).fault(19 * S, "start", "server-kill").fault(19 * S + 1, "stop", "server-kill"));
        assert_eq!(r.check(false).fair_wait_violations, 1);
        assert!(render(&fair(clean()).check(false)).contains("fair wait bound"));
    }

    /// a (token 20) holds from 10 s; the master fails over at 11 s; b is granted token 21 at 12 s; a writes at 13 s.
    fn failover(fenced_accepts: bool) -> H {
        clean()
            .fault(11 * S, "start", "sentinel-failover")
            .hold(10 * S, 15 * S, "a", "a9", 20)
            .hold(12 * S, 14 * S, "b", "b9", 21)
            .op(10 * S + 10, "read", "a9", 20, ALL, (2, 2))
            .op(13 * S, "write", "a9", 20, [fenced_accepts, true, false], (2, 3))
            .fault(14 * S + 500_000_000, "stop", "sentinel-failover")
    }

    #[test]
    fn a_failover_that_grants_twice_must_fence_the_older_holder() {
        let r = failover(true).w(13 * S + 5, "lost", "lost", "a", Some("a9"), Some(20)).check(false);
        assert_eq!((r.failover_overlaps, r.failover_unfenced), (1, 1), "{}", render(&r));
        assert!(r.failures.iter().any(|f| f.starts_with("failover double grants")), "{:?}", r.failures);
        let example = "a9 (token 20) got a fenced write accepted 1.00s after b9 (token 21) was granted";
        assert_eq!(r.failover_examples, vec![example.to_string()]);
        // Fenced: the double grant is measured, not a failure of its own.
        let r = failover(false).w(13 * S + 5, "lost", "lost", "a", Some("a9"), Some(20)).check(false);
        assert_eq!((r.failover_overlaps, r.failover_unfenced), (1, 0), "{}", render(&r));
        assert!(!r.failures.iter().any(|f| f.starts_with("failover")), "{:?}", r.failures);
        // A holder paused through the failover outlives its lease whatever the backend does: not the failover's.
        let mut pause = Event::new("nemesis", "start", "client-pause", 10 * S + 500);
        pause.targets = Some(vec!["a".into()]);
        let mut h = failover(true);
        h.0.push(pause);
        let r = h.fault(12 * S + 500, "stop", "client-pause").check(false);
        assert_eq!(r.failover_overlaps, 0, "{}", render(&r));
        // The same overlap with no failover in the history is P4's business only.
        let mut h = failover(true);
        h.0.retain(|e| e.src != "nemesis");
        assert_eq!(h.check(false).failover_overlaps, 0);
    }

    /// The clean history as an election: each leader writes its term to the SDK register after its referee read.
    fn election(stale: bool) -> H {
        let mut h = clean()
            .workload("workload=election")
            .w(S + 12, "invoke", "fence-write", "a", Some("a1"), Some(10))
            .w(S + 14, "ok", "fence-write", "a", Some("a1"), Some(10))
            .w(4 * S + 12, "invoke", "fence-write", "b", Some("b1"), Some(11))
            .w(4 * S + 14, "ok", "fence-write", "b", Some("b1"), Some(11));
        // A deposed leader (a1) comes back after b1's write: refused, or (a register that forgot) accepted.
        h = h.w(4 * S + 50, "invoke", "fence-write", "a", Some("a1"), Some(10));
        h.w(4 * S + 52, if stale { "ok" } else { "fail" }, "fence-write", "a", Some("a1"), Some(10))
    }

    #[test]
    fn an_election_whose_register_refuses_the_deposed_leader_passes() {
        let r = election(false).check(false);
        assert_eq!(r.failures, Vec::<String>::new(), "{}", render(&r));
        assert_eq!((r.workload.as_str(), r.fence_writes_accepted, r.fence_writes_refused), ("election", 2, 1));
        assert!(render(&r).contains("stale accepted=0"), "{}", render(&r));
    }

    #[test]
    fn a_stale_term_the_sdk_register_accepted_fails_the_run() {
        let r = election(true).check(false);
        assert_eq!(r.stale_fence_writes, 1, "{}", render(&r));
        assert!(r.failures.iter().any(|f| f.starts_with("stale writes accepted by the SDK fence")), "{:?}", r.failures);
        assert!(r.stale_fence_examples[0].contains("token 10") && r.stale_fence_examples[0].contains("token 11 of b1"));
        // Concurrent writes are no evidence: b1's write completing after a1's began tells a1's register nothing.
        let mut h = election(true);
        for e in h.0.iter_mut().filter(|e| e.f.as_deref() == Some("fence-write") && e.session.as_deref() == Some("b1"))
        {
            e.t_ref += 50; // b1's ok now lands after a1's second invoke
        }
        assert_eq!(h.check(false).stale_fence_writes, 0);
    }

    #[test]
    fn each_semaphore_slot_is_a_register_of_its_own() {
        // The same writes, b1's to slot 1: a1's lower token on slot 0 is no stale write.
        let mut h = election(true);
        for e in h.0.iter_mut().filter(|e| e.f.as_deref() == Some("fence-write") && e.session.as_deref() == Some("b1"))
        {
            e.slot = Some(1);
        }
        assert_eq!(h.check(false).stale_fence_writes, 0);
    }

    #[test]
    fn a_run_on_a_broken_register_passes_only_if_its_stale_write_is_caught() {
        let broken = Expect { broken_fence: true, ..Expect::default() };
        let r = check(&election(true).0, broken);
        assert_eq!(r.failures, Vec::<String>::new(), "the stale write is the evidence: {}", render(&r));
        assert!(render(&r).contains("must be caught"), "{}", render(&r));
        let r = check(&election(false).0, broken);
        assert!(r.failures.iter().any(|f| f.starts_with("broken register")), "{:?}", r.failures);
        assert_eq!(stale_fence_count(&election(true).0), 1);
    }
}
