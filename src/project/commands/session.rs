//! `status`, `context`, `checkpoint`, `resume` and `doctor`: where the project stands, the
//! session-start briefing, named snapshots to come back to, and the checks — the command lines
//! the CLI and the `context_manager` tool both parse, and what each command does.

use clap::{Args, Subcommand};
use serde::{Deserialize, Serialize};

use crate::memory::Memory;
use crate::project::lifecycle::{Briefing, Check, CheckpointInfo, Resumed, Status};
use crate::project::{Project, ProjectError};

#[derive(Debug, Args)]
pub struct ContextArgs {
    /// What the session is about (default: the titles of the tasks in progress and ready).
    #[arg(long)]
    pub query: Option<String>,
}

#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  car checkpoint before-refactor --note \"API half done, tests red\"\n  car checkpoint                       # named cp-<timestamp>\n  car resume before-refactor"
)]
pub struct CheckpointArgs {
    /// A name (default: cp-<timestamp>); names are unique per project.
    pub name: Option<String>,
    /// What to remember about this point (kept with it).
    #[arg(long, default_value = "")]
    pub note: String,
}

#[derive(Debug, Args)]
pub struct ResumeArgs {
    /// The checkpoint (default: the latest).
    pub name: Option<String>,
}

#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// Repair what can be repaired (dependency counts, the decision search index).
    #[arg(long)]
    pub fix: bool,
}

/// The session commands, as the `context_manager` tool's actions.
#[derive(Debug, Subcommand)]
pub enum SessionCommand {
    /// Where the project stands: task counts, ready work, blockers, decisions, last checkpoint.
    Status,
    /// The briefing an agent reads at session start (ready work, blockers, decisions, relevant memory).
    Context(ContextArgs),
    /// Save a named snapshot of where the project stands, with a note.
    Checkpoint(CheckpointArgs),
    /// A checkpoint's briefing and what changed since (default: the latest checkpoint).
    Resume(ResumeArgs),
    /// Check CAR's home, database, policies and project data and say what to fix.
    Doctor(DoctorArgs),
}

impl SessionCommand {
    /// The envelope's name (`status`, `context`, …).
    pub fn name(&self) -> &'static str {
        match self {
            SessionCommand::Status => "status",
            SessionCommand::Context(_) => "context",
            SessionCommand::Checkpoint(_) => "checkpoint",
            SessionCommand::Resume(_) => "resume",
            SessionCommand::Doctor(_) => "doctor",
        }
    }
}

/// What `doctor` found.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Doctor {
    /// Every check passed.
    pub healthy: bool,
    /// CAR_HOME.
    pub home: String,
    /// CAR's version.
    pub version: String,
    pub checks: Vec<Check>,
}

impl Doctor {
    /// Why the checks are a failure (`unhealthy`), when one failed.
    pub fn failure(&self) -> Option<String> {
        (!self.healthy).then(|| {
            format!(
                "some checks failed: {}",
                serde_json::to_value(&self.checks).unwrap_or_default()
            )
        })
    }
}

/// What a session command did, each by its own type.
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum SessionOutcome {
    /// `status`.
    Status(Box<Status>),
    /// `context`: the briefing and what it was made from.
    Briefing(Box<Briefing>),
    /// `checkpoint`: the checkpoint saved.
    Checkpoint(CheckpointInfo),
    /// `resume`: the checkpoint's briefing and what changed since.
    Resumed(Box<Resumed>),
    /// `doctor`: every check.
    Doctor(Doctor),
}

/// Runs the session command `command` other than `doctor` (which checks more than the project:
/// the composition root runs it). `memory` gives the briefing its relevant entries.
pub fn run(
    project: &Project,
    memory: Option<&Memory>,
    command: &SessionCommand,
) -> Result<SessionOutcome, ProjectError> {
    Ok(match command {
        SessionCommand::Status => SessionOutcome::Status(Box::new(project.status()?)),
        SessionCommand::Context(args) => {
            SessionOutcome::Briefing(Box::new(project.context(memory, args.query.as_deref())?))
        }
        SessionCommand::Checkpoint(args) => {
            SessionOutcome::Checkpoint(project.checkpoint(args.name.as_deref(), &args.note)?)
        }
        SessionCommand::Resume(args) => {
            SessionOutcome::Resumed(Box::new(project.resume(args.name.as_deref())?))
        }
        SessionCommand::Doctor(_) => {
            return Err(ProjectError::Invalid(
                "doctor checks the whole of CAR: run it through the composition root".into(),
            ))
        }
    })
}
