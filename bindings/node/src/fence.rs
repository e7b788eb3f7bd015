//! `Fence` for JS: `write(token, value)` / `read()` on a register that rejects stale tokens.

use std::fmt;

use fencelock::Fence;
use napi::bindgen_prelude::{BigInt, Buffer, Env, PromiseRaw, Result};
use napi_derive::napi;

use crate::error::invalid;
use crate::runtime::spawn_promise;

/// The highest accepted token and its value.
#[napi(object)]
pub struct FenceValue {
    pub token: BigInt,
    pub value: Buffer,
}

impl fmt::Debug for FenceValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FenceValue").field("token", &self.token).field("len", &self.value.len()).finish()
    }
}

/// A fenced register named by a resource.
#[napi]
pub struct NativeFence {
    fence: Fence,
}

impl fmt::Debug for NativeFence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NativeFence").field("resource", &self.fence.resource()).finish()
    }
}

impl NativeFence {
    pub(crate) fn new(fence: Fence) -> Self {
        NativeFence { fence }
    }
}

#[napi]
impl NativeFence {
    #[napi(getter)]
    pub fn resource(&self) -> String {
        self.fence.resource().to_string()
    }

    /// Stores `value` if `token` (a decimal string: the wrapper passes the bigint losslessly) is at least the highest
    /// token accepted so far; `FENCED` if older.
    #[napi]
    pub fn write<'env>(&self, env: &'env Env, token: String, value: Buffer) -> Result<PromiseRaw<'env, ()>> {
        let token: u64 =
            token.parse().map_err(|_| invalid(format!("token must be an integer in 0..2^64, got {token}")))?;
        let (fence, value) = (self.fence.clone(), value.to_vec());
        spawn_promise(env, async move { fence.write(token, &value).await })
    }

    #[napi]
    pub fn read<'env>(&self, env: &'env Env) -> Result<PromiseRaw<'env, FenceValue>> {
        let fence = self.fence.clone();
        spawn_promise(env, async move {
            let (token, value) = fence.read().await?;
            Ok(FenceValue { token: BigInt::from(token), value: value.into() })
        })
    }
}
