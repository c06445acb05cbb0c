//! `progress …` (notes and blockers) and `decision …` (ADRs): the command lines the CLI and the
//! `progress_tracker` and `decision_logger` tools both parse, and what each command does.

use clap::Subcommand;
use serde::Serialize;

use crate::project::decisions::{Decision, NewDecision};
use crate::project::progress::{Progress, ProgressFilter};
use crate::project::{Project, ProjectError};

#[derive(Debug, Subcommand)]
#[command(
    after_help = "Examples:\n  car progress create \"retry loop rewritten, tests next\" --task CTX-0001\n  car progress create \"CI runner is down\" --blocker\n  car progress list --status all\n  car progress resolve 3 --resolution \"runner restarted\""
)]
pub enum ProgressCommand {
    /// Notes and blockers, newest first (default: the open ones).
    List {
        /// Only the entries on this task.
        #[arg(long)]
        task: Option<String>,
        /// open, resolved or all.
        #[arg(long)]
        status: Option<String>,
        /// note or blocker.
        #[arg(long)]
        kind: Option<String>,
        /// How many (0: all).
        #[arg(long, default_value_t = 50)]
        limit: usize,
    },
    /// Add a note (or, with --blocker, a blocker) on a task or on the project.
    Create {
        /// The note or the blocker, in words.
        text: String,
        /// The task it is about (default: the project).
        #[arg(long)]
        task: Option<String>,
        /// It blocks work (open until resolved), not a note.
        #[arg(long)]
        blocker: bool,
        /// Who wrote it (default: CAR_AGENT_ID, else USER).
        #[arg(long)]
        author: Option<String>,
    },
    /// Rewrite an entry.
    Update {
        /// The entry's number.
        id: String,
        /// The new text.
        #[arg(long)]
        body: Option<String>,
        /// note or blocker.
        #[arg(long)]
        kind: Option<String>,
    },
    /// Resolve an entry (a blocker lifted, a note dealt with).
    Resolve {
        /// The entry's number.
        id: String,
        /// How it was resolved.
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
        /// Words to rank the decisions by (full-text, stemmed).
        #[arg(long)]
        search: Option<String>,
        /// How many (0: all).
        #[arg(long, default_value_t = 50)]
        limit: usize,
    },
    /// Record a decision (status accepted unless --status proposed).
    Record {
        /// What was decided, in a line.
        title: String,
        /// The decision itself.
        #[arg(long)]
        decision: String,
        /// Why it came up: the forces at play.
        #[arg(long, default_value = "")]
        context: String,
        /// What follows from it, good and bad.
        #[arg(long, default_value = "")]
        consequences: String,
        /// proposed, or accepted (the default).
        #[arg(long)]
        status: Option<String>,
        /// A decision this one replaces (it becomes superseded).
        #[arg(long)]
        supersedes: Option<String>,
    },
    /// Settle a decision: accepted, rejected or deprecated.
    Resolve {
        /// The decision (ADR-0001).
        id: String,
        /// accepted, rejected or deprecated.
        #[arg(long)]
        status: String,
        /// Why (kept as its resolution).
        #[arg(long)]
        note: Option<String>,
    },
}

/// Progress entries, or the one a command wrote (serialized as it is).
#[derive(Debug, Serialize, serde::Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum Noted {
    List(Vec<Progress>),
    One(Progress),
}

/// The envelope's name of a progress command (`progress.list`).
pub fn progress_command_name(command: &ProgressCommand) -> &'static str {
    match command {
        ProgressCommand::List { .. } => "progress.list",
        ProgressCommand::Create { .. } => "progress.create",
        ProgressCommand::Update { .. } => "progress.update",
        ProgressCommand::Resolve { .. } => "progress.resolve",
    }
}

/// Runs one progress command.
pub fn run_progress(project: &Project, command: &ProgressCommand) -> Result<Noted, ProjectError> {
    Ok(match command {
        ProgressCommand::List {
            task,
            status,
            kind,
            limit,
        } => Noted::List(project.list_progress(&ProgressFilter {
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
        } => Noted::One(project.add_progress(
            task.as_deref(),
            if *blocker { "blocker" } else { "note" },
            text,
            Some(&crate::home::agent_id(author.as_deref())),
        )?),
        ProgressCommand::Update { id, body, kind } => {
            Noted::One(project.update_progress(id, body.as_deref(), kind.as_deref())?)
        }
        ProgressCommand::Resolve { id, resolution } => {
            Noted::One(project.resolve_progress(id, resolution.as_deref())?)
        }
    })
}

/// Decisions, or the one a command wrote (serialized as it is).
#[derive(Debug, Serialize, serde::Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum Decided {
    List(Vec<Decision>),
    One(Box<Decision>),
}

/// The envelope's name of a decision command (`decision.list`).
pub fn decision_command_name(command: &DecisionCommand) -> &'static str {
    match command {
        DecisionCommand::List { .. } => "decision.list",
        DecisionCommand::Record { .. } => "decision.record",
        DecisionCommand::Resolve { .. } => "decision.resolve",
    }
}

/// Runs one decision command.
pub fn run_decision(project: &Project, command: &DecisionCommand) -> Result<Decided, ProjectError> {
    Ok(match command {
        DecisionCommand::List {
            status,
            search,
            limit,
        } => Decided::List(project.list_decisions(status.as_deref(), search.as_deref(), *limit)?),
        DecisionCommand::Record {
            title,
            decision,
            context,
            consequences,
            status,
            supersedes,
        } => Decided::One(Box::new(project.record_decision(NewDecision {
            title: title.clone(),
            context: context.clone(),
            decision: decision.clone(),
            consequences: consequences.clone(),
            status: status.clone(),
            supersedes: supersedes.clone(),
        })?)),
        DecisionCommand::Resolve { id, status, note } => Decided::One(Box::new(
            project.resolve_decision(id, status, note.as_deref())?,
        )),
    })
}
