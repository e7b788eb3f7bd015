//! OTLP export of every client's metrics (cargo feature `otel`), off unless switched on: by
//! `OTEL_EXPORTER_OTLP_METRICS_ENDPOINT` or `OTEL_EXPORTER_OTLP_ENDPOINT` at the first `Client::connect` (and not
//! `OTEL_METRICS_EXPORTER=none`), or by [`start`]. One task per process pushes each live client's snapshot over
//! OTLP/gRPC every `OTEL_METRIC_EXPORT_INTERVAL` ms (default 60 000), cumulatively, from [`MetricsSnapshot::families`]:
//! counters become monotonic sums (without `_total`, which OTLP-to-Prometheus adds back), gauges gauges, and
//! histograms explicit-bucket histograms with the same bounds. Each series carries `fencelock.client` (the client's
//! id), so two clients in one process never overwrite each other's cumulative series.
//!
//! Spans are `tracing` spans (`fencelock.acquire`, `.renew`, `.release`, `.fence_write`): a subscriber with
//! tracing-opentelemetry forwards them to the same collector.

use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::metrics::v1::metrics_service_client::MetricsServiceClient;
use opentelemetry_proto::tonic::common::v1::{AnyValue, InstrumentationScope, KeyValue, any_value};
use opentelemetry_proto::tonic::metrics::v1::{
    AggregationTemporality, Gauge, Histogram, HistogramDataPoint, Metric, NumberDataPoint, ResourceMetrics,
    ScopeMetrics, Sum, metric, number_data_point,
};
use opentelemetry_proto::tonic::resource::v1::Resource;

use crate::error::{Error, Result};
use crate::metrics::{FamilyKind, HistogramSnapshot, MetricsSnapshot, Recorder};

const DEFAULT_INTERVAL: Duration = Duration::from_secs(60);

/// A live client as the exporter sees it.
struct Source {
    client: String,
    started_ns: u64,
    recorder: Weak<Recorder>,
}

static SOURCES: Mutex<Vec<Source>> = Mutex::new(Vec::new());
static FROM_ENV: OnceLock<()> = OnceLock::new();

fn unix_nanos() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0)
}

/// Adds a client to what is exported; the first one starts the exporter if the environment asks for it.
pub(crate) fn register(client: &str, recorder: &Arc<Recorder>) {
    let mut sources = SOURCES.lock().unwrap_or_else(|p| p.into_inner());
    sources.retain(|s| s.recorder.strong_count() > 0);
    sources.push(Source { client: client.to_string(), started_ns: unix_nanos(), recorder: Arc::downgrade(recorder) });
    drop(sources);
    FROM_ENV.get_or_init(|| {
        if let Some((endpoint, interval)) = from_env()
            && let Err(e) = start(&endpoint, interval)
        {
            tracing::warn!(error = %e, "OTLP metrics export not started");
        }
    });
}

/// The endpoint and interval the standard OpenTelemetry variables ask for, if any.
fn from_env() -> Option<(String, Duration)> {
    let var = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
    if var("OTEL_METRICS_EXPORTER").is_some_and(|v| v.trim() == "none") {
        return None;
    }
    let endpoint = var("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT").or_else(|| var("OTEL_EXPORTER_OTLP_ENDPOINT"))?;
    let interval = var("OTEL_METRIC_EXPORT_INTERVAL")
        .and_then(|ms| ms.trim().parse::<u64>().ok())
        .filter(|&ms| ms > 0)
        .map_or(DEFAULT_INTERVAL, Duration::from_millis);
    Some((endpoint, interval))
}

/// Pushes every live client's metrics to the OTLP/gRPC collector at `endpoint` (`http://host:4317`) every
/// `interval`, on the current tokio runtime, until the runtime ends. A failed push is logged and retried next time.
pub fn start(endpoint: &str, interval: Duration) -> Result<()> {
    let channel = tonic::transport::Endpoint::from_shared(endpoint.to_string())
        .map_err(|e| Error::invalid(format!("OTLP endpoint {endpoint:?} is not a URL: {e}")))?
        .connect_lazy();
    let runtime = tokio::runtime::Handle::try_current()
        .map_err(|_| Error::invalid("OTLP export needs a tokio runtime to run on"))?;
    let service = std::env::var("OTEL_SERVICE_NAME").unwrap_or_else(|_| "fencelock".to_string());
    runtime.spawn(async move {
        let mut client = MetricsServiceClient::new(channel);
        let mut tick = tokio::time::interval(interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tick.tick().await;
        loop {
            tick.tick().await;
            let request = request(&service, &live());
            if let Err(status) = client.export(request).await {
                tracing::debug!(%status, "OTLP metrics export failed; retrying at the next interval");
            }
        }
    });
    Ok(())
}

/// The live clients' snapshots with their ids and start times.
fn live() -> Vec<(String, u64, MetricsSnapshot)> {
    let mut sources = SOURCES.lock().unwrap_or_else(|p| p.into_inner());
    sources.retain(|s| s.recorder.strong_count() > 0);
    sources
        .iter()
        .filter_map(|s| s.recorder.upgrade().map(|r| (s.client.clone(), s.started_ns, r.snapshot())))
        .collect()
}

fn text(key: &str, value: &str) -> KeyValue {
    KeyValue {
        key: key.to_string(),
        value: Some(AnyValue { value: Some(any_value::Value::StringValue(value.to_string())) }),
        ..Default::default()
    }
}

/// One export request: a resource (the service), one scope (fencelock), every family of every client.
fn request(service: &str, clients: &[(String, u64, MetricsSnapshot)]) -> ExportMetricsServiceRequest {
    let now = unix_nanos();
    let mut metrics: Vec<Metric> = Vec::new();
    for (client, started, snap) in clients {
        for family in snap.families() {
            let metric = metric_of(&family, client, *started, now);
            // One metric per family name, all clients' points together.
            match metrics.iter_mut().find(|m| m.name == metric.name) {
                Some(m) => merge(m, metric),
                None => metrics.push(metric),
            }
        }
    }
    ExportMetricsServiceRequest {
        resource_metrics: vec![ResourceMetrics {
            resource: Some(Resource { attributes: vec![text("service.name", service)], ..Default::default() }),
            scope_metrics: vec![ScopeMetrics {
                scope: Some(InstrumentationScope {
                    name: "fencelock".to_string(),
                    version: env!("CARGO_PKG_VERSION").to_string(),
                    ..Default::default()
                }),
                metrics,
                schema_url: String::new(),
            }],
            schema_url: String::new(),
        }],
    }
}

fn metric_of(family: &crate::metrics::Family, client: &str, start: u64, now: u64) -> Metric {
    let attributes = |labels: &std::collections::BTreeMap<String, String>| -> Vec<KeyValue> {
        std::iter::once(text("fencelock.client", client)).chain(labels.iter().map(|(k, v)| text(k, v))).collect()
    };
    let number = |s: &crate::metrics::Sample| NumberDataPoint {
        attributes: attributes(&s.labels),
        start_time_unix_nano: start,
        time_unix_nano: now,
        value: Some(number_data_point::Value::AsDouble(s.value.unwrap_or(0.0))),
        ..Default::default()
    };
    let cumulative = AggregationTemporality::Cumulative as i32;
    let data = match family.kind {
        FamilyKind::Counter => metric::Data::Sum(Sum {
            data_points: family.samples.iter().map(number).collect(),
            aggregation_temporality: cumulative,
            is_monotonic: true,
        }),
        FamilyKind::Gauge => metric::Data::Gauge(Gauge { data_points: family.samples.iter().map(number).collect() }),
        FamilyKind::Histogram => metric::Data::Histogram(Histogram {
            data_points: family
                .samples
                .iter()
                .map(|s| histogram_point(s.histogram.as_ref(), attributes(&s.labels), start, now))
                .collect(),
            aggregation_temporality: cumulative,
        }),
    };
    let name = family.name.strip_suffix("_total").unwrap_or(&family.name).to_string();
    let unit = if name.ends_with("_seconds") { "s" } else { "1" };
    Metric { name, description: family.help.clone(), unit: unit.to_string(), data: Some(data), ..Default::default() }
}

/// OTLP buckets are per bucket, not cumulative; the last (+Inf) has no bound.
fn histogram_point(
    h: Option<&HistogramSnapshot>,
    attributes: Vec<KeyValue>,
    start: u64,
    now: u64,
) -> HistogramDataPoint {
    let empty = HistogramSnapshot::empty();
    let h = h.unwrap_or(&empty);
    let mut previous = 0;
    let bucket_counts = h
        .buckets
        .iter()
        .map(|b| {
            let own = b.count - previous;
            previous = b.count;
            own
        })
        .collect();
    HistogramDataPoint {
        attributes,
        start_time_unix_nano: start,
        time_unix_nano: now,
        count: h.count,
        sum: Some(h.sum),
        bucket_counts,
        explicit_bounds: h.buckets.iter().map(|b| b.le).filter(|le| le.is_finite()).collect(),
        ..Default::default()
    }
}

fn merge(into: &mut Metric, from: Metric) {
    match (&mut into.data, from.data) {
        (Some(metric::Data::Sum(a)), Some(metric::Data::Sum(b))) => a.data_points.extend(b.data_points),
        (Some(metric::Data::Gauge(a)), Some(metric::Data::Gauge(b))) => a.data_points.extend(b.data_points),
        (Some(metric::Data::Histogram(a)), Some(metric::Data::Histogram(b))) => a.data_points.extend(b.data_points),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::MetricsNames;

    #[test]
    fn families_map_to_otlp_kinds_with_per_bucket_counts() {
        let rec = Arc::new(Recorder::new(true, "redis://x", &MetricsNames::None));
        rec.renewal(true);
        let req = request("svc", &[("c1".into(), 1, rec.snapshot()), ("c2".into(), 1, rec.snapshot())]);
        let metrics = &req.resource_metrics[0].scope_metrics[0].metrics;
        let renewals = metrics.iter().find(|m| m.name == "fencelock_renewals").expect("no _total in OTLP");
        let Some(metric::Data::Sum(sum)) = &renewals.data else { panic!("a counter is a sum") };
        assert!(sum.is_monotonic);
        assert_eq!(sum.data_points.len(), 4, "two outcomes for each of two clients");
        let wait = metrics.iter().find(|m| m.name == "fencelock_acquire_wait_seconds").unwrap();
        assert_eq!(wait.unit, "s");
        let Some(metric::Data::Histogram(h)) = &wait.data else { panic!("a histogram") };
        let point = &h.data_points[0];
        assert_eq!(point.bucket_counts.len(), point.explicit_bounds.len() + 1);
    }
}
