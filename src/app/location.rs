//! Where CAR's data and the project are: the `--home` and `--project` flags every CAR process
//! takes (`car`, `car-mcp`, `car-server`), and what they resolve to.

use std::path::PathBuf;

use clap::Args;

use crate::home::{self, Home};

/// Where CAR's data and the project are.
#[derive(Debug, Args)]
pub struct Location {
    /// CAR's data directory (absolute path). Default: ~/.car.
    #[arg(long, global = true, env = home::env::CAR_HOME, hide_env_values = true, value_name = "DIR")]
    pub home: Option<PathBuf>,
    /// The project directory (default: the nearest ancestor with .car/, else the git root, else the current directory; `--project` alone means that default, and `car setup` then configures the project instead of the user).
    #[arg(long, global = true, env = home::env::CAR_PROJECT_DIR, hide_env_values = true, value_name = "DIR", num_args = 0..=1, default_missing_value = "", value_parser = any_path)]
    pub project: Option<PathBuf>,
}

/// A path as given, the empty one included (`--project` alone: the default project).
fn any_path(text: &str) -> Result<PathBuf, std::convert::Infallible> {
    Ok(PathBuf::from(text))
}

/// Why a location could not be resolved: the message, and the exit code (2: a bad flag).
#[derive(Debug)]
pub struct LocationError {
    pub code: &'static str,
    pub message: String,
    pub exit: u8,
}

impl Location {
    /// CAR_HOME and the project root: `--project` when given, else the project around the
    /// current directory (the nearest ancestor with .car/, else the git root, else it).
    pub fn resolve(&self) -> Result<(Home, PathBuf), LocationError> {
        let usage = |message: String| LocationError {
            code: "usage",
            message,
            exit: 2,
        };
        let home = Home::resolve(self.home.as_deref()).map_err(|e| usage(e.to_string()))?;
        let project_root = match &self.project {
            Some(dir) if !dir.as_os_str().is_empty() => std::path::absolute(dir)
                .map_err(|e| usage(format!("bad --project {}: {e}", dir.display())))?,
            Some(_) | None => {
                let cwd = std::env::current_dir().map_err(|e| LocationError {
                    code: "io",
                    message: format!("cannot read the current directory: {e}"),
                    exit: 1,
                })?;
                home::project_root(&cwd)
            }
        };
        Ok((home, project_root))
    }
}
