//! `car status`, `car context`, `car checkpoint`, `car resume`: where the project stands, the
//! session-start briefing, and named snapshots to come back to. The commands are the project
//! capability's (`project::commands::session`); this face renders their outcome.

use std::sync::Arc;

use super::{open_project, remote, render_typed, Env, Failure, Printed};
use crate::memory::Memory;
use crate::project::commands::session::{
    self, CheckpointArgs, ContextArgs, ResumeArgs, SessionCommand, SessionOutcome,
};
use crate::project::lifecycle::{Resumed, Status};
use crate::project::tasks::Task;

fn status_text(status: &Status) -> String {
    let count = |key: &str| status.tasks.get(key).copied().unwrap_or(0);
    let mut out = format!(
        "{} ({})\nTasks: {} ready, {} in progress, {} blocked, {} open, {} done, {} cancelled ({} in all)\n",
        status.project.name,
        status.project.root,
        count("ready"),
        count("claimed"),
        count("blocked"),
        count("open"),
        count("done"),
        count("cancelled"),
        count("total")
    );
    let tasks = |tasks: &[Task]| -> Vec<(String, String)> {
        tasks
            .iter()
            .map(|t| (t.display_id.clone(), t.title.clone()))
            .collect()
    };
    let blockers = status
        .blockers
        .iter()
        .map(|p| (format!("#{}", p.id), p.body.clone()));
    let decisions = status
        .decisions
        .iter()
        .map(|d| (d.display_id.clone(), d.title.clone()));
    for (title, rows) in [
        ("In progress", tasks(&status.in_progress)),
        ("Ready", tasks(&status.ready)),
        ("Blocked tasks", tasks(&status.blocked)),
        ("Open blockers", blockers.collect()),
        ("Recent decisions", decisions.collect()),
    ] {
        if !rows.is_empty() {
            out.push_str(&format!("\n{title}:\n"));
            for (id, what) in rows {
                out.push_str(&format!("  {id}  {what}\n"));
            }
        }
    }
    match &status.last_checkpoint {
        Some(checkpoint) => out.push_str(&format!(
            "\nLast checkpoint: {} ({})\n",
            checkpoint.name, checkpoint.created_at
        )),
        None => out.push_str("\nNo checkpoint yet (`car checkpoint NAME`).\n"),
    }
    out
}

/// Runs a session command (not `doctor`: see `cli::doctor`). `memory` gives `context` its
/// relevant entries; without it the command opens the project's memory itself.
async fn execute(env: &Env, command: SessionCommand, memory: Option<&Arc<Memory>>) -> Printed {
    let name = command.name();
    let local = || -> Result<SessionOutcome, Failure> {
        let project = open_project(env)?;
        let opened;
        let memory = match (memory, &command) {
            (Some(m), _) => Some(m.as_ref()),
            (None, SessionCommand::Context(_)) => {
                opened = Memory::open(
                    project.store.clone(),
                    Some(&env.project_root),
                    Some(&env.home.assistant_json()),
                )?;
                Some(&opened)
            }
            (None, _) => None,
        };
        Ok(session::run(&project, memory, &command)?)
    };
    let result = match remote::server(env) {
        Some(server) => remote::project(env, server, "context_manager", name, Some(name))
            .await
            .and_then(|data| {
                Ok(match &command {
                    SessionCommand::Status => SessionOutcome::Status(remote::typed(data)?),
                    SessionCommand::Context(_) => SessionOutcome::Briefing(remote::typed(data)?),
                    SessionCommand::Checkpoint(_) => {
                        SessionOutcome::Checkpoint(remote::typed(data)?)
                    }
                    SessionCommand::Resume(_) => SessionOutcome::Resumed(remote::typed(data)?),
                    SessionCommand::Doctor(_) => SessionOutcome::Doctor(remote::typed(data)?),
                })
            }),
        None => local(),
    };
    render_typed(env.json, name, result, |outcome| match outcome {
        SessionOutcome::Status(status) => status_text(status),
        SessionOutcome::Briefing(context) => context.briefing.clone(),
        SessionOutcome::Checkpoint(checkpoint) => format!(
            "Checkpoint {0} saved ({1}). `car resume {0}` comes back to it.\n",
            checkpoint.name, checkpoint.created_at
        ),
        SessionOutcome::Resumed(resumed) => resumed_text(resumed),
        SessionOutcome::Doctor(_) => String::new(),
    })
}

/// `car status`.
pub(crate) async fn execute_status(env: &Env) -> Printed {
    execute(env, SessionCommand::Status, None).await
}

/// `car context`.
pub(crate) async fn execute_context(env: &Env, args: ContextArgs) -> Printed {
    execute(env, SessionCommand::Context(args), None).await
}

/// `car checkpoint`.
pub(crate) async fn execute_checkpoint(env: &Env, args: CheckpointArgs) -> Printed {
    execute(env, SessionCommand::Checkpoint(args), None).await
}

/// `car resume`.
pub(crate) async fn execute_resume(env: &Env, args: ResumeArgs) -> Printed {
    execute(env, SessionCommand::Resume(args), None).await
}

fn resumed_text(resumed: &Resumed) -> String {
    let cp = &resumed.checkpoint;
    let note = if cp.note.is_empty() {
        String::new()
    } else {
        format!(": {}", cp.note)
    };
    let mut out = format!(
        "Resuming from {} ({}){note}\n\n{}\n## Since then\n",
        cp.name, cp.created_at, resumed.briefing
    );
    let changes = &resumed.changes;
    let mut lines = Vec::new();
    for (list, label) in [
        (&changes.tasks_created, "New tasks"),
        (&changes.tasks_removed, "Tasks archived or gone"),
    ] {
        if !list.is_empty() {
            lines.push(format!("- {label}: {}\n", list.join(", ")));
        }
    }
    lines.extend(
        changes
            .tasks_moved
            .iter()
            .map(|m| format!("- {}: {} → {}\n", m.display_id, m.from, m.to)),
    );
    lines.extend(
        changes
            .decisions
            .iter()
            .map(|d| format!("- decision {}: {}\n", d.display_id, d.title)),
    );
    lines.extend(
        changes
            .progress
            .iter()
            .map(|p| format!("- {} #{}: {}\n", p.kind, p.id, p.body)),
    );
    if lines.is_empty() {
        lines.push("- nothing changed\n".to_string());
    }
    out.extend(lines);
    out
}
