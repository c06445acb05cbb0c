//! `car`: the command line.

// GCC's unwinder linked into `car` itself rather than loaded from libgcc_s.so.1: `car
// policy-check-hook` is a new process before every tool call of every host, and loading libgcc_s
// costs a library mapping, its symbol lookups and its start-up constructor, which runs a dozen
// `cpuid` instructions (each a trap to the hypervisor on a virtual machine). Placed here, the
// archive comes first on the link line, so the standard library's unwinding symbols resolve to it
// and the linker (`--as-needed`) drops libgcc_s. The same as `-static-libgcc`, under GCC's runtime
// library exception. Measured in docs/benchmarks.md (the hook floor).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[link(name = "gcc_eh", kind = "static", modifiers = "-bundle")]
unsafe extern "C" {}

fn main() -> std::process::ExitCode {
    car::cli::main()
}
