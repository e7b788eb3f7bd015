//! `--metrics-listen ADDR`: Prometheus text at `GET /metrics` — the backend client's families (core's one mapping)
//! and fencelockd's own (leases, waiting Lock calls, gRPC calls), rendered by core's `prometheus_text`.
//!
//! A tiny HTTP/1.1 responder on tokio, one request per connection: a scrape needs nothing more, and it keeps hyper's
//! server side out of the build. It is unauthenticated: it carries no secrets, and lock names only with
//! `--metrics-names`.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use fencelock::MetricsNames;
use fencelock::metrics::{Family, FamilyKind, prometheus_text};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::grpc_calls::GrpcCalls;
use crate::registry::Registry;

/// The longest request head read; a scrape's is a few hundred bytes.
const MAX_HEAD: usize = 8 * 1024;
/// How long a connection may take to send its request head.
const READ_TIMEOUT: Duration = Duration::from_secs(5);

/// What `/metrics` reads from.
#[derive(Debug, Clone)]
pub struct Sources {
    pub registry: Arc<Registry>,
    pub calls: Arc<GrpcCalls>,
}

impl Sources {
    /// Every family: the backend client's, then fencelockd's.
    pub fn families(&self) -> Vec<Family> {
        let mut out = self.registry.client().metrics().families();
        let mut leases = Family::new("fencelockd_leases", "Leases held now, etcd and native", FamilyKind::Gauge);
        leases.value(&[], self.registry.leases() as f64);
        let mut waiters = Family::new("fencelockd_waiters", "Lock calls waiting for their lock now", FamilyKind::Gauge);
        waiters.value(&[], self.registry.waiting_locks() as f64);
        out.extend([leases, waiters, self.calls.family(), self.calls.latency_family()]);
        out
    }
}

/// `--metrics-names`: `all`, or lock names separated by commas.
pub fn parse_names(s: &str) -> Result<MetricsNames, String> {
    if s == "all" {
        return Ok(MetricsNames::All);
    }
    let names: BTreeSet<String> = s.split(',').map(str::to_string).collect();
    if names.iter().any(String::is_empty) {
        return Err(format!("expected `all` or lock names separated by commas, with no empty name, got {s:?}"));
    }
    Ok(MetricsNames::Only(names))
}

/// The warning for a metrics endpoint reachable off loopback, if it is.
pub fn exposure_warning(listener: &TcpListener) -> Option<String> {
    let addr = listener.local_addr().ok()?;
    (!addr.ip().is_loopback()).then(|| {
        format!("metrics on {addr} are unauthenticated and reachable off loopback; keep the port on a private network")
    })
}

/// Serves `/metrics` on `listener` until the task is dropped.
pub async fn serve(listener: TcpListener, sources: Sources) {
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                let sources = sources.clone();
                tokio::spawn(async move {
                    if let Err(e) = answer(stream, &sources).await {
                        tracing::debug!(error = %e, "metrics connection failed");
                    }
                });
            }
            // Out of file descriptors and the like: log, pause, go on (the gRPC service is unaffected).
            Err(e) => {
                tracing::warn!(error = %e, "metrics listener cannot accept");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

async fn answer(mut stream: TcpStream, sources: &Sources) -> std::io::Result<()> {
    let head = match tokio::time::timeout(READ_TIMEOUT, read_head(&mut stream)).await {
        Ok(head) => head?,
        Err(_) => return Ok(()),
    };
    let (status, content_type, body) = match route(&head) {
        Route::Metrics => ("200 OK", "text/plain; version=0.0.4; charset=utf-8", prometheus_text(&sources.families())),
        Route::NotFound => ("404 Not Found", "text/plain; charset=utf-8", "not found: try GET /metrics\n".into()),
        Route::NotAllowed => ("405 Method Not Allowed", "text/plain; charset=utf-8", "only GET /metrics\n".into()),
        Route::Bad => ("400 Bad Request", "text/plain; charset=utf-8", "bad request\n".into()),
    };
    let is_head = head.starts_with("HEAD ");
    let mut response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n{}\r\n",
        body.len(),
        if status.starts_with("405") { "Allow: GET, HEAD\r\n" } else { "" },
    );
    if !is_head {
        response.push_str(&body);
    }
    stream.write_all(response.as_bytes()).await?;
    stream.shutdown().await
}

/// The request head (up to the blank line), or as much as came within [`MAX_HEAD`].
async fn read_head(stream: &mut TcpStream) -> std::io::Result<String> {
    let mut buf = Vec::with_capacity(512);
    let mut chunk = [0u8; 1024];
    while buf.len() < MAX_HEAD && !buf.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

#[derive(Debug, PartialEq, Eq)]
enum Route {
    Metrics,
    NotFound,
    NotAllowed,
    Bad,
}

/// Where a request head's request line goes. A query string is ignored, as Prometheus may add one.
fn route(head: &str) -> Route {
    let line = head.lines().next().unwrap_or("");
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version), None) = (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Route::Bad;
    };
    if !version.starts_with("HTTP/1.") {
        return Route::Bad;
    }
    let path = target.split('?').next().unwrap_or(target);
    match (method, path) {
        ("GET" | "HEAD", "/metrics") => Route::Metrics,
        (_, "/metrics") => Route::NotAllowed,
        _ => Route::NotFound,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_get_metrics_is_served() {
        assert_eq!(route("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"), Route::Metrics);
        assert_eq!(route("HEAD /metrics?x=1 HTTP/1.0\r\n\r\n"), Route::Metrics);
        assert_eq!(route("GET / HTTP/1.1\r\n\r\n"), Route::NotFound);
        assert_eq!(route("GET /metrics/x HTTP/1.1\r\n\r\n"), Route::NotFound);
        assert_eq!(route("POST /metrics HTTP/1.1\r\n\r\n"), Route::NotAllowed);
        assert_eq!(route("garbage\r\n\r\n"), Route::Bad);
        assert_eq!(route("GET /metrics SPDY/3\r\n\r\n"), Route::Bad);
        assert_eq!(route(""), Route::Bad);
    }

    #[test]
    fn metrics_names_are_all_or_a_list() {
        assert_eq!(parse_names("all"), Ok(MetricsNames::All));
        let only = parse_names("jobs/a,b").unwrap();
        assert_eq!(only, MetricsNames::Only(["jobs/a".to_string(), "b".to_string()].into()));
        for bad in ["", "a,,b", "a,"] {
            assert!(parse_names(bad).unwrap_err().contains("no empty name"), "{bad:?}");
        }
    }
}
