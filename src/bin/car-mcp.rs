//! `car-mcp`: the stdio MCP server.
fn main() -> std::process::ExitCode {
    car::mcp::process::main()
}
