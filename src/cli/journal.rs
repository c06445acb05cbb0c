//! `car progress …` (notes and blockers) and `car decision …` (ADRs): the commands are the
//! project capability's (`project::commands::journal`); this face renders their outcome.

use super::{open_project, remote, render_typed, Env, Printed};
use crate::output::table;
use crate::project::commands::journal::{
    decision_command_name, progress_command_name, run_decision, run_progress, Decided,
    DecisionCommand, Noted, ProgressCommand,
};
use crate::project::decisions::Decision;
use crate::project::progress::Progress;

impl Noted {
    fn render(&self) -> String {
        match self {
            Noted::List(list) if list.is_empty() => "no progress entries\n".into(),
            Noted::List(list) => list.iter().map(progress_line).collect(),
            Noted::One(entry) => progress_line(entry),
        }
    }
}

fn progress_line(p: &Progress) -> String {
    format!(
        "#{} {} [{}]{}: {}{}\n",
        p.id,
        p.kind,
        p.status,
        p.task
            .as_deref()
            .map(|t| format!(" on {t}"))
            .unwrap_or_default(),
        p.body,
        p.resolution
            .as_deref()
            .map(|r| format!(" — resolved: {r}"))
            .unwrap_or_default()
    )
}

/// Runs one `car progress` command and renders what it prints.
pub(crate) async fn execute_progress(env: &Env, command: ProgressCommand) -> Printed {
    let name = progress_command_name(&command);
    let result = match remote::server(env) {
        Some(server) => remote::project(env, server, "progress_tracker", "progress", None)
            .await
            .and_then(remote::typed),
        None => open_project(env).and_then(|project| Ok(run_progress(&project, &command)?)),
    };
    render_typed(env.json, name, result, Noted::render)
}

impl Decided {
    fn render(&self) -> String {
        match self {
            Decided::List(list) if list.is_empty() => "no decisions\n".into(),
            Decided::List(list) => {
                let rows: Vec<Vec<String>> = list
                    .iter()
                    .map(|d| vec![d.display_id.clone(), d.status.to_string(), d.title.clone()])
                    .collect();
                table(&["ID", "STATUS", "TITLE"], &rows)
            }
            Decided::One(decision) => decision_text(decision),
        }
    }
}

fn decision_text(d: &Decision) -> String {
    let mut out = format!(
        "{} ({}) {}\n  decision: {}\n",
        d.display_id, d.status, d.title, d.decision
    );
    for (label, value) in [
        ("context", Some(&d.context)),
        ("consequences", Some(&d.consequences)),
        ("resolution", d.resolution.as_ref()),
        ("supersedes", d.supersedes.as_ref()),
        ("supersededBy", d.superseded_by.as_ref()),
    ] {
        if let Some(v) = value.filter(|v| !v.is_empty()) {
            out.push_str(&format!("  {label}: {v}\n"));
        }
    }
    out
}

/// Runs one `car decision` command and renders what it prints.
pub(crate) async fn execute_decision(env: &Env, command: DecisionCommand) -> Printed {
    let name = decision_command_name(&command);
    let result = match remote::server(env) {
        Some(server) => remote::project(env, server, "decision_logger", "decision", None)
            .await
            .and_then(remote::typed),
        None => open_project(env).and_then(|project| Ok(run_decision(&project, &command)?)),
    };
    render_typed(env.json, name, result, Decided::render)
}
