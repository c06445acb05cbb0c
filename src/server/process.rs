//! The `car-server` process: the shared engine over streamable HTTP MCP (see `crate::server`),
//! opened through the composition root. It starts from here, not from the command line's face.

use std::net::SocketAddr;
use std::process::ExitCode;

use clap::Parser;

use crate::app::location::Location;
use crate::app::App;
use crate::console;
use crate::home::{self, Home};
use crate::logging::init_logging_to;
use crate::runtime::{Context, Face};
use crate::server::lifecycle::{DaemonDir, DaemonLock, DaemonState};
use crate::server::{self as server, Exposure, ServeOptions};

/// `car-server`: CAR's shared engine over HTTP.
#[derive(Debug, Parser)]
#[command(
    name = "car-server",
    version,
    about = "CAR's shared engine over streamable HTTP MCP: the same tools, prompt and resources as car-mcp, one live engine for every client (editors, agents, scripts).",
    after_help = "Point an MCP client at it, e.g. Claude Code:\n  claude mcp add --transport http car http://127.0.0.1:9102/mcp\nHealth: curl http://127.0.0.1:9102/health\nOnly loopback clients are served unless --allow-remote, and then every request needs\n`Authorization: Bearer <token>` with the token in $CAR_HOME/daemon/token (made at first start, mode 0600).\nEnvironment: CAR_HOME, CAR_MCP_BIND, CAR_CONFIRM (tools the host confirms), RUST_LOG."
)]
pub struct ServerCli {
    #[command(flatten)]
    pub location: Location,
    /// Where MCP listens (host:port), or `disabled` to serve only the WebSocket.
    #[arg(long, env = home::env::CAR_MCP_BIND, default_value = server::DEFAULT_MCP_BIND,
          value_name = "HOST:PORT|disabled", value_parser = McpBind::parse)]
    pub mcp_bind: McpBind,
    /// Serve clients beyond loopback (every request must then carry the bearer token).
    #[arg(long)]
    pub allow_remote: bool,
    /// The WebSocket port (plan execution with the client's own tools), on the MCP host; 0
    /// picks a free one.
    #[arg(long, env = home::env::CAR_WS_PORT, default_value_t = 9100, value_name = "PORT")]
    pub port: u16,
    /// Log to this file instead of stderr, rotated while running: past --log-max-bytes it moves
    /// to FILE.1 (one generation kept). `car daemon start` logs to $CAR_HOME/daemon/car-server.log.
    #[arg(long, value_name = "FILE")]
    pub log_file: Option<std::path::PathBuf>,
    /// The size at which --log-file rotates.
    #[arg(long, default_value_t = crate::server::logfile::DEFAULT_LIMIT, value_name = "BYTES")]
    pub log_max_bytes: u64,
    /// Serve a team from its PostgreSQL database (postgres://USER:PASSWORD@HOST:5432/DATABASE)
    /// instead of this machine's CAR: every project of the team at /mcp/<project>, each request
    /// with a user's token from `car team user add`. Start as many instances on one database
    /// as you like. No WebSocket and no dashboard in this mode.
    #[arg(
        long,
        env = "CAR_DATABASE_URL",
        hide_env_values = true,
        value_name = "URL"
    )]
    pub database: Option<String>,
}

/// What the daemon's state file says for `mcp_url` when MCP is off.
pub const MCP_DISABLED: &str = "disabled";

/// Where car-server's MCP listens, if it does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum McpBind {
    At(SocketAddr),
    /// No MCP endpoint: the WebSocket alone (`--mcp-bind disabled`, `CAR_MCP_BIND=disabled`).
    Disabled,
}

impl McpBind {
    fn parse(text: &str) -> Result<McpBind, String> {
        if text.trim().eq_ignore_ascii_case("disabled") {
            return Ok(McpBind::Disabled);
        }
        text.trim()
            .parse()
            .map(McpBind::At)
            .map_err(|e| format!("{e}: give HOST:PORT (127.0.0.1:9102) or disabled"))
    }
}

/// Where car-server's own lines go: its log file when it has one, stderr otherwise.
#[derive(Clone)]
struct Say(Option<std::sync::Arc<crate::server::logfile::RotatingLog>>);

impl Say {
    fn line(&self, text: &str) {
        match &self.0 {
            Some(log) => {
                let stamp = crate::store::now();
                if log.record(format!("{stamp} {text}\n").as_bytes()).is_err() {
                    console::stderr_line(text);
                }
            }
            None => console::stderr_line(text),
        }
    }
}

/// The daemon's bearer token: read from `$CAR_HOME/daemon/token`, made (two random UUIDs, hex,
/// mode 0600) when it does not exist.
pub fn token(home: &Home) -> std::io::Result<String> {
    let path = DaemonDir::new(home.root()).token();
    if let Ok(text) = std::fs::read_to_string(&path) {
        if !text.trim().is_empty() {
            return Ok(text.trim().to_string());
        }
    }
    let made =
        uuid::Uuid::new_v4().simple().to_string() + &uuid::Uuid::new_v4().simple().to_string();
    // Of two processes making it at once, one wins; both then read the winner's.
    home::create_private(&path, made.as_bytes())?;
    Ok(std::fs::read_to_string(&path)?.trim().to_string())
}

/// Runs `car-server`.
pub fn main() -> ExitCode {
    let cli = ServerCli::parse();
    let log = match &cli.log_file {
        Some(path) => match crate::server::logfile::RotatingLog::open(path, cli.log_max_bytes) {
            Ok(log) => Some(log),
            Err(e) => {
                console::stderr_line(&format!(
                    "car-server: cannot open the log {}: {e}",
                    path.display()
                ));
                return ExitCode::FAILURE;
            }
        },
        None => None,
    };
    init_logging_to(log.clone().map(crate::server::logfile::LogWriter));
    let say = Say(log.clone());
    if let Some(log) = log {
        // A panic is written to the log like everything else, not to a stderr no one reads.
        std::panic::set_hook(Box::new(move |info| {
            let _ = log
                .record(format!("{} car-server: panic: {info}\n", crate::store::now()).as_bytes());
        }));
    }
    if let Some(url) = cli.database.clone() {
        return team_main(&cli, &url, &say);
    }
    let (home, project_root) = match cli.location.resolve() {
        Ok(location) => location,
        Err(e) => {
            say.line(&format!("car-server: {}", e.message));
            return ExitCode::from(e.exit);
        }
    };
    // The WebSocket listens on MCP's host; without MCP, on loopback (every interface with
    // --allow-remote).
    let (mcp_bind, ws_host) = match cli.mcp_bind {
        McpBind::At(addr) => (Some(addr), addr.ip()),
        McpBind::Disabled if cli.allow_remote => (None, std::net::Ipv4Addr::UNSPECIFIED.into()),
        McpBind::Disabled => (None, std::net::Ipv4Addr::LOCALHOST.into()),
    };
    if let Some(addr) = mcp_bind {
        if !addr.ip().is_loopback() && !cli.allow_remote {
            say.line(&format!(
                "car-server: {}",
                server::ServerError::NotLoopback(addr)
            ));
            return ExitCode::from(2);
        }
    }
    // The token admits WebSocket sessions always, and HTTP requests beyond loopback.
    let secret = match token(&home) {
        Ok(token) => token,
        Err(e) => {
            say.line(&format!(
                "car-server: cannot read or make the token under {}: {e}",
                home.root().display()
            ));
            return ExitCode::FAILURE;
        }
    };
    let exposure = if cli.allow_remote {
        Exposure::Remote {
            token: secret.clone(),
        }
    } else {
        Exposure::Loopback
    };
    let Some(runtime) = async_runtime(&say) else {
        return ExitCode::FAILURE;
    };
    let lock = match DaemonLock::acquire(&DaemonDir::new(home.root())) {
        Ok(lock) => lock,
        Err(e) => {
            say.line(&format!("car-server: {e}"));
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async move {
        // `car do` on the daemon: assistant_start, assistant_poll, assistant_cancel.
        let runs = crate::app::launch::daemon_runs(&home, &project_root);
        let app = match App::open_with(&home, &project_root, runs.tools()) {
            Ok(app) => app,
            Err(e) => {
                say.line(&format!("car-server: {e}"));
                return ExitCode::FAILURE;
            }
        };
        if let Some(memory) = app.memory().cloned() {
            tokio::task::spawn_blocking(move || {
                if let Err(e) = memory.warm() {
                    tracing::warn!("warming the memory index failed: {e}");
                }
            });
        }
        let shutdown = cancel_on_signal();
        let options = ServeOptions {
            mcp_bind: mcp_bind.unwrap_or_else(|| SocketAddr::new(ws_host, 0)),
            exposure,
            context: Context::new(Face::Mcp).grants(home::confirm_grants_from_env()),
            shutdown,
            car_home: Some(home.root().to_path_buf()),
        };
        let listener = match mcp_bind {
            Some(_) => match server::bind(&options).await {
                Ok(listener) => Some(listener),
                Err(e) => {
                    say.line(&format!("car-server: {e}"));
                    return ExitCode::FAILURE;
                }
            },
            None => None,
        };
        let ws_addr = SocketAddr::new(ws_host, cli.port);
        let ws_listener = match tokio::net::TcpListener::bind(ws_addr).await {
            Ok(listener) => listener,
            Err(e) => {
                say.line(&format!("car-server: cannot listen on {ws_addr} for WebSocket clients: {e}; choose another port with --port"
                ));
                return ExitCode::FAILURE;
            }
        };
        let ws_url = format!("ws://{}/", ws_listener.local_addr().map_or(ws_addr, |a| a));
        // The one line a supervisor (or a test that asked for port 0) reads to find it.
        let mcp_url = match &listener {
            Some(listener) => format!(
                "http://{}/mcp",
                listener.local_addr().map_or(options.mcp_bind, |a| a)
            ),
            None => MCP_DISABLED.to_string(),
        };
        let state = DaemonState {
            pid: std::process::id(),
            mcp_url,
            ws_url: ws_url.clone(),
            started_at: crate::store::now(),
            version: env!("CARGO_PKG_VERSION").to_string(),
        };
        if let Err(e) = lock.publish(&state) {
            tracing::warn!("cannot write the daemon's state file: {e}");
        }
        if listener.is_some() {
            say.line(&format!("car-server: MCP at {}", state.mcp_url));
        } else {
            say.line("car-server: MCP disabled (--mcp-bind disabled); the WebSocket only");
        }
        say.line(&format!("car-server: WebSocket at {ws_url}"));
        let ws_state = server::ws::WsState {
            app: app.clone(),
            token: std::sync::Arc::from(secret.as_str()),
            context: options.context.clone(),
            project: project_root.clone(),
        };
        let exposure = options.exposure.clone();
        let ws = server::serve_ws_on(ws_state, ws_listener, &exposure, options.shutdown.clone());
        let mcp = async move {
            match listener {
                Some(listener) => server::serve_on(app, listener, options).await,
                None => Ok(()),
            }
        };
        let (served, ws_served) = tokio::join!(mcp, ws);
        let served = served.and(ws_served);
        drop(lock);
        match served {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                say.line(&format!("car-server: {e}"));
                ExitCode::FAILURE
            }
        }
    })
}

/// `car-server --database`: a team's server, holding no state of its own (no home, no lock,
/// no WebSocket), so any number run on one database.
fn team_main(cli: &ServerCli, url: &str, say: &Say) -> ExitCode {
    let McpBind::At(addr) = cli.mcp_bind else {
        say.line("car-server: --database serves MCP only; give --mcp-bind HOST:PORT");
        return ExitCode::from(2);
    };
    if !addr.ip().is_loopback() && !cli.allow_remote {
        say.line(&format!(
            "car-server: {}",
            server::ServerError::NotLoopback(addr)
        ));
        return ExitCode::from(2);
    }
    let exposure = if cli.allow_remote {
        // Every request carries a user's token; the server's own token plays no part.
        Exposure::Remote {
            token: String::new(),
        }
    } else {
        Exposure::Loopback
    };
    let Some(runtime) = async_runtime(say) else {
        return ExitCode::FAILURE;
    };
    runtime.block_on(async move {
        let db = match crate::team::TeamDb::connect(url).await {
            Ok(db) => db,
            Err(e) => {
                say.line(&format!("car-server: {e}"));
                return ExitCode::FAILURE;
            }
        };
        let shutdown = cancel_on_signal();
        let listener = match tokio::net::TcpListener::bind(addr).await {
            Ok(listener) => listener,
            Err(source) => {
                say.line(&format!(
                    "car-server: {}",
                    server::ServerError::Bind { addr, source }
                ));
                return ExitCode::FAILURE;
            }
        };
        let bound = listener.local_addr().unwrap_or(addr);
        say.line(&format!(
            "car-server: MCP at http://{bound}/mcp (team: /mcp/<project>)"
        ));
        let team = server::team::TeamServer::new(db, shutdown.clone());
        let router = server::team::router(team, &exposure);
        match server::serve_router(listener, router, shutdown).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                say.line(&format!("car-server: {e}"));
                ExitCode::FAILURE
            }
        }
    })
}

/// The server's async runtime, or `None` (said) when it cannot start.
fn async_runtime(say: &Say) -> Option<tokio::runtime::Runtime> {
    match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => Some(rt),
        Err(e) => {
            say.line(&format!("car-server: cannot start the async runtime: {e}"));
            None
        }
    }
}

/// A token cancelled when a stop signal arrives (see [`stop_signal`]).
fn cancel_on_signal() -> tokio_util::sync::CancellationToken {
    let shutdown = tokio_util::sync::CancellationToken::new();
    let on_signal = shutdown.clone();
    tokio::spawn(async move {
        stop_signal().await;
        tracing::info!("car-server: stopping");
        on_signal.cancel();
    });
    shutdown
}

/// SIGINT or SIGTERM (Ctrl-C elsewhere).
async fn stop_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
