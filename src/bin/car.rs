//! `car`: the command line, and the program behind `car-mcp`, `car-server` and
//! `car-memgine-eval`, which start it under their own names (see `car::multicall`).

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

// car-server's many clients allocate from many threads at once: mimalloc's per-thread heaps
// spare the contention glibc's arenas have under that load (measured with
// scripts/bench-http.sh).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The servers take no transparent huge pages. mimalloc asks for them, gives memory back to the
/// kernel 10 ms after it is freed, and each 2 MiB page touched again was zeroed whole (`perf` on
/// a team write storm: 13% of car-server's time in `clear_page_erms`; writes/s 3,001–3,252
/// against 4,016–4,212 without, three storms each, docs/benchmarks.md). Only the servers: a
/// short-lived command such as the policy hook touches fewer pages with them (page faults 231
/// without, 165–170 with). Processes the servers start inherit the setting.
fn no_huge_pages() {
    #[cfg(target_os = "linux")]
    // SAFETY: PR_SET_THP_DISABLE takes plain integers and sets a flag of this process only.
    unsafe {
        libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
    }
}

fn main() -> std::process::ExitCode {
    match car::multicall::invoked_as() {
        Some("car-mcp") => {
            no_huge_pages();
            car::mcp::process::main()
        }
        Some("car-server") => {
            no_huge_pages();
            car::server::process::main()
        }
        Some("car-memgine-eval") => car::eval::cli::main(),
        _ => car::cli::main(),
    }
}
