//! `car`: the command line.
fn main() -> std::process::ExitCode {
    car::cli::main()
}
