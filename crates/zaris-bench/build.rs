//! Compiles the part of etcd's v3 gRPC API the comparison bench calls (`proto/etcd`), and the
//! replication floor's own one-call service (`proto/floor`), with the vendored protoc as
//! `zaris-proto` does: a fresh machine needs only Rust.

use std::error::Error;
use std::path::PathBuf;

fn main() -> Result<(), Box<dyn Error>> {
    let protos = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?).join("proto");
    let dir = protos.join("etcd");
    println!("cargo:rerun-if-changed={}", protos.display());
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
    let floor = protos.join("floor");
    let mut config = tonic_prost_build::Config::new();
    config.protoc_executable(protoc_bin_vendored::protoc_bin_path()?);
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_with_config(config, &[floor.join("floor.proto")], &[floor])?;
    Ok(())
}
