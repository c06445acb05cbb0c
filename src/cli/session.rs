//! `car status`, `car context`, `car checkpoint`, `car resume`: where the project stands, the
//! session-start briefing, and named snapshots to come back to. They render to [`Printed`] so
//! the `context_manager` MCP tool runs them in-process.

use std::sync::Arc;

use clap::Args;

use super::{open_project, render_typed, Env, Failure, Printed};
use crate::memory::Memory;
use crate::project::lifecycle::{Briefing, Check, Resumed, Status};
use crate::project::tasks::Task;
use crate::project::Mode;

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
    #[arg(long, default_value = "")]
    pub note: String,
}

#[derive(Debug, Args)]
pub struct ResumeArgs {
    /// The checkpoint (default: the latest).
    pub name: Option<String>,
}

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

/// `car status`.
pub(crate) fn execute_status(env: &Env) -> Printed {
    let result = open_project(env).and_then(|p| Ok(p.status()?));
    render_typed(env.json, "status", result, status_text)
}

/// `car context`: with `memory`, the briefing includes the most relevant facts.
pub(crate) fn execute_context(
    env: &Env,
    args: &ContextArgs,
    memory: Option<&Arc<Memory>>,
) -> Printed {
    let result = (|| -> Result<Briefing, Failure> {
        let project = open_project(env)?;
        let opened;
        let memory = match memory {
            Some(m) => Some(m.as_ref()),
            None => {
                opened = Memory::open(
                    project.store.clone(),
                    Some(&env.project_root),
                    Some(&env.home.assistant_json()),
                )?;
                Some(&opened)
            }
        };
        Ok(project.context(memory, args.query.as_deref())?)
    })();
    render_typed(env.json, "context", result, |context| {
        context.briefing.clone()
    })
}

/// `car checkpoint`.
pub(crate) fn execute_checkpoint(env: &Env, args: &CheckpointArgs) -> Printed {
    let result =
        open_project(env).and_then(|p| Ok(p.checkpoint(args.name.as_deref(), &args.note)?));
    render_typed(env.json, "checkpoint", result, |checkpoint| {
        format!(
            "Checkpoint {0} saved ({1}). `car resume {0}` comes back to it.\n",
            checkpoint.name, checkpoint.created_at
        )
    })
}

/// `car resume`.
pub(crate) fn execute_resume(env: &Env, args: &ResumeArgs) -> Printed {
    let result = open_project(env).and_then(|p| Ok(p.resume(args.name.as_deref())?));
    render_typed(env.json, "resume", result, resumed_text)
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

/// The project checks of `car doctor` (with [`Mode::Apply`], repairing what they can).
pub(crate) fn doctor_checks(env: &Env, mode: Mode) -> Vec<Check> {
    match open_project(env).and_then(|p| Ok(p.check(mode)?)) {
        Ok(checks) => checks,
        Err(failure) => vec![Check::new("project data", false, failure.message)],
    }
}
