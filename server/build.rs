//! Generates the gRPC code for etcd's lease + v3lock subset and the native service (needs protoc, like etcd-client),
//! and the descriptor set the reflection service serves.

fn main() -> std::io::Result<()> {
    let out = std::path::PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    tonic_prost_build::configure().file_descriptor_set_path(out.join("descriptors.bin")).compile_protos(
        &["proto/etcdserverpb/rpc.proto", "proto/v3lockpb/v3lock.proto", "proto/fencelock/v1/fencelock.proto"],
        &["proto"],
    )
}
