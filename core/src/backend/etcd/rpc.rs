//! etcd's gRPC API (the stubs of crate `fencelock-proto`), with failover between endpoints: one lazy channel per
//! endpoint and a preferred endpoint. Every request goes to the preferred one and, on a transport failure, to the
//! next, each endpoint at most once per request and all within the request timeout. Every request fencelock sends is
//! safe to repeat (its Txns compare revisions, deletes compare create revisions, the rest are reads), so a request
//! that reached a dying member and is sent again elsewhere does no harm. Streams (watches, lease keepalives) open on
//! the preferred endpoint the same way; their owner reports a broken stream with `demote`, so it and later requests
//! move on. (A balanced channel over every endpoint, as etcd-client has, keeps sending to a dead member.)
//!
//! With credentials, each endpoint authenticates on first use and sends the token in the `token` metadata; a token
//! the server no longer accepts (expired, the member restarted, or older than a change to users and roles) is
//! replaced once per request. With TLS, every
//! channel uses the same tonic TLS configuration (rustls with ring; the roots and identity of `backend/tls.rs`).

use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use fencelock_proto::EtcdConn;
use fencelock_proto::etcdserverpb::{
    LeaseGrantRequest, LeaseGrantResponse, LeaseKeepAliveRequest, LeaseKeepAliveResponse, LeaseRevokeRequest,
    LeaseTimeToLiveRequest, LeaseTimeToLiveResponse, RangeRequest, RangeResponse, TxnRequest, TxnResponse,
    WatchCreateRequest, WatchRequest, WatchResponse, watch_request,
};
use futures::channel::mpsc;
use futures::{StreamExt, stream};
use tokio::sync::Mutex;
use tokio::time::Instant;
use tonic::metadata::AsciiMetadataValue;
use tonic::transport::{Channel, ClientTlsConfig, Endpoint};
use tonic::{Code, Status, Streaming};

/// What a request to etcd fails with: a gRPC status (connection failures arrive as UNAVAILABLE).
pub(super) type EtcdError = Status;

/// How the channels connect and time out.
#[derive(Clone)]
pub(super) struct Settings {
    pub(super) connect_timeout: Duration,
    pub(super) request_timeout: Duration,
    pub(super) user: Option<Credentials>,
    /// TLS for every endpoint (`https://` ones), or none.
    pub(super) tls: Option<ClientTlsConfig>,
}

impl fmt::Debug for Settings {
    // Neither the password nor the client key (which tonic's TLS configuration would print) is shown.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Settings")
            .field("connect_timeout", &self.connect_timeout)
            .field("request_timeout", &self.request_timeout)
            .field("user", &self.user)
            .field("tls", &self.tls.is_some())
            .finish()
    }
}

/// An etcd user and password, for etcd's Authenticate call.
#[derive(Clone, PartialEq, Eq)]
pub(super) struct Credentials {
    pub(super) name: String,
    pub(super) password: String,
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credentials").field("name", &self.name).field("password", &"***").finish()
    }
}

/// The endpoints of one backend and the one requests go to first.
pub(super) struct Rpc {
    endpoints: Vec<String>,
    channels: Vec<Channel>,
    /// Each endpoint's auth token, fetched on first use when there are credentials.
    tokens: Vec<Mutex<Option<AsciiMetadataValue>>>,
    user: Option<Credentials>,
    preferred: AtomicUsize,
    request_timeout: Duration,
}

impl fmt::Debug for Rpc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Rpc")
            .field("endpoints", &self.endpoints)
            .field("preferred", &self.preferred.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

/// One endpoint's channel and token: what a request needs.
pub(super) type Conn = EtcdConn;

/// How a failed request failed.
#[derive(Debug, PartialEq, Eq)]
enum Failure {
    /// The endpoint could not be reached or could not serve (connect refused, a broken connection, gRPC UNAVAILABLE:
    /// also etcd's "no leader", "leader changed", "request timed out"): another member may do better.
    Transport,
    /// No answer in time: the time is spent, but the next request should try elsewhere.
    Timeout,
    /// The token was refused: authenticate again and repeat.
    Unauthenticated,
    /// The request itself failed (a missing lease, bad arguments, …): every member would answer the same.
    Application,
}

/// etcd's ErrGRPCAuthOldRevision, which comes as INVALID_ARGUMENT.
const AUTH_OLD_REVISION: &str = "revision of auth store is old";

fn failure(e: &Status) -> Failure {
    match e.code() {
        // UNKNOWN: what tonic makes of an HTTP/2 or I/O error it cannot name; etcd itself does not send it.
        Code::Unavailable | Code::Unknown => Failure::Transport,
        Code::DeadlineExceeded | Code::Cancelled => Failure::Timeout,
        Code::Unauthenticated => Failure::Unauthenticated,
        // A token from before any change to users or roles: etcd refuses it for writes until it is replaced.
        Code::InvalidArgument if e.message().contains(AUTH_OLD_REVISION) => Failure::Unauthenticated,
        _ => Failure::Application,
    }
}

fn timed_out(timeout: Duration) -> Status {
    Status::deadline_exceeded(format!("no answer from any endpoint within {timeout:?}"))
}

/// A short text for a status: its code and message (a status's Display also prints its metadata).
pub(super) fn describe(e: &Status) -> String {
    format!("{:?}: {}", e.code(), e.message())
}

/// A watch's replies, and the request side that keeps it open: dropping it ends the request stream, and etcd ends
/// a watch whose request stream ends. (Dropping the replies alone leaves the HTTP/2 stream, and the server's
/// watcher, open for as long as the connection lives.)
#[derive(Debug)]
pub(super) struct WatchStream {
    replies: Streaming<WatchResponse>,
    _open: mpsc::Sender<WatchRequest>,
}

impl WatchStream {
    pub(super) async fn message(&mut self) -> Result<Option<WatchResponse>, Status> {
        self.replies.message().await
    }
}

/// A lease's keepalive stream: requests go out through `send`, acknowledgements come back on `replies`.
#[derive(Debug)]
pub(super) struct KeepAlive {
    pub(super) send: mpsc::Sender<LeaseKeepAliveRequest>,
    pub(super) replies: Streaming<LeaseKeepAliveResponse>,
}

impl Rpc {
    /// Lazy channels to `endpoints` (`http://host:port`, or `https://` with `settings.tls`): nothing connects until
    /// the first request.
    pub(super) fn new(endpoints: Vec<String>, settings: Settings) -> Result<Self, String> {
        let mut channels = Vec::new();
        for url in &endpoints {
            let mut endpoint = Endpoint::from_shared(url.clone()).map_err(|e| format!("bad endpoint {url:?}: {e}"))?;
            if let Some(tls) = &settings.tls {
                endpoint = endpoint.tls_config(tls.clone()).map_err(|e| format!("TLS for {url:?}: {e}"))?;
            }
            let endpoint = endpoint
                .connect_timeout(settings.connect_timeout)
                // Until the response headers: a stream's later messages are not timed.
                .timeout(settings.request_timeout)
                .http2_keep_alive_interval(settings.request_timeout)
                .keep_alive_timeout(settings.request_timeout)
                .keep_alive_while_idle(true);
            channels.push(endpoint.connect_lazy());
        }
        Ok(Rpc {
            tokens: endpoints.iter().map(|_| Mutex::new(None)).collect(),
            endpoints,
            channels,
            user: settings.user,
            preferred: AtomicUsize::new(0),
            request_timeout: settings.request_timeout,
        })
    }

    /// The connection of endpoint `i`, authenticated first if there are credentials and no token yet; `stale` is a
    /// token the server refused, replaced by a new one.
    async fn conn(&self, i: usize, stale: Option<&AsciiMetadataValue>) -> Result<Conn, Status> {
        let channel = self.channels[i].clone();
        let Some(user) = &self.user else { return Ok(EtcdConn::new(channel)) };
        let mut known = self.tokens[i].lock().await;
        match known.as_ref() {
            Some(token) if Some(token) != stale => Ok(EtcdConn { channel, token: Some(token.clone()) }),
            _ => {
                let conn = EtcdConn::authenticate(channel, &user.name, &user.password).await?;
                known.clone_from(&conn.token);
                Ok(conn)
            }
        }
    }

    /// Moves the preference past endpoint `i` if it is still the preferred one (concurrent failures of one endpoint
    /// move it once).
    pub(super) fn demote(&self, i: usize) {
        let next = (i + 1) % self.channels.len();
        if next != i
            && self.preferred.compare_exchange(i, next, Ordering::AcqRel, Ordering::Acquire).is_ok()
            && let Some(endpoint) = self.endpoints.get(next)
        {
            tracing::debug!(failed = %self.endpoints[i], next = %endpoint, "etcd endpoint failed; moving on");
        }
    }

    /// Runs `op` on the preferred endpoint, failing over on transport failures, within the request timeout.
    pub(super) async fn call<T, F, Fut>(&self, op: F) -> Result<T, Status>
    where
        F: FnMut(Conn) -> Fut,
        Fut: Future<Output = Result<T, Status>>,
    {
        self.call_on(self.request_timeout, op).await.map(|(_, t)| t)
    }

    /// `call` with a time limit of its own, returning also the index of the endpoint that answered (for streams,
    /// whose owner demotes it when the stream breaks).
    pub(super) async fn call_on<T, F, Fut>(&self, timeout: Duration, mut op: F) -> Result<(usize, T), Status>
    where
        F: FnMut(Conn) -> Fut,
        Fut: Future<Output = Result<T, Status>>,
    {
        let deadline = Instant::now() + timeout;
        let n = self.channels.len();
        let first = self.preferred.load(Ordering::Acquire) % n;
        let mut last = None;
        for i in (first..n).chain(0..first) {
            let attempt = async {
                let conn = self.conn(i, None).await?;
                match op(conn.clone()).await {
                    Err(e) if failure(&e) == Failure::Unauthenticated && self.user.is_some() => {
                        op(self.conn(i, conn.token.as_ref()).await?).await
                    }
                    done => done,
                }
            };
            let error = match tokio::time::timeout_at(deadline, attempt).await {
                Ok(Ok(t)) => {
                    // After a failover, the endpoint that answered is the preferred one.
                    if i != first {
                        self.preferred.store(i, Ordering::Release);
                    }
                    return Ok((i, t));
                }
                Ok(Err(e)) => e,
                Err(_) => {
                    self.demote(i);
                    return Err(timed_out(timeout));
                }
            };
            match failure(&error) {
                Failure::Application | Failure::Unauthenticated => return Err(error),
                Failure::Timeout => {
                    self.demote(i);
                    return Err(error);
                }
                Failure::Transport => {
                    tracing::debug!(endpoint = %self.endpoints[i], error = %describe(&error), "etcd request failed; trying the next endpoint");
                    self.demote(i);
                    last = Some(error);
                }
            }
        }
        Err(last.unwrap_or_else(|| timed_out(timeout)))
    }

    /// A range read.
    pub(super) async fn range(&self, range: RangeRequest) -> Result<RangeResponse, Status> {
        self.range_within(self.request_timeout, range).await.map(|(_, r)| r)
    }

    /// A range read within `timeout`, and the endpoint that answered.
    pub(super) async fn range_within(
        &self,
        timeout: Duration,
        range: RangeRequest,
    ) -> Result<(usize, RangeResponse), Status> {
        self.call_on(timeout, |c| {
            let range = range.clone();
            async move { c.kv().range(c.req(range)).await.map(tonic::Response::into_inner) }
        })
        .await
    }

    /// A Txn.
    pub(super) async fn txn(&self, txn: TxnRequest) -> Result<TxnResponse, Status> {
        self.call(|c| {
            let txn = txn.clone();
            async move { c.kv().txn(c.req(txn)).await.map(tonic::Response::into_inner) }
        })
        .await
    }

    /// A lease grant. Repeated after a transport failure it may grant a lease nobody uses, which expires after `ttl`.
    pub(super) async fn grant(&self, ttl: i64) -> Result<LeaseGrantResponse, Status> {
        self.call(|c| async move {
            c.lease().lease_grant(c.req(LeaseGrantRequest { ttl, id: 0 })).await.map(tonic::Response::into_inner)
        })
        .await
    }

    pub(super) async fn revoke(&self, id: i64) -> Result<(), Status> {
        self.call(|c| async move { c.lease().lease_revoke(c.req(LeaseRevokeRequest { id })).await.map(drop) }).await
    }

    pub(super) async fn time_to_live(&self, id: i64) -> Result<LeaseTimeToLiveResponse, Status> {
        self.call(|c| async move {
            let request = LeaseTimeToLiveRequest { id, keys: false };
            c.lease().lease_time_to_live(c.req(request)).await.map(tonic::Response::into_inner)
        })
        .await
    }

    /// A watch as `create` asks (a range, previous values), and the endpoint it runs on.
    pub(super) async fn watch_with(&self, create: WatchCreateRequest) -> Result<(usize, WatchStream), Status> {
        let request = WatchRequest { request_union: Some(watch_request::RequestUnion::CreateRequest(create)) };
        self.call_on(self.request_timeout, |c| {
            let (open, rest) = mpsc::channel(1);
            let mut requests = c.req(stream::once(futures::future::ready(request.clone())).chain(rest));
            // etcd then ends the watch when its member loses the leader, instead of keeping it open and silent
            // while the rest of the cluster goes on: the waiters watch again elsewhere.
            requests.metadata_mut().insert("hasleader", AsciiMetadataValue::from_static("true"));
            async move {
                let replies = c.watch().watch(requests).await?.into_inner();
                Ok(WatchStream { replies, _open: open })
            }
        })
        .await
    }

    /// Opens lease `id`'s keepalive stream and sends one keepalive; `None` if the server says the lease is gone.
    pub(super) async fn keep_alive(&self, id: i64) -> Result<(usize, Option<KeepAlive>), Status> {
        self.call_on(self.request_timeout, |c| async move {
            let (mut send, requests) = mpsc::channel(1);
            send.try_send(LeaseKeepAliveRequest { id }).expect("a new channel has room");
            let mut replies = c.lease().lease_keep_alive(c.req(requests)).await?.into_inner();
            match replies.message().await? {
                Some(reply) if reply.ttl > 0 => Ok(Some(KeepAlive { send, replies })),
                Some(_) => Ok(None),
                None => Err(Status::unavailable("the keepalive stream ended before its first reply")),
            }
        })
        .await
    }
}
