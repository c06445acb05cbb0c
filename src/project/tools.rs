//! The project's six tools: `task_manager`, `progress_tracker`, `decision_logger`,
//! `context_manager`, `project_admin` and `graph_explorer`.
//!
//! Their wire contract is the seed's: `{action, args}` where `args` are the command's words as
//! on the command line, and the text of the result is exactly what `car --json <command>`
//! prints (the envelope and a newline); a failure is `isError` with that text, then a
//! `--- STDERR ---` line and what the command would have said on stderr (a bad flag's usage).
//! Behind the contract everything is typed: `args` are parsed with the very definitions the
//! CLI parses (`super::commands`), the capability runs the command, and the envelope's `data`
//! is the command's typed outcome, described by each tool's `outputSchema`.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use serde::Serialize;
use serde_json::{json, Value};

use super::commands::admin::{self, AdminOutcome, ConfigCommand, ProjectCommand, StatsArgs};
use super::commands::graph::{self, GraphCommand, GraphOutcome};
use super::commands::journal::{self, Decided, DecisionCommand, Noted, ProgressCommand};
use super::commands::session::{self, Doctor, SessionCommand, SessionOutcome};
use super::commands::task::{self, TaskCommand, TaskOutcome};
use super::{Mode, Project, ProjectError};
use crate::memory::Memory;
use crate::output;
use crate::runtime::{Effect, Idempotence, ResultText, Tool, ToolError, ToolSpec};
use crate::store::Store;

/// What the project tools work on, and the checks `doctor` runs (the composition root's: they
/// look at every capability).
#[derive(Clone)]
pub struct ProjectTools {
    pub store: Arc<Store>,
    pub root: PathBuf,
    /// `archive.db`, where `car prune` keeps cold rows (stats count them).
    pub archive: PathBuf,
    /// Gives the `context` briefing its relevant memory.
    pub memory: Option<Arc<Memory>>,
    /// `None` where doctor is not served (a team server: it checks one machine).
    pub doctor: Option<Arc<dyn Fn(Mode) -> Doctor + Send + Sync>>,
}

/// One tool: its name, what it does, its actions and the command words before them.
struct Spec {
    name: &'static str,
    title: &'static str,
    description: &'static str,
    actions: &'static [&'static str],
    /// `Some("task")`: `task <action>`; `None`: the action is itself the command.
    group: Option<&'static str>,
    /// Actions that run other command words than `<group> <action>`.
    routes: &'static [(&'static str, &'static [&'static str])],
    effect: Effect,
    /// The actions that only read (a team reader may call them).
    reads: &'static [&'static str],
    /// Served by a team server (the code graph, doctor and housekeeping are one machine's).
    team: bool,
    /// How long one call may run.
    timeout_secs: u64,
    /// The JSON Schema of the envelope a successful call answers with.
    output: fn() -> Value,
}

/// What a successful call answers: `car --json`'s envelope around the command's outcome.
#[derive(Serialize, schemars::JsonSchema)]
struct Envelope<T> {
    /// The envelope's version (1).
    schema_version: u32,
    /// The command that ran (`task.list`, `context`, …).
    command: String,
    /// Always true here: a failure is an error result.
    success: bool,
    data: T,
}

fn output<T: schemars::JsonSchema>() -> Value {
    crate::runtime::schema::output_of::<Envelope<T>>()
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
        reads: &["edges", "export"],
        team: false,
        timeout_secs: 600,
        output: output::<GraphOutcome>,
    },
    Spec {
        name: "context_manager",
        title: "Session context and checkpoints",
        description: "Where the project stands and the session briefing: `status` (counts, ready tasks, blockers, decisions, last checkpoint), `context` (the briefing to read at session start, with relevant memory; args [\"--query\", \"…\"]), `checkpoint` (args [\"NAME\", \"--note\", \"…\"]), `resume` (a checkpoint's briefing and what changed since; args [\"NAME\"]), `doctor` (checks; args [\"--fix\"]). Runs `car <action> --json <args…>` and returns exactly what it prints.",
        actions: &["status", "context", "checkpoint", "resume", "doctor"],
        group: None,
        routes: &[],
        effect: Effect::Write,
        reads: &["status", "context", "resume"],
        team: true,
        timeout_secs: 120,
        output: output::<SessionOutcome>,
    },
    Spec {
        name: "task_manager",
        title: "Project tasks",
        description: "The project's task tracker: `ready` (the tasks to pick up next), `list` (args e.g. [\"--status\", \"claimed\"]), `create` ([\"TITLE\", \"--priority\", \"P1\", \"--label\", \"x\", \"--depends-on\", \"CTX-0001\"]), `update` ([\"CTX-0001\", \"--status\", \"open\"]), `claim` ([] claims the most urgent ready task; [\"CTX-0001\", \"--agent\", \"me\"]), `complete`, `block` ([\"CTX-0001\", \"--reason\", \"…\"]), `unblock`, `show`, `dep` ([\"add\", \"CTX-0002\", \"CTX-0001\"]: CTX-0002 waits for CTX-0001; [\"remove\", …]). Runs `car task <action> --json <args…>` and returns exactly what it prints.",
        actions: &[
            "ready", "list", "create", "update", "claim", "complete", "block", "unblock", "show",
            "dep",
        ],
        group: Some("task"),
        routes: &[],
        effect: Effect::Write,
        reads: &["ready", "list", "show"],
        team: true,
        timeout_secs: 120,
        output: output::<TaskOutcome>,
    },
    Spec {
        name: "progress_tracker",
        title: "Progress notes and blockers",
        description: "Notes and blockers on tasks: `list` (args [\"--task\", \"CTX-0001\", \"--status\", \"all\"]), `create` ([\"TEXT\", \"--task\", \"CTX-0001\", \"--blocker\"]), `update` ([\"ID\", \"--body\", \"…\"]), `resolve` ([\"ID\", \"--resolution\", \"…\"]). Runs `car progress <action> --json <args…>` and returns exactly what it prints.",
        actions: &["list", "create", "update", "resolve"],
        group: Some("progress"),
        routes: &[],
        effect: Effect::Write,
        reads: &["list"],
        team: true,
        timeout_secs: 120,
        output: output::<Noted>,
    },
    Spec {
        name: "decision_logger",
        title: "Architecture decision records",
        description: "Decisions (ADRs): `list` (args [\"--search\", \"words\"] for full-text search, [\"--status\", \"accepted\"]), `record` ([\"TITLE\", \"--decision\", \"…\", \"--context\", \"…\", \"--consequences\", \"…\", \"--supersedes\", \"ADR-0001\"]), `resolve` ([\"ADR-0001\", \"--status\", \"rejected\"]). Runs `car decision <action> --json <args…>` and returns exactly what it prints.",
        actions: &["list", "record", "resolve"],
        group: Some("decision"),
        routes: &[],
        effect: Effect::Write,
        reads: &["list"],
        team: true,
        timeout_secs: 120,
        output: output::<Decided>,
    },
    Spec {
        name: "project_admin",
        title: "Project administration",
        description: "Project housekeeping: `stats` (what the project holds; args [\"--all\"] for every project), `prune` (forget projects whose root directory is gone: runs `car project prune`; args [\"--dry-run\"]), `config` (args [\"get\", \"task.prefix\"], [\"set\", \"task.prefix\", \"APP\"], [\"list\"]), `project` (args [\"list\"], [\"show\"], [\"rename\", \"NEW\"]). Runs `car <action> --json <args…>` (prune: `car project prune`) and returns exactly what it prints. Archiving old tasks to cold storage is `car prune` on the command line.",
        actions: &["stats", "prune", "config", "project"],
        group: None,
        routes: &[("prune", &["project", "prune"])],
        effect: Effect::Destructive,
        reads: &["stats"],
        team: false,
        timeout_secs: 120,
        output: output::<AdminOutcome>,
    },
];

/// A call's command line, parsed with the commands' own definitions (the CLI's).
#[derive(Debug, Parser)]
#[command(name = "car")]
struct Line {
    /// The envelope is always what a tool answers; the flag is accepted as the CLI takes it.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: LineCommand,
}

#[derive(Debug, Subcommand)]
enum LineCommand {
    #[command(subcommand)]
    Task(TaskCommand),
    #[command(subcommand)]
    Progress(ProgressCommand),
    #[command(subcommand)]
    Decision(DecisionCommand),
    #[command(subcommand)]
    Graph(GraphCommand),
    #[command(flatten)]
    Session(SessionCommand),
    Stats(StatsArgs),
    #[command(subcommand)]
    Project(ProjectCommand),
    #[command(subcommand)]
    Config(ConfigCommand),
}

/// Parses a command line. The clap command is built once and reused (building it is most of
/// the cost of a small call); parsing is serialized on it, microseconds each.
fn parse(words: Vec<String>) -> Result<Line, clap::Error> {
    static COMMAND: OnceLock<Mutex<clap::Command>> = OnceLock::new();
    let command = COMMAND.get_or_init(|| Mutex::new(Line::command()));
    let mut command = command.lock().unwrap_or_else(|poison| poison.into_inner());
    let mut matches = command.try_get_matches_from_mut(words)?;
    Line::from_arg_matches_mut(&mut matches).map_err(|e| e.format(&mut command))
}

/// The command words a call stands for: `car --json <group> <action> <args…>`.
fn words(spec: &Spec, action: &str, args: &[String]) -> Vec<String> {
    let mut words = vec!["car".to_string(), "--json".to_string()];
    match spec.routes.iter().find(|(a, _)| *a == action) {
        Some((_, route)) => words.extend(route.iter().map(|w| w.to_string())),
        None => {
            words.extend(spec.group.map(str::to_string));
            words.push(action.to_string());
        }
    }
    words.extend(args.iter().cloned());
    words
}

/// A failed call as the seed's contract has it: what the command printed on stdout (its
/// failure envelope), then `--- STDERR ---` and what it printed on stderr.
fn failed(code: &'static str, stdout: String, stderr: &str) -> ToolError {
    ToolError::Reported {
        code,
        text: format!("{stdout}--- STDERR ---\n{stderr}"),
    }
}

/// A command's outcome, typed, as the envelope's data.
fn envelope<T: Serialize>(
    command: &str,
    outcome: Result<T, ProjectError>,
) -> Result<Value, ToolError> {
    match outcome {
        Ok(data) => {
            let data = serde_json::to_value(data).map_err(|e| ToolError::Failed(e.to_string()))?;
            Ok(output::success(command, data))
        }
        Err(e) => Err(failed(
            e.code(),
            format!("{}\n", output::failure(command, e.code(), &e.to_string())),
            "",
        )),
    }
}

impl ProjectTools {
    fn project(&self) -> Result<Project, ProjectError> {
        Project::open(self.store.clone(), &self.root)
    }

    /// Runs a parsed command.
    fn run(&self, command: LineCommand) -> Result<Value, ToolError> {
        match command {
            LineCommand::Task(command) => envelope(
                task::command_name(&command),
                self.project().and_then(|p| task::run(&p, &command)),
            ),
            LineCommand::Progress(command) => envelope(
                journal::progress_command_name(&command),
                self.project()
                    .and_then(|p| journal::run_progress(&p, &command)),
            ),
            LineCommand::Decision(command) => envelope(
                journal::decision_command_name(&command),
                self.project()
                    .and_then(|p| journal::run_decision(&p, &command)),
            ),
            LineCommand::Graph(command) => envelope(
                graph::command_name(&command),
                self.project()
                    .and_then(|p| graph::run(&p, &command, &|_| {})),
            ),
            LineCommand::Session(SessionCommand::Doctor(args)) => {
                let Some(doctor) = &self.doctor else {
                    return Err(failed(
                        "unavailable",
                        format!(
                            "{}\n",
                            output::failure(
                                "doctor",
                                "unavailable",
                                "doctor checks one machine's CAR; run `car doctor` there"
                            )
                        ),
                        "",
                    ));
                };
                let doctor = doctor(Mode::dry_run_if(!args.fix));
                match doctor.failure() {
                    None => envelope("doctor", Ok(SessionOutcome::Doctor(doctor))),
                    Some(message) => Err(failed(
                        "unhealthy",
                        format!("{}\n", output::failure("doctor", "unhealthy", &message)),
                        "",
                    )),
                }
            }
            LineCommand::Session(command) => envelope(
                command.name(),
                self.project()
                    .and_then(|p| session::run(&p, self.memory.as_deref(), &command)),
            ),
            LineCommand::Stats(args) => envelope(
                "stats",
                admin::run_stats(&self.place(), &args).map(AdminOutcome::Stats),
            ),
            LineCommand::Project(command) => envelope(
                admin::project_command_name(&command),
                admin::run_project(&self.place(), &command),
            ),
            LineCommand::Config(command) => envelope(
                admin::config_command_name(&command),
                self.project().and_then(|p| admin::run_config(&p, &command)),
            ),
        }
    }

    fn place(&self) -> admin::Place<'_> {
        static CWD: OnceLock<PathBuf> = OnceLock::new();
        admin::Place {
            store: &self.store,
            root: &self.root,
            archive: &self.archive,
            cwd: CWD.get_or_init(|| std::env::current_dir().unwrap_or_default()),
        }
    }

    /// One call: `{action, args}`.
    fn call(&self, spec: &Spec, args: &Value) -> Result<Value, ToolError> {
        let action = args["action"].as_str().unwrap_or_default();
        let extra: Vec<String> = args["args"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|a| a.as_str().map(str::to_string))
            .collect();
        // Flags only: after `--` every word is a value (a title may start with anything).
        if let Some(flag) = extra
            .iter()
            .take_while(|a| *a != "--")
            .find(|a| ["--home", "--project"].iter().any(|f| a.starts_with(f)))
        {
            return Err(ToolError::InvalidArguments(format!(
                "{flag} is not available through MCP: this server works on {} with the data in {}",
                self.root.display(),
                self.archive.parent().unwrap_or(&self.root).display()
            )));
        }
        match parse(words(spec, action, &extra)) {
            Ok(line) => self.run(line.command),
            Err(err) => Err(failed("usage", String::new(), &err.render().to_string())),
        }
    }

    /// The six tools.
    pub fn tools(self) -> Vec<Tool> {
        self.serve(false)
    }

    /// The tools a team server serves on a project of its database: tasks, progress,
    /// decisions, and the status, briefing and checkpoints (`doctor` checks one machine).
    pub fn team_tools(self) -> Vec<Tool> {
        self.serve(true)
    }

    fn serve(self, team: bool) -> Vec<Tool> {
        SPECS
            .iter()
            .filter(|spec| spec.team || !team)
            .map(|spec| {
                let tools = self.clone();
                let actions: Vec<&str> = spec
                    .actions
                    .iter()
                    .copied()
                    .filter(|action| !(team && *action == "doctor"))
                    .collect();
                Tool::blocking(
                    ToolSpec::new(
                        spec.name,
                        spec.description,
                        json!({
                            "type": "object",
                            "properties": {
                                "action": {"type": "string", "enum": actions, "description": "The command to run."},
                                "args": {"type": "array", "items": {"type": "string"}, "default": [],
                                         "description": "Its arguments and flags, as on the command line (see `car <command> --help`)."}
                            },
                            "required": ["action"],
                            "additionalProperties": false
                        }),
                    )
                    .title(spec.title)
                    .output_schema((spec.output)())
                    .text(ResultText::JsonLine)
                    .effect(spec.effect)
                    .read_actions(spec.reads)
                    .idempotence(Idempotence::NotIdempotent)
                    .timeout(std::time::Duration::from_secs(spec.timeout_secs)),
                    move |c| {
                        crate::home::acting_for(c.context.author_name(), || {
                            tools.call(spec, &c.args)
                        })
                    },
                )
            })
            .collect()
    }
}
