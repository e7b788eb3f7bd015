//! OTLP export switched on by the standard environment: a real OTLP/gRPC receiver (the collector's MetricsService,
//! served here with tonic) gets a SQLite client's metrics, cumulative, with the outcome and reason labels.

mod support;

use std::net::SocketAddr;
use std::time::Duration;

use fencelock::{Client, ErrorKind, LockOptions};
use opentelemetry_proto::tonic::collector::metrics::v1::metrics_service_server::{
    MetricsService, MetricsServiceServer,
};
use opentelemetry_proto::tonic::collector::metrics::v1::{ExportMetricsServiceRequest, ExportMetricsServiceResponse};
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use opentelemetry_proto::tonic::metrics::v1::metric::Data;
use tokio::sync::mpsc;
use tokio::time::Instant;

struct Receiver(mpsc::UnboundedSender<ExportMetricsServiceRequest>);

#[tonic::async_trait]
impl MetricsService for Receiver {
    async fn export(
        &self,
        request: tonic::Request<ExportMetricsServiceRequest>,
    ) -> Result<tonic::Response<ExportMetricsServiceResponse>, tonic::Status> {
        let _ = self.0.send(request.into_inner());
        Ok(tonic::Response::new(ExportMetricsServiceResponse::default()))
    }
}

fn attr<'a>(attrs: &'a [opentelemetry_proto::tonic::common::v1::KeyValue], key: &str) -> Option<&'a str> {
    attrs.iter().find(|kv| kv.key == key).and_then(|kv| match kv.value.as_ref()?.value.as_ref()? {
        Value::StringValue(s) => Some(s.as_str()),
        _ => None,
    })
}

/// `client`'s timed-out acquires (a histogram's count) and refused fenced writes (a sum), if exported.
fn figures(req: &ExportMetricsServiceRequest, client: &str) -> (Option<u64>, Option<f64>) {
    let metrics = &req.resource_metrics[0].scope_metrics[0].metrics;
    let mut out = (None, None);
    for m in metrics {
        match (m.name.as_str(), &m.data) {
            ("fencelock_acquire_wait_seconds", Some(Data::Histogram(h))) => {
                out.0 = h
                    .data_points
                    .iter()
                    .find(|p| {
                        attr(&p.attributes, "outcome") == Some("timeout")
                            && attr(&p.attributes, "fencelock.client") == Some(client)
                    })
                    .map(|p| p.count);
            }
            ("fencelock_fence_writes", Some(Data::Sum(s))) => {
                out.1 = s
                    .data_points
                    .iter()
                    .find(|p| {
                        attr(&p.attributes, "outcome") == Some("refused")
                            && attr(&p.attributes, "fencelock.client") == Some(client)
                    })
                    .and_then(|p| {
                        p.value.map(|v| match v {
                            opentelemetry_proto::tonic::metrics::v1::number_data_point::Value::AsDouble(d) => d,
                            opentelemetry_proto::tonic::metrics::v1::number_data_point::Value::AsInt(i) => i as f64,
                        })
                    });
            }
            _ => {}
        }
    }
    out
}

#[tokio::test(flavor = "current_thread")]
async fn the_otlp_environment_variables_switch_export_on() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr: SocketAddr = listener.local_addr().unwrap();
    // SAFETY: set before the first client exists, on this single-threaded test's only thread; nothing else in this
    // process reads the environment concurrently.
    unsafe {
        std::env::set_var("OTEL_EXPORTER_OTLP_ENDPOINT", format!("http://{addr}"));
        std::env::set_var("OTEL_METRIC_EXPORT_INTERVAL", "100");
        std::env::set_var("OTEL_SERVICE_NAME", "otel-test");
    }
    let (tx, mut rx) = mpsc::unbounded_channel();
    let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener);
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(MetricsServiceServer::new(Receiver(tx)))
            .serve_with_incoming(incoming),
    );

    let url = support::sqlite_url("fencelock-otel");
    let (a, b) = (Client::connect(&url).await.unwrap(), Client::connect(&url).await.unwrap());
    let lease = a.lock("o", &LockOptions::default()).await.unwrap();
    let err = b.lock("o", &LockOptions::default().timeout(Duration::from_millis(50))).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Timeout);
    b.fence("r").write(lease.fence() + 1, b"x").await.unwrap();
    assert_eq!(b.fence("r").write(lease.fence(), b"y").await.unwrap_err().kind(), ErrorKind::Fenced);

    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let req = tokio::time::timeout_at(deadline, rx.recv()).await.expect("no export within 20 s").unwrap();
        let resource = req.resource_metrics[0].resource.as_ref().unwrap();
        assert_eq!(attr(&resource.attributes, "service.name"), Some("otel-test"));
        if figures(&req, b.id()) == (Some(1), Some(1.0)) {
            break;
        }
    }
    lease.release().await.unwrap();
}
