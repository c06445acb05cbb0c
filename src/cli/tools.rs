//! `car tools list|call` and `car executions`: the registry and its log, from the shell.

use std::process::ExitCode;

use clap::{Args, Subcommand};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::{call_tool, finish, finish_typed, open_app, Env, Failure};
use crate::output::render_human;
use crate::runtime::executions::{self, Execution};
use crate::runtime::ToolSpec;

#[derive(Debug, Subcommand)]
pub enum ToolsCommand {
    /// List every registered tool with its effect and hints.
    List,
    /// Call any registered tool in-process, through validation, policy and the execution log.
    #[command(
        after_help = "Examples:\n  car tools call memory_query --params '{\"query\":\"release steps\"}'\n  echo '{\"query\":\"x\"}' | car tools call memory_query --params -"
    )]
    Call {
        /// The tool's name, as `car tools list` shows it.
        name: String,
        /// Arguments as a JSON object, @FILE to read them from a file, or - for stdin.
        #[arg(long, default_value = "{}")]
        params: String,
        /// Idempotency key: a repeated id on a non-idempotent tool returns the recorded result.
        #[arg(long)]
        request_id: Option<String>,
    },
}

#[derive(Debug, Args)]
pub struct ExecutionsArgs {
    /// Only this tool's executions.
    #[arg(long)]
    tool: Option<String>,
    /// Only those that came through this face: cli, mcp, web (the dashboard), agent, or hook
    /// (the policy gate's denies and warnings, the memory hooks' briefings).
    #[arg(long)]
    face: Option<String>,
    /// Only those that ended so: ok, error, denied, warned (a hook's warning), cancelled,
    /// timeout or running.
    #[arg(long)]
    outcome: Option<String>,
    /// Only those of this session (an MCP session's id, a host's session id for hooks).
    #[arg(long)]
    session: Option<String>,
    /// Only those this agent made: the MCP client's name (claude-code, …) or, for the policy
    /// hook's decisions, its host (claude-code, codex, gemini, cursor).
    #[arg(long)]
    host: Option<String>,
    /// How many, newest first.
    #[arg(long, default_value_t = 20)]
    limit: usize,
}

fn parse_params(text: &str) -> Result<Value, Failure> {
    let source = if text == "-" {
        std::io::read_to_string(std::io::stdin())
            .map_err(|e| Failure::new("io", format!("cannot read stdin: {e}")))?
    } else if let Some(path) = text.strip_prefix('@') {
        std::fs::read_to_string(path)
            .map_err(|e| Failure::usage(format!("cannot read {path}: {e}")))?
    } else {
        text.to_string()
    };
    let value: Value = serde_json::from_str(&source)
        .map_err(|e| Failure::usage(format!("--params is not JSON: {e}")))?;
    if !value.is_object() {
        return Err(Failure::usage(
            "--params must be a JSON object, e.g. '{\"query\":\"…\"}'",
        ));
    }
    Ok(value)
}

pub async fn run(env: &Env, command: ToolsCommand) -> ExitCode {
    let name = match command {
        ToolsCommand::List => "tools.list",
        ToolsCommand::Call { .. } => "tools.call",
    };
    let app = match open_app(env) {
        Ok(app) => app,
        Err(f) => return finish(env.json, name, Err(f), |_| String::new()),
    };
    match command {
        ToolsCommand::List => {
            let specs = app.runtime().specs();
            let rendered = human_tools(&specs);
            let tools: Vec<Value> = specs.iter().map(ToolSpec::to_json).collect();
            finish(env.json, name, Ok(json!({"tools": tools})), move |_| {
                rendered
            })
        }
        ToolsCommand::Call {
            name: tool,
            params,
            request_id,
        } => {
            let result = match parse_params(&params) {
                Ok(args) => call_tool(&app, &tool, args, request_id).await,
                Err(f) => Err(f),
            };
            finish(env.json, name, result, render_human)
        }
    }
}

/// One line a tool: name, effect, title.
fn human_tools(specs: &[ToolSpec]) -> String {
    specs
        .iter()
        .map(|spec| {
            format!(
                "{:<24} {:<15} {}\n",
                spec.name,
                spec.effect.as_str(),
                spec.title
            )
        })
        .collect()
}

/// What `car executions` lists.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Executions {
    /// Newest first.
    pub executions: Vec<Execution>,
}

pub async fn executions(env: &Env, args: ExecutionsArgs) -> ExitCode {
    // One table: the store alone, not the whole of CAR (policies, connectors, the import).
    let result = crate::store::Store::open(&env.home.db_path())
        .map_err(Failure::from)
        .and_then(|store| {
            // The policy hook's denies and warnings written since the last read join the log.
            if let Err(e) = executions::ingest_gate_log(&store, &env.home.gate_log_path()) {
                tracing::warn!("the gate's decision file was not read: {e}");
            }
            let filter = executions::Filter {
                tool: args.tool.as_deref(),
                face: args.face.as_deref(),
                status: args.outcome.as_deref(),
                session: args.session.as_deref(),
                host: args.host.as_deref(),
                subject: None,
            };
            executions::recent(&store, &filter, args.limit)
                .map(|executions| Executions { executions })
                .map_err(Failure::from)
        });
    finish_typed(env.json, "executions.list", result, |list| {
        if list.executions.is_empty() {
            "no executions recorded yet\n".to_string()
        } else {
            // The generic table, its columns the fields of an execution.
            serde_json::to_value(&list.executions)
                .map(|rows| render_human(&rows))
                .unwrap_or_default()
        }
    })
}
