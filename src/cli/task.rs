//! `car task …`: the project's task tracker. The commands, their arguments and what they do
//! are the project capability's (`project::commands::task`, which the `task_manager` tool runs
//! too); this face renders their outcome for a person.

use super::{open_project, remote, render_typed, Env, Failure, Printed};
use crate::output::table;
use crate::project::commands::task::{self, command_name, TaskCommand, TaskOutcome};
use crate::project::tasks::{Task, TaskDetail, TaskStatus};

/// How a person reads a task command's outcome.
fn render(done: &TaskOutcome) -> String {
    match done {
        TaskOutcome::Tasks(tasks) => task_rows(tasks),
        TaskOutcome::Task(task) => one_task(task),
        TaskOutcome::Detail(detail) => human_detail(detail),
        TaskOutcome::Imported(imported) => format!(
            "Imported {} task(s) ({} to {}) with {} dependencies.\n",
            imported.created,
            imported.first.as_deref().unwrap_or("-"),
            imported.last.as_deref().unwrap_or("-"),
            imported.dependencies
        ),
        TaskOutcome::Dependency(change) => format!(
            "{}: {}",
            if change.changed {
                "updated"
            } else {
                "unchanged"
            },
            one_task(&change.task)
        ),
    }
}

fn task_rows(tasks: &[Task]) -> String {
    if tasks.is_empty() {
        return "no tasks\n".into();
    }
    let rows: Vec<Vec<String>> = tasks
        .iter()
        .map(|t| {
            let mut status = t.status.to_string();
            if let Some(by) = &t.claimed_by {
                status = format!("{status} ({by})");
            }
            if t.waiting_on > 0 && t.status == TaskStatus::Open {
                status = format!("waiting on {}", t.waiting_on);
            }
            vec![
                t.display_id.clone(),
                t.priority.to_string(),
                status,
                t.title.clone(),
                t.labels.join(","),
            ]
        })
        .collect();
    table(&["ID", "PRI", "STATUS", "TITLE", "LABELS"], &rows)
}

fn one_task(task: &Task) -> String {
    let mut out = format!(
        "{} [{}] {} — {}",
        task.display_id, task.priority, task.status, task.title
    );
    if let Some(by) = &task.claimed_by {
        out.push_str(&format!(" (claimed by {by})"));
    }
    if let Some(reason) = &task.blocked_reason {
        out.push_str(&format!("\n  blocked: {reason}"));
    }
    out.push('\n');
    out
}

fn human_detail(detail: &TaskDetail) -> String {
    let mut out = one_task(&detail.task);
    if !detail.description.is_empty() {
        out.push_str(&format!("\n{}\n", detail.description));
    }
    for (links, title) in [
        (&detail.depends_on, "Waits for"),
        (&detail.blocks, "Blocks"),
        (&detail.children, "Children"),
    ] {
        if !links.is_empty() {
            out.push_str(&format!("\n{title}:\n"));
            for l in links {
                out.push_str(&format!("  {} [{}] {}\n", l.display_id, l.status, l.title));
            }
        }
    }
    out.push_str("\nHistory:\n");
    for e in &detail.events {
        out.push_str(&format!(
            "  {}  {}{}{}\n",
            e.at,
            e.event,
            e.actor
                .as_deref()
                .map(|a| format!(" by {a}"))
                .unwrap_or_default(),
            e.detail
                .as_deref()
                .map(|d| format!(": {d}"))
                .unwrap_or_default()
        ));
    }
    out
}

/// Runs one `car task` command, here or on the team server, and renders what it prints.
pub(crate) async fn execute(env: &Env, command: TaskCommand) -> Printed {
    let name = command_name(&command);
    let result = match remote::server(env) {
        Some(_) if matches!(command, TaskCommand::Import { .. }) => Err(Failure::usage(
            "car task import reads a file on this machine; import into the local project, then `car team push` copies it up",
        )),
        Some(server) => remote::project(env, server, "task_manager", "task", None)
            .await
            .and_then(|data| {
                Ok(match name {
                    "task.list" | "task.ready" => TaskOutcome::Tasks(remote::typed(data)?),
                    "task.show" => TaskOutcome::Detail(remote::typed(data)?),
                    "task.dep.add" | "task.dep.remove" => {
                        TaskOutcome::Dependency(remote::typed(data)?)
                    }
                    _ => TaskOutcome::Task(remote::typed(data)?),
                })
            }),
        None => open_project(env).and_then(|project| Ok(task::run(&project, &command)?)),
    };
    render_typed(env.json, name, result, render)
}
