//! redis-server processes a test starts for itself, on free loopback ports and without persistence, for tests that
//! kill or restart them.

use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// Whether redis-server is installed (see [`super::installed`]).
pub fn installed() -> bool {
    super::installed("redis-server")
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Starts redis-server on `port` and returns once it says it accepts connections.
pub async fn spawn(port: u16) -> Child {
    let mut child = Command::new("redis-server")
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("redis-server starts");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let ready = async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if line.contains("Ready to accept connections") {
                return true;
            }
        }
        false
    };
    let ready = tokio::time::timeout(Duration::from_secs(10), ready).await;
    assert_eq!(ready, Ok(true), "redis-server on port {port} did not become ready");
    // Keep reading its log so a full pipe never blocks it.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    child
}

/// [`spawn`], then [`past_first_second`]: a server that grants at once (it refuses grants in its first second).
pub async fn spawn_granting(port: u16) -> Child {
    let child = spawn(port).await;
    past_first_second(port).await;
    child
}

/// Waits (bounded) until the server on `port` has been up a whole second. Fence registers and token seeds tell a
/// restart apart by the whole second of the server's start (redis.rs `START_FLOOR`), and a server grants nothing
/// before that (`TRYAGAIN`), so a test that grants at once or restarts a server and expects the floor to move waits
/// this long first.
pub async fn past_first_second(port: u16) {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}")).unwrap();
    let mut raw = client.get_multiplexed_async_connection().await.unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(3);
    loop {
        let info: String = redis::cmd("INFO").arg("server").query_async(&mut raw).await.unwrap();
        let up = info.lines().find_map(|l| l.strip_prefix("uptime_in_seconds:")).expect("INFO has the uptime");
        if up.trim().parse::<u64>().unwrap() >= 1 {
            return;
        }
        assert!(tokio::time::Instant::now() < deadline, "redis-server on port {port} stays at uptime 0");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
