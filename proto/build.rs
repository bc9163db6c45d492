//! Compiles the schema with protox (pure Rust), so no `protoc` is needed.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto = "boltwatch/v1/telemetry.proto";
    println!("cargo:rerun-if-changed={proto}");
    let fds = protox::compile([proto], ["."])?;
    tonic_prost_build::configure().compile_fds(fds)?;
    Ok(())
}
