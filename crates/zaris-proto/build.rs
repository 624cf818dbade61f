//! Compiles `proto/zaris/v1/*.proto` (at the workspace root) into Rust with prost + tonic.
//!
//! protoc comes from the `protoc-bin-vendored` crate: a fresh machine needs only Rust, and neither
//! a system protoc nor the `PROTOC` environment variable is ever consulted.

use std::error::Error;
use std::path::{Path, PathBuf};

/// Where the descriptor set (with source info, so comments included) is written in `OUT_DIR`.
const DESCRIPTOR_SET_FILE: &str = "zaris_v1_descriptor.bin";

fn main() -> Result<(), Box<dyn Error>> {
    let manifest_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?);
    let proto_root = manifest_dir.join("../../proto").canonicalize()?;
    let package_dir = proto_root.join("zaris/v1");
    let protos = proto_files(&package_dir)?;
    if protos.is_empty() {
        return Err(format!("no .proto files in {}", package_dir.display()).into());
    }
    // A file added to or removed from the package must trigger a rebuild too, not only edits.
    println!("cargo:rerun-if-changed={}", package_dir.display());

    let out_dir = PathBuf::from(std::env::var("OUT_DIR")?);
    let mut config = tonic_prost_build::Config::new();
    config.protoc_executable(protoc_bin_vendored::protoc_bin_path()?);

    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .file_descriptor_set_path(out_dir.join(DESCRIPTOR_SET_FILE))
        .compile_with_config(config, &protos, &[proto_root])?;
    Ok(())
}

/// The package's `.proto` files, sorted so the generated code does not depend on directory order.
fn proto_files(dir: &Path) -> Result<Vec<PathBuf>, Box<dyn Error>> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.extension().is_some_and(|ext| ext == "proto") {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}
