//! Link options for the binaries. `car policy-check-hook` is a new process before every tool
//! call of Claude Code, so start-up matters: on Linux with glibc the binaries use packed relative
//! relocations (DT_RELR, glibc ≥ 2.36, binutils ≥ 2.38), which shrink the dynamic relocation
//! table from ~500 KB to a few KB that the loader reads and applies at every start.
//!
//! `CAR_PACKED_RELOCS=0` turns that off, for binaries that must run on an older glibc: the release
//! archives are built that way on Ubuntu 22.04 (see DISTRIBUTION.md), so they need glibc ≥ 2.35.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=CAR_PACKED_RELOCS");
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let env = std::env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    let packed = std::env::var("CAR_PACKED_RELOCS").as_deref() != Ok("0");
    if os == "linux" && env == "gnu" && packed {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
}
