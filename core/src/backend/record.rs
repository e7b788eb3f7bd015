//! The attempt of a backend whose only trace of an acquire on the server is the holder's record (Redis, the SQL
//! tables, memory): a waiter's subscription is local, so the one thing to undo is a record taken while the attempt
//! was in doubt — or a waiting writer's mark, which a read-write lock leaves on the server so new readers wait
//! ([`Records::left_behind`]).

use std::sync::Arc;

use async_trait::async_trait;
use tokio::time::Instant;

use super::{AcquireRequest, Attempt, Busy, Doubt, Pending, Undo, poll_backoff};
use crate::error::Result;

/// A store of lock records, one per name, each naming its holder.
#[async_trait]
pub(crate) trait Records: Send + Sync + 'static {
    /// What a waiter keeps between attempts (a subscription); `()` for a polling store.
    type Waiter: Default + Send;

    /// One attempt to take the record.
    async fn take(&self, req: &AcquireRequest, waiter: &mut Self::Waiter) -> Result<Attempt>;

    /// Resolves when the lock is probably free, or at `deadline`. The default polls with jittered backoff, bounded
    /// by the holder's remaining TTL; stores with notifications override it.
    async fn wait_free(
        &self,
        req: &AcquireRequest,
        busy: &Busy,
        waiter: &mut Self::Waiter,
        deadline: Option<Instant>,
    ) -> Result<()> {
        let _ = (req, waiter);
        poll_backoff(busy, deadline).await;
        Ok(())
    }

    /// Deletes whatever record `req.holder` may have made for `req.name`, and any waiting writer's mark it left.
    async fn abandon(&self, req: &AcquireRequest) -> Result<()>;

    /// Whether a busy attempt left something on the server that an attempt ending without a grant must delete
    /// (a waiting writer's mark); a grant clears it.
    fn left_behind(waiter: &Self::Waiter) -> bool {
        let _ = waiter;
        false
    }
}

/// One acquire on a record store; dropped in doubt, it deletes the holder's record.
pub(crate) struct RecordAttempt<R: Records> {
    records: Arc<R>,
    req: AcquireRequest,
    waiter: R::Waiter,
    doubt: Doubt,
    undo: Undo,
}

impl<R: Records> RecordAttempt<R> {
    pub(crate) fn begin(records: Arc<R>, req: AcquireRequest, undo: Undo) -> Box<dyn Pending> {
        Box::new(RecordAttempt { records, req, waiter: R::Waiter::default(), doubt: Doubt::default(), undo })
    }
}

#[async_trait]
impl<R: Records> Pending for RecordAttempt<R> {
    async fn try_acquire(&mut self) -> Result<Attempt> {
        self.doubt.clone().settle(self.records.take(&self.req, &mut self.waiter)).await
    }

    async fn wait(&mut self, busy: &Busy, deadline: Option<Instant>) -> Result<()> {
        self.records.wait_free(&self.req, busy, &mut self.waiter, deadline).await
    }
}

impl<R: Records> Drop for RecordAttempt<R> {
    fn drop(&mut self) {
        if !self.doubt.is_set() && !R::left_behind(&self.waiter) {
            return;
        }
        let (records, req) = (self.records.clone(), self.req.clone());
        self.undo.abandon(&self.req.name, async move { records.abandon(&req).await });
    }
}
