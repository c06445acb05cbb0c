//! Link options for the binaries. `car policy-check-hook` is a new process before every tool
//! call of Claude Code, so start-up matters: on Linux with glibc the binaries use packed relative
//! relocations (DT_RELR, glibc ≥ 2.36, binutils ≥ 2.38), which shrink the dynamic relocation
//! table from ~500 KB to a few KB that the loader reads and applies at every start.
//!
//! `car` itself is not position-independent (see below).
//!
//! `CAR_PACKED_RELOCS=0` turns that off, for binaries that must run on an older glibc: the release
//! archives are built that way on Ubuntu 22.04 (see DISTRIBUTION.md), so they need glibc ≥ 2.35.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=CAR_PACKED_RELOCS");
    println!("cargo:rerun-if-env-changed=CAR_PIE");
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let env = std::env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    let packed = std::env::var("CAR_PACKED_RELOCS").as_deref() != Ok("0");
    if os == "linux" && env == "gnu" && packed {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
    // `car` (the hook's binary) is linked at a fixed address: a position-independent executable
    // makes the loader apply every relative relocation and touch every page of .data.rel.ro
    // (~170 pages) at each start, about a third of the hook's cost. The long-running servers
    // stay position-independent. `CAR_PIE=1` keeps `car` position-independent too.
    if os == "linux" && env == "gnu" && std::env::var("CAR_PIE").as_deref() != Ok("1") {
        println!("cargo:rustc-link-arg-bin=car=-no-pie");
        println!("cargo:rustc-link-arg-bin=car-gate=-no-pie");
    }
}
