//! Runs the language-neutral scenarios of tests/conformance/ against every backend (DESIGN.md §7).
//! One test per backend; each prints its row of the scenario × backend matrix.

mod support;

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

use fencelock::{Client, ClientOptions, ErrorKind, HoldKind, Leader, Leadership, Lease, LockOptions};
use futures::StreamExt;
use serde_json::Value;
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// The longest any one step may take (the longest `pause` or `within_ms` of a scenario is a few seconds).
const STEP_BOUND: Duration = Duration::from_secs(60);

struct Scenario {
    name: String,
    requires: Vec<String>,
    unless: Vec<String>,
    steps: Vec<Value>,
}

fn scenarios() -> Vec<Scenario> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/conformance");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    files
        .iter()
        .map(|p| {
            let v: Value = serde_json::from_str(&std::fs::read_to_string(p).unwrap())
                .unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            let strings = |k: &str| -> Vec<String> {
                v[k].as_array().map(|a| a.iter().map(|s| s.as_str().unwrap().to_string()).collect()).unwrap_or_default()
            };
            Scenario {
                name: v["name"].as_str().unwrap().to_string(),
                requires: strings("requires"),
                unless: strings("unless"),
                steps: v["steps"].as_array().unwrap().clone(),
            }
        })
        .collect()
}

/// The state of one scenario run.
struct Run {
    url: String,
    unreachable: Option<String>,
    prefix: String,
    clients: HashMap<String, Client>,
    leases: HashMap<String, Held>,
    // Every name the scenario used, with the kind of hold it was used for (the clean check differs per family).
    names: Vec<(String, HoldKind)>,
    // Acquires started with `spawn`, awaited by `join`.
    tasks: HashMap<String, JoinHandle<fencelock::Result<Option<Held>>>>,
    // Observers started with `observe`: what each stream has reported, in order.
    observers: HashMap<String, tokio::sync::mpsc::UnboundedReceiver<fencelock::Result<Option<Leader>>>>,
    // When the previous and the current step began: `min_elapsed_ms` counts from the previous one.
    previous_start: Instant,
    current_start: Instant,
}

/// The kind of hold a `lock`/`try_lock` step asks for: `kind` "read", "write" or "permit" (with `permits`), else a
/// mutex.
fn kind(step: &Value) -> HoldKind {
    match step["kind"].as_str() {
        None => HoldKind::Exclusive,
        Some("read") => HoldKind::Read,
        Some("write") => HoldKind::Write,
        Some("permit") => HoldKind::Permit { permits: step["permits"].as_u64().unwrap() as u32 },
        Some("leader") => HoldKind::Leader,
        Some(other) => panic!("unknown kind {other}"),
    }
}

/// A hold a scenario keeps: a lease, or a leadership (a lease with the election's calls).
enum Held {
    Lease(Lease),
    Leader(Leadership),
}

impl std::ops::Deref for Held {
    type Target = Lease;

    fn deref(&self) -> &Lease {
        match self {
            Held::Lease(l) => l,
            Held::Leader(l) => l,
        }
    }
}

/// The value a step campaigns or proclaims with: `value` (UTF-8), or `value_len` bytes.
fn value(step: &Value) -> Vec<u8> {
    match step["value_len"].as_u64() {
        Some(n) => vec![b'v'; n as usize],
        None => step["value"].as_str().unwrap_or("").as_bytes().to_vec(),
    }
}

/// One acquire of `kind` through the public API: `lock` (`once` false) or `try_lock`; a campaign with `value` for
/// a leadership.
async fn acquire(
    client: Client,
    name: String,
    kind: HoldKind,
    value: Vec<u8>,
    opts: LockOptions,
    once: bool,
) -> fencelock::Result<Option<Held>> {
    if kind == HoldKind::Leader {
        let election = client.election(&name);
        return match once {
            false => election.campaign(&value, &opts).await.map(|l| Some(Held::Leader(l))),
            true => election.try_campaign(&value, &opts).await.map(|l| l.map(Held::Leader)),
        };
    }
    let lease = match (kind, once) {
        (HoldKind::Read, false) => client.rw_lock(&name).read(&opts).await.map(Some),
        (HoldKind::Read, true) => client.rw_lock(&name).try_read(&opts).await,
        (HoldKind::Write, false) => client.rw_lock(&name).write(&opts).await.map(Some),
        (HoldKind::Write, true) => client.rw_lock(&name).try_write(&opts).await,
        (HoldKind::Permit { permits }, false) => client.semaphore(&name, permits).acquire(&opts).await.map(Some),
        (HoldKind::Permit { permits }, true) => client.semaphore(&name, permits).try_acquire(&opts).await,
        (_, false) => client.lock(&name, &opts).await.map(Some),
        (_, true) => client.try_lock(&name, &opts).await,
    };
    lease.map(|l| l.map(Held::Lease))
}

fn ms(v: &Value) -> Option<Duration> {
    v.as_u64().map(Duration::from_millis)
}

fn expected_errors(step: &Value) -> Vec<ErrorKind> {
    let kinds: Vec<&str> = match &step["expect_error"] {
        Value::String(s) => vec![s.as_str()],
        Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
        _ => vec![],
    };
    kinds.into_iter().map(|k| ErrorKind::from_name(k).unwrap_or_else(|| panic!("unknown error kind {k}"))).collect()
}

/// `mentions` must appear in the error's message, and no `not_mentions` in its message, Display or Debug.
fn mentions(step: &Value, e: &fencelock::Error) -> Result<(), String> {
    let words = |field: &str| -> Vec<String> {
        step[field]
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_str).map(str::to_string).collect())
            .unwrap_or_default()
    };
    let texts = [e.message().to_string(), e.to_string(), format!("{e:?}")];
    if let Some(word) = words("mentions").into_iter().find(|w| !texts[0].contains(w.as_str())) {
        return Err(format!("the error does not mention {word:?}: {e}"));
    }
    for word in words("not_mentions") {
        if let Some(text) = texts.iter().find(|t| t.contains(word.as_str())) {
            return Err(format!("the error mentions {word:?}: {text}"));
        }
    }
    Ok(())
}

impl Run {
    fn name(&mut self, step: &Value) -> String {
        if let Some(n) = step["name_len"].as_u64() {
            return "n".repeat(n as usize);
        }
        let label = step["name"].as_str().unwrap_or("L");
        if label.is_empty() || label.contains('\0') {
            return label.to_string();
        }
        let name = format!("{}/{label}", self.prefix);
        let kind = match step["op"].as_str() {
            Some("lock" | "try_lock") => kind(step),
            Some("expect_leader" | "observe") => HoldKind::Leader,
            // A semaphore's count read first: its clean check is the semaphore's, not a mutex's.
            Some("expect_available") => HoldKind::Permit { permits: step["permits"].as_u64().unwrap_or(0) as u32 },
            _ => HoldKind::Exclusive,
        };
        if !self.names.iter().any(|(n, _)| *n == name) && !matches!(kind, HoldKind::Permit { permits: 0 }) {
            self.names.push((name.clone(), kind));
        }
        name
    }

    /// Checks an acquire's outcome against the step (`expect`, `min_elapsed_ms`) and keeps the lease `as`.
    async fn settle(
        &mut self,
        step: &Value,
        got: fencelock::Result<Option<Held>>,
    ) -> Result<fencelock::Result<()>, String> {
        let lease = match got {
            Ok(lease) => lease,
            Err(e) => return Ok(Err(e)),
        };
        let busy_expected = step["expect"].as_str() == Some("busy");
        match (lease, busy_expected) {
            (Some(lease), true) => {
                let _ = lease.release().await;
                Err("acquired, expected busy".into())
            }
            (None, false) => Err("busy, expected to acquire".into()),
            (None, true) => Ok(Ok(())),
            (Some(lease), false) => {
                // From the previous step's start: the hold this one waits out was written after it.
                let since = self.previous_start.elapsed();
                if let Some(min) = ms(&step["min_elapsed_ms"]).filter(|&m| since < m) {
                    return Err(format!("acquired {since:?} after the previous step began, sooner than {min:?}"));
                }
                if let Some(id) = step["as"].as_str() {
                    self.leases.insert(id.to_string(), lease);
                } else {
                    lease.release().await.map_err(|e| e.to_string())?;
                }
                Ok(Ok(()))
            }
        }
    }

    /// Runs one step, again and again within `eventually_ms` until it meets its expectations.
    async fn step(&mut self, step: &Value) -> Result<(), String> {
        self.previous_start = std::mem::replace(&mut self.current_start, Instant::now());
        // A step that never ends (a `lock` with no timeout behind a hold that is never released) fails the scenario
        // instead of hanging the run: the mutation check needs a failure, not its own timeout.
        match tokio::time::timeout(STEP_BOUND, self.step_bounded(step)).await {
            Ok(outcome) => outcome,
            Err(_) => Err(format!("did not finish within {STEP_BOUND:?}")),
        }
    }

    async fn step_bounded(&mut self, step: &Value) -> Result<(), String> {
        let Some(bound) = ms(&step["eventually_ms"]) else { return self.step_once(step).await };
        let deadline = Instant::now() + bound;
        loop {
            match self.step_once(step).await {
                Err(e) if Instant::now() >= deadline => return Err(format!("not within {bound:?}: {e}")),
                Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
                ok => return ok,
            }
        }
    }

    fn client(&self, step: &Value) -> &Client {
        let id = step["client"].as_str().unwrap();
        self.clients.get(id).unwrap_or_else(|| panic!("no client {id}"))
    }

    fn lease(&self, step: &Value, key: &str) -> &Held {
        let id = step[key].as_str().unwrap();
        self.leases.get(id).unwrap_or_else(|| panic!("no lease {id}"))
    }

    fn options(step: &Value) -> LockOptions {
        let mut o = LockOptions::default().ttl(ms(&step["ttl_ms"]).unwrap_or(Duration::from_secs(30)));
        if let Some(t) = ms(&step["timeout_ms"]) {
            o = o.timeout(t);
        }
        if let Some(w) = step["watchdog"].as_bool() {
            o = o.watchdog(w);
        }
        if let Some(owner) = step["owner"].as_str() {
            o = o.owner(owner);
        }
        if let Some(fair) = step["fair"].as_bool() {
            o = o.fair(fair);
        }
        o
    }

    /// Runs one step; `Err` describes a failed expectation.
    async fn step_once(&mut self, step: &Value) -> Result<(), String> {
        let op = step["op"].as_str().unwrap();
        let want = expected_errors(step);
        let started = Instant::now();
        let outcome: fencelock::Result<()> = match op {
            "connect" => {
                let url = match step["url"].as_str() {
                    Some("$UNREACHABLE") => match &self.unreachable {
                        Some(u) => u.clone(),
                        None => return Ok(()), // this backend has no such address (memory://)
                    },
                    Some(u) => u.to_string(),
                    None => self.url.clone(),
                };
                let mut opts = ClientOptions::default();
                if let Some(t) = ms(&step["connect_timeout_ms"]) {
                    opts = opts.connect_timeout(t);
                }
                Client::connect_with(&url, &opts).await.map(|c| {
                    self.clients.insert(step["client"].as_str().unwrap().to_string(), c);
                })
            }
            "close" => {
                self.client(step).close().await;
                Ok(())
            }
            "lock" | "try_lock" => {
                let name = self.name(step);
                let client = self.client(step).clone();
                let acquiring = acquire(client, name, kind(step), value(step), Self::options(step), op == "try_lock");
                if let Some(task) = step["spawn"].as_str() {
                    self.tasks.insert(task.to_string(), tokio::spawn(acquiring));
                    return Ok(());
                }
                self.settle(step, acquiring.await).await?
            }
            "join" => {
                let task = self.tasks.remove(step["task"].as_str().unwrap()).expect("join of a task never spawned");
                let got = task.await.map_err(|e| format!("the spawned acquire panicked: {e}"))?;
                self.settle(step, got).await?
            }
            "expect_slot" => {
                let slot = |l: &Lease| l.slot().ok_or_else(|| format!("lease {} has no slot", l.name()));
                let mine = slot(self.lease(step, "lease"))?;
                if step["eq"].is_string() && mine != slot(self.lease(step, "eq"))? {
                    return Err(format!("slot {mine} is not the slot of {}", step["eq"]));
                }
                if step["ne"].is_string() && mine == slot(self.lease(step, "ne"))? {
                    return Err(format!("slot {mine} is also the slot of {}", step["ne"]));
                }
                if let Some(below) = step["below"].as_u64().filter(|&b| u64::from(mine) >= b) {
                    return Err(format!("slot {mine} is not below {below}"));
                }
                Ok(())
            }
            "expect_available" => {
                let name = self.name(step);
                let permits = step["permits"].as_u64().unwrap() as u32;
                match self.client(step).semaphore(&name, permits).available().await {
                    Ok(n) if step["count"].as_u64().is_some_and(|c| c != u64::from(n)) => {
                        return Err(format!("{n} permits available, expected {}", step["count"]));
                    }
                    other => other.map(drop),
                }
            }
            "release" => self.lease(step, "lease").release().await,
            "proclaim" | "resign" => {
                let Held::Leader(leadership) = self.lease(step, "lease") else {
                    panic!("{op} of a lease that is no leadership")
                };
                if op == "proclaim" { leadership.proclaim(&value(step)).await } else { leadership.resign().await }
            }
            "expect_leader" => {
                let name = self.name(step);
                let leader = self.client(step).election(&name).leader().await.map_err(|e| e.to_string())?;
                self.check_leader(step, leader.as_ref())?;
                Ok(())
            }
            "observe" => {
                let name = self.name(step);
                let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
                let mut changes = Box::pin(self.client(step).election(&name).observe());
                tokio::spawn(async move {
                    while let Some(change) = changes.next().await {
                        if tx.send(change).is_err() {
                            return;
                        }
                    }
                });
                self.observers.insert(step["as"].as_str().unwrap().to_string(), rx);
                Ok(())
            }
            "expect_observed" => {
                let id = step["observer"].as_str().unwrap();
                let bound = ms(&step["within_ms"]).unwrap_or(Duration::from_secs(10));
                let rx = self.observers.get_mut(id).unwrap_or_else(|| panic!("no observer {id}"));
                let change = match tokio::time::timeout(bound, rx.recv()).await {
                    Ok(Some(change)) => change.map_err(|e| format!("observe failed: {e}"))?,
                    Ok(None) => return Err("the observer's stream ended".into()),
                    Err(_) => return Err(format!("no change observed within {bound:?}")),
                };
                self.check_leader(step, change.as_ref())?;
                Ok(())
            }
            "renew" => {
                let lease = self.lease(step, "lease");
                let r = lease.renew(ms(&step["ttl_ms"])).await;
                let min = ms(&step["min_remaining_ms"]).filter(|&m| r.is_ok() && lease.remaining() < m);
                if let Some(min) = min {
                    return Err(format!("remaining {:?} < {min:?} after renew", lease.remaining()));
                }
                r
            }
            "expect_token" => {
                let a = self.lease(step, "lease").fence();
                let (rel, other) = if step["gt"].is_string() { ("gt", "gt") } else { ("eq", "eq") };
                let b = self.lease(step, other).fence();
                let ok = if rel == "gt" { a > b } else { a == b };
                if !ok {
                    return Err(format!("token {a} is not {rel} {b}"));
                }
                Ok(())
            }
            "pause" => {
                tokio::time::sleep(ms(&step["ms"]).unwrap()).await;
                Ok(())
            }
            "expect_lost" => {
                let bound = ms(&step["within_ms"]).unwrap();
                let lease = self.lease(step, "lease");
                match tokio::time::timeout(bound, lease.lost()).await {
                    Ok(fencelock::LeaseEnd::Lost(_)) => {}
                    Ok(end) => return Err(format!("the lease ended without a loss: {end:?}")),
                    Err(_) => return Err(format!("lost did not fire within {bound:?}")),
                }
                Ok(())
            }
            "expect_not_lost" => {
                let lease = self.lease(step, "lease");
                if lease.is_lost() || !lease.is_valid() {
                    return Err(format!("lease lost={} valid={}", lease.is_lost(), lease.is_valid()));
                }
                Ok(())
            }
            "force_release" => {
                let name = self.name(step);
                self.client(step).force_release(&name).await.map(drop)
            }
            "expect_free" | "expect_held" => {
                let name = self.name(step);
                let info = self.client(step).inspect(&name).await.map_err(|e| e.to_string())?;
                if info.holder.is_some() != (op == "expect_held") {
                    return Err(format!("{op}: holder is {:?}", info.holder));
                }
                Ok(())
            }
            "fence_write" | "fence_read" => {
                let resource = format!("{}/{}", self.prefix, step["resource"].as_str().unwrap());
                let token = match step["token_of"].as_str() {
                    Some(_) => self.lease(step, "token_of").fence(),
                    None => step["token"].as_u64().unwrap(),
                };
                let value = step["value"].as_str().unwrap_or("").as_bytes().to_vec();
                let fence = self.client(step).fence(&resource);
                if op == "fence_write" {
                    fence.write(token, &value).await
                } else {
                    let got = fence.read().await.map_err(|e| e.to_string())?;
                    if got != (token, value.clone()) {
                        return Err(format!("read {got:?}, expected {:?}", (token, value)));
                    }
                    Ok(())
                }
            }
            other => panic!("unknown op {other}"),
        };
        if let Some(bound) = ms(&step["within_ms"]).filter(|&b| op != "expect_lost" && started.elapsed() > b) {
            return Err(format!("took {:?}, more than {bound:?}", started.elapsed()));
        }
        match (outcome, want.is_empty()) {
            (Ok(()), true) => Ok(()),
            (Ok(()), false) => Err(format!("succeeded, expected {want:?}")),
            (Err(e), true) => Err(format!("failed: {e}")),
            (Err(e), false) if want.contains(&e.kind()) => mentions(step, &e),
            (Err(e), false) => Err(format!("failed with {e}, expected {want:?}")),
        }
    }

    /// A leader read or observed against the step: `none`, or `value` and `term_of` (a leadership's term).
    fn check_leader(&self, step: &Value, leader: Option<&Leader>) -> Result<(), String> {
        if step["none"].as_bool() == Some(true) {
            return match leader {
                None => Ok(()),
                Some(l) => Err(format!("leader {l:?}, expected none")),
            };
        }
        let Some(l) = leader else { return Err("no leader, expected one".into()) };
        if step["value"].is_string() && l.value != value(step) {
            return Err(format!("leader value {:?}, expected {:?}", String::from_utf8_lossy(&l.value), step["value"]));
        }
        if step["term_of"].is_string() && l.term != self.lease(step, "term_of").fence() {
            return Err(format!("leader term {}, expected the term of {}", l.term, step["term_of"]));
        }
        Ok(())
    }

    /// After the scenario: nothing may be left held.
    async fn check_clean(&mut self) -> Result<(), String> {
        for lease in self.leases.values() {
            let _ = lease.release().await;
        }
        let checker = Client::connect(&self.url).await.map_err(|e| e.to_string())?;
        for client in self.clients.values() {
            if client.local_entries() != 0 {
                return Err(format!("{} local queue entries left", client.local_entries()));
            }
        }
        for task in self.tasks.values() {
            task.abort();
        }
        for (name, kind) in &self.names {
            let once = LockOptions::default();
            match kind {
                HoldKind::Read | HoldKind::Write => match checker.rw_lock(name).try_write(&once).await {
                    Ok(Some(lease)) => lease.release().await.map_err(|e| e.to_string())?,
                    Ok(None) => return Err(format!("read-write lock {name} left held")),
                    Err(e) if e.kind() == ErrorKind::Unsupported => {}
                    Err(e) => return Err(e.to_string()),
                },
                HoldKind::Leader => match checker.election(name).leader().await {
                    Ok(None) => {}
                    Ok(Some(l)) => return Err(format!("election {name} left a leader of term {}", l.term)),
                    Err(e) if e.kind() == ErrorKind::Unsupported => {}
                    Err(e) => return Err(e.to_string()),
                },
                HoldKind::Permit { permits } => match checker.semaphore(name, *permits).available().await {
                    Ok(n) if n != *permits => return Err(format!("semaphore {name} left {n} of {permits} permits")),
                    Err(e) if !matches!(e.kind(), ErrorKind::Unsupported | ErrorKind::InvalidArgument) => {
                        return Err(e.to_string());
                    }
                    _ => {}
                },
                _ => {
                    let info = checker.inspect(name).await.map_err(|e| e.to_string())?;
                    if info.holder.is_some() {
                        return Err(format!("{name} left held by {:?}", info.holder));
                    }
                }
            }
        }
        checker.close().await;
        Ok(())
    }
}

/// Runs every scenario on one backend and fails listing every failed scenario.
async fn run_backend(label: &str, url: String, unreachable: Option<&str>) {
    let probe = Client::connect(&url).await.unwrap_or_else(|e| panic!("{label}: cannot connect to {url}: {e}"));
    let caps = probe.capability();
    let flags: Vec<&str> = [
        ("fencing", caps.fencing),
        ("native_wait", caps.native_wait),
        ("fair", caps.fair),
        ("session_bound", caps.session_bound),
        ("rw_lock", caps.rw_lock),
        ("semaphore", caps.semaphore),
        ("election", caps.election),
    ]
    .into_iter()
    .filter_map(|(n, on)| on.then_some(n))
    .collect();
    let mut failures = Vec::new();
    let mut row = Vec::new();
    for sc in scenarios() {
        if sc.unless.iter().any(|c| flags.contains(&c.as_str()))
            || sc.requires.iter().any(|c| !flags.contains(&c.as_str()))
        {
            row.push(format!("{}=skip", sc.name));
            continue;
        }
        let mut run = Run {
            url: url.clone(),
            unreachable: unreachable.map(str::to_string),
            prefix: support::unique(&format!("conformance/{}", sc.name)),
            clients: HashMap::new(),
            leases: HashMap::new(),
            names: Vec::new(),
            tasks: HashMap::new(),
            observers: HashMap::new(),
            previous_start: Instant::now(),
            current_start: Instant::now(),
        };
        let mut result = Ok(());
        for (i, step) in sc.steps.iter().enumerate() {
            if let Err(e) = run.step(step).await {
                result = Err(format!("step {} {}: {e}", i + 1, step));
                break;
            }
        }
        if result.is_ok() {
            result = run.check_clean().await;
        }
        match result {
            Ok(()) => row.push(format!("{}=pass", sc.name)),
            Err(e) => {
                row.push(format!("{}=FAIL", sc.name));
                failures.push(format!("{label}/{}: {e}", sc.name));
            }
        }
    }
    println!("conformance matrix row: rust × {label}: {}", row.join(" "));
    assert!(failures.is_empty(), "conformance failures:\n{}", failures.join("\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory() {
    run_backend("memory", format!("memory://{}", support::unique("conformance")), None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite() {
    let dir = std::env::temp_dir().join(support::unique("fencelock-conformance"));
    std::fs::create_dir_all(&dir).unwrap();
    let url = format!("sqlite:{}", dir.join("locks.db").display());
    run_backend("sqlite", url, Some("sqlite:/nonexistent-dir/fencelock/locks.db")).await;
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A backend whose server the test command starts; its URL comes from `var`.
macro_rules! served_backend {
    ($test:ident, $var:literal, $unreachable:literal) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $test() {
            if let Some(url) = support::service_url($var) {
                run_backend(stringify!($test), url, Some($unreachable)).await;
            }
        }
    };
}

// The BACKENDS table: one line per served backend. An unreachable URL is a loopback port where nothing listens.
served_backend!(redis, "FENCELOCK_TEST_REDIS", "redis://127.0.0.1:1");
served_backend!(redis_tls, "FENCELOCK_TEST_REDIS_SECURE", "rediss://127.0.0.1:1");
served_backend!(redlock, "FENCELOCK_TEST_REDLOCK", "redlock://127.0.0.1:1,127.0.0.1:2,127.0.0.1:3");
served_backend!(redis_cluster, "FENCELOCK_TEST_REDIS_CLUSTER", "redis+cluster://127.0.0.1:1,127.0.0.1:2,127.0.0.1:3");
served_backend!(redis_sentinel, "FENCELOCK_TEST_SENTINEL", "redis+sentinel://127.0.0.1:1/fencelock-master");
served_backend!(etcd, "FENCELOCK_TEST_ETCD", "etcd://127.0.0.1:1");
served_backend!(postgres, "FENCELOCK_TEST_POSTGRES", "postgres://postgres@127.0.0.1:1/fencelock_test");
served_backend!(mysql, "FENCELOCK_TEST_MYSQL", "mysql://root@127.0.0.1:1/fencelock_test");
served_backend!(zk, "FENCELOCK_TEST_ZK", "zk://127.0.0.1:1");
