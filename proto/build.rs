//! Compiles the `.proto` files with protox, a protobuf compiler in Rust, so building needs cargo alone: no protoc,
//! no well-known types from libprotobuf-dev, no PROTOC variable. Also writes the descriptor set reflection serves.

use prost::Message;

const PROTOS: [&str; 5] = [
    "etcdserverpb/rpc.proto",
    "mvccpb/kv.proto",
    "v3lockpb/v3lock.proto",
    "v3electionpb/v3election.proto",
    "fencelock/v1/fencelock.proto",
];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto");
    let out = std::path::PathBuf::from(std::env::var_os("OUT_DIR").ok_or("cargo sets OUT_DIR")?);
    let files = protox::compile(PROTOS, ["proto"])?;
    std::fs::write(out.join("descriptors.bin"), files.encode_to_vec())?;
    tonic_prost_build::configure().compile_fds(files)?;
    Ok(())
}
