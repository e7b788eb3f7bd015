//! The members of a test cluster that scripts/services.sh started (etcd cluster, ZooKeeper ensemble): their pid
//! files and restart scripts, so failover tests can SIGKILL one and start it again.

use std::time::Duration;

use tokio::time::{Instant, sleep, timeout};

/// How long killing or restarting a member may take.
const BOUND: Duration = Duration::from_secs(20);

/// Three members described by services.sh's `…_PIDFILE` and `…_RESTART` path patterns (with `-N.` for the member).
pub struct Members {
    /// `…/<service>-N.pid`: member N's current pid (a restart writes the new one).
    pidfile: String,
    /// `…/restart-<service>-N.sh`: starts member N again and returns once it serves.
    restart: String,
    /// What member N's command line contains, with `{n}` for N: proof a pid is that member.
    cmdline: &'static str,
}

impl Members {
    /// The members of the service whose env vars start with `prefix` (e.g. `FENCELOCK_TEST_ETCD_CLUSTER`).
    pub fn from_env(prefix: &str, cmdline: &'static str) -> Members {
        let var =
            |name: String| std::env::var(&name).unwrap_or_else(|_| panic!("{name} is not set alongside {prefix}"));
        Members { pidfile: var(format!("{prefix}_PIDFILE")), restart: var(format!("{prefix}_RESTART")), cmdline }
    }

    /// Member `i` (0-based) is member `i + 1` of services.sh.
    fn path(pattern: &str, i: usize) -> String {
        pattern.replace("-N.", &format!("-{}.", i + 1))
    }

    fn pid(&self, i: usize) -> String {
        std::fs::read_to_string(Self::path(&self.pidfile, i)).unwrap().trim().to_string()
    }

    /// Starts members an earlier run killed and could not start again.
    pub async fn revive_dead(&self) {
        for i in 0..3 {
            if !is_running(&self.pid(i)) {
                Revive { script: Self::path(&self.restart, i), armed: true }.run().await;
            }
        }
    }

    /// SIGKILLs member `i` after checking the pid is that member, and waits until it is gone.
    pub async fn kill(&self, i: usize) -> Revive {
        let pid = self.pid(i);
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        let mark = self.cmdline.replace("{n}", &(i + 1).to_string());
        assert!(cmdline.contains(&mark), "pid {pid} is not member {i} ({mark:?}): {cmdline}");
        let killed = std::process::Command::new("kill").args(["-KILL", &pid]).status().unwrap();
        assert!(killed.success(), "kill -KILL {pid}");
        let revive = Revive { script: Self::path(&self.restart, i), armed: true };
        let deadline = Instant::now() + BOUND;
        while is_running(&pid) {
            assert!(Instant::now() < deadline, "pid {pid} outlived SIGKILL by {BOUND:?}");
            sleep(Duration::from_millis(20)).await;
        }
        revive
    }
}

/// Whether `pid` runs (a zombie has ended).
fn is_running(pid: &str) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|stat| stat.rsplit_once(") ").is_some_and(|(_, rest)| !rest.starts_with(['Z', 'X'])))
}

/// Starts a killed member again: explicitly at the end of the test, or on drop if the test failed first.
pub struct Revive {
    script: String,
    armed: bool,
}

impl Revive {
    /// Restarts the member and waits until it serves.
    pub async fn run(mut self) {
        self.armed = false;
        let out = timeout(BOUND * 2, tokio::process::Command::new(&self.script).output())
            .await
            .expect("the restart script returns")
            .unwrap();
        assert!(out.status.success(), "{}: {}", self.script, String::from_utf8_lossy(&out.stderr));
    }
}

impl Drop for Revive {
    fn drop(&mut self) {
        if self.armed {
            let _ = std::process::Command::new(&self.script).status();
        }
    }
}
