//! Compiles the part of etcd's v3 gRPC API the comparison bench calls (`proto/etcd`), with the
//! vendored protoc as `zaris-proto` does: a fresh machine needs only Rust.

use std::error::Error;
use std::path::PathBuf;

fn main() -> Result<(), Box<dyn Error>> {
    let dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?).join("proto/etcd");
    println!("cargo:rerun-if-changed={}", dir.display());
    let mut config = tonic_prost_build::Config::new();
    config.protoc_executable(protoc_bin_vendored::protoc_bin_path()?);
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(false)
        .compile_with_config(
            config,
            &[dir.join("rpc.proto"), dir.join("v3lock.proto")],
            &[dir],
        )?;
    Ok(())
}
