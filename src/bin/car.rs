//! `car`: the command line.

// mimalloc: the hooks build the memory index from its snapshot (hundreds of thousands of small
// strings) in a fresh process, where it allocates and frees about twice as fast as glibc's.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    car::cli::main()
}
