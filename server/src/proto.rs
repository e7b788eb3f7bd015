//! The generated gRPC code: etcd's lease + v3lock subset and fencelockd's native service.

/// etcd's `etcdserverpb` package (the Lease service and the response header).
#[allow(missing_docs, clippy::all, missing_debug_implementations)]
pub mod etcdserverpb {
    tonic::include_proto!("etcdserverpb");
}

/// etcd's `v3lockpb` package (the Lock service).
#[allow(missing_docs, clippy::all, missing_debug_implementations)]
pub mod v3lockpb {
    tonic::include_proto!("v3lockpb");
}

/// fencelockd's native `fencelock.v1` package.
#[allow(missing_docs, clippy::all, missing_debug_implementations)]
pub mod fencelock_v1 {
    tonic::include_proto!("fencelock.v1");
}

/// The encoded descriptors of every file above, served by the reflection service.
pub const DESCRIPTORS: &[u8] = tonic::include_file_descriptor_set!("descriptors");
