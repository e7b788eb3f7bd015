//! The gRPC code fencelock's etcd backend, its tests and fencelockd share, generated at build time from `proto/`
//! (see build.rs): etcd's KV, Watch, Lease and Authenticate calls, etcd's v3lock and v3election services, and fencelockd's native
//! service. One copy, so the backend and the server cannot drift apart on etcd's wire format.

/// etcd's `etcdserverpb` package: KV, Watch, Lease, Auth and the response header.
#[allow(missing_docs, clippy::all, missing_debug_implementations)]
pub mod etcdserverpb {
    tonic::include_proto!("etcdserverpb");
}

/// etcd's `mvccpb` package: stored keys and watch events.
#[allow(missing_docs, clippy::all, missing_debug_implementations)]
pub mod mvccpb {
    tonic::include_proto!("mvccpb");
}

/// etcd's `v3lockpb` package (the Lock service).
#[allow(missing_docs, clippy::all, missing_debug_implementations)]
pub mod v3lockpb {
    tonic::include_proto!("v3lockpb");
}

/// etcd's `v3electionpb` package (the Election service).
#[allow(missing_docs, clippy::all, missing_debug_implementations)]
pub mod v3electionpb {
    tonic::include_proto!("v3electionpb");
}

/// fencelockd's native `fencelock.v1` package.
#[allow(missing_docs, clippy::all, missing_debug_implementations)]
pub mod fencelock_v1 {
    tonic::include_proto!("fencelock.v1");
}

/// The encoded descriptors of every file above, for a reflection service.
pub const DESCRIPTORS: &[u8] = tonic::include_file_descriptor_set!("descriptors");

/// An etcd connection: a channel, and the auth token its requests carry when the server has authentication on.
#[derive(Debug, Clone)]
pub struct EtcdConn {
    pub channel: tonic::transport::Channel,
    pub token: Option<tonic::metadata::AsciiMetadataValue>,
}

impl EtcdConn {
    /// `channel` without a token.
    pub fn new(channel: tonic::transport::Channel) -> Self {
        EtcdConn { channel, token: None }
    }

    /// `channel` with a token for `name`, from etcd's Authenticate call.
    pub async fn authenticate(
        channel: tonic::transport::Channel,
        name: &str,
        password: &str,
    ) -> Result<Self, tonic::Status> {
        let request = etcdserverpb::AuthenticateRequest { name: name.into(), password: password.into() };
        let reply = etcdserverpb::auth_client::AuthClient::new(channel.clone()).authenticate(request).await?;
        let token = tonic::metadata::AsciiMetadataValue::try_from(reply.into_inner().token)
            .map_err(|_| tonic::Status::internal("etcd sent an auth token that is not ASCII"))?;
        Ok(EtcdConn { channel, token: Some(token) })
    }

    /// `msg` as a request carrying the token (etcd reads it from the `token` metadata).
    pub fn req<T>(&self, msg: T) -> tonic::Request<T> {
        let mut request = tonic::Request::new(msg);
        if let Some(token) = &self.token {
            request.metadata_mut().insert("token", token.clone());
        }
        request
    }

    pub fn kv(&self) -> etcdserverpb::kv_client::KvClient<tonic::transport::Channel> {
        etcdserverpb::kv_client::KvClient::new(self.channel.clone())
    }

    pub fn lease(&self) -> etcdserverpb::lease_client::LeaseClient<tonic::transport::Channel> {
        etcdserverpb::lease_client::LeaseClient::new(self.channel.clone())
    }

    pub fn watch(&self) -> etcdserverpb::watch_client::WatchClient<tonic::transport::Channel> {
        etcdserverpb::watch_client::WatchClient::new(self.channel.clone())
    }
}

/// The end of the range of every key that starts with `prefix` (etcd's "prefix" option): the prefix with its last
/// byte below 0xff raised by one, or `\0` (every key from `prefix` on) when there is no such byte.
pub fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0]
}

#[cfg(test)]
mod tests {
    use super::prefix_end;

    #[test]
    fn prefix_end_raises_the_last_byte_that_can_rise() {
        assert_eq!(prefix_end(b"a/"), b"a0");
        assert_eq!(prefix_end(b"a\xff"), b"b");
        assert_eq!(prefix_end(b"\xff\xff"), b"\0");
        assert_eq!(prefix_end(b""), b"\0");
    }
}
