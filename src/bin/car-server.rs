//! `car-server`: the shared engine over streamable HTTP MCP. A launcher: it starts the `car` binary beside it under its own name
//! (see `car::multicall`), so CAR and its embedding model are stored once.

fn main() -> std::process::ExitCode {
    car::multicall::launch("car-server")
}
