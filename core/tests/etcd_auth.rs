//! `etcd://user:password@…` against a real etcd with authentication on: a server of the test's own (auth changes the
//! whole server), started from the `etcd` that scripts/services.sh installs, with short-lived auth tokens so the
//! backend must authenticate again while it holds a lock.

mod support;

use std::net::TcpListener;
use std::process::Stdio;
use std::time::Duration;

use fencelock::{Client, ClientOptions, ErrorKind, LockOptions};
use tokio::process::{Child, Command};
use tokio::time::{Instant, sleep};

const PASSWORD: &str = "s3cret-pw-9Zq";
/// etcd's simple tokens expire after this much idle time (`--auth-token-ttl`, whole seconds).
const TOKEN_TTL: Duration = Duration::from_secs(1);
const BOUND: Duration = Duration::from_secs(20);

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free port").port()
}

/// An etcd with a root user and authentication enabled; killed when dropped.
struct AuthEtcd {
    _server: Child,
    _dir: TempDir,
    endpoint: String,
}

/// A directory removed on drop.
struct TempDir(std::path::PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

async fn etcdctl(endpoint: &str, args: &[&str]) -> bool {
    let status = Command::new("etcdctl")
        .env("ETCDCTL_API", "3")
        .args(["--endpoints", endpoint, "--dial-timeout", "1s", "--command-timeout", "3s"])
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .await;
    status.is_ok_and(|s| s.success())
}

impl AuthEtcd {
    async fn start() -> AuthEtcd {
        let dir = TempDir(std::env::temp_dir().join(support::unique("fencelock-etcd-auth")));
        let (client, peer) = (format!("http://127.0.0.1:{}", free_port()), format!("http://127.0.0.1:{}", free_port()));
        let server = Command::new("etcd")
            .args(["--name", "auth", "--data-dir"])
            .arg(&dir.0)
            .args(["--listen-client-urls", &client, "--advertise-client-urls", &client])
            .args(["--listen-peer-urls", &peer, "--initial-advertise-peer-urls", &peer])
            .arg(format!("--initial-cluster=auth={peer}"))
            .arg("--auth-token=simple")
            .arg(format!("--auth-token-ttl={}", TOKEN_TTL.as_secs()))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("etcd is installed (scripts/services.sh installs etcd-server)");
        let deadline = Instant::now() + BOUND;
        while !etcdctl(&client, &["endpoint", "health"]).await {
            assert!(Instant::now() < deadline, "the auth etcd never became healthy");
            sleep(Duration::from_millis(100)).await;
        }
        assert!(etcdctl(&client, &["user", "add", "root", &format!("--new-user-password={PASSWORD}")]).await);
        assert!(etcdctl(&client, &["auth", "enable"]).await, "etcdctl auth enable");
        let endpoint = client.trim_start_matches("http://").to_string();
        AuthEtcd { _server: server, _dir: dir, endpoint }
    }

    fn url(&self, password: &str) -> String {
        format!("etcd://root:{password}@{}", self.endpoint)
    }
}

fn quick() -> ClientOptions {
    ClientOptions::default().connect_timeout(Duration::from_secs(3)).request_timeout(Duration::from_secs(3))
}

#[tokio::test]
async fn credentials_authenticate_and_a_token_that_expires_is_replaced() {
    // The servers scripts/services.sh starts tell whether etcd is installed here.
    if support::service_url("FENCELOCK_TEST_ETCD").is_none() {
        return;
    }
    let etcd = AuthEtcd::start().await;
    let name = support::unique("auth-lock");

    let holder = Client::connect_with(&etcd.url(PASSWORD), &quick()).await.expect("the right password connects");
    let rival = Client::connect_with(&etcd.url(PASSWORD), &quick()).await.unwrap();
    let lease = holder.lock(&name, &LockOptions::default().ttl(Duration::from_secs(5))).await.unwrap();
    assert!(rival.try_lock(&name, &LockOptions::default()).await.unwrap().is_none(), "the lock excludes");

    // Idle past the token's TTL: etcd forgets the token, and every request must authenticate again.
    sleep(TOKEN_TTL * 3).await;
    lease.renew(None).await.expect("a renewal after the token expired authenticates again");
    holder.fence(&name).write(lease.fence(), b"v").await.expect("a fenced write with a fresh token");
    lease.release().await.expect("the release after the token expired");
    let next = rival.try_lock(&name, &LockOptions::default()).await.unwrap().expect("free after the release");
    assert!(next.fence() > lease.fence());
    next.release().await.unwrap();
    holder.close().await;
    rival.close().await;
}

#[tokio::test]
async fn a_wrong_password_or_none_is_refused_without_showing_the_password() {
    if support::service_url("FENCELOCK_TEST_ETCD").is_none() {
        return;
    }
    let etcd = AuthEtcd::start().await;
    let wrong = "not-the-pw-7Kx";
    let err = Client::connect_with(&etcd.url(wrong), &quick()).await.expect_err("a wrong password is refused");
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    assert!(err.to_string().contains("authentication failed"), "{err}");
    assert!(!err.to_string().contains(wrong), "the password shows in {err}");

    let anonymous = format!("etcd://{}", etcd.endpoint);
    let err = Client::connect_with(&anonymous, &quick()).await.expect_err("no credentials on an auth etcd");
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
}
