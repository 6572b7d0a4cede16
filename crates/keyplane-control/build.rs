//! Generates the gRPC code from proto/keyplane/v1/control.proto (needs
//! `protoc`: Debian's protobuf-compiler; scripts/test.sh installs it).
fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../proto");
    let file = root.join("keyplane/v1/control.proto");
    println!("cargo:rerun-if-changed={}", file.display());
    tonic_prost_build::configure().compile_protos(&[file], &[root])?;
    Ok(())
}
