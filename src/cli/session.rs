//! `car status`, `car context`, `car checkpoint`, `car resume`: where the project stands, the
//! session-start briefing, and named snapshots to come back to. They render to [`Printed`] so
//! the `context_manager` MCP tool runs them in-process.

use std::sync::Arc;

use clap::Args;
use serde_json::{json, Value};

use super::{open_project, render, Env, Failure, Printed};
use crate::memory::Memory;
use crate::project::lifecycle::Status;
use crate::project::tasks::Task;

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

fn to_value<T: serde::Serialize>(value: &T) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
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
    match open_project(env).and_then(|p| Ok(p.status()?)) {
        Ok(status) => {
            let text = status_text(&status);
            render(env.json, "status", Ok(to_value(&status)), |_| text)
        }
        Err(failure) => render(env.json, "status", Err(failure), |_| String::new()),
    }
}

/// `car context`: with `memory`, the briefing includes the most relevant facts.
pub(crate) fn execute_context(
    env: &Env,
    args: &ContextArgs,
    memory: Option<&Arc<Memory>>,
) -> Printed {
    let result = (|| -> Result<Value, Failure> {
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
    render(env.json, "context", result, |data| {
        data["briefing"].as_str().unwrap_or("").to_string()
    })
}

/// `car checkpoint`.
pub(crate) fn execute_checkpoint(env: &Env, args: &CheckpointArgs) -> Printed {
    let result = open_project(env)
        .and_then(|p| Ok(to_value(&p.checkpoint(args.name.as_deref(), &args.note)?)));
    render(env.json, "checkpoint", result, |data| {
        format!(
            "Checkpoint {} saved ({}). `car resume {}` comes back to it.\n",
            data["name"].as_str().unwrap_or(""),
            data["createdAt"].as_str().unwrap_or(""),
            data["name"].as_str().unwrap_or("")
        )
    })
}

/// `car resume`.
pub(crate) fn execute_resume(env: &Env, args: &ResumeArgs) -> Printed {
    let result = open_project(env).and_then(|p| Ok(p.resume(args.name.as_deref())?));
    render(env.json, "resume", result, |data| {
        let cp = &data["checkpoint"];
        let mut out = format!(
            "Resuming from {} ({}){}\n\n{}\n## Since then\n",
            cp["name"].as_str().unwrap_or(""),
            cp["createdAt"].as_str().unwrap_or(""),
            cp["note"]
                .as_str()
                .filter(|n| !n.is_empty())
                .map(|n| format!(": {n}"))
                .unwrap_or_default(),
            data["briefing"].as_str().unwrap_or("")
        );
        let changes = &data["changes"];
        let ids = |key: &str| -> Vec<String> {
            changes[key]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        };
        let mut any = false;
        for (key, label) in [
            ("tasksCreated", "New tasks"),
            ("tasksRemoved", "Tasks archived or gone"),
        ] {
            let list = ids(key);
            if !list.is_empty() {
                any = true;
                out.push_str(&format!("- {label}: {}\n", list.join(", ")));
            }
        }
        for m in changes["tasksMoved"].as_array().into_iter().flatten() {
            any = true;
            out.push_str(&format!(
                "- {}: {} → {}\n",
                m["displayId"].as_str().unwrap_or(""),
                m["from"].as_str().unwrap_or(""),
                m["to"].as_str().unwrap_or("")
            ));
        }
        for d in changes["decisions"].as_array().into_iter().flatten() {
            any = true;
            out.push_str(&format!(
                "- decision {}: {}\n",
                d["displayId"].as_str().unwrap_or(""),
                d["title"].as_str().unwrap_or("")
            ));
        }
        for p in changes["progress"].as_array().into_iter().flatten() {
            any = true;
            out.push_str(&format!(
                "- {} #{}: {}\n",
                p["kind"].as_str().unwrap_or(""),
                p["id"],
                p["body"].as_str().unwrap_or("")
            ));
        }
        if !any {
            out.push_str("- nothing changed\n");
        }
        out
    })
}

/// The project checks of `car doctor`, as doctor check entries.
pub(crate) fn doctor_checks(env: &Env, fix: bool) -> Vec<Value> {
    match open_project(env).and_then(|p| Ok(p.check(fix)?)) {
        Ok(checks) => checks
            .into_iter()
            .map(|(name, ok, detail)| json!({"check": name, "ok": ok, "detail": detail}))
            .collect(),
        Err(failure) => {
            vec![json!({"check": "project data", "ok": false, "detail": failure.message})]
        }
    }
}
