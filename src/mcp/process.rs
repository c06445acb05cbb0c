//! The `car-mcp` process (and `car mcp`): CAR opened through the composition root for the
//! project, served as MCP over stdio. It starts from here, not from the command line's face.

use std::path::Path;
use std::process::ExitCode;

use clap::{Args, Parser};

use super::McpServer;
use crate::app::location::Location;
use crate::app::App;
use crate::console;
use crate::home::{self, Home};
use crate::logging::init_logging;
use crate::runtime::{Context, Face};

/// Options of the stdio MCP server.
#[derive(Debug, Args)]
pub struct McpArgs {
    /// Serve over stdio (the default and only transport of this command; accepted for compatibility).
    #[arg(long)]
    pub stdio: bool,
}

/// Serves MCP on stdio for `car mcp` and `car-mcp`.
pub async fn serve(home: &Home, project_root: &Path) -> ExitCode {
    let app = match App::open(home, project_root) {
        Ok(app) => app,
        Err(e) => {
            console::stderr_line(&format!("car-mcp: {e}"));
            return ExitCode::FAILURE;
        }
    };
    if let Some(memory) = app.memory().cloned() {
        // Build the index beside the handshake rather than on the first query.
        tokio::task::spawn_blocking(move || {
            if let Err(e) = memory.warm() {
                tracing::warn!("warming the memory index failed: {e}");
            }
        });
    }
    let context = Context::new(Face::Mcp).grants(home::confirm_grants_from_env());
    match McpServer::new(app).context(context).serve_stdio().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e}");
            ExitCode::FAILURE
        }
    }
}

/// `car-mcp`: the stdio MCP server, configured by CAR_HOME and CAR_CONFIRM.
#[derive(Debug, Parser)]
#[command(
    name = "car-mcp",
    version,
    about = "CAR's MCP server over stdio: memory, skill, plan, policy_check and the six project tools (tasks, progress, decisions, context graph, sessions, admin), plus the enabled tools of remote MCP servers (car connector), behind the policy gate; the car_context prompt and memory and skill resources.",
    after_help = "Point an MCP client at this binary, e.g. Claude Code:\n  claude mcp add car -- car-mcp\nEnvironment: CAR_HOME (data directory), CAR_CONFIRM (comma-separated tools the host confirms), RUST_LOG (stderr log level)."
)]
pub struct McpCli {
    #[command(flatten)]
    pub location: Location,
    #[command(flatten)]
    pub mcp: McpArgs,
}

/// Runs `car-mcp`.
pub fn main() -> ExitCode {
    let cli = McpCli::parse();
    init_logging();
    let (home, project_root) = match cli.location.resolve() {
        Ok(location) => location,
        Err(e) => {
            console::stderr_line(&format!("car-mcp: {}", e.message));
            return ExitCode::from(e.exit);
        }
    };
    match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt.block_on(serve(&home, &project_root)),
        Err(e) => {
            console::stderr_line(&format!("car-mcp: cannot start the async runtime: {e}"));
            ExitCode::FAILURE
        }
    }
}
