//! A lone etcd member a test starts for itself, on free loopback ports with a data dir of its own, for tests that
//! kill it and start it again with its data lost.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use tokio::process::{Child, Command};
use tokio::time::{Instant, sleep};

use super::etcd_raw::Raw;
use super::own_redis::free_port;

/// How long a start may take.
const BOUND: Duration = Duration::from_secs(20);

/// Whether etcd is installed (see [`super::installed`]).
pub fn installed() -> bool {
    super::installed("etcd")
}

/// The member: its process, ports and data dir (removed on drop).
pub struct OwnEtcd {
    child: Child,
    client: u16,
    peer: u16,
    dir: PathBuf,
}

impl OwnEtcd {
    /// Starts a member with an empty data dir and returns once it serves.
    pub async fn spawn() -> OwnEtcd {
        let dir = std::env::temp_dir().join(super::unique("fencelock-own-etcd"));
        let (client, peer) = (free_port(), free_port());
        let child = start(&dir, client, peer).await;
        OwnEtcd { child, client, peer, dir }
    }

    pub fn url(&self) -> String {
        format!("etcd://127.0.0.1:{}", self.client)
    }

    pub fn raw(&self) -> Raw {
        Raw::new(&[format!("127.0.0.1:{}", self.client)], Duration::from_secs(5))
    }

    /// SIGKILLs the member, deletes its data dir and starts it again on the same ports: every key, revision and
    /// lease is gone, as on a member that came back with a blank disk.
    pub async fn lose_data(&mut self) {
        self.child.kill().await.unwrap();
        std::fs::remove_dir_all(&self.dir).unwrap();
        self.child = start(&self.dir, self.client, self.peer).await;
    }
}

impl Drop for OwnEtcd {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

async fn start(dir: &std::path::Path, client: u16, peer: u16) -> Child {
    let (client_url, peer_url) = (format!("http://127.0.0.1:{client}"), format!("http://127.0.0.1:{peer}"));
    let child = Command::new("etcd")
        .args(["--name", "own", "--data-dir", dir.to_str().unwrap(), "--log-level", "error"])
        .args(["--listen-client-urls", &client_url, "--advertise-client-urls", &client_url])
        .args(["--listen-peer-urls", &peer_url, "--initial-advertise-peer-urls", &peer_url])
        .args(["--initial-cluster", &format!("own={peer_url}"), "--initial-cluster-state", "new"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("etcd starts");
    // Serving once a read answers (etcd has no readiness line on a quiet log).
    let raw = Raw::new(&[format!("127.0.0.1:{client}")], Duration::from_secs(1));
    let deadline = Instant::now() + BOUND;
    while let Err(e) = raw.count("fencelock/").await {
        assert!(Instant::now() < deadline, "etcd on port {client} never served: {e}");
        sleep(Duration::from_millis(50)).await;
    }
    child
}
