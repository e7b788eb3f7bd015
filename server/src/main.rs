//! `fencelockd --listen HOST:PORT --backend URL`: see the crate docs and the README's fencelockd section.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, ValueEnum};
use fencelock::{ClientOptions, MetricsNames};
use fencelockd::grpc_calls::GrpcCalls;
use fencelockd::registry::{Limits, Registry};
use fencelockd::users::Users;
use fencelockd::{metrics, serve, transport};
use tracing_subscriber::EnvFilter;

#[derive(Debug, Clone, Copy, ValueEnum)]
enum LogFormat {
    Json,
    Text,
}

/// A gRPC lock service speaking etcd's lease + v3lock protocol (and a native fencelock service) over a fencelock
/// backend.
#[derive(Debug, Parser)]
#[command(version)]
struct Args {
    /// Address to listen on; etcd's client port by default, so etcd clients find it without flags (port 0 = any free
    /// port; the bound address is printed on stdout). Off loopback without TLS a warning is logged.
    #[arg(long, default_value = "127.0.0.1:2379")]
    listen: SocketAddr,
    /// Serve TLS with this PEM certificate chain (with --tls-key).
    #[arg(long, requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// The PEM private key of --tls-cert.
    #[arg(long, requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Mutual TLS: refuse clients without a certificate this PEM CA signed; the certificate's subject CN is the
    /// caller's identity, which owns the leases it grants.
    #[arg(long, requires = "tls_cert")]
    client_ca: Option<PathBuf>,
    /// etcd-style password authentication: users and PBKDF2 hashes, one `NAME:pbkdf2-sha256:…` line each. etcd
    /// clients with a user name and password then work unchanged, and every lease and lock call needs their token
    /// (or, with --client-ca, a client certificate).
    #[arg(long)]
    users: Option<PathBuf>,
    /// Print the users-file line for user NAME with the password read from stdin (its first line), and exit.
    #[arg(long, value_name = "NAME")]
    hash_password: Option<String>,
    /// Listen off loopback without TLS and without the warning (a private network, a TLS-terminating proxy).
    #[arg(long)]
    insecure: bool,
    /// fencelock backend URL [default: $FENCELOCK_URL, else sqlite:fencelock.db]
    #[arg(long)]
    backend: Option<String>,
    /// Most leases (etcd and native together) held at once; past it LeaseGrant and Lock fail with RESOURCE_EXHAUSTED.
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..))]
    max_leases: u64,
    /// Most Lock calls (etcd and native) waiting for their lock at once; past it Lock fails with RESOURCE_EXHAUSTED.
    #[arg(long, default_value_t = 1_000, value_parser = clap::value_parser!(u64).range(1..))]
    max_waiters: u64,
    /// Serve Prometheus metrics at `GET /metrics` on this address (off by default; port 0 = any free port, printed on
    /// stdout as `metrics on ADDR`). Unauthenticated: keep it on loopback or a private network. It carries no secrets
    /// and no lock names unless --metrics-names opts them in.
    #[arg(long, value_name = "ADDR")]
    metrics_listen: Option<SocketAddr>,
    /// Lock names that get series of their own on /metrics: `all` (at most 1000 names, the rest summed as `_other`)
    /// or a comma-separated list. Without it no lock name appears.
    #[arg(long, value_name = "all|NAME,...", requires = "metrics_listen", value_parser = metrics::parse_names)]
    metrics_names: Option<MetricsNames>,
    /// Log format on stderr (level from RUST_LOG, default info).
    #[arg(long, value_enum, default_value = "json")]
    log_format: LogFormat,
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let logs = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    match args.log_format {
        LogFormat::Json => logs.json().init(),
        LogFormat::Text => logs.init(),
    }

    if let Some(name) = &args.hash_password {
        return hash_password(name);
    }
    let users = match &args.users {
        Some(path) => match Users::load(path) {
            Ok(users) => Some(std::sync::Arc::new(users)),
            Err(e) => {
                tracing::error!(error = %e, "cannot read the users file");
                return ExitCode::from(2);
            }
        },
        None => None,
    };
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => match transport::server_tls(cert, key, args.client_ca.as_deref()) {
            Ok(tls) => Some(tls),
            Err(e) => {
                tracing::error!(error = %e, "cannot configure TLS");
                return ExitCode::from(2);
            }
        },
        _ => None,
    };
    if let Some(warning) = transport::exposure_warning(args.listen, tls.is_some(), args.insecure) {
        tracing::warn!("{warning}");
    }

    let url = args.backend.unwrap_or_else(fencelock::default_url);
    let options = ClientOptions::default().metrics_names(args.metrics_names.clone().unwrap_or(MetricsNames::None));
    let client = match fencelock::Client::connect_with(&url, &options).await {
        Ok(c) => c,
        Err(e) => {
            // The URL may carry a password: logs show it redacted, as the error itself does.
            tracing::error!(backend = %fencelock::redact(&url), error = %e, "cannot connect to the backend");
            return ExitCode::from(2);
        }
    };
    let incoming = match serve::bind(args.listen) {
        Ok(i) => i,
        Err(e) => {
            tracing::error!(listen = %args.listen, error = %e, "cannot listen");
            return ExitCode::from(2);
        }
    };
    let addr = incoming.local_addr().unwrap_or(args.listen);
    let auth = match (&tls, &args.client_ca, &users) {
        (_, None, Some(_)) => "users file (identity: the authenticated user)",
        (_, Some(_), Some(_)) => "users file or mutual TLS (identity: the user, else the client certificate CN)",
        (None, _, None) => "none (plaintext)",
        (Some(_), None, None) => "none (TLS, no client certificates)",
        (Some(_), Some(_), None) => "mutual TLS (identity: client certificate CN)",
    };
    tracing::info!(
        listen = %addr,
        backend = %client.url(),
        max_leases = args.max_leases,
        max_waiters = args.max_waiters,
        auth,
        "fencelockd serving"
    );
    let metrics_listener = match args.metrics_listen {
        Some(at) => match tokio::net::TcpListener::bind(at).await {
            Ok(l) => Some(l),
            Err(e) => {
                tracing::error!(metrics_listen = %at, error = %e, "cannot listen for metrics");
                return ExitCode::from(2);
            }
        },
        None => None,
    };
    println!("listening on {addr}");

    let size = |n: u64| usize::try_from(n).unwrap_or(usize::MAX);
    let limits = Limits { max_leases: size(args.max_leases), max_waiters: size(args.max_waiters) };
    let registry = Registry::new(client, limits);
    let calls = std::sync::Arc::new(GrpcCalls::new());
    if let Some(listener) = metrics_listener {
        let at = listener.local_addr().map_or_else(|_| "?".to_string(), |a| a.to_string());
        if let Some(warning) = metrics::exposure_warning(&listener) {
            tracing::warn!("{warning}");
        }
        tracing::info!(metrics_listen = %at, "serving Prometheus metrics at /metrics");
        println!("metrics on {at}");
        let sources = metrics::Sources { registry: registry.clone(), calls: calls.clone() };
        tokio::spawn(metrics::serve(listener, sources));
    }
    match serve::serve(registry, incoming, tls, users, calls, stop_signal()).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = %e, "server failed");
            ExitCode::FAILURE
        }
    }
}

/// `--hash-password NAME`: the users-file line for NAME, the password from stdin's first line.
fn hash_password(name: &str) -> ExitCode {
    if name.is_empty() || name.contains(':') || name.contains(char::is_whitespace) {
        eprintln!("fencelockd: --hash-password {name:?}: a user name is not empty and has no ':' or whitespace");
        return ExitCode::from(2);
    }
    let mut password = String::new();
    if let Err(e) = std::io::stdin().read_line(&mut password) {
        eprintln!("fencelockd: --hash-password: cannot read the password from stdin: {e}");
        return ExitCode::from(2);
    }
    let password = password.strip_suffix('\n').unwrap_or(&password);
    let password = password.strip_suffix('\r').unwrap_or(password);
    if password.is_empty() {
        eprintln!("fencelockd: --hash-password: the password (stdin's first line) is empty");
        return ExitCode::from(2);
    }
    println!("{}", Users::hash_line(name, password));
    ExitCode::SUCCESS
}

/// SIGTERM or SIGINT.
async fn stop_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int)) = (signal(SignalKind::terminate()), signal(SignalKind::interrupt())) else {
        tracing::error!("cannot install signal handlers; stop with SIGKILL (leases then expire after their TTL)");
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
}
