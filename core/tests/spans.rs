//! Core's tracing spans: acquire, renew, release and fence_write, each with the lock (or resource), the backend and
//! the outcome, as a subscriber (tracing-opentelemetry, or any other) sees them on a real SQLite file.

mod support;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fencelock::{Client, ErrorKind, LockOptions};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};

type Fields = BTreeMap<String, String>;

/// Every closed span's name and fields, in closing order.
#[derive(Clone, Default)]
struct Spans(Arc<Mutex<Vec<(String, Fields)>>>);

struct Collect<'a>(&'a mut Fields);

impl Visit for Collect<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_string(), format!("{value:?}").trim_matches('"').to_string());
    }
}

impl<S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>> Layer<S> for Spans {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut fields = Fields::new();
        attrs.record(&mut Collect(&mut fields));
        ctx.span(id).unwrap().extensions_mut().insert(fields);
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        if let Some(fields) = ctx.span(id).unwrap().extensions_mut().get_mut::<Fields>() {
            values.record(&mut Collect(fields));
        }
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        let span = ctx.span(&id).unwrap();
        let fields = span.extensions().get::<Fields>().cloned().unwrap_or_default();
        self.0.lock().unwrap().push((span.name().to_string(), fields));
    }
}

impl Spans {
    fn named(&self, name: &str) -> Vec<Fields> {
        self.0.lock().unwrap().iter().filter(|(n, _)| n == name).map(|(_, f)| f.clone()).collect()
    }
}

#[tokio::test(flavor = "current_thread")]
async fn every_operation_has_a_span_with_lock_backend_and_outcome() {
    let spans = Spans::default();
    let _default = tracing::subscriber::set_default(tracing_subscriber::registry().with(spans.clone()));
    let url = support::sqlite_url("fencelock-spans");
    let (a, b) = (Client::connect(&url).await.unwrap(), Client::connect(&url).await.unwrap());

    let lease = a.lock("s", &LockOptions::default()).await.unwrap();
    let err = b.lock("s", &LockOptions::default().timeout(Duration::from_millis(30))).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Timeout);
    lease.renew(None).await.unwrap();
    a.fence("res").write(lease.fence(), b"v").await.unwrap();
    assert_eq!(a.fence("res").write(lease.fence() - 1, b"old").await.unwrap_err().kind(), ErrorKind::Fenced);
    lease.release().await.unwrap();

    let acquires = spans.named("fencelock.acquire");
    let outcomes: Vec<_> = acquires.iter().map(|f| f["outcome"].as_str()).collect();
    assert_eq!(outcomes, ["acquired", "timeout"]);
    assert!(acquires.iter().all(|f| f["lock"] == "s" && f["backend"] == "sqlite"), "{acquires:?}");
    assert_eq!(acquires[0]["token"], lease.fence().to_string());
    let renew = &spans.named("fencelock.renew")[0];
    assert_eq!((renew["lock"].as_str(), renew["outcome"].as_str()), ("s", "ok"));
    let writes: Vec<_> = spans.named("fencelock.fence_write").iter().map(|f| f["outcome"].clone()).collect();
    assert_eq!(writes, ["ok", "refused"]);
    let release = &spans.named("fencelock.release")[0];
    assert_eq!(
        (release["lock"].as_str(), release["backend"].as_str(), release["outcome"].as_str()),
        ("s", "sqlite", "ok")
    );
}
