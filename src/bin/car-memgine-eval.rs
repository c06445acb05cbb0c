//! `car-memgine-eval`: the StateBench memory evaluation. A launcher: it starts the `car` binary beside it under its own name
//! (see `car::multicall`), so CAR and its embedding model are stored once.

fn main() -> std::process::ExitCode {
    car::multicall::launch("car-memgine-eval")
}
