//! The `fencelock` binary end to end: real processes against a throwaway SQLite file, no mocks. Waits are bounded
//! retries on an observable condition (a line printed, a file written, a process exited), never bare sleeps.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, ExitStatus, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc::{self, Receiver};
use std::thread;
use std::time::{Duration, Instant};

/// Upper bound for anything a test waits on; far above the expected sub-second times.
const PATIENCE: Duration = Duration::from_secs(10);

/// A fresh directory holding the test's database and files, removed afterwards.
struct Scratch {
    dir: PathBuf,
    /// Where the locks live: the scratch SQLite file, or a test server's URL.
    url: String,
}

impl Scratch {
    fn new() -> Self {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "fencelock-cli-test-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch { url: format!("sqlite:{}", dir.join("locks.db").display()), dir }
    }

    /// A scratch directory whose locks live on the server that `var` names, as the test command sets it; `None`
    /// (skipped) when it is unset, unless the test command requires every server.
    fn served(var: &str) -> Option<Self> {
        match std::env::var(var) {
            Ok(url) if !url.is_empty() => {
                let mut s = Scratch::new();
                s.url = url;
                Some(s)
            }
            _ if std::env::var("FENCELOCK_REQUIRE_SERVICES").as_deref() == Ok("1") => {
                panic!("{var} is not set but FENCELOCK_REQUIRE_SERVICES=1")
            }
            _ => None,
        }
    }

    fn url(&self) -> String {
        self.url.clone()
    }

    /// A lock name of this scratch alone: a server's tables outlive the test.
    fn unique(&self, base: &str) -> String {
        format!("{base}-{}", self.dir.file_name().unwrap().to_string_lossy())
    }

    fn path(&self, file: &str) -> PathBuf {
        self.dir.join(file)
    }

    /// `fencelock ARGS…` with `--url` pointing at this scratch database, run in the scratch directory.
    fn cmd(&self, sub: &str, args: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_fencelock"));
        cmd.arg(sub).arg("--url").arg(self.url()).args(args).current_dir(&self.dir).env_remove("FENCELOCK_URL");
        cmd
    }

    /// Runs to completion within `PATIENCE`.
    fn output(&self, sub: &str, args: &[&str]) -> Output {
        Proc::spawn(self.cmd(sub, args)).finish()
    }

    /// The `status` output as (key, value) lines.
    fn status(&self, name: &str) -> Vec<(String, String)> {
        let out = self.output("status", &[name]);
        assert!(out.status.success(), "status failed: {}", text(&out.stderr));
        text(&out.stdout)
            .lines()
            .map(|l| {
                let (k, v) = l.split_once(": ").unwrap_or_else(|| panic!("bad status line {l:?}"));
                (k.to_string(), v.to_string())
            })
            .collect()
    }

    fn holder(&self, name: &str) -> String {
        let status = self.status(name);
        status.iter().find(|(k, _)| k == "held by").map(|(_, v)| v.clone()).expect("a held by line")
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Retries `probe` until it yields a value or `PATIENCE` passes.
fn eventually<T>(what: &str, mut probe: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + PATIENCE;
    loop {
        if let Some(v) = probe() {
            return v;
        }
        assert!(Instant::now() < deadline, "gave up waiting for {what}");
        thread::sleep(Duration::from_millis(10));
    }
}

/// A spawned process whose stdout and stderr are read line by line on threads, so a test can wait for a line with
/// a deadline; killed on drop if still running.
struct Proc {
    child: Child,
    stdout: Receiver<String>,
    stderr: Receiver<String>,
    seen_out: Vec<String>,
    seen_err: Vec<String>,
}

fn lines_of(stream: impl Read + Send + 'static) -> Receiver<String> {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        for line in BufReader::new(stream).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

impl Proc {
    fn spawn(mut cmd: Command) -> Self {
        let mut child = cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        let stdout = lines_of(child.stdout.take().unwrap());
        let stderr = lines_of(child.stderr.take().unwrap());
        Proc { child, stdout, stderr, seen_out: vec![], seen_err: vec![] }
    }

    fn pid(&self) -> String {
        self.child.id().to_string()
    }

    fn stdin(&mut self) -> &mut ChildStdin {
        self.child.stdin.as_mut().unwrap()
    }

    /// Waits for a stdout line containing `needle`.
    fn expect_stdout(&mut self, needle: &str) -> String {
        expect_line(&self.stdout, &mut self.seen_out, needle, "stdout")
    }

    /// Waits for a stderr line containing `needle`.
    fn expect_stderr(&mut self, needle: &str) -> String {
        expect_line(&self.stderr, &mut self.seen_err, needle, "stderr")
    }

    fn signal(&self, sig: &str) {
        let ok = Command::new("kill").arg(format!("-{sig}")).arg(self.pid()).status().unwrap().success();
        assert!(ok, "kill -{sig} {} failed", self.pid());
    }

    /// Waits for the exit (closing stdin first) and collects the rest of the output.
    fn finish(mut self) -> Output {
        drop(self.child.stdin.take());
        self.exited()
    }

    /// Waits for the exit with stdin left open, for a process told to stop by a signal: an EOF it saw first would
    /// end a CMD that reads stdin normally, and the signal would find it gone.
    fn exited(mut self) -> Output {
        let status = eventually("the process to exit", || self.child.try_wait().unwrap());
        let collect = |rx: &Receiver<String>, seen: &mut Vec<String>| {
            // The writer has exited; the reader thread ends at EOF, which closes the channel.
            while let Ok(line) = rx.recv_timeout(PATIENCE) {
                seen.push(line);
            }
            seen.iter().map(|l| format!("{l}\n")).collect::<String>().into_bytes()
        };
        let stdout = collect(&self.stdout, &mut self.seen_out);
        let stderr = collect(&self.stderr, &mut self.seen_err);
        Output { status, stdout, stderr }
    }
}

fn expect_line(rx: &Receiver<String>, seen: &mut Vec<String>, needle: &str, stream: &str) -> String {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) => {
                seen.push(line.clone());
                if line.contains(needle) {
                    return line;
                }
            }
            Err(_) => panic!("no {stream} line containing {needle:?}; got {seen:?}"),
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// A `fencelock run NAME` whose command prints `held` and then waits for its stdin to close.
fn hold(s: &Scratch, name: &str) -> Proc {
    let mut p = Proc::spawn(s.cmd("run", &[name, "--", "sh", "-c", "echo held; read _ || true"]));
    p.expect_stdout("held");
    p
}

fn code(status: ExitStatus) -> i32 {
    status.code().unwrap_or_else(|| panic!("fencelock died of a signal: {status:?}"))
}

#[test]
fn exits_with_the_commands_status_and_prints_nothing_of_its_own() {
    let s = Scratch::new();
    let out = s.output("run", &["x", "--", "sh", "-c", "exit 7"]);
    assert_eq!(code(out.status), 7);
    assert!(out.stdout.is_empty() && out.stderr.is_empty(), "{out:?}");

    let out = s.output("run", &["x", "--", "sh", "-c", "echo to-out; echo to-err >&2"]);
    assert_eq!(code(out.status), 0);
    assert_eq!((text(&out.stdout), text(&out.stderr)), ("to-out\n".into(), "to-err\n".into()));

    // A command killed by a signal: 128 + its number.
    let out = s.output("run", &["x", "--", "sh", "-c", "kill -KILL $$"]);
    assert_eq!(code(out.status), 128 + 9);
    assert_eq!(s.holder("x"), "nobody", "every run released the lock");
}

#[test]
fn the_command_sees_the_name_and_token() {
    sees_the_name_and_token(&Scratch::new(), "jobs/nightly");
}

fn sees_the_name_and_token(s: &Scratch, lock: &str) {
    let out = s.output("run", &[lock, "--", "sh", "-c", "echo \"$FENCELOCK_NAME $FENCELOCK_TOKEN\""]);
    assert_eq!(code(out.status), 0, "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let (name, token) = stdout.trim().split_once(' ').unwrap();
    assert_eq!(name, lock);
    let status = s.status(lock);
    assert!(status.contains(&("last token".into(), token.into())), "{status:?} vs token {token}");
}

#[test]
fn verbose_reports_acquire_and_release_on_stderr() {
    let s = Scratch::new();
    let out = s.output("run", &["-v", "x", "--", "true"]);
    assert_eq!(code(out.status), 0);
    let err = text(&out.stderr);
    assert!(err.contains("acquired lock \"x\" with token ") && err.contains("released lock \"x\""), "{err}");
    assert!(out.stdout.is_empty());
}

#[test]
fn concurrent_runs_never_overlap_and_tokens_rise() {
    never_overlap(&Scratch::new(), "x");
}

fn never_overlap(s: &Scratch, lock: &str) {
    let log = s.path("log");
    let script = "echo \"start $FENCELOCK_TOKEN\" >> \"$1\"; sleep 0.05; echo \"end $FENCELOCK_TOKEN\" >> \"$1\"";
    let log_arg = log.to_str().unwrap();
    let runs: Vec<Proc> =
        (0..4).map(|_| Proc::spawn(s.cmd("run", &[lock, "--", "sh", "-c", script, "sh", log_arg]))).collect();
    for run in runs {
        let out = run.finish();
        assert_eq!(code(out.status), 0, "{}", text(&out.stderr));
    }
    let lines: Vec<String> = std::fs::read_to_string(&log).unwrap().lines().map(String::from).collect();
    assert_eq!(lines.len(), 8, "{lines:?}");
    let mut last = 0u64;
    for pair in lines.chunks(2) {
        let start: u64 = pair[0].strip_prefix("start ").expect("a start line").parse().unwrap();
        assert_eq!(pair[1], format!("end {start}"), "sections interleaved: {lines:?}");
        assert!(start > last, "tokens did not rise: {lines:?}");
        last = start;
    }
}

#[test]
fn timeout_gives_up_with_124() {
    gives_up_with_124(&Scratch::new(), "x");
}

fn gives_up_with_124(s: &Scratch, lock: &str) {
    let holder = hold(s, lock);
    let started = Instant::now();
    let out = s.output("run", &["--timeout", "0.3", lock, "--", "echo", "must not run"]);
    assert_eq!(code(out.status), 124);
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert!(out.stdout.is_empty(), "the command ran: {out:?}");
    let err = text(&out.stderr);
    assert!(err.contains("timed out") && err.contains(&format!("{lock:?}")) && err.lines().count() == 1, "{err}");
    assert_eq!(code(holder.finish().status), 0);
}

#[test]
fn lost_lock_terminates_the_command() {
    lost_lock_terminates(&Scratch::new(), "x");
}

fn lost_lock_terminates(s: &Scratch, lock: &str) {
    let marker = s.path("marker");
    // The command records that it started and that SIGTERM reached it; `wait` lets the trap run at once.
    let script = "trap 'kill $!; echo terminated >> \"$1\"; exit 143' TERM; echo started >> \"$1\"; sleep 30 & wait";
    let run =
        Proc::spawn(s.cmd("run", &["--ttl", "1", lock, "--", "sh", "-c", script, "sh", marker.to_str().unwrap()]));
    eventually("the command to start", || std::fs::read_to_string(&marker).ok().filter(|m| m.contains("started")));

    let out = s.output("release", &["--force", lock]);
    assert!(text(&out.stdout).starts_with(&format!("released {lock}")), "{out:?}");

    let started = Instant::now();
    let out = run.finish();
    assert!(started.elapsed() < Duration::from_secs(3), "loss noticed after {:?}", started.elapsed());
    assert_eq!(code(out.status), 75);
    let err = text(&out.stderr);
    assert!(err.contains("lost") && err.lines().count() == 1, "{err}");
    assert_eq!(std::fs::read_to_string(&marker).unwrap(), "started\nterminated\n");
}

#[test]
fn mysql_urls_work_as_sqlite_ones_do() {
    let Some(s) = Scratch::served("FENCELOCK_TEST_MYSQL") else {
        return;
    };
    sees_the_name_and_token(&s, &s.unique("jobs/nightly"));
    never_overlap(&s, &s.unique("x"));
    gives_up_with_124(&s, &s.unique("t"));
    lost_lock_terminates(&s, &s.unique("l"));
}

#[test]
fn signals_are_forwarded_to_the_command_then_the_lock_is_released() {
    let s = Scratch::new();
    let script = "trap 'kill $!; echo got-term; exit 3' TERM; echo ready; sleep 30 & wait";
    let mut run = Proc::spawn(s.cmd("run", &["x", "--", "sh", "-c", script]));
    run.expect_stdout("ready");
    run.signal("TERM");
    let out = run.finish();
    assert_eq!(code(out.status), 3, "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("got-term"));
    assert_eq!(s.holder("x"), "nobody");
}

#[test]
fn a_signal_while_waiting_exits_128_plus_n_and_leaves_no_lock() {
    let s = Scratch::new();
    let holder = hold(&s, "x");
    for (sig, expected) in [("TERM", 143), ("INT", 130)] {
        let mut waiter = Proc::spawn(s.cmd("run", &["-v", "x", "--", "echo", "must not run"]));
        waiter.expect_stderr("waiting for lock \"x\"");
        waiter.signal(sig);
        let out = waiter.finish();
        assert_eq!(code(out.status), expected, "{}", text(&out.stderr));
        assert!(out.stdout.is_empty());
    }
    let held_by = s.holder("x");
    assert!(held_by.contains(&format!(":run-{}@", holder.pid())), "{held_by}");
    assert_eq!(code(holder.finish().status), 0);
    assert_eq!(s.holder("x"), "nobody", "a waiter left a record behind");
}

#[test]
fn status_shows_holder_remaining_and_token() {
    let s = Scratch::new();
    let status = s.status("x");
    assert_eq!(
        status,
        [
            ("name".into(), "x".into()),
            ("held by".into(), "nobody".into()),
            ("last token".into(), "none".into()),
            // SQLite has no waiter table to count.
            ("waiters".into(), "0".into())
        ]
    );

    let mut holder = Proc::spawn(
        s.cmd("run", &["--ttl", "20", "x", "--", "sh", "-c", "echo \"token $FENCELOCK_TOKEN\"; read _ || true"]),
    );
    let token = holder.expect_stdout("token ").trim_start_matches("token ").to_string();
    let status = s.status("x");
    let keys: Vec<&str> = status.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(keys, ["name", "held by", "remaining", "last token", "waiters"]);
    assert!(status[1].1.ends_with(&format!(":run-{}@{}", holder.pid(), hostname())), "{status:?}");
    let remaining: f64 = status[2].1.strip_suffix('s').unwrap().parse().unwrap();
    assert!(remaining > 0.0 && remaining <= 20.0, "{status:?}");
    assert_eq!(status[3].1, token);
    holder.stdin().write_all(b"done\n").unwrap();
    assert_eq!(code(holder.finish().status), 0);

    let out = s.output("release", &["--force", "x"]);
    assert_eq!((code(out.status), text(&out.stdout)), (0, "x was not held; nothing to release\n".into()));
}

fn hostname() -> String {
    let out = Command::new("hostname").output().unwrap();
    text(&out.stdout).trim().to_string()
}

#[test]
fn bad_input_is_a_usage_error_naming_the_problem() {
    let s = Scratch::new();
    let cases: &[(&str, &[&str], &str)] = &[
        ("run", &["--ttl", "0", "x", "--", "true"], "TTL"),
        ("run", &["--ttl", "soon", "x", "--", "true"], "number of seconds"),
        ("run", &["--timeout", "-1", "x", "--", "true"], "non-negative"),
        ("run", &["", "--", "true"], "empty"),
        ("run", &["x"], "CMD"),
        ("status", &[""], "empty"),
        ("release", &["x"], "--force"),
    ];
    for (sub, args, needle) in cases {
        let out = s.output(sub, args);
        assert_eq!(code(out.status), 2, "{sub} {args:?}: {out:?}");
        assert!(text(&out.stderr).contains(needle), "{sub} {args:?}: {}", text(&out.stderr));
    }
    assert!(!s.path("locks.db").exists(), "bad arguments must be caught before connecting");

    for url in ["nonsense", "ftp://h"] {
        let out = Proc::spawn(bin(&["status", "--url", url, "x"])).finish();
        assert_eq!(code(out.status), 2, "{out:?}");
        let err = text(&out.stderr);
        assert!(err.starts_with("fencelock: ") && err.contains(url) && err.lines().count() == 1, "{err}");
    }

    let out = s.output("run", &["x", "--", "/no/such/command"]);
    assert_eq!(code(out.status), 127);
    assert!(text(&out.stderr).contains("/no/such/command"));
    assert_eq!(s.holder("x"), "nobody");
}

#[test]
fn the_url_defaults_to_fencelock_url_then_a_local_file() {
    let s = Scratch::new();
    let mut cmd = bin(&["run", "x", "--", "true"]);
    cmd.current_dir(&s.dir).env_remove("FENCELOCK_URL");
    assert_eq!(code(Proc::spawn(cmd).finish().status), 0);
    assert!(s.path("fencelock.db").exists());

    let other = s.path("other.db");
    let mut cmd = bin(&["status", "y"]);
    cmd.current_dir(&s.dir).env("FENCELOCK_URL", format!("sqlite:{}", other.display()));
    assert_eq!(code(Proc::spawn(cmd).finish().status), 0);
    assert!(other.exists());
}

fn bin(args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_fencelock"));
    cmd.args(args);
    cmd
}

#[test]
fn redis_force_release_refuses_a_key_that_is_not_a_lock_record() {
    let Some(s) = Scratch::served("FENCELOCK_TEST_REDIS") else {
        return;
    };
    let lock = s.unique("counted");
    let out = s.output("run", &[&lock, "--", "sh", "-c", "echo $FENCELOCK_TOKEN"]);
    assert_eq!(code(out.status), 0, "{}", text(&out.stderr));
    let token = text(&out.stdout).trim().to_string();
    // The lock's token counter is a string key next to the lock: forcing it must leave it alone.
    let counter = format!("redisson_lock_token:{{{lock}}}");
    let out = s.output("release", &["--force", &counter]);
    assert_eq!(code(out.status), 2, "{out:?}");
    let err = text(&out.stderr);
    assert!(err.contains("a string, not a lock record") && err.contains(&counter), "{err}");
    assert!(s.status(&lock).contains(&("last token".into(), token.clone())), "the counter was deleted");
    let out = s.output("run", &[&lock, "--", "sh", "-c", "echo $FENCELOCK_TOKEN"]);
    let next: u64 = text(&out.stdout).trim().parse().unwrap();
    assert!(next > token.parse().unwrap(), "tokens went on from the counter");
}

#[test]
fn status_watch_prints_a_line_per_refresh_as_the_holder_changes() {
    let s = Scratch::new();
    // SQLite counts the live places in its waiter queue: the one `run` waiting below.
    watch_sees_changes(&s, "watched", "waiters: 1");
    if let Some(s) = Scratch::served("FENCELOCK_TEST_REDIS") {
        // Redis counts the clients subscribed to the lock's channel: the one `run` waiting below.
        watch_sees_changes(&s, &s.unique("watched"), "waiters: 1");
    }
}

fn watch_sees_changes(s: &Scratch, lock: &str, one_waiting: &str) {
    let field = |line: &str, key: &str| {
        let found = line.split('\t').find_map(|f| f.strip_prefix(key)?.strip_prefix(": ").map(str::to_string));
        found.unwrap_or_else(|| panic!("no {key:?} in {line:?}"))
    };
    let first_holder = hold(s, lock);
    let first = s.holder(lock);
    let mut watch = Proc::spawn(s.cmd("status", &["--watch", "--interval", "0.2", lock]));
    let line = watch.expect_stdout(&format!("held by: {first}"));
    assert_eq!(field(&line, "name"), lock, "{line}");
    let first_token: u64 = field(&line, "last token").parse().unwrap();
    assert!(line.contains("\tremaining: "), "{line}");

    // Another holder, and a contender waiting behind it: the watch's later lines show both.
    assert_eq!(code(first_holder.finish().status), 0);
    let second_holder = hold(s, lock);
    let second = s.holder(lock);
    assert_ne!(first, second);
    let waiting = Proc::spawn(s.cmd("run", &[lock, "--", "true"]));
    let line = watch.expect_stdout(&format!("held by: {second}"));
    let second_token: u64 = field(&line, "last token").parse().unwrap();
    assert!(second_token > first_token, "{line}: the token rose past {first_token}");
    watch.expect_stdout(one_waiting);

    watch.signal("TERM");
    let out = watch.finish();
    assert_eq!(code(out.status), 0, "{}", text(&out.stderr));
    drop(second_holder);
    drop(waiting);
}

/// A `fencelock run FLAGS… NAME` whose command prints `held <token> <slot>` and then waits for its stdin to close.
fn hold_with(s: &Scratch, flags: &[&str], name: &str) -> (Proc, String) {
    let script = "echo \"held $FENCELOCK_TOKEN ${FENCELOCK_SLOT-none}\"; read _ || true";
    let mut p = Proc::spawn(s.cmd("run", &[flags, &[name, "--", "sh", "-c", script]].concat()));
    let line = p.expect_stdout("held");
    (p, line.trim_start_matches("held ").to_string())
}

#[test]
fn read_runs_share_and_a_write_run_excludes_them() {
    let s = Scratch::new();
    let (r1, seen1) = hold_with(&s, &["--read"], "rw");
    let (r2, seen2) = hold_with(&s, &["--read"], "rw");
    assert_eq!(seen1, seen2, "readers of one run share a token and hold no slot");
    assert!(seen1.ends_with(" none"), "{seen1}");

    let out = s.output("run", &["--write", "--timeout", "0.2", "rw", "--", "echo", "must not run"]);
    assert_eq!(code(out.status), 124, "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("write lock \"rw\""), "{}", text(&out.stderr));
    // A mutex of the same name is another lock.
    assert_eq!(code(s.output("run", &["--timeout", "0", "rw", "--", "true"]).status), 0);

    for r in [r1, r2] {
        assert_eq!(code(r.finish().status), 0);
    }
    let out = s.output("run", &["--write", "rw", "--", "sh", "-c", "echo $FENCELOCK_TOKEN"]);
    assert_eq!(code(out.status), 0, "{}", text(&out.stderr));
    let write_token: u64 = text(&out.stdout).trim().parse().unwrap();
    let read_token: u64 = seen1.split(' ').next().unwrap().parse().unwrap();
    assert!(write_token > read_token, "the write epoch's token {write_token} is not above {read_token}");
}

#[test]
fn permits_bound_the_holders_and_name_their_slots() {
    let s = Scratch::new();
    let (p1, seen1) = hold_with(&s, &["--permits", "2"], "pool");
    let (p2, seen2) = hold_with(&s, &["--permits", "2"], "pool");
    let slot = |seen: &str| seen.split(' ').nth(1).unwrap().to_string();
    let mut slots = [slot(&seen1), slot(&seen2)];
    slots.sort();
    assert_eq!(slots, ["0", "1"], "{seen1} / {seen2}");

    let out = s.output("run", &["--permits", "2", "--timeout", "0.2", "pool", "--", "echo", "must not run"]);
    assert_eq!(code(out.status), 124, "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("semaphore \"pool\""), "{}", text(&out.stderr));
    // Every run on a name must agree on N; a mismatch is a usage error naming both numbers.
    let out = s.output("run", &["--permits", "3", "pool", "--", "echo", "must not run"]);
    assert_eq!(code(out.status), 2, "{out:?}");
    assert!(text(&out.stderr).contains('2') && text(&out.stderr).contains('3'), "{}", text(&out.stderr));
    assert!(out.stdout.is_empty());

    let freed = slot(&seen1);
    assert_eq!(code(p1.finish().status), 0);
    let (p3, seen3) = hold_with(&s, &["--permits", "2"], "pool");
    assert_eq!(slot(&seen3), freed, "the new holder takes the freed slot");
    let token = |seen: &str| seen.split(' ').next().unwrap().parse::<u64>().unwrap();
    assert!(token(&seen3) > token(&seen1), "the slot's token rose: {seen1} then {seen3}");
    for p in [p2, p3] {
        assert_eq!(code(p.finish().status), 0);
    }
}

#[test]
fn a_run_outside_a_semaphore_sees_no_slot() {
    let s = Scratch::new();
    let mut cmd = s.cmd("run", &["x", "--", "sh", "-c", "echo ${FENCELOCK_SLOT-none}"]);
    cmd.env("FENCELOCK_SLOT", "7");
    let out = Proc::spawn(cmd).finish();
    assert_eq!((code(out.status), text(&out.stdout)), (0, "none\n".to_string()), "an outer run's slot leaked");
}

/// A `fencelock elect FLAGS… NAME` whose command prints `held <term> <token>` and then waits for its stdin to close.
fn lead_with(s: &Scratch, flags: &[&str], name: &str) -> (Proc, u64) {
    let script = "echo \"held $FENCELOCK_TERM $FENCELOCK_TOKEN\"; read _ || true";
    let mut p = Proc::spawn(s.cmd("elect", &[flags, &[name, "--", "sh", "-c", script]].concat()));
    let line = p.expect_stdout("held");
    let (term, token) = line.trim_start_matches("held ").split_once(' ').unwrap();
    assert_eq!(term, token, "the term is the leadership's token");
    (p, term.parse().unwrap())
}

#[test]
fn elect_runs_the_command_while_leader_and_leader_shows_it() {
    let s = Scratch::new();
    let out = s.output("leader", &["e"]);
    assert_eq!(code(out.status), 3, "{out:?}");
    assert!(text(&out.stderr).contains("nobody leads election \"e\""), "{}", text(&out.stderr));

    let (first, term1) = lead_with(&s, &["--value", "one"], "e");
    let out = s.output("leader", &["e"]);
    assert_eq!((code(out.status), text(&out.stdout)), (0, format!("one\t{term1}\n")));
    let out = s.output("elect", &["--value", "two", "--timeout", "0.2", "e", "--", "echo", "must not run"]);
    assert_eq!(code(out.status), 124, "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("campaigning in election \"e\""), "{}", text(&out.stderr));

    let mut standby = Proc::spawn(s.cmd(
        "elect",
        &["-v", "--value", "two", "e", "--", "sh", "-c", "echo \"held $FENCELOCK_TERM\"; read _ || true"],
    ));
    standby.expect_stderr("campaigning in election \"e\"");
    assert_eq!(code(first.finish().status), 0);
    let term2: u64 = standby.expect_stdout("held").trim_start_matches("held ").parse().unwrap();
    assert!(term2 > term1, "the next leader's term {term2} is not above {term1}");
    let out = s.output("leader", &["e"]);
    assert_eq!(text(&out.stdout), format!("two\t{term2}\n"));
    assert_eq!(code(standby.finish().status), 0);
    assert_eq!(code(s.output("leader", &["e"]).status), 3, "the leader resigned when its command ended");
}

#[test]
fn a_lost_leadership_stops_the_command_and_again_campaigns_anew() {
    let s = Scratch::new();
    let marker = s.path("marker");
    let script = "trap 'kill $!; echo terminated >> \"$1\"; exit 143' TERM; echo started >> \"$1\"; sleep 30 & wait";
    let lead =
        Proc::spawn(s.cmd("elect", &["--ttl", "1", "e", "--", "sh", "-c", script, "sh", marker.to_str().unwrap()]));
    eventually("the command to start", || std::fs::read_to_string(&marker).ok().filter(|m| m.contains("started")));
    assert_eq!(code(s.output("release", &["--force", "e"]).status), 0);
    let out = lead.finish();
    assert_eq!(code(out.status), 75, "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("lost the leadership of election \"e\""), "{}", text(&out.stderr));
    assert_eq!(std::fs::read_to_string(&marker).unwrap(), "started\nterminated\n");

    // A hot standby: after the loss it campaigns again and leads with a higher term; a signal ends it.
    let (mut standby, term1) = lead_with(&s, &["--again", "--ttl", "1"], "again");
    assert_eq!(code(s.output("release", &["--force", "again"]).status), 0);
    let line = standby.expect_stdout("held");
    let term2: u64 = line.trim_start_matches("held ").split(' ').next().unwrap().parse().unwrap();
    assert!(term2 > term1, "the new term {term2} is not above {term1}");
    standby.signal("TERM");
    let out = standby.exited();
    assert_eq!(code(out.status), 143, "{}", text(&out.stderr));
    assert_eq!(code(s.output("leader", &["again"]).status), 3, "the standby resigned on the signal");
}
