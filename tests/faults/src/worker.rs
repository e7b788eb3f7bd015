//! The Rust client worker: the loop of SAFETY-TESTING.md §2.2 on the Rust API, speaking the JSON-lines protocol of
//! README.md (events on stdout, stops at stdin EOF). workers/worker.py and workers/worker.mjs are its twins.

use crate::clock::t_ref;
use fencelock::{Client, ErrorKind, Lease, LockOptions};
use rand::{Rng, SeedableRng, rngs::StdRng};
use serde_json::{Value, json};
use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};

#[derive(Debug, Clone, clap::Args)]
pub struct WorkerArgs {
    #[arg(long)]
    pub url: String,
    /// host:port of the referee.
    #[arg(long)]
    pub referee: String,
    #[arg(long)]
    pub client: String,
    #[arg(long, default_value_t = 2000)]
    pub ttl_ms: u64,
    #[arg(long, default_value = "locktest")]
    pub name: String,
    #[arg(long, default_value = "register")]
    pub key: String,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// `mutex`, `rwlock` (reads and writes of one read-write lock), `semaphore` (permits, a register per slot) or
    /// `election` (campaigns; the term is the token).
    #[arg(long, default_value = "mutex")]
    pub workload: String,
    /// The semaphore's permits (`--workload semaphore`).
    #[arg(long, default_value_t = 2)]
    pub permits: u32,
    /// No lost check before a write: the canary's user, whom only fencing protects from a pause past the TTL.
    #[arg(long)]
    pub careless: bool,
}

/// What one cycle takes: the mutex, a read or the write hold of the rw lock, a permit, or the leadership.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Hold {
    Mutex,
    Read,
    Write,
    Permit,
    Leader,
}

impl Hold {
    /// The `hold` field of the events (none for the mutex, whose history predates it).
    fn name(self) -> Option<&'static str> {
        match self {
            Hold::Mutex => None,
            Hold::Read => Some("read"),
            Hold::Write => Some("write"),
            Hold::Permit => Some("permit"),
            Hold::Leader => Some("leader"),
        }
    }
}

/// Writes events; shared with the lost-notification tasks.
#[derive(Debug)]
struct Emitter {
    client: String,
    pid: u32,
    seq: AtomicU64,
}

impl Emitter {
    fn emit(&self, kind: &str, f: &str, session: Option<&str>, token: Option<u64>, error: Option<&str>) {
        self.emit_hold(kind, f, session, token, error, None, None);
    }

    /// An event that also names the hold kind and the semaphore slot (the `ok acquire` of the rw and semaphore
    /// workloads).
    #[allow(clippy::too_many_arguments)]
    fn emit_hold(
        &self,
        kind: &str,
        f: &str,
        session: Option<&str>,
        token: Option<u64>,
        error: Option<&str>,
        hold: Option<&str>,
        slot: Option<u32>,
    ) {
        let mut e = json!({
            "src": "worker", "type": kind, "f": f, "client": self.client, "lang": "rust", "pid": self.pid,
            "seq": self.seq.fetch_add(1, Ordering::SeqCst), "t_ref": t_ref(),
        });
        let m = e.as_object_mut().expect("object");
        if let Some(s) = session {
            m.insert("session".into(), s.into());
        }
        if let Some(t) = token {
            m.insert("token".into(), t.into());
        }
        if let Some(err) = error {
            m.insert("error".into(), err.into());
        }
        if let Some(h) = hold {
            m.insert("hold".into(), h.into());
        }
        if let Some(n) = slot {
            m.insert("slot".into(), n.into());
        }
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{e}");
        let _ = out.flush();
    }
}

struct RefereeConn {
    r: tokio::io::Lines<BufReader<OwnedReadHalf>>,
    w: OwnedWriteHalf,
}

impl RefereeConn {
    async fn call(&mut self, req: Value) -> Result<([bool; 3], [i64; 3]), String> {
        let mut line = req.to_string();
        line.push('\n');
        self.w.write_all(line.as_bytes()).await.map_err(|e| e.to_string())?;
        let reply = self.r.next_line().await.map_err(|e| e.to_string())?.ok_or("referee closed")?;
        let v: Value = serde_json::from_str(&reply).map_err(|e| e.to_string())?;
        let ok = serde_json::from_value(v["ok"].clone()).map_err(|e| format!("{e}: {reply}"))?;
        let values = serde_json::from_value(v["values"].clone()).map_err(|e| format!("{e}: {reply}"))?;
        Ok((ok, values))
    }
}

fn code(e: &fencelock::Error) -> &'static str {
    e.kind().as_str()
}

/// The acquire outcome class of the protocol: a timeout is `fail`, anything indeterminate `info`.
fn class(e: &fencelock::Error) -> &'static str {
    if e.kind() == ErrorKind::Timeout { "fail" } else { "info" }
}

pub async fn run(args: WorkerArgs) -> Result<(), String> {
    let out = Arc::new(Emitter { client: args.client.clone(), pid: std::process::id(), seq: AtomicU64::new(0) });
    let stop = Arc::new(AtomicBool::new(false));
    {
        let stop = stop.clone();
        // A plain thread: tokio's stdin needs a feature the workspace does not enable.
        std::thread::spawn(move || {
            for line in std::io::stdin().lines() {
                if line.is_err() {
                    break;
                }
            }
            stop.store(true, Ordering::SeqCst);
        });
    }
    let sock = TcpStream::connect(&args.referee).await.map_err(|e| format!("referee {}: {e}", args.referee))?;
    let (r, w) = sock.into_split();
    let mut referee = RefereeConn { r: BufReader::new(r).lines(), w };
    let client = loop {
        match Client::connect(&args.url).await {
            Ok(c) => break c,
            Err(e) if stop.load(Ordering::SeqCst) => return Err(format!("connect {}: {e}", args.url)),
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    };
    let ttl = Duration::from_millis(args.ttl_ms);
    let owner = format!("{}-main", args.client);
    let opts = LockOptions::default().ttl(ttl).timeout(ttl * 3).owner(owner);
    let mut rng = StdRng::seed_from_u64(args.seed ^ u64::from(std::process::id()));
    let mut n = 0u64;
    let (rw, sem) = (client.rw_lock(&args.name), client.semaphore(&args.name, args.permits));
    let (election, value) = (client.election(&args.name), args.client.as_bytes());
    while !stop.load(Ordering::SeqCst) {
        let hold = match args.workload.as_str() {
            "mutex" => Hold::Mutex,
            // Readers outnumber the writer: overlapping read runs, and writers waiting behind them.
            "rwlock" if rng.random_bool(0.6) => Hold::Read,
            "rwlock" => Hold::Write,
            "semaphore" => Hold::Permit,
            "election" => Hold::Leader,
            w => return Err(format!("unknown workload {w:?} (mutex, rwlock, semaphore, election)")),
        };
        out.emit_hold("invoke", "acquire", None, None, None, hold.name(), None);
        let got = match hold {
            Hold::Mutex => client.lock(&args.name, &opts).await,
            Hold::Read => rw.read(&opts).await,
            Hold::Write => rw.write(&opts).await,
            Hold::Permit => sem.acquire(&opts).await,
            // The leadership's lease carries the watchdog, the lost signal and the release (resign) alike.
            Hold::Leader => election.campaign(value, &opts).await.map(fencelock::Leadership::into_lease),
        };
        let lease = match got {
            Ok(l) => l,
            Err(e) => {
                // The history keeps the code; the message (core redacts secrets) goes to the slot's log for whoever
                // asks why.
                if class(&e) == "info" {
                    eprintln!("locktest worker {}: acquire: {e}", args.client);
                }
                out.emit(class(&e), "acquire", None, None, Some(code(&e)));
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        n += 1;
        let session = format!("{}.{}.{n}", args.client, std::process::id());
        let token = lease.fence();
        out.emit_hold("ok", "acquire", Some(&session), Some(token), None, hold.name(), lease.slot());
        {
            let (out, lost, session) = (out.clone(), lease.lost(), session.clone());
            tokio::spawn(async move {
                if let fencelock::LeaseEnd::Lost(_) = lost.await {
                    out.emit("lost", "lost", Some(&session), Some(token), Some("LOCK_LOST"));
                }
            });
        }
        critical_section(&client, &lease, hold, &opts, &args, &mut referee, &out, &session, &mut rng).await?;
        out.emit("invoke", "release", Some(&session), Some(token), None);
        match lease.release().await {
            Ok(()) => out.emit("ok", "release", Some(&session), Some(token), None),
            Err(e) => out.emit("fail", "release", Some(&session), Some(token), Some(code(&e))),
        }
        tokio::time::sleep(ttl.mul_f64(rng.random_range(0.0..0.1))).await;
    }
    client.close().await;
    Ok(())
}

#[allow(clippy::too_many_arguments)]
async fn critical_section(
    client: &Client,
    lease: &Lease,
    hold: Hold,
    opts: &LockOptions,
    args: &WorkerArgs,
    referee: &mut RefereeConn,
    out: &Emitter,
    session: &str,
    rng: &mut StdRng,
) -> Result<(), String> {
    let token = lease.fence();
    let ttl = Duration::from_millis(args.ttl_ms);
    if hold == Hold::Mutex && rng.random_bool(0.2) {
        // Reentrancy: the same owner gets the same grant back (P8).
        out.emit("invoke", "nested-acquire", Some(session), Some(token), None);
        match client.lock(&args.name, opts).await {
            Ok(inner) => {
                out.emit("ok", "nested-acquire", Some(session), Some(inner.fence()), None);
                match inner.release().await {
                    Ok(()) => out.emit("ok", "nested-release", Some(session), Some(token), None),
                    Err(e) => out.emit("fail", "nested-release", Some(session), Some(token), Some(code(&e))),
                }
            }
            Err(e) => out.emit(class(&e), "nested-acquire", Some(session), None, Some(code(&e))),
        }
    }
    // Each semaphore slot is a resource of its own, fenced by that slot's token.
    let key = match lease.slot() {
        Some(slot) => format!("{}.slot{slot}", args.key),
        None => args.key.clone(),
    };
    let mut base = json!({ "key": key, "client": args.client, "session": session, "token": token });
    if let Some(h) = hold.name() {
        base["hold"] = h.into();
    }
    let mut read = base.clone();
    read["op"] = "read".into();
    // A refused read does not end the cycle: the shadow and cas registers must see what an unfenced resource
    // would, and the fenced register refuses whatever follows anyway.
    let (_, mut values) = referee.call(read.clone()).await?;
    // Work; the long tail crosses the TTL, so the watchdog must carry it.
    tokio::time::sleep(ttl.mul_f64(rng.random_range(0.1..1.5))).await;
    if hold == Hold::Read {
        // A reader reads again at the end: accepted by the fence, it must see what it saw first (no writer in
        // between), which the checker verifies. Then the same explicit renewal as a writer's (P6).
        if lease.is_lost() {
            return Ok(());
        }
        referee.call(read).await?;
        renew(lease, out, session).await;
        return Ok(());
    }
    let writes = if rng.random_bool(0.3) { 2 } else { 1 };
    for i in 0..writes {
        // A careful user: no write once the SDK said the lock is lost. A pause between this check and the write is
        // exactly what fencing exists for.
        if !args.careless && lease.is_lost() {
            return Ok(());
        }
        // The SDK's own register on the backend decides the fenced write; the referee only records its answer
        // (none when the answer is unknown: a timeout is no refusal).
        let fenced = fence_write(client, &key, token, lease.slot(), session, out).await;
        let mut write = base.clone();
        write["op"] = "write".into();
        write["fenced"] = json!(fenced);
        write["values"] = json!([values[0] + 1, values[1] + 1, values[2] + 1]);
        (_, values) = referee.call(write).await?;
        if i == 0 {
            // An explicit renewal: P6 checks none succeeds after another session acquired.
            renew(lease, out, session).await;
            if writes > 1 {
                tokio::time::sleep(ttl.mul_f64(rng.random_range(0.0..0.3))).await;
            }
        }
    }
    Ok(())
}

/// An explicit renewal, with its events.
async fn renew(lease: &Lease, out: &Emitter, session: &str) {
    let token = lease.fence();
    out.emit("invoke", "renew", Some(session), Some(token), None);
    match lease.renew(None).await {
        Ok(()) => out.emit("ok", "renew", Some(session), Some(token), None),
        Err(e) => out.emit("fail", "renew", Some(session), Some(token), Some(code(&e))),
    }
}

/// A write of the hold's token to the SDK's own Fence register `key` on the backend: whether the register accepted
/// it, `None` when its answer is unknown (an indeterminate error). The checker fails on an accepted token below one
/// the same register accepted before this write began.
async fn fence_write(
    client: &Client,
    key: &str,
    token: u64,
    slot: Option<u32>,
    session: &str,
    out: &Emitter,
) -> Option<bool> {
    out.emit_hold("invoke", "fence-write", Some(session), Some(token), None, None, slot);
    let result = client.fence(key).write(token, session.as_bytes()).await;
    let answer = fence_answer(&result);
    let kind = match answer {
        Some(true) => "ok",
        Some(false) => "fail",
        None => "info",
    };
    out.emit_hold(kind, "fence-write", Some(session), Some(token), result.as_ref().err().map(code), None, slot);
    answer
}

/// What a register's answer says: accepted, refused (`FENCED`), or unknown. Any other error is unknown, never a
/// refusal: a timeout or a cut connection says nothing of what the register did, and P5 counts every refusal as a
/// loss the client must have been told of.
fn fence_answer(result: &fencelock::Result<()>) -> Option<bool> {
    match result {
        Ok(()) => Some(true),
        Err(e) if e.kind() == ErrorKind::Fenced => Some(false),
        Err(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fencelock::Error;

    #[test]
    fn only_a_fenced_error_is_a_refusal_and_any_other_error_is_unknown() {
        assert_eq!(fence_answer(&Ok(())), Some(true));
        assert_eq!(fence_answer(&Err(Error::new(ErrorKind::Fenced, "token 3 below 5"))), Some(false));
        for kind in [ErrorKind::Unavailable, ErrorKind::Timeout, ErrorKind::Closed, ErrorKind::Internal] {
            assert_eq!(fence_answer(&Err(Error::new(kind, "no answer"))), None, "{kind:?}");
        }
    }

    #[tokio::test]
    async fn a_real_register_answers_accepted_then_fenced() {
        let dir = std::env::temp_dir().join(format!("locktest-fence-answer-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let client = Client::connect(&format!("sqlite:{}", dir.join("f.db").display())).await.expect("sqlite");
        let out = Emitter { client: "test".into(), pid: 0, seq: AtomicU64::new(0) };
        // Above any clock seed: a register seeds itself from the clock in µs and refuses what lies below.
        let newer = 1 << 62;
        assert_eq!(fence_write(&client, "r", newer, None, "s", &out).await, Some(true));
        assert_eq!(fence_write(&client, "r", newer - 1, None, "s", &out).await, Some(false));
        drop(client);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
