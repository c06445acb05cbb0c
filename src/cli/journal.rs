//! `car progress …` (notes and blockers) and `car decision …` (ADRs). Both render to
//! [`Printed`] so the `progress_tracker` and `decision_logger` MCP tools run them in-process.

use clap::Subcommand;
use serde_json::Value;

use super::{open_project, render, Env, Failure, Printed};
use crate::output::table;
use crate::project::decisions::NewDecision;
use crate::project::progress::ProgressFilter;
use crate::project::Project;

#[derive(Debug, Subcommand)]
#[command(
    after_help = "Examples:\n  car progress create \"retry loop rewritten, tests next\" --task CTX-0001\n  car progress create \"CI runner is down\" --blocker\n  car progress list --status all\n  car progress resolve 3 --resolution \"runner restarted\""
)]
pub enum ProgressCommand {
    /// Notes and blockers, newest first (default: the open ones).
    List {
        #[arg(long)]
        task: Option<String>,
        /// open, resolved or all.
        #[arg(long)]
        status: Option<String>,
        /// note or blocker.
        #[arg(long)]
        kind: Option<String>,
        #[arg(long, default_value_t = 50)]
        limit: usize,
    },
    /// Add a note (or, with --blocker, a blocker) on a task or on the project.
    Create {
        text: String,
        #[arg(long)]
        task: Option<String>,
        #[arg(long)]
        blocker: bool,
        /// Who wrote it (default: CAR_AGENT_ID, else USER).
        #[arg(long)]
        author: Option<String>,
    },
    /// Rewrite an entry.
    Update {
        id: String,
        #[arg(long)]
        body: Option<String>,
        /// note or blocker.
        #[arg(long)]
        kind: Option<String>,
    },
    /// Resolve an entry (a blocker lifted, a note dealt with).
    Resolve {
        id: String,
        #[arg(long)]
        resolution: Option<String>,
    },
}

#[derive(Debug, Subcommand)]
#[command(
    after_help = "Examples:\n  car decision record \"Use SQLite\" --decision \"one WAL database under CAR_HOME\" --context \"many processes write\"\n  car decision record \"Shard by project\" --decision \"…\" --supersedes ADR-0001\n  car decision list --search \"sqlite wal\"\n  car decision resolve ADR-0002 --status rejected --note \"too complex\""
)]
pub enum DecisionCommand {
    /// Decisions, newest first; --search ranks by full-text relevance (stemmed).
    List {
        /// proposed, accepted, rejected, deprecated, superseded or all.
        #[arg(long)]
        status: Option<String>,
        #[arg(long)]
        search: Option<String>,
        #[arg(long, default_value_t = 50)]
        limit: usize,
    },
    /// Record a decision (status accepted unless --status proposed).
    Record {
        title: String,
        #[arg(long)]
        decision: String,
        #[arg(long, default_value = "")]
        context: String,
        #[arg(long, default_value = "")]
        consequences: String,
        #[arg(long)]
        status: Option<String>,
        /// A decision this one replaces (it becomes superseded).
        #[arg(long)]
        supersedes: Option<String>,
    },
    /// Settle a decision: accepted, rejected or deprecated.
    Resolve {
        id: String,
        #[arg(long)]
        status: String,
        #[arg(long)]
        note: Option<String>,
    },
}

fn to_value<T: serde::Serialize>(value: &T) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}

fn text(v: &Value, key: &str) -> String {
    v[key].as_str().unwrap_or("").to_string()
}

fn progress_line(p: &Value) -> String {
    format!(
        "#{} {} [{}]{}: {}{}\n",
        p["id"],
        text(p, "kind"),
        text(p, "status"),
        p["task"]
            .as_str()
            .map(|t| format!(" on {t}"))
            .unwrap_or_default(),
        text(p, "body"),
        p["resolution"]
            .as_str()
            .map(|r| format!(" — resolved: {r}"))
            .unwrap_or_default()
    )
}

fn run_progress(project: &Project, command: &ProgressCommand) -> Result<Value, Failure> {
    Ok(match command {
        ProgressCommand::List {
            task,
            status,
            kind,
            limit,
        } => to_value(&project.list_progress(&ProgressFilter {
            task: task.clone(),
            status: status.clone(),
            kind: kind.clone(),
            limit: *limit,
        })?),
        ProgressCommand::Create {
            text,
            task,
            blocker,
            author,
        } => to_value(&project.add_progress(
            task.as_deref(),
            if *blocker { "blocker" } else { "note" },
            text,
            Some(&crate::home::agent_id(author.as_deref())),
        )?),
        ProgressCommand::Update { id, body, kind } => {
            to_value(&project.update_progress(id, body.as_deref(), kind.as_deref())?)
        }
        ProgressCommand::Resolve { id, resolution } => {
            to_value(&project.resolve_progress(id, resolution.as_deref())?)
        }
    })
}

/// Runs one `car progress` command and renders what it prints.
pub(crate) fn execute_progress(env: &Env, command: ProgressCommand) -> Printed {
    let name = match command {
        ProgressCommand::List { .. } => "progress.list",
        ProgressCommand::Create { .. } => "progress.create",
        ProgressCommand::Update { .. } => "progress.update",
        ProgressCommand::Resolve { .. } => "progress.resolve",
    };
    let result = open_project(env).and_then(|project| run_progress(&project, &command));
    render(env.json, name, result, |data| match data.as_array() {
        Some(list) if list.is_empty() => "no progress entries\n".into(),
        Some(list) => list.iter().map(progress_line).collect(),
        None => progress_line(data),
    })
}

fn run_decision(project: &Project, command: &DecisionCommand) -> Result<Value, Failure> {
    Ok(match command {
        DecisionCommand::List {
            status,
            search,
            limit,
        } => to_value(&project.list_decisions(status.as_deref(), search.as_deref(), *limit)?),
        DecisionCommand::Record {
            title,
            decision,
            context,
            consequences,
            status,
            supersedes,
        } => to_value(&project.record_decision(NewDecision {
            title: title.clone(),
            context: context.clone(),
            decision: decision.clone(),
            consequences: consequences.clone(),
            status: status.clone(),
            supersedes: supersedes.clone(),
        })?),
        DecisionCommand::Resolve { id, status, note } => {
            to_value(&project.resolve_decision(id, status, note.as_deref())?)
        }
    })
}

fn decision_text(d: &Value) -> String {
    let mut out = format!(
        "{} ({}) {}\n  decision: {}\n",
        text(d, "displayId"),
        text(d, "status"),
        text(d, "title"),
        text(d, "decision")
    );
    for key in [
        "context",
        "consequences",
        "resolution",
        "supersedes",
        "supersededBy",
    ] {
        if let Some(v) = d[key].as_str().filter(|v| !v.is_empty()) {
            out.push_str(&format!("  {key}: {v}\n"));
        }
    }
    out
}

/// Runs one `car decision` command and renders what it prints.
pub(crate) fn execute_decision(env: &Env, command: DecisionCommand) -> Printed {
    let name = match command {
        DecisionCommand::List { .. } => "decision.list",
        DecisionCommand::Record { .. } => "decision.record",
        DecisionCommand::Resolve { .. } => "decision.resolve",
    };
    let result = open_project(env).and_then(|project| run_decision(&project, &command));
    render(env.json, name, result, |data| match data.as_array() {
        Some(list) if list.is_empty() => "no decisions\n".into(),
        Some(list) => {
            let rows: Vec<Vec<String>> = list
                .iter()
                .map(|d| vec![text(d, "displayId"), text(d, "status"), text(d, "title")])
                .collect();
            table(&["ID", "STATUS", "TITLE"], &rows)
        }
        None => decision_text(data),
    })
}
