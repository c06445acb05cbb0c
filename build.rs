//! Link options for the binaries. `car policy-check-hook` is a new process before every tool
//! call of Claude Code, so start-up matters: on Linux with glibc the binaries use packed relative
//! relocations (DT_RELR, glibc ≥ 2.36, binutils ≥ 2.38), which shrink the dynamic relocation
//! table from ~500 KB to a few KB that the loader reads and applies at every start.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let env = std::env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    if os == "linux" && env == "gnu" {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
}
