//! The backend servers of one run, started by the suite inside its private network namespace: each member a
//! process group of its own (killed as a group, restarted with the same command and data), reached by the clients
//! only through the fault proxies (proxy.rs), one per client slot and member.

use crate::sentinel;
use std::net::{SocketAddr, TcpListener as StdListener};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// The server side of the backends the suite knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Backend {
    Redis,
    /// Three masters of one Redis Cluster, no replicas (every slot has one owner; a killed master loses its keys).
    RedisCluster,
    /// One master, two replicas, three sentinels (sentinel.rs).
    RedisSentinel,
    /// Three independent Redis servers.
    Redlock,
    /// Five independent Redis servers: a minority of two may fail or skew.
    Redlock5,
    Etcd,
    Zk,
    Postgres,
    /// MySQL's protocol, served by MariaDB (Debian's mariadb-server).
    Mysql,
    Sqlite,
}

impl Backend {
    pub fn label(self) -> &'static str {
        match self {
            Backend::Redis => "redis",
            Backend::RedisCluster => "redis-cluster(3)",
            Backend::RedisSentinel => "redis-sentinel(1+2)",
            Backend::Redlock => "redlock(3)",
            Backend::Redlock5 => "redlock(5)",
            Backend::Etcd => "etcd(3)",
            Backend::Zk => "zk(3)",
            Backend::Postgres => "postgres",
            Backend::Mysql => "mariadb",
            Backend::Sqlite => "sqlite",
        }
    }

    /// The name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Redis => "redis",
            Backend::RedisCluster => "redis-cluster",
            Backend::RedisSentinel => "redis-sentinel",
            Backend::Redlock => "redlock",
            Backend::Redlock5 => "redlock5",
            Backend::Etcd => "etcd",
            Backend::Zk => "zk",
            Backend::Postgres => "postgres",
            Backend::Mysql => "mysql",
            Backend::Sqlite => "sqlite",
        }
    }

    /// Whether the backend elects a leader the nemesis can kill.
    pub fn has_leader(self) -> bool {
        matches!(self, Backend::Etcd | Backend::Zk)
    }

    /// Independent Redis servers whose clocks the nemesis may move: the instances, and how many may be skewed at
    /// once (a minority, which Redlock's majority must outvote).
    pub fn skewable(self) -> Option<(usize, usize)> {
        match self {
            Backend::Redlock => Some((3, 1)),
            Backend::Redlock5 => Some((5, 2)),
            _ => None,
        }
    }

    /// Whether clients reach the servers through the per-slot fault proxies. Sentinel hands clients the data nodes'
    /// real addresses, so a proxy in front of the sentinels would only see discovery, never the lock traffic; a
    /// cluster's slot map and redirections name its nodes' own addresses the same way.
    pub fn proxied(self) -> bool {
        !matches!(self, Backend::Sqlite | Backend::RedisSentinel | Backend::RedisCluster)
    }
}

/// A free TCP port on `ip` that this run has not handed out before (the namespace is private, so nobody else races
/// for it). The probe's listener closes at once, and the kernel may give the same ephemeral port to the next probe:
/// an etcd cluster once got one peer port twice ("has duplicate url").
pub fn free_port(ip: &str) -> std::io::Result<u16> {
    static HANDED: std::sync::Mutex<Vec<(String, u16)>> = std::sync::Mutex::new(Vec::new());
    let mut handed = HANDED.lock().unwrap_or_else(|p| p.into_inner());
    for _ in 0..256 {
        let port = StdListener::bind((ip, 0))?.local_addr()?.port();
        if !handed.iter().any(|(i, p)| i == ip && *p == port) {
            handed.push((ip.to_string(), port));
            return Ok(port);
        }
    }
    Err(std::io::Error::other(format!("no port on {ip} that this run has not handed out already")))
}

/// Sets the death signal so no server or worker outlives the orchestrator, and a process group of its own so the
/// nemesis can stop or kill it whole.
pub fn own_group(cmd: &mut Command) {
    cmd.process_group(0);
    // SAFETY: prctl is async-signal-safe and touches only the calling (child) process.
    unsafe {
        cmd.pre_exec(|| {
            child_setup();
            Ok(())
        });
    }
}

/// What a member is, where the nemesis must tell them apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Role {
    Server,
    /// A Redis data node behind Sentinel (master or replica), with its data dir.
    Data(PathBuf),
    Sentinel,
}

#[derive(Debug)]
pub struct Member {
    pub name: String,
    pub role: Role,
    /// The client address on 127.0.0.1.
    pub addr: SocketAddr,
    program: String,
    args: Vec<String>,
    user: Option<(u32, u32)>,
    log: PathBuf,
    pub pid: Option<u32>,
    /// The clock shim (clockskew.c) and its offset file, for a member whose clock the nemesis may move.
    clock: Option<(PathBuf, PathBuf)>,
}

impl Member {
    pub fn start(&mut self) -> std::io::Result<()> {
        let log = std::fs::OpenOptions::new().create(true).append(true).open(&self.log)?;
        let mut cmd = Command::new(&self.program);
        cmd.args(&self.args).stdin(Stdio::null()).stdout(log.try_clone()?).stderr(log);
        if let Some((uid, gid)) = self.user {
            cmd.uid(uid).gid(gid).current_dir("/");
        }
        if let Some((shim, clock)) = &self.clock {
            cmd.env("LD_PRELOAD", shim).env("FENCELOCK_CLOCK_FILE", clock);
        }
        own_group(&mut cmd);
        let child = cmd.spawn().map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", self.program)))?;
        self.pid = Some(child.id());
        // Reaped by a thread: a killed server must not linger as a zombie holding nothing but a pid.
        std::thread::spawn(move || {
            let mut child = child;
            let _ = child.wait();
        });
        Ok(())
    }

    /// SIGKILL to the member's process group and to every descendant that left it (PostgreSQL's backends call
    /// setsid()): the whole server dies, as in a crash. Returns once all are gone: a child still dying may hold the
    /// listening socket or PostgreSQL's shared memory, and a restart at once then fails ("pre-existing shared
    /// memory block is still in use", seen once three runs shared the machine).
    pub fn kill(&mut self) {
        if let Some(pid) = self.pid.take() {
            let strays = descendants(pid);
            // SAFETY: signals a process group this suite created, and processes descended from its leader.
            unsafe {
                libc::kill(-(pid as i32), libc::SIGKILL);
                for &c in &strays {
                    libc::kill(c as i32, libc::SIGKILL);
                }
            }
            for _ in 0..250 {
                // SAFETY: signal 0 only asks whether any process of the group is left.
                if !alive(pid) && unsafe { libc::kill(-(pid as i32), 0) } != 0 && !strays.iter().any(|&c| alive(c)) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }

    pub fn is_running(&self) -> bool {
        self.pid.is_some()
    }

    /// A Sentinel data node's next start is as a replica of `master` (None: as a master).
    pub fn replica_of(&mut self, master: Option<u16>) {
        if let Role::Data(dir) = &self.role {
            self.args = sentinel::data_args(self.addr.port(), dir, master);
        }
    }

    /// Sends `sig` to the member's process group and to every descendant that left it (PostgreSQL's backends, which
    /// hold the clients' connections): SIGSTOP / SIGCONT of the whole server.
    pub fn signal_all(&self, sig: i32) {
        if let Some(pid) = self.pid {
            let strays = descendants(pid);
            self.signal(sig);
            for c in strays {
                // SAFETY: signals a process descended from a member this suite started.
                unsafe { libc::kill(c as i32, sig) };
            }
        }
    }

    /// Sends `sig` to the member's process group (SIGSTOP / SIGCONT).
    pub fn signal(&self, sig: i32) {
        if let Some(pid) = self.pid {
            // SAFETY: signals a process group this suite created.
            unsafe { libc::kill(-(pid as i32), sig) };
        }
    }
}

/// In a forked child before exec: die with the orchestrator, and give up its raised priority (main.rs).
pub fn child_setup() {
    // SAFETY: prctl and setpriority are async-signal-safe and touch only the calling process.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
        libc::setpriority(libc::PRIO_PROCESS, 0, 0);
    }
}

/// Whether `pid` exists and is no zombie.
/// The processes descended from `pid` now, read from /proc (parents first).
fn descendants(pid: u32) -> Vec<u32> {
    let parents: Vec<(u32, u32)> = std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|p| {
            let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).ok()?;
            let ppid = stat.rsplit(") ").next()?.split_whitespace().nth(1)?.parse().ok()?;
            Some((p, ppid))
        })
        .collect();
    let mut out = Vec::new();
    let mut frontier = vec![pid];
    while let Some(p) = frontier.pop() {
        for &(c, parent) in &parents {
            if parent == p && !out.contains(&c) {
                out.push(c);
                frontier.push(c);
            }
        }
    }
    out
}

pub fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat.rsplit(") ").next().is_some_and(|rest| !rest.starts_with('Z') && !rest.starts_with('X')),
        Err(_) => false,
    }
}

#[derive(Debug)]
pub struct Servers {
    pub backend: Backend,
    pub members: Vec<Member>,
    /// sqlite: the database file.
    pub file: Option<PathBuf>,
}

fn postgres_bin() -> Result<PathBuf, String> {
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .map_err(|e| format!("PostgreSQL not installed (/usr/lib/postgresql: {e})"))?
        .filter_map(|d| d.ok().map(|d| d.path().join("bin")))
        .filter(|p| p.join("postgres").exists())
        .collect();
    found.sort();
    found.pop().ok_or_else(|| "no /usr/lib/postgresql/*/bin/postgres".into())
}

fn postgres_user() -> Result<(u32, u32), String> {
    let name = std::ffi::CString::new("postgres").expect("no NUL");
    // SAFETY: getpwnam returns a pointer into static storage, read at once on this thread.
    let pw = unsafe { libc::getpwnam(name.as_ptr()) };
    if pw.is_null() {
        return Err("no postgres user (apt-get install postgresql)".into());
    }
    // SAFETY: non-null, as checked.
    Ok(unsafe { ((*pw).pw_uid, (*pw).pw_gid) })
}

/// Compiles clockskew.c, the wall-clock shim of the server-clock-jump fault (libfaketime hangs Debian's jemalloc-linked
/// redis-server), into `dir`; the C compiler is the one cargo links with.
fn build_clock_shim(dir: &Path) -> Result<PathBuf, String> {
    let (src, lib) = (dir.join("clockskew.c"), dir.join("libclockskew.so"));
    std::fs::write(&src, include_str!("../clockskew.c")).map_err(|e| e.to_string())?;
    let out = Command::new("cc")
        .args(["-O2", "-Wall", "-Werror", "-shared", "-fPIC", "-o"])
        .arg(&lib)
        .arg(&src)
        .output()
        .map_err(|e| format!("cc (building the clock shim): {e}"))?;
    if !out.status.success() {
        return Err(format!("cc clockskew.c failed: {}", String::from_utf8_lossy(&out.stderr)));
    }
    Ok(lib)
}

const MARIADBD: &str = "/usr/sbin/mariadbd";

/// The database the mysql clients use; the server's `--init-file` creates it at every start, before it serves.
pub const MYSQL_DB: &str = "fencelock_test";

fn s(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| x.to_string()).collect()
}

impl Servers {
    /// Writes configuration, initializes data, and starts every member but the sentinels (readiness is the caller's
    /// probe, which starts those).
    pub fn start(backend: Backend, data: &Path, logs: &Path) -> Result<Servers, String> {
        let err = |e: std::io::Error| e.to_string();
        let mut members = Vec::new();
        let mut member = |name: String, port: u16, program: &str, args: Vec<String>, user| {
            let role = if name.starts_with("sentinel") {
                Role::Sentinel
            } else if name.starts_with("data") {
                Role::Data(data.join(&name))
            } else {
                Role::Server
            };
            members.push(Member {
                log: logs.join(format!("{name}.log")),
                role,
                name,
                addr: SocketAddr::from(([127, 0, 0, 1], port)),
                program: program.into(),
                args,
                user,
                pid: None,
                clock: None,
            });
        };
        let mut file = None;
        match backend {
            Backend::Sqlite => file = Some(data.join("locks.db")),
            Backend::Redis | Backend::Redlock | Backend::Redlock5 => {
                let n = backend.skewable().map_or(1, |(n, _)| n);
                for i in 1..=n {
                    let port = free_port("127.0.0.1").map_err(err)?;
                    let dir = data.join(format!("redis{i}"));
                    std::fs::create_dir_all(&dir).map_err(err)?;
                    // No persistence: a restart loses the data, the Redlock restart hazard the tokens must survive.
                    let args = s(&["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly"])
                        .into_iter()
                        .chain(s(&["no", "--dir", &dir.to_string_lossy()]))
                        .collect();
                    member(format!("redis{i}"), port, "redis-server", args, None);
                }
            }
            Backend::RedisCluster => {
                for i in 1..=3 {
                    let port = free_port("127.0.0.1").map_err(err)?;
                    let dir = data.join(format!("node{i}"));
                    std::fs::create_dir_all(&dir).map_err(err)?;
                    // No persistence, as for Redis alone; nodes.conf keeps the node's identity and slots across a
                    // restart. A master that is down leaves the other masters' slots served (full coverage off).
                    let args = s(&["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly"])
                        .into_iter()
                        .chain(s(&["no", "--dir", &dir.to_string_lossy(), "--cluster-enabled", "yes"]))
                        .chain(s(&["--cluster-config-file", &dir.join("nodes.conf").to_string_lossy()]))
                        .chain(s(&["--cluster-node-timeout", "2000", "--cluster-require-full-coverage", "no"]))
                        .collect();
                    member(format!("node{i}"), port, "redis-server", args, None);
                }
            }
            Backend::RedisSentinel => {
                let ports: Vec<u16> =
                    (0..6).map(|_| free_port("127.0.0.1")).collect::<std::io::Result<_>>().map_err(err)?;
                for (i, &port) in ports[..3].iter().enumerate() {
                    let dir = data.join(format!("data{}", i + 1));
                    std::fs::create_dir_all(&dir).map_err(err)?;
                    let master = (i > 0).then_some(ports[0]);
                    member(
                        format!("data{}", i + 1),
                        port,
                        "redis-server",
                        sentinel::data_args(port, &dir, master),
                        None,
                    );
                }
                for (i, &port) in ports[3..].iter().enumerate() {
                    let args = sentinel::sentinel_args(port, &data.join(format!("sentinel{}", i + 1)), ports[0]);
                    member(format!("sentinel{}", i + 1), port, "redis-server", args.map_err(err)?, None);
                }
            }
            Backend::Etcd => {
                let ports: Vec<(u16, u16)> = (0..3)
                    .map(|_| Ok((free_port("127.0.0.1")?, free_port("127.0.0.1")?)))
                    .collect::<std::io::Result<_>>()
                    .map_err(err)?;
                let cluster: Vec<String> =
                    ports.iter().enumerate().map(|(i, (_, p))| format!("etcd{}=http://127.0.0.1:{p}", i + 1)).collect();
                for (i, (cp, pp)) in ports.iter().enumerate() {
                    let name = format!("etcd{}", i + 1);
                    let client = format!("http://127.0.0.1:{cp}");
                    let peer = format!("http://127.0.0.1:{pp}");
                    let dir = data.join(&name);
                    let args = s(&[
                        "--name",
                        &name,
                        "--data-dir",
                        &dir.to_string_lossy(),
                        "--listen-client-urls",
                        &client,
                        "--advertise-client-urls",
                        &client,
                        "--listen-peer-urls",
                        &peer,
                        "--initial-advertise-peer-urls",
                        &peer,
                        "--initial-cluster",
                        &cluster.join(","),
                        "--initial-cluster-state",
                        "new",
                        "--initial-cluster-token",
                        "locktest",
                        "--logger",
                        "zap",
                    ]);
                    member(name, *cp, "etcd", args, None);
                }
            }
            Backend::Zk => {
                let ports: Vec<(u16, u16, u16)> = (0..3)
                    .map(|_| Ok((free_port("127.0.0.1")?, free_port("127.0.0.1")?, free_port("127.0.0.1")?)))
                    .collect::<std::io::Result<_>>()
                    .map_err(err)?;
                let servers: String = ports
                    .iter()
                    .enumerate()
                    .map(|(i, (_, q, e))| format!("server.{}=127.0.0.1:{q}:{e}\n", i + 1))
                    .collect();
                for (i, (cp, _, _)) in ports.iter().enumerate() {
                    let name = format!("zk{}", i + 1);
                    let dir = data.join(&name);
                    std::fs::create_dir_all(dir.join("data")).map_err(err)?;
                    std::fs::write(dir.join("data/myid"), format!("{}\n", i + 1)).map_err(err)?;
                    // tickTime=500: sessions of 1–10 s, so a 2 s TTL is a 2 s session (SAFETY-TESTING.md).
                    // admin.enableServer=false: no Jetty on 0.0.0.0:8080.
                    let cfg = format!(
                        "tickTime=500\ninitLimit=20\nsyncLimit=10\ndataDir={}\nclientPort={cp}\n\
                         clientPortAddress=127.0.0.1\nmaxClientCnxns=0\nadmin.enableServer=false\n\
                         4lw.commands.whitelist=ruok,srvr,conf\n{servers}",
                        dir.join("data").display()
                    );
                    std::fs::write(dir.join("zoo.cfg"), cfg).map_err(err)?;
                    let args = s(&[
                        "-Xmx128m",
                        "-XX:+UseSerialGC",
                        "-XX:-UsePerfData",
                        "-XX:TieredStopAtLevel=1",
                        "-cp",
                        "/etc/zookeeper/conf:/usr/share/java/zookeeper.jar",
                        "org.apache.zookeeper.server.quorum.QuorumPeerMain",
                        &dir.join("zoo.cfg").to_string_lossy(),
                    ]);
                    member(name, *cp, "java", args, None);
                }
            }
            Backend::Postgres => {
                let bin = postgres_bin()?;
                let (uid, gid) = postgres_user()?;
                let dir = data.join("pg");
                std::fs::create_dir_all(&dir).map_err(err)?;
                let c = std::ffi::CString::new(dir.to_string_lossy().as_bytes()).expect("no NUL");
                // SAFETY: a valid path. The postgres user must own its data directory (initdb refuses root).
                if unsafe { libc::chown(c.as_ptr(), uid, gid) } != 0 {
                    return Err(format!("chown {}: {}", dir.display(), std::io::Error::last_os_error()));
                }
                let out = Command::new(bin.join("initdb"))
                    .args(["-D", &dir.join("data").to_string_lossy(), "-A", "trust", "-U", "postgres", "-E", "UTF8"])
                    .args(["--locale=C", "-N"])
                    .uid(uid)
                    .gid(gid)
                    .current_dir("/")
                    .output()
                    .map_err(|e| format!("initdb: {e}"))?;
                if !out.status.success() {
                    return Err(format!("initdb failed: {}", String::from_utf8_lossy(&out.stderr)));
                }
                let port = free_port("127.0.0.1").map_err(err)?;
                let args = s(&[
                    "-D",
                    &dir.join("data").to_string_lossy(),
                    "-h",
                    "127.0.0.1",
                    "-p",
                    &port.to_string(),
                    "-k",
                    &dir.to_string_lossy(),
                    "-c",
                    "fsync=off",
                    "-c",
                    "max_connections=200",
                ]);
                member("postgres".into(), port, &bin.join("postgres").to_string_lossy(), args, Some((uid, gid)));
            }
            Backend::Mysql => {
                if !Path::new(MARIADBD).exists() {
                    return Err(format!("MariaDB not installed ({MARIADBD}: apt-get install mariadb-server)"));
                }
                let dir = data.join("mysql");
                std::fs::create_dir_all(&dir).map_err(err)?;
                let datadir = format!("--datadir={}", dir.join("data").display());
                // A throwaway server, small and quick to start. InnoDB writes its redo log at every commit and
                // flushes it once a second: a SIGKILLed server keeps every committed row (only an OS crash would
                // lose the last second), so the nemesis's restarts keep the data. The suite runs as root.
                let opts = s(&[
                    "--user=root",
                    "--skip-name-resolve",
                    "--innodb-buffer-pool-size=32M",
                    "--innodb-log-file-size=8M",
                    "--innodb-flush-log-at-trx-commit=2",
                    "--max-connections=300",
                ]);
                let out = Command::new("mariadb-install-db")
                    .args(["--no-defaults", &datadir, "--auth-root-authentication-method=normal", "--skip-test-db"])
                    .args(&opts)
                    .output()
                    .map_err(|e| format!("mariadb-install-db: {e}"))?;
                if !out.status.success() {
                    return Err(format!(
                        "mariadb-install-db failed: {}{}",
                        String::from_utf8_lossy(&out.stdout),
                        String::from_utf8_lossy(&out.stderr)
                    ));
                }
                // Run at every start before the server serves anyone: the database exists once a client gets in.
                let init = dir.join("init.sql");
                std::fs::write(&init, format!("CREATE DATABASE IF NOT EXISTS {MYSQL_DB};\n")).map_err(err)?;
                let port = free_port("127.0.0.1").map_err(err)?;
                let args = [
                    "--no-defaults".to_string(),
                    datadir,
                    format!("--socket={}", dir.join("mysqld.sock").display()),
                    format!("--pid-file={}", dir.join("mariadbd.pid").display()),
                    format!("--port={port}"),
                    "--bind-address=127.0.0.1".into(),
                    format!("--init-file={}", init.display()),
                ]
                .into_iter()
                .chain(opts)
                .collect();
                member("mariadb".into(), port, MARIADBD, args, None);
            }
        }
        if backend.skewable().is_some() {
            let shim = build_clock_shim(data)?;
            for m in &mut members {
                let clock = data.join(format!("clock-{}", m.name));
                std::fs::write(&clock, "+0\n").map_err(err)?;
                m.clock = Some((shim.clone(), clock));
            }
        }
        let mut servers = Servers { backend, members, file };
        // Sentinels start once their replicas have synced (orchestrator's readiness).
        for m in servers.members.iter_mut().filter(|m| m.role != Role::Sentinel) {
            m.start().map_err(err)?;
        }
        Ok(servers)
    }

    /// The URL a client uses, given the proxy address of each member (in member order).
    pub fn url(&self, via: &[SocketAddr]) -> String {
        let hosts: Vec<String> = via.iter().map(|a| a.to_string()).collect();
        match self.backend {
            Backend::Sqlite => format!("sqlite:{}", self.file.as_ref().expect("sqlite file").display()),
            Backend::Redis => format!("redis://{}", hosts[0]),
            Backend::RedisCluster => format!("redis+cluster://{}", hosts.join(",")),
            // Never proxied (Backend::proxied): the sentinels' own addresses.
            Backend::RedisSentinel => {
                let s: Vec<String> = self.sentinels().iter().map(|a| a.to_string()).collect();
                format!("redis+sentinel://{}/{}", s.join(","), sentinel::MASTER)
            }
            Backend::Redlock | Backend::Redlock5 => format!("redlock://{}", hosts.join(",")),
            Backend::Etcd => format!("etcd://{}", hosts.join(",")),
            Backend::Zk => format!("zk://{}", hosts.join(",")),
            Backend::Postgres => format!("postgres://postgres@{}/postgres", hosts[0]),
            Backend::Mysql => format!("mysql://root@{}/{MYSQL_DB}", hosts[0]),
        }
    }

    /// The URL straight to the servers (readiness probe; never faulted).
    pub fn direct_url(&self) -> String {
        let addrs: Vec<SocketAddr> = self.members.iter().map(|m| m.addr).collect();
        self.url(&addrs)
    }

    /// Sentinel: the sentinels' addresses.
    pub fn sentinels(&self) -> Vec<SocketAddr> {
        self.members.iter().filter(|m| m.role == Role::Sentinel).map(|m| m.addr).collect()
    }

    /// Sentinel: the data node the sentinels name master now.
    pub async fn sentinel_master(&self) -> Option<usize> {
        let addr = sentinel::master(&self.sentinels()).await?;
        self.members.iter().position(|m| matches!(m.role, Role::Data(_)) && m.addr == addr)
    }

    /// Starts a stopped member; a Sentinel data node as a replica of the master the sentinels name now (never as a
    /// second, empty master), or as a master if they name it.
    /// Sets the libfaketime offset (`+4`, `+0`) of the members `which`; a member without a clock file is an error.
    pub fn set_clocks(&self, which: &[usize], offset: &str) -> std::io::Result<()> {
        for &i in which {
            let m = &self.members[i];
            let (_, clock) =
                m.clock.as_ref().ok_or_else(|| std::io::Error::other(format!("{} has no fake clock", m.name)))?;
            std::fs::write(clock, format!("{offset}\n"))?;
        }
        Ok(())
    }

    /// How far member `i`'s clock (Redis `TIME`) is ahead of ours, in seconds: proof that a clock jump took.
    pub async fn clock_offset(&self, i: usize) -> Result<f64, String> {
        let m = &self.members[i];
        let lines = sentinel::cli(m.addr, &["TIME"]).await?;
        let num = |j: usize| lines.get(j).and_then(|l| l.trim().parse::<f64>().ok());
        let (Some(secs), Some(us)) = (num(0), num(1)) else {
            return Err(format!("{}: TIME answered {lines:?}", m.name));
        };
        let ours = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_err(|e| e.to_string())?;
        Ok(secs + us / 1e6 - ours.as_secs_f64())
    }

    pub async fn restart(&mut self, i: usize) -> std::io::Result<()> {
        if matches!(self.members[i].role, Role::Data(_)) {
            let master = sentinel::master(&self.sentinels()).await.map(|a| a.port());
            let me = self.members[i].addr.port();
            self.members[i].replica_of(master.filter(|&p| p != me));
        }
        self.members[i].start()
    }

    /// Redis Cluster: assigns the slots across the masters (`redis-cli --cluster create`) and waits until every
    /// node reports `cluster_state:ok`.
    pub async fn create_cluster(&self, within: Duration) -> Result<(), String> {
        let deadline = std::time::Instant::now() + within;
        for m in &self.members {
            while sentinel::cli(m.addr, &["PING"]).await.is_err() {
                if std::time::Instant::now() >= deadline {
                    return Err(format!("{}: no answer to PING within {within:?}", m.name));
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
        let addrs: Vec<String> = self.members.iter().map(|m| m.addr.to_string()).collect();
        let first = self.members[0].addr;
        let create = tokio::process::Command::new("redis-cli")
            .args(["-h", &first.ip().to_string(), "-p", &first.port().to_string(), "--cluster", "create"])
            .args(&addrs)
            .args(["--cluster-replicas", "0", "--cluster-yes"])
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output();
        let out = tokio::time::timeout(within, create)
            .await
            .map_err(|_| format!("redis-cli --cluster create: not done within {within:?}"))?
            .map_err(|e| format!("redis-cli: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "redis-cli --cluster create failed: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        for m in &self.members {
            loop {
                let info = sentinel::cli(m.addr, &["CLUSTER", "INFO"]).await.unwrap_or_default();
                if info.iter().any(|l| l.trim() == "cluster_state:ok") {
                    break;
                }
                if std::time::Instant::now() >= deadline {
                    return Err(format!("{}: no cluster_state:ok within {within:?}: {info:?}", m.name));
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
        Ok(())
    }

    /// The index of the current leader (etcd, ZooKeeper), if one is known.
    pub async fn leader(&self) -> Option<usize> {
        match self.backend {
            Backend::Zk => {
                for (i, m) in self.members.iter().enumerate().filter(|(_, m)| m.is_running()) {
                    if four_letter(m.addr, "srvr").await.is_some_and(|r| r.contains("Mode: leader")) {
                        return Some(i);
                    }
                }
                None
            }
            Backend::Etcd => {
                let eps: Vec<String> = self.members.iter().map(|m| format!("http://{}", m.addr)).collect();
                let out = tokio::process::Command::new("etcdctl")
                    .env("ETCDCTL_API", "3")
                    .args(["--endpoints", &eps.join(","), "--dial-timeout", "1s", "--command-timeout", "2s"])
                    .args(["endpoint", "status", "-w", "json"])
                    .output()
                    .await
                    .ok()?;
                let v: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
                v.as_array()?.iter().find_map(|st| {
                    let leader = st["Status"]["leader"].as_u64()?;
                    (st["Status"]["header"]["member_id"].as_u64()? == leader)
                        .then(|| st["Endpoint"].as_str())
                        .flatten()
                        .and_then(|ep| eps.iter().position(|e| e == ep))
                })
            }
            _ => None,
        }
    }

    /// MySQL: ends every connection of the lock clients with `KILL <id>`; PostgreSQL: with `pg_terminate_backend`
    /// (the server's own CLI straight to its port, never through a proxy). Returns the ids it found, and how many of
    /// them had gone before their kill.
    pub async fn kill_connections(&self) -> Result<(Vec<u64>, usize), String> {
        let m = self.members.first().filter(|m| m.is_running());
        let Some(m) = m.filter(|_| matches!(self.backend, Backend::Mysql | Backend::Postgres)) else {
            return Err(format!("{}: no running server to kill connections on", self.backend.name()));
        };
        if self.backend == Backend::Postgres {
            return terminate_backends(m.addr).await;
        }
        let select =
            format!("SELECT id FROM information_schema.processlist WHERE db = '{MYSQL_DB}' AND id <> CONNECTION_ID()");
        // A server the previous fault restarted may still be recovering: retried until it answers, within a bound.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        let ids = loop {
            match mariadb(m.addr, &["-N", "-B", "-e", &select]).await {
                Ok((ids, _)) => break ids,
                Err(e) if std::time::Instant::now() >= deadline => return Err(format!("{e} (for 10 s)")),
                Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        };
        let ids = ids
            .split_whitespace()
            .map(|id| id.parse::<u64>().map_err(|e| format!("processlist id {id:?}: {e}")))
            .collect::<Result<Vec<u64>, String>>()?;
        if ids.is_empty() {
            return Ok((ids, 0));
        }
        // --force: one that ended meanwhile ("Unknown thread id") must not spare the others.
        let kills: String = ids.iter().map(|id| format!("KILL {id};")).collect();
        let (_, errors) = mariadb(m.addr, &["--force", "-e", &kills]).await?;
        let gone = errors.lines().filter(|l| l.starts_with("ERROR 1094 ")).count();
        Ok((ids, gone))
    }

    pub fn stop(&mut self) {
        for m in &mut self.members {
            m.kill();
        }
    }
}

impl Drop for Servers {
    fn drop(&mut self) {
        self.stop();
    }
}

/// PostgreSQL: `pg_terminate_backend` of every other client backend, by psql as the superuser (trust auth), retried
/// within a bound while a restarted server recovers. Returns their pids, and how many had ended before the call.
async fn terminate_backends(addr: SocketAddr) -> Result<(Vec<u64>, usize), String> {
    let psql = postgres_bin()?.join("psql");
    let sql = "SELECT pid, pg_terminate_backend(pid) FROM pg_stat_activity \
               WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()";
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let out = loop {
        let run = tokio::process::Command::new(&psql)
            .args(["-h", &addr.ip().to_string(), "-p", &addr.port().to_string(), "-U", "postgres", "-d", "postgres"])
            .args(["-X", "-A", "-t", "-F", " ", "-c", sql])
            .env("PGCONNECT_TIMEOUT", "2")
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output();
        let out = match tokio::time::timeout(Duration::from_secs(10), run).await {
            Ok(Ok(out)) if out.status.success() => break out,
            Ok(Ok(out)) => format!("psql: {}: {}", out.status, String::from_utf8_lossy(&out.stderr).trim()),
            Ok(Err(e)) => format!("psql: {e}"),
            Err(_) => "psql: no answer within 10 s".into(),
        };
        if std::time::Instant::now() >= deadline {
            return Err(format!("{out} (for 10 s)"));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let (mut pids, mut gone) = (Vec::new(), 0);
    for line in String::from_utf8_lossy(&out.stdout).lines().filter(|l| !l.trim().is_empty()) {
        let (pid, ok) = line.trim().split_once(' ').ok_or_else(|| format!("psql answered {line:?}"))?;
        pids.push(pid.parse::<u64>().map_err(|e| format!("pg_stat_activity pid {pid:?}: {e}"))?);
        gone += usize::from(ok != "t");
    }
    Ok((pids, gone))
}

/// Runs the mariadb CLI as root on `addr`; returns stdout and stderr. It fails unless every error was ER_NO_SUCH_THREAD
/// (1094, "Unknown thread id": a connection that ended before its KILL).
async fn mariadb(addr: SocketAddr, args: &[&str]) -> Result<(String, String), String> {
    let run = tokio::process::Command::new("mariadb")
        .args(["--no-defaults", "--connect-timeout=2", "-uroot", "-h"])
        .arg(addr.ip().to_string())
        .arg(format!("-P{}", addr.port()))
        .args(args)
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(10), run)
        .await
        .map_err(|_| "mariadb CLI: no answer within 10 s".to_string())?
        .map_err(|e| format!("mariadb CLI: {e}"))?;
    let (stdout, stderr) =
        (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned());
    // With --force the CLI goes on after an error and prints each one as an `ERROR <code> …` line (after the
    // statement, boxed in dashes); a non-zero exit with no such line is a CLI that could not run or connect.
    let errors: Vec<&str> = stderr.lines().filter(|l| l.starts_with("ERROR")).collect();
    let unknown = |l: &&str| l.starts_with("ERROR 1094 ");
    if !out.status.success() && (errors.is_empty() || !errors.iter().all(unknown)) {
        return Err(format!("mariadb CLI {args:?}: {}: {}", out.status, stderr.trim()));
    }
    Ok((stdout, stderr))
}

async fn four_letter(addr: SocketAddr, word: &str) -> Option<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let io = async {
        let mut s = tokio::net::TcpStream::connect(addr).await.ok()?;
        s.write_all(word.as_bytes()).await.ok()?;
        let mut out = String::new();
        s.read_to_string(&mut out).await.ok()?;
        Some(out)
    };
    tokio::time::timeout(Duration::from_secs(2), io).await.ok().flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kill_takes_the_descendants_that_left_the_group() {
        // A child that leaves the group with setsid, as PostgreSQL's backends do.
        let log = std::env::temp_dir().join(format!("locktest-kill-{}.log", std::process::id()));
        let mut m = Member {
            name: "sh".into(),
            role: Role::Server,
            addr: SocketAddr::from(([127, 0, 0, 1], 1)),
            program: "sh".into(),
            args: vec!["-c".into(), "setsid sleep 60 & sleep 60".into()],
            user: None,
            log: log.clone(),
            pid: None,
            clock: None,
        };
        m.start().expect("sh");
        let leader = m.pid.expect("started");
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        let strays = loop {
            let d = descendants(leader);
            if d.len() >= 2 || std::time::Instant::now() > deadline {
                break d;
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        assert_eq!(strays.len(), 2, "sh's two sleeps: {strays:?}");
        m.kill();
        assert!(!alive(leader) && strays.iter().all(|&c| !alive(c)), "{strays:?} outlived the kill");
        let _ = std::fs::remove_file(&log);
    }
}
