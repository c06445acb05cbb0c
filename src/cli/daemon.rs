//! `car daemon …`: start, stop and watch the `car-server` of this `CAR_HOME`.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use clap::{Args, Subcommand};
use serde::Serialize;

use super::{finish_typed, Env, Failure};
use crate::server::lifecycle::{self, DaemonDir, DaemonState};

pub const HELP: &str = "\
car-server shares one live engine between every client: editors, agents and scripts connect to
http://127.0.0.1:9102/mcp instead of each spawning car-mcp. One daemon runs per CAR_HOME.

Examples:
  car daemon start                  # in the background; its log is $CAR_HOME/daemon/car-server.log
  car daemon status                 # pid, address, health
  claude mcp add --transport http car http://127.0.0.1:9102/mcp
  car daemon logs -n 20
  car daemon stop
  car daemon start --foreground     # in this terminal; Ctrl-C stops it
  car daemon install                # start it at login (systemd user unit / launchd agent)";

#[derive(Debug, Subcommand)]
pub enum DaemonCommand {
    /// Start car-server for this CAR_HOME (in the background unless --foreground).
    Start(StartArgs),
    /// Stop it: in-flight calls finish or are cancelled, then it exits.
    Stop,
    /// Whether it runs, where, and whether it answers.
    Status,
    /// The end of its log.
    Logs {
        /// How many lines.
        #[arg(short = 'n', long, default_value_t = 50)]
        lines: usize,
    },
    /// Print the bearer token that clients beyond loopback send (made, mode 0600, if missing).
    Token,
    /// Start car-server at login: a systemd user unit (Linux) or a launchd agent (macOS).
    Install(InstallArgs),
    /// Remove what `install` wrote.
    Uninstall {
        /// Only remove the file; do not ask systemctl / launchctl to disable it.
        #[arg(long)]
        no_disable: bool,
    },
}

#[derive(Debug, Args)]
pub struct StartArgs {
    /// Run in this terminal instead of the background.
    #[arg(long)]
    foreground: bool,
    /// Where MCP listens (host:port).
    #[arg(long, env = crate::home::env::CAR_MCP_BIND, value_name = "HOST:PORT")]
    mcp_bind: Option<String>,
    /// Serve clients beyond loopback (each request then needs the token of `car daemon token`).
    #[arg(long)]
    allow_remote: bool,
    /// The WebSocket port (default 9100; 0 picks a free one).
    #[arg(long, env = crate::home::env::CAR_WS_PORT, value_name = "PORT")]
    port: Option<u16>,
}

#[derive(Debug, Args)]
pub struct InstallArgs {
    #[command(flatten)]
    start: StartArgs,
    /// Only write the file; do not ask systemctl / launchctl to enable it.
    #[arg(long)]
    no_enable: bool,
}

/// What `start` found or did.
#[derive(Debug, Serialize)]
struct Started {
    /// False when one was running already.
    started: bool,
    #[serde(flatten)]
    state: DaemonState,
    log: String,
}

/// What `stop` did.
#[derive(Debug, Serialize)]
struct Stopped {
    stopped: bool,
    pid: Option<u32>,
}

/// What `status` saw.
#[derive(Debug, Serialize)]
struct Status {
    running: bool,
    #[serde(flatten)]
    state: Option<DaemonState>,
    /// It answered `GET /health`.
    healthy: Option<bool>,
    log: String,
}

#[derive(Debug, Serialize)]
struct Logs {
    path: String,
    lines: Vec<String>,
}

/// What `install` or `uninstall` did.
#[derive(Debug, Serialize)]
struct Unit {
    /// The unit or agent file.
    path: String,
    /// Written (install) or removed (uninstall).
    changed: bool,
    /// What the service manager said when asked to (un)load it, when there was one to ask.
    manager: Option<String>,
}

#[derive(Debug, Serialize)]
struct Token {
    path: String,
    token: String,
}

pub async fn run(env: &Env, command: DaemonCommand) -> ExitCode {
    let dir = DaemonDir::new(env.home.root());
    let log = dir.log().display().to_string();
    match command {
        DaemonCommand::Start(args) if args.foreground => foreground(env, &args),
        DaemonCommand::Start(args) => {
            finish_typed(env.json, "daemon.start", start(env, &dir, &args), |s| {
                if s.started {
                    format!(
                        "car-server started (pid {}), MCP at {}\nlog: {}\n",
                        s.state.pid, s.state.mcp_url, s.log
                    )
                } else {
                    format!(
                        "car-server already runs (pid {}), MCP at {}\n",
                        s.state.pid, s.state.mcp_url
                    )
                }
            })
        }
        DaemonCommand::Stop => finish_typed(env.json, "daemon.stop", stop(&dir), |s| match s.pid {
            Some(pid) if s.stopped => format!("car-server (pid {pid}) stopped\n"),
            _ => "no car-server runs for this CAR_HOME\n".to_string(),
        }),
        DaemonCommand::Status => {
            let state = lifecycle::running(&dir);
            let healthy = match &state {
                Some(s) if s.mcp_url == crate::server::process::MCP_DISABLED => None,
                Some(s) => Some(healthy(&s.mcp_url).await),
                None => None,
            };
            let status = Status {
                running: state.is_some(),
                state,
                healthy,
                log,
            };
            finish_typed(env.json, "daemon.status", Ok(status), |s| match &s.state {
                Some(state) => format!(
                    "car-server runs (pid {}, version {}, since {}), MCP at {}; {}\n",
                    state.pid,
                    state.version,
                    state.started_at,
                    state.mcp_url,
                    match s.healthy {
                        Some(true) => "it answers",
                        Some(false) => "it does not answer /health",
                        None => "the WebSocket only",
                    }
                ),
                None => "no car-server runs for this CAR_HOME; start one with `car daemon start`\n"
                    .to_string(),
            })
        }
        DaemonCommand::Logs { lines } => {
            finish_typed(env.json, "daemon.logs", tail(&dir, lines), |l| {
                l.lines.iter().map(|line| format!("{line}\n")).collect()
            })
        }
        DaemonCommand::Token => {
            let result = crate::server::process::token(&env.home)
                .map(|token| Token {
                    path: dir.token().display().to_string(),
                    token,
                })
                .map_err(|e| {
                    Failure::new(
                        "failed",
                        format!("cannot read or make {}: {e}", dir.token().display()),
                    )
                });
            finish_typed(env.json, "daemon.token", result, |t| {
                format!("{}\n", t.token)
            })
        }
        DaemonCommand::Install(args) => finish_typed(
            env.json,
            "daemon.install",
            install(env, &args),
            |u| match &u.manager {
                Some(said) => format!("wrote {}; car-server starts at login ({said})\n", u.path),
                None => format!(
                    "wrote {}; enable it with `{}`\n",
                    u.path,
                    if cfg!(target_os = "macos") {
                        format!("launchctl load -w {}", u.path)
                    } else {
                        "systemctl --user daemon-reload && systemctl --user enable --now car-server"
                            .to_string()
                    }
                ),
            },
        ),
        DaemonCommand::Uninstall { no_disable } => {
            finish_typed(env.json, "daemon.uninstall", uninstall(no_disable), |u| {
                if u.changed {
                    format!("removed {}\n", u.path)
                } else {
                    format!("nothing to remove: no {}\n", u.path)
                }
            })
        }
    }
}

/// `car-server` beside this `car`, else the one on PATH.
fn car_server() -> PathBuf {
    let name = if cfg!(windows) {
        "car-server.exe"
    } else {
        "car-server"
    };
    std::env::current_exe()
        .ok()
        .map(|exe| exe.with_file_name(name))
        .filter(|path| path.exists())
        .unwrap_or_else(|| PathBuf::from(name))
}

fn server_command(env: &Env, args: &StartArgs) -> Command {
    let mut command = Command::new(car_server());
    command
        .env(crate::home::env::CAR_HOME, env.home.root())
        .arg("--project")
        .arg(&env.project_root);
    if let Some(bind) = &args.mcp_bind {
        command.args(["--mcp-bind", bind]);
    }
    if args.allow_remote {
        command.arg("--allow-remote");
    }
    if let Some(port) = args.port {
        command.args(["--port", &port.to_string()]);
    }
    command
}

fn foreground(env: &Env, args: &StartArgs) -> ExitCode {
    match server_command(env, args).status() {
        Ok(status) => ExitCode::from(status.code().map_or(1, |c| c.clamp(0, 255) as u8)),
        Err(e) => {
            super::console::stderr_line(&format!(
                "error: cannot run {}: {e}",
                car_server().display()
            ));
            ExitCode::FAILURE
        }
    }
}

fn start(env: &Env, dir: &DaemonDir, args: &StartArgs) -> Result<Started, Failure> {
    let log = dir.log().display().to_string();
    if let Some(state) = lifecycle::running(dir) {
        return Ok(Started {
            started: false,
            state,
            log,
        });
    }
    let fail = |what: &str, e: std::io::Error| Failure::new("failed", format!("{what}: {e}"));
    std::fs::create_dir_all(dir.path()).map_err(|e| fail("cannot make the daemon directory", e))?;
    // The server writes and rotates its log itself; its stderr goes to the same file for what
    // it prints before the log is open.
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.log())
        .map_err(|e| fail("cannot open the log", e))?;
    let mut command = server_command(env, args);
    command
        .arg("--log-file")
        .arg(dir.log())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(file));
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        // Its own process group: a Ctrl-C in this terminal later does not reach it.
        command.process_group(0);
    }
    let mut child = command
        .spawn()
        .map_err(|e| fail(&format!("cannot run {}", car_server().display()), e))?;
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        if let Some(state) = lifecycle::running(dir).filter(|s| s.pid == child.id()) {
            return Ok(Started {
                started: true,
                state,
                log,
            });
        }
        if let Ok(Some(status)) = child.try_wait() {
            let last = tail(dir, 5).map(|l| l.lines.join("\n")).unwrap_or_default();
            return Err(Failure::new(
                "failed",
                format!("car-server exited ({status}) before it listened:\n{last}"),
            ));
        }
        if Instant::now() > deadline {
            return Err(Failure::new(
                "failed",
                format!(
                    "car-server (pid {}) did not listen within 15 s; see {log}",
                    child.id()
                ),
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn stop(dir: &DaemonDir) -> Result<Stopped, Failure> {
    let Some(state) = lifecycle::running(dir) else {
        return Ok(Stopped {
            stopped: false,
            pid: None,
        });
    };
    terminate(state.pid)?;
    let deadline = Instant::now() + Duration::from_secs(15);
    while lifecycle::running(dir).is_some() {
        if Instant::now() > deadline {
            return Err(Failure::new(
                "failed",
                format!("car-server (pid {}) did not stop within 15 s", state.pid),
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(Stopped {
        stopped: true,
        pid: Some(state.pid),
    })
}

#[cfg(unix)]
fn terminate(pid: u32) -> Result<(), Failure> {
    let pid = i32::try_from(pid)
        .map_err(|_| Failure::new("failed", format!("pid {pid} is out of range")))?;
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGTERM,
    )
    .map_err(|e| {
        Failure::new(
            "failed",
            format!("cannot signal car-server (pid {pid}): {e}"),
        )
    })
}

#[cfg(not(unix))]
fn terminate(pid: u32) -> Result<(), Failure> {
    Err(Failure::new("failed", format!("stop car-server (pid {pid}) from the task manager; `car daemon stop` signals it on Unix only")))
}

fn tail(dir: &DaemonDir, lines: usize) -> Result<Logs, Failure> {
    let path = dir.log();
    let file = std::fs::File::open(&path).map_err(|e| {
        Failure::new(
            "not_found",
            format!(
                "no daemon log at {} ({e}); start one with `car daemon start`",
                path.display()
            ),
        )
    })?;
    let all: Vec<String> = BufReader::new(file).lines().map_while(Result::ok).collect();
    let from = all.len().saturating_sub(lines);
    Ok(Logs {
        path: path.display().to_string(),
        lines: all[from..].to_vec(),
    })
}

/// Whether `GET /health` answers within a second.
async fn healthy(mcp_url: &str) -> bool {
    let Some(base) = mcp_url.strip_suffix("/mcp") else {
        return false;
    };
    let Ok(client) = reqwest::Client::builder()
        .timeout(Duration::from_secs(1))
        .build()
    else {
        return false;
    };
    client
        .get(format!("{base}/health"))
        .send()
        .await
        .is_ok_and(|r| r.status().is_success())
}

/// Where the login service lives: a systemd user unit, or a launchd agent on macOS.
fn unit_path() -> Result<PathBuf, Failure> {
    let dirs = directories::BaseDirs::new()
        .ok_or_else(|| Failure::new("failed", "cannot find the user's home directory"))?;
    Ok(if cfg!(target_os = "macos") {
        dirs.home_dir()
            .join("Library/LaunchAgents/dev.car.server.plist")
    } else {
        dirs.config_dir().join("systemd/user/car-server.service")
    })
}

/// The unit text: car-server in the foreground, with this CAR_HOME and project.
fn unit_text(env: &Env, args: &StartArgs) -> String {
    let server = car_server();
    let mut argv = vec![
        server.display().to_string(),
        "--project".to_string(),
        env.project_root.display().to_string(),
    ];
    if let Some(bind) = &args.mcp_bind {
        argv.extend(["--mcp-bind".to_string(), bind.clone()]);
    }
    if args.allow_remote {
        argv.push("--allow-remote".to_string());
    }
    if let Some(port) = args.port {
        argv.extend(["--port".to_string(), port.to_string()]);
    }
    argv.extend([
        "--log-file".to_string(),
        DaemonDir::new(env.home.root()).log().display().to_string(),
    ]);
    let home = env.home.root().display().to_string();
    if cfg!(target_os = "macos") {
        let items: String = argv
            .iter()
            .map(|a| format!("    <string>{a}</string>\n"))
            .collect();
        format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<!DOCTYPE plist PUBLIC \"-//Apple//DTD PLIST 1.0//EN\" \"http://www.apple.com/DTDs/PropertyList-1.0.dtd\">\n<plist version=\"1.0\">\n<dict>\n  <key>Label</key><string>dev.car.server</string>\n  <key>ProgramArguments</key>\n  <array>\n{items}  </array>\n  <key>EnvironmentVariables</key>\n  <dict><key>CAR_HOME</key><string>{home}</string></dict>\n  <key>RunAtLoad</key><true/>\n  <key>KeepAlive</key><true/>\n  <key>StandardErrorPath</key><string>{home}/daemon/car-server.log</string>\n</dict>\n</plist>\n"
        )
    } else {
        let quoted: Vec<String> = argv.iter().map(|a| format!("\"{a}\"")).collect();
        format!(
            "[Unit]\nDescription=CAR shared engine (car-server)\n\n[Service]\nEnvironment=\"CAR_HOME={home}\"\nExecStart={}\nRestart=on-failure\n\n[Install]\nWantedBy=default.target\n",
            quoted.join(" ")
        )
    }
}

/// Asks the service manager, when there is one, and reports what it said.
fn ask_manager(args: &[&str]) -> Option<String> {
    let program = if cfg!(target_os = "macos") {
        "launchctl"
    } else {
        "systemctl"
    };
    let out = Command::new(program).args(args).output().ok()?;
    Some(if out.status.success() {
        format!("{program} {}: done", args.join(" "))
    } else {
        format!(
            "{program} {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )
    })
}

fn install(env: &Env, args: &InstallArgs) -> Result<Unit, Failure> {
    let path = unit_path()?;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| Failure::new("failed", format!("cannot make {}: {e}", dir.display())))?;
    }
    std::fs::write(&path, unit_text(env, &args.start))
        .map_err(|e| Failure::new("failed", format!("cannot write {}: {e}", path.display())))?;
    let shown = path.display().to_string();
    let manager = if args.no_enable {
        None
    } else if cfg!(target_os = "macos") {
        ask_manager(&["load", "-w", &shown])
    } else {
        ask_manager(&["--user", "daemon-reload"])
            .and_then(|_| ask_manager(&["--user", "enable", "car-server.service"]))
    };
    Ok(Unit {
        path: shown,
        changed: true,
        manager,
    })
}

fn uninstall(no_disable: bool) -> Result<Unit, Failure> {
    let path = unit_path()?;
    let shown = path.display().to_string();
    if !path.exists() {
        return Ok(Unit {
            path: shown,
            changed: false,
            manager: None,
        });
    }
    let manager = if no_disable {
        None
    } else if cfg!(target_os = "macos") {
        ask_manager(&["unload", "-w", &shown])
    } else {
        ask_manager(&["--user", "disable", "car-server.service"])
    };
    std::fs::remove_file(&path)
        .map_err(|e| Failure::new("failed", format!("cannot remove {}: {e}", path.display())))?;
    Ok(Unit {
        path: shown,
        changed: true,
        manager,
    })
}
