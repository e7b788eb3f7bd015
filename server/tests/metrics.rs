//! fencelockd's `--metrics-listen`: `GET /metrics` after real Lock/Unlock calls and a refused one shows the gRPC call
//! counters by method and code, fencelockd's gauges and the backend client's core families; other paths are 404;
//! lock names appear only with `--metrics-names`.

mod support;

use fencelockd::proto::etcdserverpb::LeaseGrantRequest;
use fencelockd::proto::v3lockpb::{LockRequest, UnlockRequest};
use support::{Daemon, backends, unique, within};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tonic::Code;

/// Starts fencelockd with metrics on a free port (and `extra` flags); returns it and the metrics address.
async fn start(url: &str, extra: &[&str]) -> (Daemon, String) {
    let mut args = vec!["--metrics-listen", "127.0.0.1:0"];
    args.extend(extra);
    let mut d = Daemon::start(url, &args).await;
    let line = within("the metrics line", 10, d.stdout.next_line()).await.unwrap().expect("a second line");
    let at = line.strip_prefix("metrics on ").unwrap_or_else(|| panic!("unexpected line {line:?}")).to_string();
    (d, at)
}

/// One HTTP/1.1 request; the status line and the body.
async fn get(at: &str, request_line: &str) -> (String, String) {
    let mut s = tokio::net::TcpStream::connect(at).await.expect("connect to /metrics");
    s.write_all(format!("{request_line}\r\nHost: {at}\r\n\r\n").as_bytes()).await.unwrap();
    let mut response = String::new();
    within("the metrics response", 10, s.read_to_string(&mut response)).await.unwrap();
    let (head, body) = response.split_once("\r\n\r\n").expect("a response head");
    (head.lines().next().unwrap().to_string(), body.to_string())
}

async fn scrape(at: &str) -> String {
    let (status, body) = get(at, "GET /metrics HTTP/1.1").await;
    assert_eq!(status, "HTTP/1.1 200 OK", "{body}");
    body
}

/// The value of the sample written exactly as `series` (`name{labels}`).
fn value(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

#[tokio::test]
async fn lock_unlock_and_a_refused_call_are_counted_with_core_families() {
    for url in backends() {
        let (d, at) = start(&url, &[]).await;
        let scheme = url.split(':').next().unwrap();
        let lease = d.leases().lease_grant(LeaseGrantRequest { ttl: 10, id: 0 }).await.unwrap().into_inner().id;
        let name = unique("metrics");
        let key =
            d.locks().lock(LockRequest { name: name.clone().into_bytes(), lease }).await.unwrap().into_inner().key;

        let held = scrape(&at).await;
        assert_eq!(value(&held, "fencelockd_leases"), Some(1.0), "{url}: {held}");
        assert_eq!(value(&held, "fencelockd_waiters"), Some(0.0), "{url}");
        let active = format!("fencelock_active_leases{{backend=\"{scheme}\"}}");
        assert_eq!(value(&held, &active), Some(1.0), "{url}: the core's gauge counts fencelockd's grant\n{held}");

        d.locks().unlock(UnlockRequest { key }).await.unwrap();
        // Unlock of a key no lease holds: a non-OK code.
        let e = d.locks().unlock(UnlockRequest { key: b"no/such/key".to_vec() }).await.unwrap_err();
        let code = format!("{:?}", e.code());
        assert_ne!(e.code(), Code::Ok);

        let text = scrape(&at).await;
        let calls = |method: &str, code: &str| {
            value(&text, &format!("fencelockd_grpc_requests_total{{code=\"{code}\",method=\"{method}\"}}"))
        };
        assert_eq!(calls("etcdserverpb.Lease/LeaseGrant", "Ok"), Some(1.0), "{url}: {text}");
        assert_eq!(calls("v3lockpb.Lock/Lock", "Ok"), Some(1.0), "{url}");
        assert_eq!(calls("v3lockpb.Lock/Unlock", "Ok"), Some(1.0), "{url}");
        assert_eq!(calls("v3lockpb.Lock/Unlock", &code), Some(1.0), "{url}: the refused Unlock under {code}");
        assert!(text.contains("# TYPE fencelockd_grpc_requests_total counter\n"), "{url}");
        let unlock_time = "fencelockd_grpc_request_seconds_count{method=\"v3lockpb.Lock/Unlock\"}";
        assert_eq!(value(&text, unlock_time), Some(2.0), "{url}: both Unlocks timed\n{text}");
        // Core's families of the backend client, through the one mapping.
        let acquired = format!("fencelock_acquire_wait_seconds_count{{backend=\"{scheme}\",outcome=\"acquired\"}}");
        assert_eq!(value(&text, &acquired), Some(1.0), "{url}: {text}");
        assert_eq!(value(&text, &active), Some(0.0), "{url}");
        assert!(text.contains("# TYPE fencelock_backend_op_seconds histogram\n"), "{url}");
        assert!(!text.contains(&name), "{url}: no lock name without --metrics-names");

        let (status, _) = get(&at, "GET / HTTP/1.1").await;
        assert_eq!(status, "HTTP/1.1 404 Not Found", "{url}");
        let (status, _) = get(&at, "POST /metrics HTTP/1.1").await;
        assert_eq!(status, "HTTP/1.1 405 Method Not Allowed", "{url}");
    }
}

#[tokio::test]
async fn lock_names_are_labels_only_when_opted_in() {
    let url = support::sqlite();
    let name = unique("named");
    let (d, at) = start(&url, &["--metrics-names", &name]).await;
    let lease = d.leases().lease_grant(LeaseGrantRequest { ttl: 10, id: 0 }).await.unwrap().into_inner().id;
    d.locks().lock(LockRequest { name: name.clone().into_bytes(), lease }).await.unwrap();
    let text = scrape(&at).await;
    let series = format!("fencelock_lock_active_leases{{backend=\"sqlite\",lock=\"{name}\"}}");
    assert_eq!(value(&text, &series), Some(1.0), "{text}");
}

#[tokio::test]
async fn bad_metrics_flags_are_refused_by_name() {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_fencelockd"))
        .args(["--metrics-listen", "127.0.0.1:0", "--metrics-names", "a,,b"])
        .output();
    let out = within("fencelockd to refuse its flags", 10, out).await.unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--metrics-names"), "{out:?}");
}
