//! Helpers for the fencelockd integration tests: the built `fencelockd` binary on a free port against a real backend,
//! and tonic clients generated from the same protos.
#![allow(dead_code, reason = "each test binary uses a different subset")]

use std::process::Stdio;
use std::time::Duration;

use fencelockd::proto::etcdserverpb::lease_client::LeaseClient;
use fencelockd::proto::fencelock_v1::StatsRequest;
use fencelockd::proto::fencelock_v1::locks_client::LocksClient;
use fencelockd::proto::v3electionpb::election_client::ElectionClient;
use fencelockd::proto::v3lockpb::lock_client::LockClient;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Identity};

#[path = "../../../core/tests/support/services.rs"]
mod services;
#[allow(unused_imports, reason = "each test binary uses a different subset")]
pub use services::{service_url, skipped, unique};

/// The backends every test runs on: a fresh SQLite file and, when started, Redis.
pub fn backends() -> Vec<String> {
    let mut urls = vec![sqlite()];
    urls.extend(service_url("FENCELOCK_TEST_REDIS"));
    urls
}

/// A fresh SQLite file's URL.
pub fn sqlite() -> String {
    let file = std::env::temp_dir().join(format!("{}.db", unique("fencelockd-test")));
    format!("sqlite:{}", file.display())
}

/// The test PKI scripts/services.sh makes (FENCELOCK_TEST_CA and friends), or `None` (the test is skipped).
#[derive(Debug, Clone)]
pub struct Pki {
    pub ca: String,
    pub wrong_ca: String,
    pub server: (String, String),
    pub client: (String, String),
    pub other: (String, String),
    pub rogue: (String, String),
}

impl Pki {
    pub fn from_env() -> Option<Pki> {
        let var = |name: &str| service_url(name);
        let ca = var("FENCELOCK_TEST_CA")?;
        // The server certificate sits beside the CA (tls/server.pem, for IP 127.0.0.1).
        let dir = std::path::Path::new(&ca).parent().expect("the CA's directory").display().to_string();
        Some(Pki {
            server: (format!("{dir}/server.pem"), format!("{dir}/server.key")),
            wrong_ca: var("FENCELOCK_TEST_WRONG_CA")?,
            client: (var("FENCELOCK_TEST_CLIENT_CERT")?, var("FENCELOCK_TEST_CLIENT_KEY")?),
            other: (var("FENCELOCK_TEST_OTHER_CERT")?, var("FENCELOCK_TEST_OTHER_KEY")?),
            rogue: (var("FENCELOCK_TEST_ROGUE_CERT")?, var("FENCELOCK_TEST_ROGUE_KEY")?),
            ca,
        })
    }

    /// fencelockd's flags for TLS with this PKI's server certificate, and mutual TLS if `mutual`.
    pub fn server_args(&self, mutual: bool) -> Vec<String> {
        let mut args = vec!["--tls-cert".into(), self.server.0.clone(), "--tls-key".into(), self.server.1.clone()];
        if mutual {
            args.extend(["--client-ca".into(), self.ca.clone()]);
        }
        args
    }

    /// A client configuration trusting `ca` and presenting `identity` (a certificate and key), if given.
    pub fn client(&self, ca: &str, identity: Option<&(String, String)>) -> ClientTlsConfig {
        let read = |path: &str| std::fs::read(path).unwrap_or_else(|e| panic!("{path}: {e}"));
        let mut config = ClientTlsConfig::new().ca_certificate(Certificate::from_pem(read(ca)));
        if let Some((cert, key)) = identity {
            config = config.identity(Identity::from_pem(read(cert), read(key)));
        }
        config
    }
}

/// A running fencelockd, killed on drop.
#[derive(Debug)]
pub struct Daemon {
    pub child: Child,
    pub addr: String,
    pub channel: Channel,
    pub backend: String,
    /// The rest of fencelockd's stdout (kept open: a closed pipe would fail its later lines).
    pub stdout: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
}

impl Daemon {
    /// Starts fencelockd on a free port against `backend`, with `extra` arguments, and connects to it.
    pub async fn start(backend: &str, extra: &[&str]) -> Daemon {
        Daemon::start_tls(backend, extra, None).await
    }

    /// Starts fencelockd like `start` and connects to it over TLS with `tls` (plaintext if `None`).
    pub async fn start_tls(backend: &str, extra: &[&str], tls: Option<ClientTlsConfig>) -> Daemon {
        let mut child = Command::new(env!("CARGO_BIN_EXE_fencelockd"))
            .args(["--listen", "127.0.0.1:0", "--backend", backend])
            .args(extra)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("start fencelockd");
        let mut lines = BufReader::new(child.stdout.take().expect("piped stdout")).lines();
        let line = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
            .await
            .expect("fencelockd printed its address in time")
            .expect("read fencelockd's stdout")
            .expect("fencelockd printed a line");
        let addr = line.strip_prefix("listening on ").unwrap_or_else(|| panic!("unexpected first line {line:?}"));
        let channel = connect(addr, tls).await.expect("connect");
        Daemon { child, addr: addr.to_string(), channel, backend: backend.to_string(), stdout: lines }
    }

    /// Another connection to this fencelockd, over TLS with `tls` (plaintext if `None`).
    pub async fn connect(&self, tls: Option<ClientTlsConfig>) -> Result<Channel, tonic::transport::Error> {
        connect(&self.addr, tls).await
    }

    pub fn leases(&self) -> LeaseClient<Channel> {
        LeaseClient::new(self.channel.clone())
    }

    pub fn locks(&self) -> LockClient<Channel> {
        LockClient::new(self.channel.clone())
    }

    pub fn elections(&self) -> ElectionClient<Channel> {
        ElectionClient::new(self.channel.clone())
    }

    pub fn native(&self) -> LocksClient<Channel> {
        LocksClient::new(self.channel.clone())
    }

    /// Returns once fencelockd's own count of waiting Lock calls (its Stats) is `n`: a Lock call is inside the wait,
    /// not merely sent. Panics after 10 s.
    pub async fn until_waiting(&self, n: u64) {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            let stats = self.native().stats(StatsRequest {}).await.expect("Stats").into_inner();
            if stats.waiting_locks == n {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "fencelockd counts {} waiting Lock calls, not {n}",
                stats.waiting_locks
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// A fencelock SDK client on the same backend.
    pub async fn sdk(&self) -> fencelock::Client {
        fencelock::Client::connect(&self.backend).await.expect("SDK connect")
    }

    /// SIGTERM, then the exit status.
    pub async fn terminate(mut self) -> std::process::ExitStatus {
        let pid = self.child.id().expect("running") as i32;
        let status = Command::new("kill").args(["-TERM", &pid.to_string()]).status().await.expect("kill");
        assert!(status.success());
        tokio::time::timeout(Duration::from_secs(20), self.child.wait())
            .await
            .expect("fencelockd exits after SIGTERM")
            .expect("wait")
    }
}

async fn connect(addr: &str, tls: Option<ClientTlsConfig>) -> Result<Channel, tonic::transport::Error> {
    let endpoint = Channel::from_shared(format!("{}://{addr}", if tls.is_some() { "https" } else { "http" }))
        .expect("uri")
        .connect_timeout(Duration::from_secs(10));
    match tls {
        Some(tls) => endpoint.tls_config(tls)?.connect().await,
        None => endpoint.connect().await,
    }
}

/// Bounds a test step so a hang fails instead of stalling the run.
pub async fn within<T>(what: &str, secs: u64, f: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(secs), f).await.unwrap_or_else(|_| panic!("{what}: took over {secs} s"))
}
