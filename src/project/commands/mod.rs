//! The project's commands as a command line: the argument types (clap) and what each command
//! does, typed. The `car` CLI parses them as its own subcommands and renders the outcome for a
//! person; the six project tools (`super::tools`) parse a call's `{action, args}` with the same
//! definitions and answer with the same outcome in the JSON envelope. One definition per
//! argument, one default, one place the work is done.

pub mod admin;
pub mod graph;
pub mod journal;
pub mod session;
pub mod task;

/// Reads a file, or stdin when the path is `-` (`task import`).
pub(crate) fn read_input(path: &std::path::Path) -> Result<String, super::ProjectError> {
    let read = if path.as_os_str() == "-" {
        std::io::read_to_string(std::io::stdin())
    } else {
        std::fs::read_to_string(path)
    };
    read.map_err(|e| {
        if path.as_os_str() == "-" {
            super::ProjectError::Io {
                path: "stdin".into(),
                message: format!("cannot read it: {e}"),
            }
        } else {
            super::ProjectError::Invalid(format!("cannot read {}: {e}", path.display()))
        }
    })
}
