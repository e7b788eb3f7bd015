//! Failover between endpoints. etcd-client balances one channel over every endpoint without health checks, so after a
//! member dies it keeps sending some requests there, and they fail with "connection refused" until the member is
//! back. Instead this keeps one etcd-client `Client` per endpoint (connected on first use) and a preferred endpoint:
//! every request goes to the preferred one and, on a transport failure, to the next, each endpoint at most once per
//! request and all within the request timeout. Every request fencelock sends is safe to repeat (its Txns compare
//! revisions, deletes compare create revisions, the rest are reads), so a request that reached a dying member and is
//! sent again elsewhere does no harm. Streams (watches, lease keepalives) open on the preferred endpoint the same
//! way; their owner reports a broken stream with `demote`, so it and later requests move on.

use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use etcd_client::{
    Client, ConnectOptions, Error as EtcdError, GetOptions, GetResponse, LeaseGrantResponse, LeaseRevokeResponse,
    LeaseTimeToLiveResponse, Txn, TxnResponse,
};
use tokio::sync::OnceCell;
use tokio::time::Instant;

/// gRPC status codes (etcd-client does not re-export tonic's `Code`).
const GRPC_CANCELLED: i32 = 1;
const GRPC_DEADLINE_EXCEEDED: i32 = 4;
const GRPC_UNAVAILABLE: i32 = 14;

/// The endpoints of one backend and the one requests go to first.
pub(super) struct Rpc {
    endpoints: Vec<String>,
    options: ConnectOptions,
    clients: Vec<OnceCell<Client>>,
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

/// How a failed request failed.
#[derive(Debug, PartialEq, Eq)]
enum Failure {
    /// The endpoint could not be reached or could not serve (connect refused, a broken connection, gRPC UNAVAILABLE:
    /// also etcd's "no leader", "leader changed", "request timed out"): another member may do better.
    Transport,
    /// No answer in time: the time is spent, but the next request should try elsewhere.
    Timeout,
    /// The request itself failed (a missing lease, bad arguments, …): every member would answer the same.
    Application,
}

fn failure(e: &EtcdError) -> Failure {
    match e {
        EtcdError::TransportError(_) | EtcdError::IoError(_) => Failure::Transport,
        EtcdError::GRpcStatus(s) => match s.code() as i32 {
            GRPC_UNAVAILABLE => Failure::Transport,
            GRPC_DEADLINE_EXCEEDED | GRPC_CANCELLED => Failure::Timeout,
            _ => Failure::Application,
        },
        _ => Failure::Application,
    }
}

fn timed_out(timeout: Duration) -> EtcdError {
    EtcdError::IoError(std::io::Error::new(
        std::io::ErrorKind::TimedOut,
        format!("no answer from any endpoint within {timeout:?}"),
    ))
}

impl Rpc {
    pub(super) fn new(endpoints: Vec<String>, options: ConnectOptions, request_timeout: Duration) -> Self {
        let clients = endpoints.iter().map(|_| OnceCell::new()).collect();
        Rpc { endpoints, options, clients, preferred: AtomicUsize::new(0), request_timeout }
    }

    /// The client of endpoint `i`, connected on first use (a lazy channel: connecting costs nothing without
    /// credentials, and one authentication round trip with them).
    async fn client(&self, i: usize) -> Result<Client, EtcdError> {
        let connecting = || Client::connect([self.endpoints[i].as_str()], Some(self.options.clone()));
        self.clients[i].get_or_try_init(connecting).await.cloned()
    }

    /// Moves the preference past endpoint `i` if it is still the preferred one (concurrent failures of one endpoint
    /// move it once).
    pub(super) fn demote(&self, i: usize) {
        let next = (i + 1) % self.clients.len();
        if next != i
            && self.preferred.compare_exchange(i, next, Ordering::AcqRel, Ordering::Acquire).is_ok()
            && let Some(endpoint) = self.endpoints.get(next)
        {
            tracing::debug!(failed = %self.endpoints[i], next = %endpoint, "etcd endpoint failed; moving on");
        }
    }

    /// Runs `op` on the preferred endpoint's client, failing over on transport failures, within the request timeout.
    pub(super) async fn call<T, F, Fut>(&self, op: F) -> Result<T, EtcdError>
    where
        F: FnMut(Client) -> Fut,
        Fut: Future<Output = Result<T, EtcdError>>,
    {
        self.call_on(self.request_timeout, op).await.map(|(_, t)| t)
    }

    /// `call` for a stream: also returns the index of the endpoint that answered, which the stream's owner demotes
    /// when the stream breaks.
    pub(super) async fn open<T, F, Fut>(&self, op: F) -> Result<(usize, T), EtcdError>
    where
        F: FnMut(Client) -> Fut,
        Fut: Future<Output = Result<T, EtcdError>>,
    {
        self.call_on(self.request_timeout, op).await
    }

    /// `call` with a time limit of its own, returning also the index of the endpoint that answered (for streams,
    /// whose owner demotes it when the stream breaks).
    pub(super) async fn call_on<T, F, Fut>(&self, timeout: Duration, mut op: F) -> Result<(usize, T), EtcdError>
    where
        F: FnMut(Client) -> Fut,
        Fut: Future<Output = Result<T, EtcdError>>,
    {
        let deadline = Instant::now() + timeout;
        let n = self.clients.len();
        let first = self.preferred.load(Ordering::Acquire) % n;
        let mut last = None;
        for i in (first..n).chain(0..first) {
            let attempt = async {
                let client = self.client(i).await?;
                op(client).await
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
                Failure::Application => return Err(error),
                Failure::Timeout => {
                    self.demote(i);
                    return Err(error);
                }
                Failure::Transport => {
                    tracing::debug!(endpoint = %self.endpoints[i], error = %error, "etcd request failed; trying the next endpoint");
                    self.demote(i);
                    last = Some(error);
                }
            }
        }
        Err(last.unwrap_or_else(|| timed_out(timeout)))
    }

    /// A range read.
    pub(super) async fn get(
        &self,
        key: impl Into<Vec<u8>>,
        opts: Option<GetOptions>,
    ) -> Result<GetResponse, EtcdError> {
        let key = key.into();
        self.call(|c| {
            let (key, opts) = (key.clone(), opts.clone());
            async move { c.kv_client().get(key, opts).await }
        })
        .await
    }

    /// A Txn.
    pub(super) async fn txn(&self, txn: Txn) -> Result<TxnResponse, EtcdError> {
        self.call(|c| {
            let txn = txn.clone();
            async move { c.kv_client().txn(txn).await }
        })
        .await
    }

    /// A lease grant. Repeated after a transport failure it may grant a lease nobody uses, which expires after `ttl`.
    pub(super) async fn grant(&self, ttl: i64) -> Result<LeaseGrantResponse, EtcdError> {
        self.call(|c| async move { c.lease_client().grant(ttl, None).await }).await
    }

    pub(super) async fn revoke(&self, id: i64) -> Result<LeaseRevokeResponse, EtcdError> {
        self.call(|c| async move { c.lease_client().revoke(id).await }).await
    }

    pub(super) async fn time_to_live(&self, id: i64) -> Result<LeaseTimeToLiveResponse, EtcdError> {
        self.call(|c| async move { c.lease_client().time_to_live(id, None).await }).await
    }
}
