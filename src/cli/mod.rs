//! The `car` command line: one clap tree, one file per command group, each with its `run`.
//! Commands that map to a tool call it through the same dispatcher the MCP face uses, so a
//! command's `--json` output is the tool's structured result in the envelope.

mod admin;
mod agent;
mod connector;
mod daemon;
mod docs;
mod doctor;
mod graph;
mod hook;
mod journal;
mod keys;
mod memory;
mod plan;
mod policy;
pub mod progress;
mod reason;
mod remote;
mod session;
mod setup;
mod skill;
mod task;
mod team;
mod tools;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Args, Parser, Subcommand};
use serde_json::Value;

use crate::app::location::Location;
use crate::app::App;
pub use crate::console;
use crate::home::{self, Home};
pub use crate::logging::{init_logging, init_logging_to};
use crate::output;
use crate::project::Mode;
use crate::runtime::{CallOptions, Context, DispatchError, Face, ToolError};
use crate::store::Store;

const AFTER_HELP: &str = "\
Examples:
  car memory add \"build\" \"run cargo test --workspace before pushing\"
  car memory query \"how do we build?\"
  car memory context \"fix the payout scheduler\"
  car task create \"Fix retry logic\" --priority P1 && car task claim
  car context                  # the session-start briefing: ready work, blockers, decisions, memory
  car skill find \"deploy to staging\"
  car policy init --preset recommended
  car tools list
  car connector add docs --url https://mcp.example.com/mcp && car connector enable docs --all
  car policy check Bash --params '{\"command\":\"nc -l 9\"}'
  car graph scan && car graph edges src/lib.rs
  car mcp                      # serve MCP over stdio (same as car-mcp)
  car stats                    # what this project holds; car prune archives old closed tasks

Data lives in CAR_HOME (default ~/.car): car.db holds memory, skills, tasks, decisions, the
context graph and the execution log; policies/ holds user-wide rules; connectors.json lists remote
MCP servers (their secrets stay in the OS keychain).";

/// CAR, the Common Agent Runtime: durable memory and a governed tool registry for coding agents.
#[derive(Debug, Parser)]
#[command(name = "car", version, about, after_help = AFTER_HELP, propagate_version = true)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,
    #[command(subcommand)]
    pub command: Command,
}

/// Flags every command takes.
#[derive(Debug, Args)]
pub struct GlobalArgs {
    /// Print the result as JSON: {"schema_version":1,"command":…,"success":…,"data"|"error":…}.
    #[arg(long, global = true)]
    pub json: bool,
    #[command(flatten)]
    pub location: Location,
    /// Work against a team server: its MCP address (https://car.example.com/mcp/PROJECT). The
    /// memory, skill, task, progress, decision, status, context, checkpoint and resume commands
    /// then read and write the team's project, with the token from `car team login`
    /// (or CAR_TOKEN); the other commands work on this machine.
    #[arg(
        long,
        global = true,
        env = "CAR_SERVER",
        hide_env_values = true,
        value_name = "URL"
    )]
    pub server: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Remember, recall and manage memory (facts, knowledge, procedures, status).
    #[command(subcommand)]
    Memory(memory::MemoryCommand),
    /// The project's context graph: scan files and imports into nodes and edges, link, export.
    #[command(subcommand)]
    Graph(crate::project::commands::graph::GraphCommand),
    /// Check, simulate, compare and tidy an action proposal before running it.
    #[command(subcommand, after_help = plan::group_help())]
    Plan(plan::PlanCommand),
    /// Track the project's tasks: create, claim, complete, block, dependencies.
    #[command(subcommand)]
    Task(crate::project::commands::task::TaskCommand),
    /// Progress notes and blockers on tasks or on the project.
    #[command(subcommand)]
    Progress(crate::project::commands::journal::ProgressCommand),
    /// Architecture decision records: record, list and search, resolve.
    #[command(subcommand)]
    Decision(crate::project::commands::journal::DecisionCommand),
    /// Hand a task to CAR's governed agent: a model calls tools through the registry (policy gate,
    /// execution log), shell commands run sandboxed, and the result says what backs its claims.
    #[command(after_help = agent::HELP)]
    Do(agent::DoArgs),
    /// One answer to a question about the project, from the files and memory that bear on it, citing them.
    #[command(after_help = reason::HELP)]
    Reason(reason::ReasonArgs),
    /// The model API keys car do uses, in the OS keychain (the environment wins).
    #[command(subcommand)]
    Keys(keys::KeysCommand),
    /// Where the project stands: task counts, ready work, blockers, decisions, last checkpoint.
    Status,
    /// The briefing an agent reads at session start (ready work, blockers, decisions, relevant memory).
    Context(crate::project::commands::session::ContextArgs),
    /// Save a named snapshot of where the project stands, with a note.
    Checkpoint(crate::project::commands::session::CheckpointArgs),
    /// A checkpoint's briefing and what changed since (default: the latest checkpoint).
    Resume(crate::project::commands::session::ResumeArgs),
    /// Save, find and judge reusable skills; share them as .car/skills/*.json.
    #[command(subcommand)]
    Skill(skill::SkillCommand),
    /// Check calls against the policy rules, list them, lint rule files and write presets.
    #[command(subcommand)]
    Policy(policy::PolicyCommand),
    /// The policy gate's pre-tool-call hook for Claude Code, Codex, Gemini CLI and Cursor: reads the host's payload on stdin, answers in the host's form (a deny, or what the host needs for an allow), always exits 0.
    PolicyCheckHook(hook::HookArgs),
    /// Wire CAR (MCP server, policy gate, memory hooks) into Claude Code, Codex, Gemini CLI or Cursor: shows the change, asks, keeps your settings; --undo takes it out.
    #[command(after_help = setup::HELP)]
    Setup(setup::SetupArgs),
    /// Agent host hooks that bring memory to the model: the session-start briefing and a prompt's reminders (payload on stdin, always exits 0).
    #[command(subcommand, after_help = hook::HELP)]
    Hook(hook::HookCommand),
    /// Remote MCP servers as tool sources: add, enable their tools, test, log in (OAuth).
    #[command(subcommand, after_help = connector::HELP)]
    Connector(connector::ConnectorCommand),
    /// List the registry's tools or call any of them.
    #[command(subcommand)]
    Tools(tools::ToolsCommand),
    /// Show the execution log: every tool call, its status and duration.
    Executions(tools::ExecutionsArgs),
    /// Check CAR's home, database, policies and project data and say what to fix.
    Doctor(crate::project::commands::session::DoctorArgs),
    /// Count what a project holds (tasks, progress, decisions, graph, memory, archive) and the database size.
    #[command(after_help = admin::STATS_HELP)]
    Stats(admin::StatsArgs),
    /// List, show and rename projects; forget projects whose root directory is gone.
    #[command(subcommand)]
    Project(admin::ProjectCommand),
    /// Get, set, unset and list this project's settings (task.prefix, prune.older_than_days, …).
    #[command(subcommand, after_help = admin::config_help())]
    Config(admin::ConfigCommand),
    /// Move old closed tasks and resolved progress notes to CAR_HOME/archive.db, or --restore them.
    #[command(after_help = admin::PRUNE_HELP)]
    Prune(admin::PruneArgs),
    /// Start, stop and watch car-server, the shared engine over HTTP MCP.
    #[command(subcommand, after_help = daemon::HELP)]
    Daemon(daemon::DaemonCommand),
    /// A team's shared database on PostgreSQL: its projects, its people with their tokens and
    /// roles, and who may reach which project.
    #[command(after_help = team::HELP)]
    Team(team::TeamArgs),
    /// Serve the MCP protocol over stdio (what car-mcp does).
    Mcp(crate::mcp::process::McpArgs),
    /// Print a shell completion script (bash, zsh, fish, powershell, elvish).
    #[command(after_help = docs::COMPLETIONS_HELP)]
    Completions(docs::CompletionsArgs),
    /// Print the man page, or write one page per command with --out DIR.
    #[command(after_help = docs::MAN_HELP)]
    Man(docs::ManArgs),
}

/// What a command resolved before doing work.
pub(crate) struct Env {
    pub home: Home,
    pub project_root: PathBuf,
    pub json: bool,
    /// An open store to use instead of opening `home`'s (the MCP server's own).
    pub store: Option<Arc<Store>>,
    /// The team server named by `--server` / `CAR_SERVER`, as given.
    pub server: Option<String>,
}

/// A failed command: a code for the envelope, a message, and the exit status.
#[derive(Debug)]
pub(crate) struct Failure {
    pub code: &'static str,
    pub message: String,
    pub exit: u8,
}

impl Failure {
    pub fn new(code: &'static str, message: impl Into<String>) -> Failure {
        Failure {
            code,
            message: message.into(),
            exit: 1,
        }
    }

    pub fn usage(message: impl Into<String>) -> Failure {
        Failure {
            code: "usage",
            message: message.into(),
            exit: 2,
        }
    }
}

impl From<ToolError> for Failure {
    fn from(err: ToolError) -> Self {
        let exit = match err {
            ToolError::InvalidArguments(_) => 2,
            ToolError::NotFound(_)
            | ToolError::ConfirmationRequired(_)
            | ToolError::Denied(_)
            | ToolError::InProgress(_)
            | ToolError::Cancelled
            | ToolError::Timeout(_)
            | ToolError::Failed(_)
            | ToolError::Reported { .. } => 1,
        };
        Failure {
            code: err.code(),
            message: err.to_string(),
            exit,
        }
    }
}

impl From<DispatchError> for Failure {
    fn from(err: DispatchError) -> Self {
        match err {
            DispatchError::UnknownTool(_) => Failure {
                code: "unknown_tool",
                message: err.to_string(),
                exit: 2,
            },
            DispatchError::Store(_) => Failure::new("store", err.to_string()),
        }
    }
}

impl From<crate::memory::MemoryError> for Failure {
    fn from(err: crate::memory::MemoryError) -> Self {
        match err {
            crate::memory::MemoryError::Invalid(m) => Failure::usage(m),
            other => Failure::new("failed", other.to_string()),
        }
    }
}

impl From<crate::store::StoreError> for Failure {
    fn from(err: crate::store::StoreError) -> Self {
        Failure::new("store", err.to_string())
    }
}

/// Opens the store and memory of a project and builds the runtime over them, behind the
/// policy engine of `<CAR_HOME>/policies` and every enclosing `.car/policies` (loaded once).
/// CAR for this command, opened through the composition root.
/// A command is one short process: what it writes to memory is embedded before it answers
/// (a server embeds in the background instead), so the next command finds it by meaning.
pub(crate) fn open_app(env: &Env) -> Result<App, Failure> {
    let app =
        App::open(&env.home, &env.project_root).map_err(|e| Failure::new("open", e.to_string()))?;
    if let Some(memory) = app.memory() {
        memory.embed_on_write();
    }
    Ok(app)
}

/// The project this command works on, in the store under CAR_HOME.
pub(crate) fn open_project(env: &Env) -> Result<crate::project::Project, Failure> {
    let store = match &env.store {
        Some(store) => store.clone(),
        None => Arc::new(Store::open(&env.home.db_path())?),
    };
    Ok(crate::project::Project::open(store, &env.project_root)?)
}

impl From<crate::project::ProjectError> for Failure {
    fn from(err: crate::project::ProjectError) -> Self {
        let exit = if matches!(err, crate::project::ProjectError::Invalid(_)) {
            2
        } else {
            1
        };
        Failure {
            exit,
            ..Failure::new(err.code(), err.to_string())
        }
    }
}

fn resolve(location: &Location, json: bool, server: Option<String>) -> Result<Env, Failure> {
    let (home, project_root) = location.resolve().map_err(|e| Failure {
        code: e.code,
        message: e.message,
        exit: e.exit,
    })?;
    Ok(Env {
        home,
        project_root,
        json,
        store: None,
        server,
    })
}

/// Reads a file, or stdin when the path is `-`.
pub(crate) fn read_input(path: &std::path::Path) -> Result<String, Failure> {
    if path.as_os_str() == "-" {
        std::io::read_to_string(std::io::stdin())
            .map_err(|e| Failure::new("io", format!("cannot read stdin: {e}")))
    } else {
        std::fs::read_to_string(path)
            .map_err(|e| Failure::usage(format!("cannot read {}: {e}", path.display())))
    }
}

/// A command's typed arguments as the JSON its tool takes (the tool's own argument type, so a
/// renamed field cannot compile on one side only).
pub(crate) fn tool_args<T: serde::Serialize>(args: &T) -> Result<Value, Failure> {
    serde_json::to_value(args).map_err(|e| Failure::new("failed", e.to_string()))
}

/// Calls a tool through the dispatcher as the CLI face.
pub(crate) async fn call_tool(
    app: &App,
    name: &str,
    args: Value,
    request_id: Option<String>,
) -> Result<Value, Failure> {
    let context = Context::new(Face::Cli).grants(home::confirm_grants_from_env());
    let options = CallOptions {
        request_id,
        ..CallOptions::default()
    };
    let outcome = app.runtime().call(name, args, &context, options).await?;
    Ok(outcome.result?)
}

/// What a command printed: its stdout, its stderr and its exit status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Printed {
    pub stdout: String,
    pub stderr: String,
    pub exit: u8,
}

impl Printed {
    /// Writes it out and returns the exit code.
    pub fn emit(self) -> ExitCode {
        console::stdout(&self.stdout);
        if !self.stderr.is_empty() {
            console::stderr(&self.stderr);
        }
        ExitCode::from(self.exit)
    }
}

/// Renders a command's result: the JSON envelope or the human text, and the exit status.
pub(crate) fn render(
    env_json: bool,
    command: &str,
    result: Result<Value, Failure>,
    human: impl FnOnce(&Value) -> String,
) -> Printed {
    match result {
        Ok(data) => Printed {
            stdout: if env_json {
                format!("{}\n", output::success(command, data))
            } else {
                human(&data)
            },
            stderr: String::new(),
            exit: 0,
        },
        Err(failure) => {
            let (stdout, stderr) = if env_json {
                (
                    format!(
                        "{}\n",
                        output::failure(command, failure.code, &failure.message)
                    ),
                    String::new(),
                )
            } else {
                (String::new(), format!("error: {}\n", failure.message))
            };
            Printed {
                stdout,
                stderr,
                exit: failure.exit,
            }
        }
    }
}

/// Opens the runtime and maps a command to what it runs (`plan`), for the commands that go
/// through the tools; a failure of either is printed, and its exit code returned as the error.
pub(crate) fn prepare<T>(
    env: &Env,
    command: &str,
    plan: impl FnOnce() -> Result<T, Failure>,
) -> Result<(App, T), ExitCode> {
    let fail = |failure| finish(env.json, command, Err(failure), |_| String::new());
    let planned = plan().map_err(fail)?;
    let app = open_app(env).map_err(fail)?;
    Ok((app, planned))
}

/// Renders a tool's result for a human through its typed outcome: `data` is what the tool
/// serialized, read back as `T`; a result of another shape is shown as it is.
pub(crate) fn human_as<T: serde::de::DeserializeOwned>(
    data: &Value,
    render: impl FnOnce(&T) -> String,
) -> String {
    match T::deserialize(data) {
        Ok(typed) => render(&typed),
        Err(_) => crate::output::render_human(data),
    }
}

/// A typed result as the JSON the envelope carries.
pub(crate) fn to_json(value: impl serde::Serialize) -> Result<Value, Failure> {
    serde_json::to_value(value).map_err(|e| Failure::new("failed", e.to_string()))
}

/// Renders a command's typed result: its JSON in the envelope, or `human` of the value itself
/// (never of its JSON) for a person.
pub(crate) fn render_typed<T: serde::Serialize>(
    env_json: bool,
    command: &str,
    result: Result<T, Failure>,
    human: impl FnOnce(&T) -> String,
) -> Printed {
    let text = match &result {
        Ok(value) if !env_json => human(value),
        Ok(_) | Err(_) => String::new(),
    };
    render(env_json, command, result.and_then(to_json), move |_| text)
}

/// [`render_typed`], printed; returns the exit code.
pub(crate) fn finish_typed<T: serde::Serialize>(
    env_json: bool,
    command: &str,
    result: Result<T, Failure>,
    human: impl FnOnce(&T) -> String,
) -> ExitCode {
    render_typed(env_json, command, result, human).emit()
}

/// Prints a command's result and returns its exit code.
pub(crate) fn finish(
    env_json: bool,
    command: &str,
    result: Result<Value, Failure>,
    human: impl FnOnce(&Value) -> String,
) -> ExitCode {
    render(env_json, command, result, human).emit()
}

/// Runs the `car` command line.
/// `car-gate [--host HOST]`: the policy gate alone, what the hosts' hook configuration runs
/// (the same answers as `car policy-check-hook`). A binary of its own because every host starts
/// it before every tool call: without the rest of CAR linked in (TLS, SQLite, the async runtime,
/// the command-line tree) it maps a fifth of the pages and runs no other library's start-up
/// code. It reads no option but `--host`, and logs nothing. Returns the exit status: 0, or 2
/// for arguments it does not take.
pub fn gate_main() -> u8 {
    const USAGE: &str = "Usage: car-gate [--host claude-code|codex|gemini|cursor] < payload

CAR's policy gate for an agent host's pre-tool-call hook: reads the host's hook payload on
stdin and answers in the host's form (a deny with CAR's reason, or the host's allow). The
host is told from the payload unless --host names it. The same as `car policy-check-hook`;
`car setup <host>` wires it in. Rules: $CAR_HOME/policies and every .car/policies enclosing
the session's directory (see `car policy --help`).";
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    let host = match args.as_slice() {
        [] => None,
        [flag, host] if flag == "--host" => {
            match host.to_str().and_then(crate::hooks::hosts::Host::parse) {
                Some(host) => Some(host),
                None => {
                    console::stderr_line(&format!(
                        "car-gate: unknown host {:?}; one of claude-code, codex, gemini, cursor\n\n{USAGE}",
                        host.to_string_lossy()
                    ));
                    return 2;
                }
            }
        }
        [flag] if flag == "--help" || flag == "-h" => {
            console::stdout(&format!("{USAGE}\n"));
            return 0;
        }
        [flag] if flag == "--version" || flag == "-V" => {
            console::stdout(&format!("car-gate {}\n", env!("CARGO_PKG_VERSION")));
            return 0;
        }
        _ => {
            console::stderr_line(&format!("car-gate: unexpected arguments\n\n{USAGE}"));
            return 2;
        }
    };
    policy::hook(Home::from_env(), host, "car-gate");
    0
}

/// How `car policy-check-hook`'s notes begin.
const GATE: &str = "car policy-check-hook";

pub fn main() -> ExitCode {
    // Claude Code runs the hook before every tool call, so its plain form (the one plugins use)
    // skips building the clap tree and the logger: it logs nothing and reads only CAR_HOME.
    let mut args = std::env::args_os().skip(1);
    let (first, second, third, fourth) = (args.next(), args.next(), args.next(), args.next());
    // `policy-check-hook --host <host>`, the form the other hosts' packages use.
    if let (Some(first), Some(flag), Some(host), None) = (&first, &second, &third, &fourth) {
        if first == "policy-check-hook" && flag == "--host" {
            if let Some(host) = host.to_str().and_then(crate::hooks::hosts::Host::parse) {
                policy::hook(Home::from_env(), Some(host), GATE);
                return ExitCode::SUCCESS;
            }
        }
    }
    match (first, second, third) {
        (Some(first), None, None) if first == "policy-check-hook" => {
            policy::hook(Home::from_env(), None, GATE);
            return ExitCode::SUCCESS;
        }
        // The session-start and prompt hooks' plain form, the same way.
        (Some(first), Some(event), None) if first == "hook" => {
            if let Some(code) = event.to_str().and_then(hook::fast_path) {
                return code;
            }
        }
        _ => {}
    }
    let cli = Cli::parse();
    init_logging();
    match &cli.command {
        // No async runtime, no database.
        Command::PolicyCheckHook(args) => {
            policy::hook(
                Home::resolve(cli.global.location.home.as_deref()),
                args.host.map(Into::into),
                GATE,
            );
            return ExitCode::SUCCESS;
        }
        Command::Hook(command) => {
            return hook::execute(
                command,
                Home::resolve(cli.global.location.home.as_deref()),
                cli.global.location.project.as_deref(),
                cli.global.json,
            )
        }
        Command::Completions(args) => return docs::completions(args),
        Command::Man(args) => return docs::man(cli.global.json, args),
        _ => {}
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            console::stderr_line(&format!("error: cannot start the async runtime: {e}"));
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(run(cli))
}

async fn run(cli: Cli) -> ExitCode {
    let env = match resolve(
        &cli.global.location,
        cli.global.json,
        cli.global.server.clone(),
    ) {
        Ok(env) => env,
        Err(failure) => return finish(cli.global.json, "car", Err(failure), |_| String::new()),
    };
    match cli.command {
        Command::Memory(command) => memory::run(&env, command).await,
        Command::Graph(command) => graph::execute(&env, command).emit(),
        Command::Plan(command) => plan::run(&env, command).await,
        Command::Skill(command) => skill::run(&env, command).await,
        Command::Policy(command) => policy::run(&env, command).await,
        Command::PolicyCheckHook(args) => {
            policy::hook(
                Home::resolve(cli.global.location.home.as_deref()),
                args.host.map(Into::into),
                GATE,
            );
            ExitCode::SUCCESS
        }
        Command::Hook(command) => hook::execute(
            &command,
            Ok(env.home.clone()),
            Some(&env.project_root),
            cli.global.json,
        ),
        Command::Completions(args) => docs::completions(&args),
        Command::Man(args) => docs::man(cli.global.json, &args),
        Command::Connector(command) => connector::run(&env, command).await,
        Command::Tools(command) => tools::run(&env, command).await,
        Command::Executions(args) => tools::executions(&env, args).await,
        Command::Setup(args) => setup::run(&env, &args),
        Command::Doctor(args) => doctor::execute(&env, Mode::dry_run_if(!args.fix)).emit(),
        Command::Task(command) => task::execute(&env, command).await.emit(),
        Command::Progress(command) => journal::execute_progress(&env, command).await.emit(),
        Command::Decision(command) => journal::execute_decision(&env, command).await.emit(),
        Command::Do(args) => agent::run(&env, args).await,
        Command::Keys(command) => keys::run(&env, command),
        Command::Reason(args) => reason::run(&env, args).await,
        Command::Status => session::execute_status(&env).await.emit(),
        Command::Context(args) => session::execute_context(&env, args).await.emit(),
        Command::Checkpoint(args) => session::execute_checkpoint(&env, args).await.emit(),
        Command::Resume(args) => session::execute_resume(&env, args).await.emit(),
        Command::Stats(args) => admin::stats(&env, &args).emit(),
        Command::Project(command) => admin::project(&env, &command).emit(),
        Command::Config(command) => admin::config(&env, &command).emit(),
        Command::Prune(args) => admin::prune(&env, &args).emit(),
        Command::Daemon(command) => daemon::run(&env, command).await,
        Command::Team(args) => team::run(&env, args).await,
        Command::Mcp(_) => crate::mcp::process::serve(&env.home, &env.project_root).await,
    }
}

#[cfg(test)]
mod help_tests {
    use clap::CommandFactory;

    /// Every argument of every command, positional or flag, says what it is for: a person
    /// reading `--help` never meets a bare `--decision <DECISION>`.
    #[test]
    fn every_argument_has_a_help_line() {
        fn walk(command: &clap::Command, path: &str, missing: &mut Vec<String>) {
            for arg in command.get_arguments() {
                let id = arg.get_id().as_str();
                if id == "help" || id == "version" {
                    continue;
                }
                if arg.get_help().is_none() && arg.get_long_help().is_none() {
                    missing.push(format!("{path} {id}"));
                }
            }
            for sub in command.get_subcommands() {
                walk(sub, &format!("{path} {}", sub.get_name()), missing);
            }
        }
        let mut missing = Vec::new();
        walk(&super::Cli::command(), "car", &mut missing);
        walk(
            &crate::mcp::process::McpCli::command(),
            "car-mcp",
            &mut missing,
        );
        walk(
            &crate::server::process::ServerCli::command(),
            "car-server",
            &mut missing,
        );
        assert!(missing.is_empty(), "arguments without help: {missing:#?}");
    }
}
