//! `car-server`: the shared engine over streamable HTTP MCP.
fn main() -> std::process::ExitCode {
    car::cli::server::main()
}
