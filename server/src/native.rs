//! fencelockd's native `fencelock.v1.Locks` service: try-lock, renew with a new TTL, fenced writes, lost stream.

use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use fencelock::{DEFAULT_TTL, ErrorKind};
use tokio_stream::Stream;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};

use crate::identity::Identity;
use crate::proto::fencelock_v1::locks_server::Locks;
use crate::proto::fencelock_v1::{
    FencedReadRequest, FencedReadResponse, FencedWriteRequest, FencedWriteResponse, LockRequest, LockResponse,
    LostEvent, ReleaseRequest, ReleaseResponse, RenewRequest, RenewResponse, StatsRequest, StatsResponse,
    WatchLostRequest,
};
use crate::registry::{NativeLease, Registry};
use crate::status::{before_deadline, caller_deadline, from_error, status};

/// The `fencelock.v1.Locks` service.
#[derive(Debug, Clone)]
pub struct NativeLocks(pub Arc<Registry>);

fn ms(ms: u64) -> Option<Duration> {
    (ms > 0).then(|| Duration::from_millis(ms))
}

fn granted(native: &NativeLease) -> LockResponse {
    let ttl_ms = native.lease.remaining().as_millis() as u64;
    LockResponse { acquired: true, lease_id: native.id, fence: native.lease.fence(), ttl_ms }
}

impl NativeLocks {
    async fn acquire(&self, req: Request<LockRequest>, once: bool) -> Result<LockResponse, Status> {
        let caller = Identity::of(&req)?;
        let deadline = caller_deadline(req.metadata());
        let req = req.into_inner();
        let ttl = ms(req.ttl_ms).unwrap_or(DEFAULT_TTL);
        let timeout = if once { None } else { ms(req.timeout_ms) };
        Ok(match before_deadline(deadline, self.0.lock_native(&req.name, ttl, timeout, once, caller)).await? {
            Some(native) => granted(&native),
            None => LockResponse::default(),
        })
    }
}

#[tonic::async_trait]
impl Locks for NativeLocks {
    async fn lock(&self, req: Request<LockRequest>) -> Result<Response<LockResponse>, Status> {
        self.acquire(req, false).await.map(Response::new)
    }

    async fn try_lock(&self, req: Request<LockRequest>) -> Result<Response<LockResponse>, Status> {
        self.acquire(req, true).await.map(Response::new)
    }

    async fn renew(&self, req: Request<RenewRequest>) -> Result<Response<RenewResponse>, Status> {
        let caller = Identity::of(&req)?;
        let req = req.into_inner();
        let native = self.0.native(req.lease_id, &caller)?;
        native.lease.renew(ms(req.ttl_ms)).await.map_err(from_error)?;
        Ok(Response::new(RenewResponse { remaining_ms: native.lease.remaining().as_millis() as u64 }))
    }

    async fn release(&self, req: Request<ReleaseRequest>) -> Result<Response<ReleaseResponse>, Status> {
        let caller = Identity::of(&req)?;
        self.0.release_native(req.into_inner().lease_id, &caller).await?;
        Ok(Response::new(ReleaseResponse {}))
    }

    async fn fenced_write(&self, req: Request<FencedWriteRequest>) -> Result<Response<FencedWriteResponse>, Status> {
        let caller = Identity::of(&req)?;
        let req = req.into_inner();
        let fence = self.0.client().fence(&req.resource);
        if let Err(refused) = self.0.check_fence(&req.resource, req.token, &caller) {
            // Nobody is granted a token on a name the core refuses: say what is wrong with the name instead (the
            // core's read checks it first).
            return Err(match fence.read().await {
                Err(e) if e.kind() == ErrorKind::InvalidArgument => from_error(e),
                _ => refused,
            });
        }
        fence.write(req.token, &req.value).await.map_err(from_error)?;
        Ok(Response::new(FencedWriteResponse {}))
    }

    async fn fenced_read(&self, req: Request<FencedReadRequest>) -> Result<Response<FencedReadResponse>, Status> {
        let (token, value) = self.0.client().fence(&req.into_inner().resource).read().await.map_err(from_error)?;
        Ok(Response::new(FencedReadResponse { token, value }))
    }

    async fn stats(&self, _req: Request<StatsRequest>) -> Result<Response<StatsResponse>, Status> {
        Ok(Response::new(StatsResponse {
            leases: self.0.leases() as u64,
            waiting_locks: self.0.waiting_locks() as u64,
        }))
    }

    type WatchLostStream = Pin<Box<dyn Stream<Item = Result<LostEvent, Status>> + Send>>;

    async fn watch_lost(&self, req: Request<WatchLostRequest>) -> Result<Response<Self::WatchLostStream>, Status> {
        let caller = Identity::of(&req)?;
        let native = self.0.native(req.into_inner().lease_id, &caller)?;
        let (tx, rx) = tokio::sync::mpsc::channel(1);
        let (lost, gone, shutdown) = (native.lease.lost(), native.gone(), self.0.shutting_down());
        tokio::spawn(async move {
            tokio::select! {
                biased;
                fencelock::LeaseEnd::Lost(_) = lost => {
                    let event = LostEvent { lease_id: native.id, name: native.lease.name().to_string(), fence: native.lease.fence() };
                    let _ = tx.send(Ok(event)).await;
                }
                _ = gone => {}
                _ = shutdown => { let _ = tx.send(Err(status(ErrorKind::Unavailable, "fencelockd is shutting down"))).await; }
                _ = tx.closed() => {}
            }
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }
}
