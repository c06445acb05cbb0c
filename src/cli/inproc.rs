//! The project tools over MCP: `task_manager`, `progress_tracker`, `decision_logger`,
//! `context_manager`, `project_admin` and `graph_explorer`.
//! Each takes `{action, args}` and runs `car <group> --json <action> <args…>` in-process — the
//! same clap parser and the same command code as the CLI — so the text it returns is byte for
//! byte what that command prints. A failing command returns `isError: true` with its stdout and,
//! after a `--- STDERR ---` line, its stderr. No process is spawned.

use std::path::PathBuf;
use std::sync::Arc;

use std::sync::{Mutex, OnceLock};

use clap::{CommandFactory, FromArgMatches};
use serde_json::{json, Value};

use super::{journal, session, task, Cli, Command, Env, Printed};
use crate::home::Home;
use crate::memory::Memory;
use crate::runtime::{Effect, Idempotence, Tool, ToolError, ToolSpec};

/// One project tool: its name, what it does, its actions and the command words before them.
struct Spec {
    name: &'static str,
    title: &'static str,
    description: &'static str,
    actions: &'static [&'static str],
    /// `Some("task")`: `car task <action>`; `None`: the action is itself the command.
    group: Option<&'static str>,
    /// Actions that run other command words than `<group> <action>`.
    routes: &'static [(&'static str, &'static [&'static str])],
    effect: Effect,
    /// How long one call may run.
    timeout_secs: u64,
}

const SPECS: &[Spec] = &[
    Spec {
        name: "graph_explorer",
        title: "Project context graph",
        description: "The project's context graph of files and the links between them: `scan` (args [] or [\"src\"]: walks the project honouring .gitignore, files and their imports for Rust, Python, JS/TS, Go and C; a rescan re-reads only changed files), `edges` ([\"src/lib.rs\", \"--direction\", \"in\"]), `link` ([\"A\", \"B\", \"--kind\", \"calls\"]), `add-node` ([\"payments-service\", \"--kind\", \"service\"]), `export` ([\"--format\", \"mermaid\"]). Runs `car graph <action> --json <args…>` and returns exactly what it prints.",
        actions: &["scan", "edges", "link", "add-node", "export"],
        group: Some("graph"),
        routes: &[],
        effect: Effect::Write,
        timeout_secs: 600,
    },
    Spec {
        name: "context_manager",
        title: "Session context and checkpoints",
        description: "Where the project stands and the session briefing: `status` (counts, ready tasks, blockers, decisions, last checkpoint), `context` (the briefing to read at session start, with relevant memory; args [\"--query\", \"…\"]), `checkpoint` (args [\"NAME\", \"--note\", \"…\"]), `resume` (a checkpoint's briefing and what changed since; args [\"NAME\"]), `doctor` (checks; args [\"--fix\"]). Runs `car <action> --json <args…>` and returns exactly what it prints.",
        actions: &["status", "context", "checkpoint", "resume", "doctor"],
        group: None,
        routes: &[],
        effect: Effect::Write,
        timeout_secs: 120,
    },
    Spec {
        name: "task_manager",
        title: "Project tasks",
        description: "The project's task tracker: `list` (args e.g. [\"--status\", \"ready\"]), `create` ([\"TITLE\", \"--priority\", \"P1\", \"--label\", \"x\", \"--depends-on\", \"CTX-0001\"]), `update` ([\"CTX-0001\", \"--status\", \"open\"]), `claim` ([] claims the most urgent ready task; [\"CTX-0001\", \"--agent\", \"me\"]), `complete`, `block` ([\"CTX-0001\", \"--reason\", \"…\"]), `unblock`, `show`. Runs `car task <action> --json <args…>` and returns exactly what it prints.",
        actions: &["list", "create", "update", "claim", "complete", "block", "unblock", "show"],
        group: Some("task"),
        routes: &[],
        effect: Effect::Write,
        timeout_secs: 120,
    },
    Spec {
        name: "progress_tracker",
        title: "Progress notes and blockers",
        description: "Notes and blockers on tasks: `list` (args [\"--task\", \"CTX-0001\", \"--status\", \"all\"]), `create` ([\"TEXT\", \"--task\", \"CTX-0001\", \"--blocker\"]), `update` ([\"ID\", \"--body\", \"…\"]), `resolve` ([\"ID\", \"--resolution\", \"…\"]). Runs `car progress <action> --json <args…>` and returns exactly what it prints.",
        actions: &["list", "create", "update", "resolve"],
        group: Some("progress"),
        routes: &[],
        effect: Effect::Write,
        timeout_secs: 120,
    },
    Spec {
        name: "decision_logger",
        title: "Architecture decision records",
        description: "Decisions (ADRs): `list` (args [\"--search\", \"words\"] for full-text search, [\"--status\", \"accepted\"]), `record` ([\"TITLE\", \"--decision\", \"…\", \"--context\", \"…\", \"--consequences\", \"…\", \"--supersedes\", \"ADR-0001\"]), `resolve` ([\"ADR-0001\", \"--status\", \"rejected\"]). Runs `car decision <action> --json <args…>` and returns exactly what it prints.",
        actions: &["list", "record", "resolve"],
        group: Some("decision"),
        routes: &[],
        effect: Effect::Write,
        timeout_secs: 120,
    },
    Spec {
        name: "project_admin",
        title: "Project administration",
        description: "Project housekeeping: `stats` (what the project holds; args [\"--all\"] for every project), `prune` (forget projects whose root directory is gone: runs `car project prune`; args [\"--dry-run\"]), `config` (args [\"get\", \"task.prefix\"], [\"set\", \"task.prefix\", \"APP\"], [\"list\"]), `project` (args [\"list\"], [\"show\"], [\"rename\", \"NEW\"]). Runs `car <action> --json <args…>` (prune: `car project prune`) and returns exactly what it prints. Archiving old tasks to cold storage is `car prune` on the command line.",
        actions: &["stats", "prune", "config", "project"],
        group: None,
        routes: &[("prune", &["project", "prune"])],
        effect: Effect::Destructive,
        timeout_secs: 120,
    },
];

/// Where the in-process commands run: the server's home and project.
#[derive(Clone)]
struct Place {
    home: Home,
    project_root: PathBuf,
    memory: Arc<Memory>,
}

/// The command line a call stands for, without the program name.
fn argv(spec: &Spec, action: &str, args: &[String]) -> Vec<String> {
    let mut argv = vec!["--json".to_string()];
    match spec.routes.iter().find(|(a, _)| *a == action) {
        Some((_, words)) => argv.extend(words.iter().map(|w| w.to_string())),
        None => {
            argv.extend(spec.group.map(str::to_string));
            argv.push(action.to_string());
        }
    }
    argv.extend(args.iter().cloned());
    argv
}

/// Runs a parsed command that one of the tools may run.
fn run(place: &Place, cli: Cli) -> Printed {
    let env = Env {
        home: place.home.clone(),
        project_root: place.project_root.clone(),
        json: true,
        store: Some(place.memory.store().clone()),
    };
    match cli.command {
        Command::Task(command) => task::execute(&env, command),
        Command::Graph(command) => super::graph::execute(&env, command),
        Command::Progress(command) => journal::execute_progress(&env, command),
        Command::Decision(command) => journal::execute_decision(&env, command),
        Command::Status => session::execute_status(&env),
        Command::Context(args) => session::execute_context(&env, &args, Some(&place.memory)),
        Command::Checkpoint(args) => session::execute_checkpoint(&env, &args),
        Command::Resume(args) => session::execute_resume(&env, &args),
        Command::Doctor { fix } => {
            super::doctor::execute(&env, crate::project::Mode::dry_run_if(!fix))
        }
        Command::Stats(args) => super::admin::stats(&env, &args),
        Command::Project(command) => super::admin::project(&env, &command),
        Command::Config(command) => super::admin::config(&env, &command),
        _ => Printed {
            stdout: String::new(),
            stderr: "error: this command is not available through this tool\n".into(),
            exit: 2,
        },
    }
}

/// Parses a command line as `car` does. The clap command tree is built once and reused (building
/// it is most of the cost of a small call); parsing is serialized on it, which costs nothing
/// since each call parses for microseconds.
fn parse(argv: impl IntoIterator<Item = String>) -> Result<Cli, clap::Error> {
    static COMMAND: OnceLock<Mutex<clap::Command>> = OnceLock::new();
    let command = COMMAND.get_or_init(|| Mutex::new(Cli::command()));
    let mut command = command.lock().unwrap_or_else(|poison| poison.into_inner());
    let mut matches = command.try_get_matches_from_mut(argv)?;
    Cli::from_arg_matches_mut(&mut matches).map_err(|e| e.format(&mut command))
}

/// Runs one tool call: the text on success, [`ToolError::CommandFailed`] otherwise.
fn call(place: &Place, spec: &Spec, args: &Value) -> Result<Value, ToolError> {
    let action = args["action"].as_str().unwrap_or_default();
    let extra: Vec<String> = args["args"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|a| a.as_str().map(str::to_string))
        .collect();
    if let Some(flag) = extra
        .iter()
        .find(|a| ["--home", "--project"].iter().any(|f| a.starts_with(f)))
    {
        return Err(ToolError::InvalidArguments(format!(
            "{flag} is not available through MCP: this server works on {} with the data in {}",
            place.project_root.display(),
            place.home.root().display()
        )));
    }
    let argv = argv(spec, action, &extra);
    let printed = match parse(std::iter::once("car".to_string()).chain(argv)) {
        Ok(cli) => run(place, cli),
        Err(err) => Printed {
            stdout: String::new(),
            stderr: err.render().to_string(),
            exit: 2,
        },
    };
    if printed.exit == 0 {
        Ok(Value::String(printed.stdout))
    } else {
        Err(ToolError::CommandFailed(format!(
            "{}--- STDERR ---\n{}",
            printed.stdout, printed.stderr
        )))
    }
}

/// The project tools for a server working on `project_root` with the data in `home` (and
/// the store of `memory`).
pub(crate) fn tools(home: &Home, project_root: &std::path::Path, memory: Arc<Memory>) -> Vec<Tool> {
    let place = Place {
        home: home.clone(),
        project_root: project_root.to_path_buf(),
        memory,
    };
    SPECS
        .iter()
        .map(|spec| {
            let place = place.clone();
            Tool::blocking(
                ToolSpec::new(
                    spec.name,
                    spec.description,
                    json!({
                        "type": "object",
                        "properties": {
                            "action": {"type": "string", "enum": spec.actions, "description": "The command to run."},
                            "args": {"type": "array", "items": {"type": "string"}, "default": [],
                                     "description": "Its arguments and flags, as on the command line (see `car <command> --help`)."}
                        },
                        "required": ["action"],
                        "additionalProperties": false
                    }),
                )
                .title(spec.title)
                .effect(spec.effect)
                .idempotence(Idempotence::NotIdempotent)
                .timeout(std::time::Duration::from_secs(spec.timeout_secs)),
                move |c| call(&place, spec, &c.args),
            )
        })
        .collect()
}
