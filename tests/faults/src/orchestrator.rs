//! One run: servers, proxies, referee, N workers in several languages, the nemesis, the heal and the quiet phase,
//! then the history and the check (SAFETY-TESTING.md §2.1). Runs inside the private network namespace main.rs makes.

use crate::checker;
use crate::clock::t_ref;
use crate::history::{self, Event};
use crate::nemesis::{self, Fault, Profile, Step};
use crate::proxy::{Mode, Proxy};
use crate::referee;
use crate::sentinel;
use crate::servers::{self, Backend, Role, Servers};
use fencelock::{Client, ErrorKind, LockOptions};
use rand::{SeedableRng, rngs::StdRng};
use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::Notify;

const WARM_UP: Duration = Duration::from_secs(3);
/// Bound of the final phase: every client must acquire once within it after the heal.
const FINAL_PHASE: Duration = Duration::from_secs(30);
/// How much longer the canary may pause holders when its schedule did not bite (60 s of faults in all).
const CANARY_EXTRA: Duration = Duration::from_secs(40);

#[derive(Debug, Clone, clap::Args)]
pub struct RunArgs {
    #[arg(long, value_enum)]
    pub backend: Backend,
    #[arg(long, value_enum, default_value = "ci")]
    pub profile: Profile,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Number of client workers on the SDK (languages rotate through --langs).
    #[arg(long, default_value_t = 5)]
    pub clients: usize,
    /// The SDK workers' languages, in rotation (e.g. `rust` where the Python venv and the Node addon are not built).
    #[arg(long, value_delimiter = ',', value_parser = parse_lang, default_value = "rust,python,node")]
    pub langs: Vec<Lang>,
    /// No Go worker: by default the ci and soak profiles add one more client slot, a Go program on etcd's own
    /// clients talking to a fencelockd of its own (the canary never has one).
    #[arg(long)]
    pub no_go: bool,
    /// The Go worker (tests/faults/run.sh builds it from server/tests/go).
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/../../target/faults/goworker"))]
    pub go_worker: PathBuf,
    #[arg(long, default_value_t = 2000)]
    pub ttl_ms: u64,
    /// The repository root (workers, the venv, the Node package).
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))]
    pub root: PathBuf,
    /// Only these faults (comma-separated names, e.g. `client-pause,server-kill`) instead of the profile's menu.
    #[arg(long, value_delimiter = ',', value_parser = Fault::parse)]
    pub faults: Vec<Fault>,
    /// Clients connect straight to the servers, not through the fault proxies (the proxy faults then do nothing):
    /// tells a proxy artefact from a client behaviour.
    #[arg(long)]
    pub direct: bool,
    /// Appended to every client URL as its query (e.g. `wait_replicas=0`, `fair=true`): runs the same schedule with
    /// another backend setting.
    #[arg(long)]
    pub url_query: Option<String>,
    /// This locktest carries the `fence_accepts_older_token` mutant (tests/faults/run.sh builds it): the run must
    /// show stale writes accepted by the SDK fence, and the canary keeps pausing holders until one shows.
    #[arg(long)]
    pub broken_fence: bool,
    /// `server-clock-jump` skews a majority of the Redlock instances, one more than may fail: the known-bad run
    /// (with `--profile canary --faults server-clock-jump`) whose unfenced resource must break while the fence holds.
    #[arg(long)]
    pub skew_majority: bool,
    /// Where history.jsonl and report.json go (default: <root>/target/faults/<backend>-<profile>-<seed>, with
    /// `-<workload>` after the backend for the rw lock and the semaphore).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// What the workers hold: the mutex, a read-write lock (60 % reads), a semaphore's permits, or the leadership
    /// of an election (the term is the token).
    #[arg(long, value_enum, default_value = "mutex")]
    pub workload: Workload,
    /// The semaphore's permits (`--workload semaphore`).
    #[arg(long, default_value_t = 2)]
    pub permits: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Workload {
    Mutex,
    Rwlock,
    Semaphore,
    Election,
}

impl Workload {
    fn name(self) -> &'static str {
        match self {
            Workload::Mutex => "mutex",
            Workload::Rwlock => "rwlock",
            Workload::Semaphore => "semaphore",
            Workload::Election => "election",
        }
    }

    /// Why the backend cannot run it, if it cannot (`capability()` says what it has).
    fn unsupported(self, c: &fencelock::Capability) -> Option<&'static str> {
        match self {
            Workload::Rwlock if !c.rw_lock => Some("capability().rw_lock is false"),
            Workload::Semaphore if !c.semaphore => Some("capability().semaphore is false"),
            Workload::Election if !c.election => Some("capability().election is false"),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lang {
    Rust,
    Python,
    Node,
    /// The C API (ffi/include/fencelock.h): workers/worker.c, built by run.sh into target/faults/cworker.
    C,
    /// The jar's `FencelockClient`: workers/Worker.java, built by run.sh into target/faults/jworker.
    Java,
    /// etcd's Go clients through the slot's own fencelockd.
    Go,
}

/// Where tests/faults/run.sh puts the compiled workers, under the repository root.
const C_WORKER: &str = "target/faults/cworker";
const JAVA_WORKER: &str = "target/faults/jworker/worker";

fn parse_lang(name: &str) -> Result<Lang, String> {
    [Lang::Rust, Lang::Python, Lang::Node, Lang::C, Lang::Java]
        .into_iter()
        .find(|l| l.name() == name)
        .ok_or_else(|| format!("unknown worker language {name:?} (one of rust, python, node, c, java)"))
}

impl Lang {
    /// Whether its worker has the rw and semaphore workloads (the Go worker speaks etcd's lock API only).
    fn has_workloads(self) -> bool {
        !matches!(self, Lang::Go)
    }

    fn name(self) -> &'static str {
        match self {
            Lang::Rust => "rust",
            Lang::Python => "python",
            Lang::Node => "node",
            Lang::C => "c",
            Lang::Java => "java",
            Lang::Go => "go",
        }
    }
}

/// What the worker readers share with the nemesis.
#[derive(Debug, Default)]
struct Shared {
    history: Arc<Mutex<Vec<Event>>>,
    /// client → the session it holds now.
    holding: Mutex<HashMap<String, String>>,
    /// client → raw time of its last acquisition.
    last_ok: Mutex<HashMap<String, u64>>,
    acquired: Notify,
}

impl Shared {
    fn push(&self, e: Event) {
        self.history.lock().unwrap_or_else(|p| p.into_inner()).push(e);
    }
}

#[derive(Debug)]
struct Slot {
    client: String,
    lang: Lang,
    url: String,
    proxies: Vec<Proxy>,
    /// libfaketime's timestamp file, for slots whose clock the nemesis may move.
    clock: Option<PathBuf>,
    child: Option<Child>,
    stdin: Option<ChildStdin>,
    pid: u32,
    /// The Go slot's fencelockd: its address and process (the worker talks to it, it talks through the proxies).
    daemon: Option<(SocketAddr, Child)>,
}

fn signal_group(pid: u32, sig: i32) {
    // SAFETY: signals a process group this suite created (every worker leads its own).
    unsafe { libc::kill(-(pid as i32), sig) };
}

struct Run {
    args: RunArgs,
    out: PathBuf,
    referee: SocketAddr,
    shared: Arc<Shared>,
    slots: Vec<Slot>,
    servers: Servers,
    ttl: Duration,
    expected_exits: HashSet<u32>,
    /// This binary's path, taken at the start: a rebuild during the run replaces the file, and /proc/self/exe then
    /// names a deleted one.
    exe: PathBuf,
}

impl Run {
    fn nemesis_event(&self, kind: &str, fault: Fault, targets: Vec<String>, pid: Option<u32>, detail: String) {
        let mut e = Event::new("nemesis", kind, fault.name(), t_ref());
        e.targets = Some(targets);
        e.pid = pid;
        e.detail = Some(detail);
        self.shared.push(e);
    }

    /// Starts `fault` in the background of another (the mixed profile) for `d`, on a client's links or clock: a task
    /// that sets the fault, waits and undoes it, recording both ends. `None` if no slot can take it.
    fn background(&self, fault: Fault, pick: f64, d: Duration) -> Option<tokio::task::JoinHandle<()>> {
        let all: Vec<usize> = (0..self.slots.len()).collect();
        let ms = d.as_millis();
        let event = move |shared: &Shared, kind: &str, client: &str, detail: String| {
            let mut e = Event::new("nemesis", kind, fault.name(), t_ref());
            (e.targets, e.detail) = (Some(vec![client.to_string()]), Some(detail));
            shared.push(e);
        };
        let shared = self.shared.clone();
        match fault {
            Fault::ProxyDelay | Fault::ProxyLossy | Fault::ProxyFreeze => {
                let i = self.target(&all, pick)?;
                let (client, proxies) = (self.slots[i].client.clone(), self.slots[i].proxies.clone());
                let mode = match fault {
                    Fault::ProxyDelay => Mode::Delay(self.ttl.mul_f64(0.3 + 0.7 * pick)),
                    Fault::ProxyLossy => Mode::Lossy,
                    _ => Mode::Freeze,
                };
                Some(tokio::spawn(async move {
                    event(&shared, "start", &client, format!("{mode:?} for {ms}ms, in the background"));
                    proxies.iter().for_each(|p| p.set(mode));
                    tokio::time::sleep(d).await;
                    proxies.iter().for_each(|p| p.set(Mode::Pass));
                    event(&shared, "stop", &client, "pass".into());
                }))
            }
            Fault::ClockJump => {
                let clocked: Vec<usize> = all.into_iter().filter(|&i| self.slots[i].clock.is_some()).collect();
                let i = self.target(&clocked, pick)?;
                let (client, file) = (self.slots[i].client.clone(), self.slots[i].clock.clone()?);
                let jump = 2 * self.args.ttl_ms.div_ceil(1000) as i64 * if pick < 0.5 { 1 } else { -1 };
                Some(tokio::spawn(async move {
                    event(&shared, "start", &client, format!("{jump:+}s for {ms}ms, in the background"));
                    let _ = std::fs::write(&file, format!("{jump:+}\n"));
                    tokio::time::sleep(d).await;
                    let _ = std::fs::write(&file, "+0\n");
                    event(&shared, "stop", &client, "+0s".into());
                }))
            }
            _ => None,
        }
    }

    fn phase(&self, name: &str, detail: Option<String>) {
        let mut e = Event::new("run", "phase", name, t_ref());
        e.detail = detail;
        self.shared.push(e);
    }

    fn spawn_worker(&mut self, i: usize) -> Result<(), String> {
        let args = &self.args;
        let slot = &self.slots[i];
        let seed = (args.seed << 8) + i as u64;
        let common = vec![
            "--url".to_string(),
            slot.url.clone(),
            "--referee".into(),
            self.referee.to_string(),
            "--client".into(),
            slot.client.clone(),
            "--ttl-ms".into(),
            args.ttl_ms.to_string(),
            "--seed".into(),
            seed.to_string(),
        ];
        let mut cmd = match slot.lang {
            Lang::Go => {
                let addr = slot.daemon.as_ref().map(|d| d.0).ok_or("the Go slot has no fencelockd")?;
                let mut c = Command::new(&args.go_worker);
                c.args(["--mode", "faults-worker", "--endpoint", &addr.to_string(), "--name", "locktest"]);
                // etcd's API has no backend URL: the worker gets the protocol's other arguments.
                c.args(&common[2..8]).arg("--seed").arg((seed as i64).to_string());
                c
            }
            Lang::Rust => {
                let mut c = Command::new(&self.exe);
                c.arg("worker");
                c
            }
            Lang::Python => {
                let mut c = Command::new(args.root.join("target/python/venv/bin/python"));
                c.arg(args.root.join("tests/faults/workers/worker.py"));
                c
            }
            Lang::C => Command::new(args.root.join(C_WORKER)), // checked at the start
            Lang::Java => Command::new(args.root.join(JAVA_WORKER)),
            Lang::Node => {
                let mut c = Command::new("node");
                c.arg(args.root.join("tests/faults/workers/worker.mjs"));
                c.arg("--module").arg(args.root.join("node/index.js"));
                c
            }
        };
        if slot.lang != Lang::Go {
            cmd.args(&common);
            // The canary's users write without asking whether the lock was lost: only fencing protects them, which
            // is what it shows (a careful client's check after the SDK's own validity check leaves pauses no room).
            if args.profile == Profile::Canary {
                cmd.arg("--careless");
            }
            if args.workload != Workload::Mutex {
                cmd.args(["--workload", args.workload.name(), "--permits", &args.permits.to_string()]);
            }
        }
        if let Some(clock) = &slot.clock {
            cmd.envs(crate::clock::faketime_env(clock));
        }
        let stderr = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.out.join(format!("logs/{}.stderr", slot.client)))
            .map_err(|e| e.to_string())?;
        cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(stderr).kill_on_drop(true);
        cmd.process_group(0);
        // SAFETY: prctl only touches the child; no worker outlives the orchestrator.
        unsafe {
            cmd.pre_exec(|| {
                servers::child_setup();
                Ok(())
            });
        }
        let mut child = cmd.spawn().map_err(|e| format!("{} worker: {e}", slot.lang.name()))?;
        let stdout = child.stdout.take().expect("piped");
        let slot = &mut self.slots[i];
        slot.stdin = child.stdin.take();
        slot.pid = child.id().unwrap_or(0);
        slot.child = Some(child);
        let (shared, client) = (self.shared.clone(), slot.client.clone());
        tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let Ok(e) = serde_json::from_str::<Event>(&line) else {
                    eprintln!("locktest: {client}: not an event: {line}");
                    continue;
                };
                {
                    let mut holding = shared.holding.lock().unwrap_or_else(|p| p.into_inner());
                    match (e.kind.as_str(), e.f.as_deref()) {
                        ("ok", Some("acquire")) => {
                            holding.insert(client.clone(), e.session.clone().unwrap_or_default());
                            shared.last_ok.lock().unwrap_or_else(|p| p.into_inner()).insert(client.clone(), e.t_ref);
                            shared.acquired.notify_waiters();
                        }
                        ("invoke", Some("release")) | ("lost", _) => {
                            holding.remove(&client);
                        }
                        _ => {}
                    }
                }
                shared.push(e);
            }
        });
        Ok(())
    }

    /// Restarts any worker that exited (killed by the nemesis, or crashed: recorded).
    fn respawn_dead(&mut self) -> Result<(), String> {
        for i in 0..self.slots.len() {
            let exited = match self.slots[i].child.as_mut().map(|c| c.try_wait()) {
                Some(Ok(Some(status))) => Some(status),
                Some(Ok(None)) => None,
                _ => None,
            };
            if let Some(status) = exited {
                let pid = self.slots[i].pid;
                if !self.expected_exits.contains(&pid) {
                    let mut e = Event::new("run", "exit", "worker-exit", t_ref());
                    e.client = Some(self.slots[i].client.clone());
                    e.pid = Some(pid);
                    e.detail = Some(status.to_string());
                    self.shared.push(e);
                    eprintln!("locktest: worker {} (pid {pid}) exited on its own: {status}", self.slots[i].client);
                }
                self.shared.holding.lock().unwrap_or_else(|p| p.into_inner()).remove(&self.slots[i].client);
                self.spawn_worker(i)?;
            }
        }
        Ok(())
    }

    /// The slot to hit: a holder if there is one (among `among`), else any of `among`.
    fn target(&self, among: &[usize], pick: f64) -> Option<usize> {
        let holding = self.shared.holding.lock().unwrap_or_else(|p| p.into_inner());
        let holders: Vec<usize> =
            among.iter().copied().filter(|&i| holding.contains_key(&self.slots[i].client)).collect();
        let from = if holders.is_empty() { among.to_vec() } else { holders };
        (!from.is_empty()).then(|| from[(pick * from.len() as f64) as usize % from.len()])
    }

    async fn inject(&mut self, step: Step) -> Result<(), String> {
        let all: Vec<usize> = (0..self.slots.len()).collect();
        let d = step.duration;
        let ms = d.as_millis();
        match step.fault {
            Fault::ClientPause => {
                let Some(i) = self.target(&all, step.pick) else { return Ok(()) };
                let (client, pid) = (self.slots[i].client.clone(), self.slots[i].pid);
                self.nemesis_event("start", step.fault, vec![client.clone()], Some(pid), format!("SIGSTOP {ms}ms"));
                signal_group(pid, libc::SIGSTOP);
                tokio::time::sleep(d).await;
                signal_group(pid, libc::SIGCONT);
                self.nemesis_event("stop", step.fault, vec![client], Some(pid), "SIGCONT".into());
            }
            Fault::ClientKill => {
                let Some(i) = self.target(&all, step.pick) else { return Ok(()) };
                let (client, pid) = (self.slots[i].client.clone(), self.slots[i].pid);
                self.expected_exits.insert(pid);
                self.nemesis_event("start", step.fault, vec![client.clone()], Some(pid), "SIGKILL".into());
                signal_group(pid, libc::SIGKILL);
                if let Some(c) = self.slots[i].child.as_mut() {
                    let _ = c.wait().await;
                }
                self.respawn_dead()?;
                let new = self.slots[i].pid;
                self.nemesis_event("stop", step.fault, vec![client], Some(pid), format!("restarted as pid {new}"));
            }
            Fault::ClockJump => {
                let clocked: Vec<usize> = all.iter().copied().filter(|&i| self.slots[i].clock.is_some()).collect();
                let Some(i) = self.target(&clocked, step.pick) else { return Ok(()) };
                let client = self.slots[i].client.clone();
                let file = self.slots[i].clock.clone().expect("clocked slot");
                let jump = 2 * self.args.ttl_ms.div_ceil(1000) as i64 * if step.pick < 0.5 { 1 } else { -1 };
                self.nemesis_event("start", step.fault, vec![client.clone()], None, format!("{jump:+}s for {ms}ms"));
                std::fs::write(&file, format!("{jump:+}\n")).map_err(|e| e.to_string())?;
                tokio::time::sleep(d).await;
                std::fs::write(&file, "+0\n").map_err(|e| e.to_string())?;
                self.nemesis_event("stop", step.fault, vec![client], None, "+0s".into());
            }
            Fault::ServerClockJump => {
                let Some((n, most)) = self.servers.backend.skewable() else { return Ok(()) };
                let k = if self.args.skew_majority {
                    most + 1
                } else if step.pick < 0.5 {
                    1
                } else {
                    most
                };
                let first = (step.pick * 2.0 * n as f64) as usize % n;
                let chosen: Vec<usize> = (0..k).map(|j| (first + j) % n).collect();
                let names: Vec<String> = chosen.iter().map(|&i| self.servers.members[i].name.clone()).collect();
                let jump = 2 * self.args.ttl_ms.div_ceil(1000);
                self.servers.set_clocks(&chosen, &format!("+{jump}")).map_err(|e| e.to_string())?;
                // The jump must show in the servers' own TIME, or this fault would pass without biting.
                let mut seen = Vec::new();
                for (&i, name) in chosen.iter().zip(&names) {
                    let offset = self.servers.clock_offset(i).await?;
                    if offset < jump as f64 - 1.0 {
                        return Err(format!("server-clock-jump: {name}'s TIME is {offset:+.1}s off, not +{jump}s"));
                    }
                    seen.push(format!("{name} {offset:+.1}s"));
                }
                let detail = format!("+{jump}s on {k} of {n} for {ms}ms (TIME: {})", seen.join(", "));
                self.nemesis_event("start", step.fault, names.clone(), None, detail);
                tokio::time::sleep(d).await;
                self.servers.set_clocks(&chosen, "+0").map_err(|e| e.to_string())?;
                self.nemesis_event("stop", step.fault, names, None, "+0s".into());
            }
            Fault::ServerKill | Fault::ServerKillDelayed | Fault::LeaderKill => {
                let n = self.servers.members.len();
                let leader = if step.fault == Fault::LeaderKill { self.servers.leader().await } else { None };
                // Behind Sentinel a killed master is the sentinel-failover fault; this one hits the others.
                let master = match self.servers.backend {
                    Backend::RedisSentinel => self.servers.sentinel_master().await,
                    _ => None,
                };
                let among: Vec<usize> = (0..n).filter(|&j| Some(j) != master).collect();
                let i = leader.unwrap_or(among[(step.pick * among.len() as f64) as usize % among.len()]);
                let (name, pid) = (self.servers.members[i].name.clone(), self.servers.members[i].pid);
                let how = match (step.fault, leader, self.servers.backend) {
                    (Fault::LeaderKill, Some(_), _) => "the leader".to_string(),
                    (Fault::LeaderKill, None, _) => "no leader known: a member".into(),
                    (_, _, Backend::RedisSentinel) => match master {
                        Some(j) => format!("a member ({} is master)", self.servers.members[j].name),
                        None => "a member (no master known to the sentinels)".into(),
                    },
                    _ => "a member".into(),
                };
                self.servers.members[i].kill();
                self.nemesis_event("start", step.fault, vec![name.clone()], pid, format!("SIGKILL {how}"));
                tokio::time::sleep(d).await;
                self.servers.restart(i).await.map_err(|e| e.to_string())?;
                let pid = self.servers.members[i].pid;
                self.nemesis_event("stop", step.fault, vec![name], pid, format!("restarted after {ms}ms"));
            }
            Fault::ServerPause => {
                let n = self.servers.members.len();
                let i = (step.pick * n as f64) as usize % n;
                let (name, pid) = (self.servers.members[i].name.clone(), self.servers.members[i].pid);
                self.nemesis_event("start", step.fault, vec![name.clone()], pid, format!("SIGSTOP {ms}ms"));
                self.servers.members[i].signal_all(libc::SIGSTOP);
                tokio::time::sleep(d).await;
                self.servers.members[i].signal_all(libc::SIGCONT);
                self.nemesis_event("stop", step.fault, vec![name], pid, "SIGCONT".into());
            }
            Fault::SentinelFailover | Fault::MasterPause => self.fail_over(step).await?,
            Fault::ConnKill => {
                let m = &self.servers.members[0];
                let (name, pid) = (m.name.clone(), m.pid);
                let how = if self.servers.backend == Backend::Postgres { "pg_terminate_backend" } else { "KILL" };
                self.nemesis_event(
                    "start",
                    step.fault,
                    vec![name.clone()],
                    pid,
                    format!("{how} every client connection"),
                );
                let (ids, gone) = self.servers.kill_connections().await?;
                let ids: Vec<String> = ids.iter().map(u64::to_string).collect();
                let detail = format!("killed {} connection(s) [{}], {gone} already gone", ids.len(), ids.join(" "));
                self.nemesis_event("stop", step.fault, vec![name], pid, detail);
            }
            Fault::ProxyDelay | Fault::ProxyFreeze | Fault::ProxyCut | Fault::ProxyLossy => {
                let Some(i) = self.target(&all, step.pick) else { return Ok(()) };
                let client = self.slots[i].client.clone();
                let mode = match step.fault {
                    Fault::ProxyDelay => Mode::Delay(self.ttl.mul_f64(0.3 + 0.7 * step.pick)),
                    Fault::ProxyFreeze => Mode::Freeze,
                    Fault::ProxyLossy => Mode::Lossy,
                    _ => Mode::Cut,
                };
                self.nemesis_event("start", step.fault, vec![client.clone()], None, format!("{mode:?} for {ms}ms"));
                for p in &self.slots[i].proxies {
                    p.set(mode);
                }
                tokio::time::sleep(d).await;
                for p in &self.slots[i].proxies {
                    p.set(Mode::Pass);
                }
                self.nemesis_event("stop", step.fault, vec![client], None, "pass".into());
            }
        }
        Ok(())
    }

    /// Sentinel: kills (sentinel-failover) or stops (master-pause) the master the sentinels name, waits for them to
    /// promote a replica (bounded), then restarts the old master as a replica of the new one, or continues it (the
    /// sentinels demote it). A master-pause shorter than the down-after time is a control: no failover is awaited.
    async fn fail_over(&mut self, step: Step) -> Result<(), String> {
        let (d, ms) = (step.duration, step.duration.as_millis());
        let Some(i) = self.servers.sentinel_master().await else {
            self.nemesis_event("start", step.fault, vec![], None, "no master known to the sentinels: skipped".into());
            self.nemesis_event("stop", step.fault, vec![], None, "skipped".into());
            return Ok(());
        };
        let sentinels = self.servers.sentinels();
        let m = &mut self.servers.members[i];
        let (name, pid, old) = (m.name.clone(), m.pid, m.addr);
        let t0 = Instant::now();
        let promoted = if step.fault == Fault::SentinelFailover {
            m.kill();
            self.nemesis_event("start", step.fault, vec![name.clone()], pid, format!("SIGKILL the master {old}"));
            let new = sentinel::promoted(&sentinels, old, sentinel::PROMOTION_BOUND).await;
            tokio::time::sleep(d).await;
            self.servers.restart(i).await.map_err(|e| e.to_string())?;
            new
        } else {
            m.signal(libc::SIGSTOP);
            self.nemesis_event(
                "start",
                step.fault,
                vec![name.clone()],
                pid,
                format!("SIGSTOP the master {old} {ms}ms"),
            );
            tokio::time::sleep(d).await;
            let new = if d > sentinel::DOWN_AFTER {
                sentinel::promoted(&sentinels, old, sentinel::PROMOTION_BOUND).await
            } else {
                None
            };
            self.servers.members[i].signal(libc::SIGCONT);
            new
        };
        let took = t0.elapsed().as_millis();
        let how = if step.fault == Fault::SentinelFailover { "restarted as its replica" } else { "SIGCONT" };
        let detail = match promoted {
            Some(new) => format!("{new} promoted; {how} after {took}ms"),
            None if step.fault == Fault::MasterPause && d <= sentinel::DOWN_AFTER => format!("control: {how}"),
            None => format!("no promotion within {}s; {how}", sentinel::PROMOTION_BOUND.as_secs()),
        };
        let pid = self.servers.members[i].pid;
        self.nemesis_event("stop", step.fault, vec![name], pid, detail);
        Ok(())
    }

    /// Heal all: continue every worker and server, pass every link, reset every clock, restart every server and
    /// worker.
    async fn heal(&mut self) -> Result<(), String> {
        for s in &self.slots {
            signal_group(s.pid, libc::SIGCONT);
            for p in &s.proxies {
                p.set(Mode::Pass);
            }
            if let Some(f) = &s.clock {
                std::fs::write(f, "+0\n").map_err(|e| e.to_string())?;
            }
        }
        for i in 0..self.servers.members.len() {
            let m = &self.servers.members[i];
            m.signal(libc::SIGCONT);
            if !m.is_running() {
                self.servers.restart(i).await.map_err(|e| e.to_string())?;
            }
        }
        self.respawn_dead()
    }

    /// Jepsen's final generator: waits until every client has acquired once after `since`, or the bound passes. A
    /// client that has is told to stop (stdin EOF), so an unfair lock cannot starve the last ones with the first.
    async fn final_phase(&mut self, since: u64) {
        let deadline = Instant::now() + FINAL_PHASE;
        loop {
            let notified = self.shared.acquired.notified();
            {
                let last = self.shared.last_ok.lock().unwrap_or_else(|p| p.into_inner());
                for s in &mut self.slots {
                    if s.stdin.is_some() && last.get(&s.client).is_some_and(|&t| t >= since) {
                        self.expected_exits.insert(s.pid);
                        s.stdin.take();
                    }
                }
            }
            if self.slots.iter().all(|s| s.stdin.is_none()) || Instant::now() >= deadline {
                return;
            }
            let _ = tokio::time::timeout_at(deadline.into(), notified).await;
        }
    }

    async fn stop_workers(&mut self) {
        self.stop_worker_processes().await;
        for s in &mut self.slots {
            if let Some((_, d)) = s.daemon.as_mut() {
                let _ = d.start_kill();
                let _ = d.wait().await;
            }
        }
    }

    async fn stop_worker_processes(&mut self) {
        for s in &mut self.slots {
            self.expected_exits.insert(s.pid);
            s.stdin.take(); // EOF: finish the current cycle and exit
        }
        let deadline = Instant::now() + self.ttl * 4 + Duration::from_secs(2);
        for s in &mut self.slots {
            if let Some(c) = s.child.as_mut()
                && tokio::time::timeout_at(deadline.into(), c.wait()).await.is_err()
            {
                signal_group(s.pid, libc::SIGKILL);
                let _ = c.wait().await;
            }
        }
    }
}

/// Starts the Go slot's fencelockd (next to this binary in target/debug) on the slot's backend URL, in a process group
/// of its own like a worker, and returns the address it listens on.
async fn start_fencelockd(
    exe: &std::path::Path,
    url: &str,
    log: &std::path::Path,
) -> Result<(SocketAddr, Child), String> {
    let bin = exe.with_file_name("fencelockd");
    let stderr = std::fs::File::create(log).map_err(|e| format!("{}: {e}", log.display()))?;
    let mut cmd = Command::new(&bin);
    cmd.args(["--listen", "127.0.0.4:0", "--backend", url]);
    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(stderr).kill_on_drop(true);
    cmd.process_group(0);
    // SAFETY: prctl only touches the child.
    unsafe {
        cmd.pre_exec(|| {
            servers::child_setup();
            Ok(())
        });
    }
    let mut child = cmd.spawn().map_err(|e| format!("{}: {e}", bin.display()))?;
    let mut lines = BufReader::new(child.stdout.take().expect("piped")).lines();
    let listening = tokio::time::timeout(Duration::from_secs(30), async {
        while let Ok(Some(line)) = lines.next_line().await {
            if let Some(addr) = line.strip_prefix("listening on ") {
                return addr.parse::<SocketAddr>().ok();
            }
        }
        None
    });
    match listening.await {
        Ok(Some(addr)) => Ok((addr, child)),
        _ => Err(format!("fencelockd did not start (see {})", log.display())),
    }
}

/// Appends the run's `--url-query` to a client URL.
fn with_query(url: String, query: Option<&str>) -> String {
    match query {
        Some(q) if !q.is_empty() => format!("{url}{}{q}", if url.contains('?') { '&' } else { '?' }),
        _ => url,
    }
}

/// Waits until a lock can be taken straight through the servers (no proxy); returns what the backend can do.
async fn wait_ready(servers: &mut Servers, query: Option<&str>) -> Result<fencelock::Capability, String> {
    if servers.backend == Backend::RedisSentinel {
        // Sentinels learn the replicas from the master's INFO every 10 s: started after the replicas synced, they
        // see both at their first look.
        let replicas: Vec<SocketAddr> =
            servers.members.iter().skip(1).filter(|m| matches!(m.role, Role::Data(_))).map(|m| m.addr).collect();
        sentinel::wait_synced(&replicas, Duration::from_secs(30)).await?;
        for m in servers.members.iter_mut().filter(|m| m.role == Role::Sentinel) {
            m.start().map_err(|e| format!("{}: {e}", m.name))?;
        }
        sentinel::wait_ready(&servers.sentinels(), &replicas, Duration::from_secs(30)).await?;
    }
    if servers.backend == Backend::RedisCluster {
        servers.create_cluster(Duration::from_secs(30)).await?;
    }
    let url = with_query(servers.direct_url(), query);
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut last = String::new();
    while Instant::now() < deadline {
        let attempt = async {
            let c = Client::connect(&url).await?;
            let got = c.try_lock("locktest-ready", &LockOptions::default().ttl(Duration::from_secs(2))).await?;
            if let Some(l) = got {
                l.release().await?;
            }
            let capability = c.capability();
            c.close().await;
            fencelock::Result::Ok(capability)
        };
        let result: Result<fencelock::Result<fencelock::Capability>, _> =
            tokio::time::timeout(Duration::from_secs(10), attempt).await;
        match result {
            Ok(Ok(capability)) => return Ok(capability),
            // A URL this build cannot serve (an unknown scheme or parameter) will not start working: say so now.
            Ok(Err(e)) if matches!(e.kind(), ErrorKind::InvalidArgument | ErrorKind::Unsupported) => {
                return Err(format!("{} servers: {e}", servers.backend.name()));
            }
            Ok(Err(e)) => last = e.to_string(),
            Err(_) => last = "timed out".into(),
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    Err(format!("{} servers not ready: {last}", servers.backend.name()))
}

/// One run; returns the report (its failures decide the exit code), or `None` when the backend does not have the
/// workload's primitive (said on stderr).
pub async fn run(args: RunArgs) -> Result<Option<checker::Report>, String> {
    let root = args.root.canonicalize().map_err(|e| format!("{}: {e}", args.root.display()))?;
    let args = RunArgs { root, ..args };
    let workload = match args.workload {
        Workload::Mutex => String::new(),
        w => format!("-{}", w.name()),
    };
    let name = format!("{}{workload}-{}-{}", args.backend.name(), args.profile.name(), args.seed);
    if args.workload == Workload::Semaphore && args.permits == 0 {
        return Err("--permits must be at least 1".into());
    }
    let out = args.out.clone().unwrap_or_else(|| args.root.join("target/faults").join(&name));
    if out.exists() {
        std::fs::remove_dir_all(&out).map_err(|e| format!("{}: {e}", out.display()))?;
    }
    std::fs::create_dir_all(out.join("logs")).map_err(|e| format!("{}: {e}", out.display()))?;
    let exe = std::env::current_exe().map_err(|e| format!("own path: {e}"))?;
    let data = TempDir::new()?;
    let ttl = Duration::from_millis(args.ttl_ms);
    let mut rng = StdRng::seed_from_u64(args.seed);
    let menu = if args.faults.is_empty() { args.profile.faults(args.backend) } else { args.faults.clone() };
    let mut steps = nemesis::schedule(&mut rng, &menu, ttl, args.profile.fault_phase());
    if args.profile == Profile::Mixed {
        nemesis::pair_up(&mut rng, &mut steps, &menu);
    }

    let t0 = Instant::now();
    let mut servers = Servers::start(args.backend, &data.0, &out.join("logs"))?;
    let capability = wait_ready(&mut servers, args.url_query.as_deref()).await?;
    eprintln!("locktest: {name}: servers ready in {:.1}s", t0.elapsed().as_secs_f64());
    if let Some(why) = args.workload.unsupported(&capability) {
        // Not a failure: the workload follows the backend's capability, so a backend gains it by claiming it.
        eprintln!("locktest: {name}: skipped: {} on {} ({why})", args.workload.name(), args.backend.name());
        servers.stop();
        return Ok(None);
    }

    let shared = Arc::new(Shared::default());
    let listener = tokio::net::TcpListener::bind("127.0.0.3:0").await.map_err(|e| format!("referee: {e}"))?;
    let referee_addr = listener.local_addr().map_err(|e| e.to_string())?;
    tokio::spawn(referee::serve(listener, shared.history.clone()));

    if args.langs.is_empty() {
        return Err("--langs names no language".into());
    }
    let langs: Vec<Lang> = match args.workload {
        Workload::Mutex => args.langs.clone(),
        _ => args.langs.iter().copied().filter(|l| l.has_workloads()).collect(),
    };
    if langs.is_empty() {
        return Err(format!("--langs names no worker with the {} workload", args.workload.name()));
    }
    let clocked = menu.contains(&Fault::ClockJump);
    // The Go worker speaks etcd's lock API, which has no read-write lock, semaphore or election: mutex runs only.
    let go = args.profile != Profile::Canary && !args.no_go && args.workload == Workload::Mutex;
    if go && !args.go_worker.is_file() {
        return Err(format!(
            "no Go worker at {} (tests/faults/run.sh builds it; --no-go runs without)",
            args.go_worker.display()
        ));
    }
    for (lang, path, what) in [(Lang::C, C_WORKER, "C"), (Lang::Java, JAVA_WORKER, "JVM")] {
        let worker = args.root.join(path);
        if langs.contains(&lang) && !worker.is_file() {
            return Err(format!("no {what} worker at {} (tests/faults/run.sh builds it)", worker.display()));
        }
    }
    let mut slots = Vec::new();
    for i in 0..args.clients + usize::from(go) {
        let mut proxies = Vec::new();
        for m in servers.members.iter().filter(|_| args.backend.proxied()) {
            let p =
                Proxy::start("127.0.0.2:0".parse().expect("addr"), m.addr).await.map_err(|e| format!("proxy: {e}"))?;
            proxies.push(p);
        }
        let addrs: Vec<SocketAddr> = proxies.iter().map(|p| p.addr).collect();
        let lang = if i == args.clients { Lang::Go } else { langs[i % langs.len()] };
        // Node cannot read the raw clock (its stamps would move with the fake one), so only Rust and Python workers
        // get libfaketime, the first two slots that are either; Go does not go through libc at all.
        let clock = (clocked && i < 2 && matches!(lang, Lang::Rust | Lang::Python))
            .then(|| data.0.join(format!("clock-c{}", i + 1)));
        if let Some(f) = &clock {
            std::fs::write(f, "+0\n").map_err(|e| e.to_string())?;
        }
        let client = format!("c{}", i + 1);
        let url = if args.direct || !args.backend.proxied() { servers.direct_url() } else { servers.url(&addrs) };
        let url = with_query(url, args.url_query.as_deref());
        let daemon = match lang {
            Lang::Go => Some(start_fencelockd(&exe, &url, &out.join(format!("logs/{client}-fencelockd.log"))).await?),
            _ => None,
        };
        slots.push(Slot { client, lang, url, proxies, clock, child: None, stdin: None, pid: 0, daemon });
    }
    let mut run = Run {
        args: args.clone(),
        out: out.clone(),
        referee: referee_addr,
        shared: shared.clone(),
        slots,
        servers,
        ttl,
        expected_exits: HashSet::new(),
        exe,
    };
    let mut label = format!(
        "backend={} profile={} seed={} ttl={}ms",
        args.backend.label(),
        args.profile.name(),
        args.seed,
        args.ttl_ms
    );
    if args.skew_majority {
        label += " skew=majority";
    }
    match args.workload {
        Workload::Mutex => {}
        Workload::Rwlock => label += " workload=rwlock",
        Workload::Semaphore => label += &format!(" workload=semaphore permits={}", args.permits),
        Workload::Election => label += " workload=election",
    }
    run.phase("start", Some(label));
    // The checker's fairness bound applies where the backend serves waiters in arrival order.
    let flags = [("fencing", capability.fencing), ("native_wait", capability.native_wait), ("fair", capability.fair)];
    let flags: Vec<&str> = flags.iter().filter(|f| f.1).map(|f| f.0).collect();
    let mut e = Event::new("run", "capability", "capability", t_ref());
    e.detail = Some(flags.join(" "));
    run.shared.push(e);
    for i in 0..run.slots.len() {
        run.spawn_worker(i)?;
    }
    tokio::time::sleep(WARM_UP).await;
    run.respawn_dead()?;
    run.phase("faults", None);
    let faults_end = Instant::now() + args.profile.fault_phase();
    for step in steps {
        if Instant::now() >= faults_end {
            break;
        }
        // Mixed: a background fault for the step's duration, a TTL at least (a kill is over at once).
        let background = step.also.and_then(|f| run.background(f, 1.0 - step.pick, step.duration.max(ttl)));
        run.inject(step).await?;
        if let Some(task) = background {
            let _ = task.await;
        }
        run.respawn_dead()?;
        tokio::time::sleep(step.gap).await;
    }
    if args.profile == Profile::Canary {
        // Robust by design, not by luck: a seed whose pauses happened not to bite keeps pausing holders until the
        // referee has recorded a violation without fencing, up to the cap; only faults that never bite fail it.
        let cap = faults_end + CANARY_EXTRA;
        let bitten = || {
            let h = shared.history.lock().unwrap_or_else(|p| p.into_inner());
            if args.skew_majority {
                return checker::believed_overlaps(&h) > 0;
            }
            checker::unfenced_violations(&h) > 0 && (!args.broken_fence || checker::stale_fence_count(&h) > 0)
        };
        if !bitten() {
            eprintln!("locktest: {name}: the faults have not bitten yet; more of them until they do");
        }
        while !bitten() && Instant::now() < cap {
            let step = nemesis::canary_step(&mut rng, ttl, menu.first().copied().unwrap_or(Fault::ClientPause));
            run.inject(step).await?;
            run.respawn_dead()?;
            tokio::time::sleep(step.gap).await;
        }
    }
    run.heal().await?;
    let heal = t_ref();
    run.phase("heal", None);
    run.final_phase(heal).await;
    run.stop_workers().await;
    run.phase("end", None);
    run.servers.stop();

    let mut events = std::mem::take(&mut *shared.history.lock().unwrap_or_else(|p| p.into_inner()));
    let path = out.join("history.jsonl");
    history::write(&path, &mut events).map_err(|e| format!("{}: {e}", path.display()))?;
    let expect = checker::Expect {
        canary: args.profile == Profile::Canary,
        broken_fence: args.broken_fence,
        double_grant: args.skew_majority,
    };
    let report = checker::check(&events, expect);
    let text = checker::render(&report);
    std::fs::write(out.join("report.txt"), &text).map_err(|e| e.to_string())?;
    let json = serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?;
    std::fs::write(out.join("report.json"), json).map_err(|e| e.to_string())?;
    print!("{text}");
    if !report.failures.is_empty() {
        let canary = if expect.canary { " --canary" } else { "" };
        let broken = if expect.broken_fence { " --broken-fence" } else { "" };
        let double = if expect.double_grant { " --double-grant" } else { "" };
        println!("replay the check: target/debug/locktest check {}{canary}{broken}{double}", path.display());
        // The running binary, not target/debug/locktest: the broken-register run is a build of its own.
        let exe = std::env::current_exe().map_or_else(|_| "target/debug/locktest".into(), |p| p.display().to_string());
        println!(
            "re-run the schedule: {exe} run --backend {} --profile {} --seed {}{}{}{}{broken}",
            args.backend.name(),
            args.profile.name(),
            args.seed,
            match &args.faults[..] {
                [] => String::new(),
                f => format!(" --faults {}", f.iter().map(|f| f.name()).collect::<Vec<_>>().join(",")),
            },
            if args.skew_majority { " --skew-majority" } else { "" },
            match args.workload {
                Workload::Mutex => String::new(),
                w => format!(" --workload {} --permits {}", w.name(), args.permits),
            }
        );
    }
    println!("history: {}", path.display());
    Ok(Some(report))
}

/// Server data and clock files; removed at the end of the run.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> Result<TempDir, String> {
        let p = std::env::temp_dir().join(format!("locktest-{}", std::process::id()));
        std::fs::create_dir_all(&p).map_err(|e| format!("{}: {e}", p.display()))?;
        Ok(TempDir(p))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
