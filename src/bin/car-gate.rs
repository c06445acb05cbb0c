//! `car-gate`: CAR's policy gate alone, for the agent hosts' pre-tool-call hooks (the same
//! answers as `car policy-check-hook`, from a binary a fifth the size of `car`).
//!
//! On Linux with glibc it starts from C's `main` rather than through the standard library's
//! runtime set-up, which reads `/proc/self/maps` (to find the main thread's stack guard) and
//! installs a signal stack: 0.05 ms of a process that every host starts before every tool
//! call. Output is flushed where it is written (`car::console`); a panic aborts, which every
//! host reads as a failed hook, as it does the exit status 101 of a panicking `main`.
#![cfg_attr(all(target_os = "linux", target_env = "gnu"), no_main)]

// GCC's unwinder linked in rather than loaded from libgcc_s.so.1 (see src/bin/car.rs).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[link(name = "gcc_eh", kind = "static", modifiers = "-bundle")]
unsafe extern "C" {}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[no_mangle]
pub extern "C" fn main(
    _argc: std::ffi::c_int,
    _argv: *const *const std::ffi::c_char,
) -> std::ffi::c_int {
    // Without the runtime's set-up SIGPIPE keeps its default: a host that closed the pipe
    // ends the gate, which has nothing left to say to it.
    car::cli::gate_main().into()
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn main() -> std::process::ExitCode {
    car::cli::gate_main().into()
}
