//! `car-server`: the shared engine over streamable HTTP MCP.

// Many clients at once allocate from many threads: mimalloc's per-thread heaps spare the
// contention glibc's arenas have under that load (measured with scripts/bench-http.sh).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    car::server::process::main()
}
