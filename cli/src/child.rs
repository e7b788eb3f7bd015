//! CMD as a child process: spawned with the lock's name and token in its environment, stdio inherited untouched.

use std::io;
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;

use tokio::process::{Child, Command};

use crate::exit::{self, Failure};

/// A running CMD.
#[derive(Debug)]
pub struct Cmd {
    pub child: Child,
    pub pid: Pid,
}

/// CMD's process id, kept apart from `Child` so signals can be sent while a `wait` is pending.
#[derive(Debug, Clone, Copy)]
pub struct Pid(libc::pid_t);

impl Pid {
    /// Sends `signo`. CMD is reaped only by our own `wait`, so the pid cannot have been reused meanwhile.
    pub fn signal(self, signo: i32) {
        // SAFETY: kill(2) takes plain integers and touches no memory of ours.
        let _ = unsafe { libc::kill(self.0, signo) };
    }
}

/// What CMD's environment says of the hold, besides its name and token: a permit's slot, a leadership's term.
#[derive(Debug, Clone, Copy, Default)]
pub struct HoldEnv {
    pub slot: Option<u32>,
    pub term: Option<u64>,
}

/// Starts `argv` with `FENCELOCK_NAME`, `FENCELOCK_TOKEN` and, for a semaphore's permit, `FENCELOCK_SLOT` set, for a
/// leadership `FENCELOCK_TERM`. Must run on the thread that lives as long as the process (see `die_with_parent`).
pub fn spawn(argv: &[String], name: &str, token: u64, hold: HoldEnv) -> Result<Cmd, Failure> {
    let (program, args) = argv.split_first().ok_or_else(|| Failure::new(exit::USAGE, "no command given"))?;
    let mut command = Command::new(program);
    command.args(args).env("FENCELOCK_NAME", name).env("FENCELOCK_TOKEN", token.to_string());
    // Not an outer run's: a run nested in a permit's or a leader's CMD holds no slot or term of its own.
    for (var, value) in [("FENCELOCK_SLOT", hold.slot.map(u64::from)), ("FENCELOCK_TERM", hold.term)] {
        match value {
            Some(v) => command.env(var, v.to_string()),
            None => command.env_remove(var),
        };
    }
    die_with_parent(&mut command);
    let child = command.spawn().map_err(|e| {
        let code = match e.kind() {
            io::ErrorKind::NotFound => exit::NOT_FOUND,
            _ => exit::CANNOT_EXECUTE,
        };
        Failure::new(code, format!("cannot run {program:?}: {e}"))
    })?;
    let pid = child.id().expect("a child that was just spawned has not been reaped");
    Ok(Cmd { child, pid: Pid(pid as libc::pid_t) })
}

/// If fencelock itself is killed (SIGKILL, OOM), CMD gets SIGTERM: otherwise it would go on running unprotected
/// once the lease expires. Linux ties this to the spawning thread, hence the current-thread runtime in main.
#[cfg(target_os = "linux")]
fn die_with_parent(command: &mut Command) {
    let parent = std::process::id() as libc::pid_t;
    // SAFETY: the closure runs between fork and exec and calls only async-signal-safe functions, allocating nothing.
    unsafe {
        command.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM as libc::c_ulong) != 0 {
                return Err(io::Error::last_os_error());
            }
            // The parent may have died before prctl took effect; then no signal would ever come.
            if libc::getppid() != parent {
                return Err(io::Error::from_raw_os_error(libc::ESRCH));
            }
            Ok(())
        });
    }
}

#[cfg(not(target_os = "linux"))]
fn die_with_parent(_command: &mut Command) {}

/// CMD's status as our exit status: its code, or 128+N if signal N ended it.
pub fn exit_code(status: ExitStatus) -> i32 {
    match (status.code(), status.signal()) {
        (Some(code), _) => code,
        (None, Some(signo)) => exit::signalled(signo),
        (None, None) => exit::FAILURE,
    }
}
