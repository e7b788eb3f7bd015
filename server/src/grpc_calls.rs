//! gRPC calls counted by method and status code, and timed by method (until the status: a stream's whole life): a
//! tower layer around every tonic service, for `/metrics`.
//!
//! The code is read where gRPC puts it: the response headers of a trailers-only answer (every error tonic returns
//! from a unary call), else the trailers at the end of the body (OK, and every streaming call). A body dropped before
//! its trailers is a call the client abandoned: `Cancelled`. Method labels are bounded: only the methods of the
//! services fencelockd serves, from their descriptors; any other path is counted as `_unknown`.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Instant;

use bytes::Bytes;
use fencelock::metrics::{Family, FamilyKind, Histogram};
use http::{HeaderMap, Request, Response};
use http_body::{Frame, SizeHint};
use prost::Message as _;
use tonic::Code;
use tonic::body::Body;

/// The label of a path that is no method fencelockd serves (a bounded label for scanners and typos).
pub const UNKNOWN_METHOD: &str = "_unknown";

/// Services whose methods are labelled by name: fencelockd's own, etcd's Auth, health and reflection.
const LABELLED: [&str; 7] = [
    "etcdserverpb.Lease",
    "v3lockpb.Lock",
    "fencelock.v1.Locks",
    "etcdserverpb.Auth",
    "grpc.health.v1.Health",
    "grpc.reflection.v1.ServerReflection",
    "grpc.reflection.v1alpha.ServerReflection",
];

/// Counts of finished calls by (method, code).
#[derive(Debug)]
pub struct GrpcCalls {
    methods: BTreeSet<String>,
    counts: Mutex<BTreeMap<(String, i32), u64>>,
    latency: Mutex<BTreeMap<String, Arc<Histogram>>>,
}

impl Default for GrpcCalls {
    fn default() -> Self {
        GrpcCalls::new()
    }
}

impl GrpcCalls {
    /// Counters knowing the methods of [`LABELLED`] services from the descriptors fencelockd serves.
    pub fn new() -> Self {
        let mut methods = BTreeSet::new();
        for set in [crate::proto::DESCRIPTORS, tonic_health::pb::FILE_DESCRIPTOR_SET] {
            let Ok(set) = prost_types::FileDescriptorSet::decode(set) else { continue };
            for file in set.file {
                for service in &file.service {
                    let full = format!("{}.{}", file.package(), service.name());
                    if LABELLED.contains(&full.as_str()) {
                        methods.extend(service.method.iter().map(|m| format!("{full}/{}", m.name())));
                    }
                }
            }
        }
        // Reflection's descriptors are not exported; its one method is fixed by the protocol.
        for service in &LABELLED[5..] {
            methods.insert(format!("{service}/ServerReflectionInfo"));
        }
        GrpcCalls { methods, counts: Mutex::default(), latency: Mutex::default() }
    }

    /// The method label of a request path (`/etcdserverpb.Lease/LeaseGrant` → `etcdserverpb.Lease/LeaseGrant`).
    fn method_of(&self, path: &str) -> String {
        let method = path.strip_prefix('/').unwrap_or(path);
        if self.methods.contains(method) { method.to_string() } else { UNKNOWN_METHOD.to_string() }
    }

    fn record(&self, method: &str, code: Code, started: Instant) {
        let mut counts = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        *counts.entry((method.to_string(), code as i32)).or_default() += 1;
        drop(counts);
        let mut latency = self.latency.lock().unwrap_or_else(|e| e.into_inner());
        latency.entry(method.to_string()).or_default().observe(started.elapsed());
    }

    /// `fencelockd_grpc_requests_total{method,code}`; codes by tonic's names (`Ok`, `NotFound`).
    pub fn family(&self) -> Family {
        let mut f = Family::new(
            "fencelockd_grpc_requests_total",
            "gRPC calls finished, by method and status code",
            FamilyKind::Counter,
        );
        let counts = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        for ((method, code), n) in counts.iter() {
            f.value(&[("method", method), ("code", &format!("{:?}", Code::from_i32(*code)))], *n as f64);
        }
        f
    }

    /// `fencelockd_grpc_request_seconds{method}`: from the request to its status.
    pub fn latency_family(&self) -> Family {
        let mut f = Family::new(
            "fencelockd_grpc_request_seconds",
            "gRPC call time from request to status (a stream's whole life), by method",
            FamilyKind::Histogram,
        );
        let latency = self.latency.lock().unwrap_or_else(|e| e.into_inner());
        for (method, h) in latency.iter() {
            f.histogram(&[("method", method)], &h.snapshot());
        }
        f
    }

    /// The tower layer that counts into `self`.
    pub fn layer(self: &Arc<Self>) -> CountLayer {
        CountLayer(self.clone())
    }
}

/// The status code in `headers`, if gRPC put one there.
fn code_in(headers: &HeaderMap) -> Option<Code> {
    headers.get("grpc-status").map(|v| Code::from_bytes(v.as_bytes()))
}

#[derive(Debug, Clone)]
pub struct CountLayer(Arc<GrpcCalls>);

impl<S> tower_layer::Layer<S> for CountLayer {
    type Service = Counted<S>;

    fn layer(&self, inner: S) -> Counted<S> {
        Counted { inner, calls: self.0.clone() }
    }
}

#[derive(Debug, Clone)]
pub struct Counted<S> {
    inner: S,
    calls: Arc<GrpcCalls>,
}

impl<S, B> tower_service::Service<Request<B>> for Counted<S>
where
    S: tower_service::Service<Request<B>, Response = Response<Body>>,
    S::Future: Send + 'static,
{
    type Response = Response<Body>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Body>, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let method = self.calls.method_of(req.uri().path());
        let (calls, started) = (self.calls.clone(), Instant::now());
        let call = self.inner.call(req);
        Box::pin(async move {
            let response = call.await?;
            if let Some(code) = code_in(response.headers()) {
                calls.record(&method, code, started);
                return Ok(response);
            }
            Ok(response.map(|body| Body::new(CountedBody { inner: body, pending: Some((calls, method, started)) })))
        })
    }
}

/// A response body that records its call's code from the trailers, or `Cancelled` if dropped before them.
struct CountedBody {
    inner: Body,
    pending: Option<(Arc<GrpcCalls>, String, Instant)>,
}

impl CountedBody {
    fn finish(&mut self, code: Code) {
        if let Some((calls, method, started)) = self.pending.take() {
            calls.record(&method, code, started);
        }
    }
}

impl http_body::Body for CountedBody {
    type Data = Bytes;
    type Error = tonic::Status;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(code) = frame.trailers_ref().and_then(code_in) {
                    self.finish(code);
                }
            }
            Poll::Ready(Some(Err(status))) => {
                let code = status.code();
                self.finish(code);
            }
            // The body ended with no status: not a gRPC answer.
            Poll::Ready(None) => self.finish(Code::Unknown),
            Poll::Pending => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for CountedBody {
    fn drop(&mut self) {
        self.finish(Code::Cancelled);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn methods_are_those_served_and_others_are_unknown() {
        let calls = GrpcCalls::new();
        assert_eq!(calls.method_of("/etcdserverpb.Lease/LeaseGrant"), "etcdserverpb.Lease/LeaseGrant");
        assert_eq!(calls.method_of("/v3lockpb.Lock/Lock"), "v3lockpb.Lock/Lock");
        assert_eq!(calls.method_of("/grpc.health.v1.Health/Check"), "grpc.health.v1.Health/Check");
        assert_eq!(calls.method_of("/etcdserverpb.KV/Range"), UNKNOWN_METHOD);
        assert_eq!(calls.method_of("/v3lockpb.Lock/NoSuchCall"), UNKNOWN_METHOD);
        assert_eq!(calls.method_of("/favicon.ico"), UNKNOWN_METHOD);
    }

    #[test]
    fn the_family_names_codes_as_tonic_does() {
        let (calls, t0) = (GrpcCalls::new(), Instant::now());
        calls.record("v3lockpb.Lock/Lock", Code::Ok, t0);
        calls.record("v3lockpb.Lock/Lock", Code::Ok, t0);
        calls.record("v3lockpb.Lock/Unlock", Code::NotFound, t0);
        let f = calls.family();
        let got: Vec<(String, String, f64)> = f
            .samples
            .iter()
            .map(|s| (s.labels["method"].clone(), s.labels["code"].clone(), s.value.unwrap()))
            .collect();
        assert_eq!(
            got,
            [("v3lockpb.Lock/Lock".into(), "Ok".into(), 2.0), ("v3lockpb.Lock/Unlock".into(), "NotFound".into(), 1.0)]
        );
        let latency = calls.latency_family();
        let counts: Vec<(String, u64)> =
            latency.samples.iter().map(|s| (s.labels["method"].clone(), s.histogram.as_ref().unwrap().count)).collect();
        assert_eq!(counts, [("v3lockpb.Lock/Lock".into(), 2), ("v3lockpb.Lock/Unlock".into(), 1)]);
    }
}
