//! One program, several names: `car-mcp`, `car-server` and `car-memgine-eval` are small
//! launchers that start the `car` binary beside them under their own name, and `car` runs as
//! the program it was started as. The embedding model (22.9 MB) and the rest of CAR are then
//! stored once, in `car`, instead of once per binary.
//!
//! On Unix a launcher replaces itself with `car` (`exec`, with `argv[0]` its own name), so the
//! process a host started is the server itself: same pid, same stdio, same signals. Elsewhere
//! it runs `car` as a child with the same stdio and exits with its status.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::{Command, ExitCode};

/// The names `car` answers to besides its own.
pub const NAMES: &[&str] = &["car-mcp", "car-server", "car-memgine-eval"];

/// The name this process was started as (`argv[0]`'s file name without an extension), when it
/// is one of [`NAMES`].
pub fn invoked_as() -> Option<&'static str> {
    if let Some(name) = std::env::var_os(AS_VAR) {
        // Read once: what this process starts is plain `car` again.
        std::env::remove_var(AS_VAR);
        return NAMES.iter().copied().find(|n| *n == name);
    }
    let arg0 = std::env::args_os().next()?;
    let stem = PathBuf::from(arg0)
        .file_stem()?
        .to_string_lossy()
        .into_owned();
    NAMES.iter().copied().find(|name| *name == stem)
}

/// Starts the `car` binary beside this one as `name`, with this process's arguments.
pub fn launch(name: &str) -> ExitCode {
    let car = match std::env::current_exe() {
        Ok(exe) => exe.with_file_name(format!("car{}", std::env::consts::EXE_SUFFIX)),
        Err(e) => return fail(name, &format!("cannot find its own executable: {e}")),
    };
    if !car.is_file() {
        return fail(
            name,
            &format!(
                "runs the `car` binary beside it, and {} is missing: reinstall CAR (`cargo install --locked --path .` or the installer) so that both are in one directory",
                car.display()
            ),
        );
    }
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    let mut command = Command::new(&car);
    command.args(&args);
    run(name, command, &car)
}

#[cfg(unix)]
fn run(name: &str, mut command: Command, car: &std::path::Path) -> ExitCode {
    use std::os::unix::process::CommandExt;
    let error = command.arg0(name).exec();
    fail(name, &format!("cannot start {}: {error}", car.display()))
}

#[cfg(not(unix))]
fn run(name: &str, mut command: Command, car: &std::path::Path) -> ExitCode {
    // Windows has no exec: `car` runs as a child named `car` (argv[0] cannot be set), so it is
    // told the name it runs as.
    command.env(AS_VAR, name);
    match command.status() {
        Ok(status) => ExitCode::from(status.code().unwrap_or(1).clamp(0, 255) as u8),
        Err(e) => fail(name, &format!("cannot start {}: {e}", car.display())),
    }
}

/// Where `argv[0]` cannot carry the name (Windows), the launcher sets it here.
pub const AS_VAR: &str = "CAR_RUN_AS";

fn fail(name: &str, message: &str) -> ExitCode {
    crate::console::stderr_line(&format!("{name}: {message}"));
    ExitCode::from(2)
}
