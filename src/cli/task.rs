//! `car task …`: the project's task tracker. Every command renders to [`Printed`], so the
//! `task_manager` MCP tool runs exactly these commands in-process.

use clap::{Args, Subcommand};
use serde_json::{json, Value};

use super::{open_project, render, Env, Failure, Printed};
use crate::output::table;
use crate::project::tasks::{parse_priority, Filter, NewTask, Task, TaskDetail, TaskUpdate};
use crate::project::Project;

const TASK_HELP: &str = "\
Ids: CTX-0001, ctx-1, #1 or 1 (the prefix is the task.prefix setting).
Statuses: open, ready (open with every dependency done), claimed, blocked, done, cancelled.
Agents: claims and history record --agent, else CAR_AGENT_ID, else USER.

Examples:
  car task create \"Fix retry logic\" --priority P1 --label backend
  car task create \"Ship 2.0\" --depends-on CTX-0001
  car task list --status ready
  car task claim                       # the most urgent ready task, atomically
  car task complete CTX-0001 --note \"merged in #42\"
  car task dep add CTX-0002 CTX-0001   # CTX-0002 waits for CTX-0001";

#[derive(Debug, Subcommand)]
#[command(after_help = TASK_HELP)]
pub enum TaskCommand {
    /// List tasks, most urgent first (default: everything not done or cancelled).
    List {
        /// ready, open, claimed, blocked, done, cancelled or all.
        #[arg(long)]
        status: Option<String>,
        #[arg(long)]
        label: Option<String>,
        #[arg(long)]
        claimed_by: Option<String>,
        /// Only the children of this task.
        #[arg(long)]
        parent: Option<String>,
        /// How many (0: all).
        #[arg(long, default_value_t = 50)]
        limit: usize,
    },
    /// Create a task.
    Create {
        title: String,
        #[arg(long, default_value = "")]
        description: String,
        /// P0 (most urgent) … P4.
        #[arg(long, default_value = "P2")]
        priority: String,
        /// A label (repeatable).
        #[arg(long = "label")]
        labels: Vec<String>,
        #[arg(long)]
        parent: Option<String>,
        /// A task this one waits for (repeatable).
        #[arg(long = "depends-on")]
        depends_on: Vec<String>,
        #[command(flatten)]
        agent: AgentArg,
    },
    /// Change a task's title, description, priority, labels, parent or status (open, done, cancelled).
    Update {
        id: String,
        #[arg(long)]
        title: Option<String>,
        #[arg(long)]
        description: Option<String>,
        #[arg(long)]
        priority: Option<String>,
        /// Add a label (repeatable).
        #[arg(long = "label")]
        labels: Vec<String>,
        /// Remove a label (repeatable).
        #[arg(long = "unlabel")]
        unlabels: Vec<String>,
        #[arg(long, conflicts_with = "no_parent")]
        parent: Option<String>,
        #[arg(long)]
        no_parent: bool,
        /// open (also releases a claim), done or cancelled.
        #[arg(long)]
        status: Option<String>,
        #[command(flatten)]
        agent: AgentArg,
    },
    /// Claim a ready task (default: the most urgent one); of concurrent claimers exactly one wins.
    Claim {
        id: Option<String>,
        #[command(flatten)]
        agent: AgentArg,
    },
    /// Mark a task done; tasks waiting only on it become ready.
    Complete {
        id: String,
        #[arg(long)]
        note: Option<String>,
        #[command(flatten)]
        agent: AgentArg,
    },
    /// Mark a task blocked, saying why.
    Block {
        id: String,
        #[arg(long)]
        reason: String,
        #[command(flatten)]
        agent: AgentArg,
    },
    /// Lift a block (back to claimed if someone holds the task, else open).
    Unblock {
        id: String,
        #[command(flatten)]
        agent: AgentArg,
    },
    /// Show a task with its dependencies, dependents, children and history.
    Show { id: String },
    /// Import tasks from JSON Lines (one transaction; beads' issues.jsonl works as is).
    #[command(
        after_help = "Each line: {\"ref\": \"a\", \"title\": \"…\", \"description\": \"…\", \"priority\": \"P1\", \"labels\": […],\n            \"status\": \"open|done|cancelled\", \"depends_on\": [\"a\", \"CTX-0003\"], \"parent\": \"a\"}\nA bad line or a dependency cycle imports nothing.\nExamples:\n  car task import tasks.jsonl\n  car task import .beads/issues.jsonl"
    )]
    Import {
        /// The file, or - for stdin.
        file: std::path::PathBuf,
        #[command(flatten)]
        agent: AgentArg,
    },
    /// Add or remove a dependency.
    #[command(subcommand)]
    Dep(DepCommand),
}

#[derive(Debug, Subcommand)]
pub enum DepCommand {
    /// ID waits for ON (refused, with the path, when it would close a cycle).
    Add {
        id: String,
        on: String,
        #[command(flatten)]
        agent: AgentArg,
    },
    /// ID no longer waits for ON.
    Remove {
        id: String,
        on: String,
        #[command(flatten)]
        agent: AgentArg,
    },
}

#[derive(Debug, Args)]
pub struct AgentArg {
    /// Who is acting (default: CAR_AGENT_ID, else USER).
    #[arg(long)]
    agent: Option<String>,
}

impl AgentArg {
    fn id(&self) -> String {
        crate::home::agent_id(self.agent.as_deref())
    }
}

fn command_name(command: &TaskCommand) -> &'static str {
    match command {
        TaskCommand::List { .. } => "task.list",
        TaskCommand::Create { .. } => "task.create",
        TaskCommand::Update { .. } => "task.update",
        TaskCommand::Claim { .. } => "task.claim",
        TaskCommand::Complete { .. } => "task.complete",
        TaskCommand::Block { .. } => "task.block",
        TaskCommand::Unblock { .. } => "task.unblock",
        TaskCommand::Show { .. } => "task.show",
        TaskCommand::Import { .. } => "task.import",
        TaskCommand::Dep(DepCommand::Add { .. }) => "task.dep.add",
        TaskCommand::Dep(DepCommand::Remove { .. }) => "task.dep.remove",
    }
}

fn to_value<T: serde::Serialize>(value: &T) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}

fn task_rows(tasks: &[Value]) -> String {
    if tasks.is_empty() {
        return "no tasks\n".into();
    }
    let rows: Vec<Vec<String>> = tasks
        .iter()
        .map(|t| {
            let text = |k: &str| t[k].as_str().unwrap_or("").to_string();
            let mut status = text("status");
            if let Some(by) = t["claimedBy"].as_str() {
                status = format!("{status} ({by})");
            }
            if t["waitingOn"].as_i64().unwrap_or(0) > 0 && text("status") == "open" {
                status = format!("waiting on {}", t["waitingOn"]);
            }
            let labels: Vec<&str> = t["labels"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            vec![
                text("displayId"),
                text("priority"),
                status,
                text("title"),
                labels.join(","),
            ]
        })
        .collect();
    table(&["ID", "PRI", "STATUS", "TITLE", "LABELS"], &rows)
}

fn one_task(data: &Value) -> String {
    let mut out = format!(
        "{} [{}] {} — {}",
        data["displayId"].as_str().unwrap_or(""),
        data["priority"].as_str().unwrap_or(""),
        data["status"].as_str().unwrap_or(""),
        data["title"].as_str().unwrap_or("")
    );
    if let Some(by) = data["claimedBy"].as_str() {
        out.push_str(&format!(" (claimed by {by})"));
    }
    if let Some(reason) = data["blockedReason"].as_str() {
        out.push_str(&format!("\n  blocked: {reason}"));
    }
    out.push('\n');
    out
}

fn detail(data: &Value) -> String {
    let mut out = one_task(data);
    if let Some(d) = data["description"].as_str().filter(|d| !d.is_empty()) {
        out.push_str(&format!("\n{d}\n"));
    }
    for (key, title) in [
        ("dependsOn", "Waits for"),
        ("blocks", "Blocks"),
        ("children", "Children"),
    ] {
        let links = data[key].as_array().cloned().unwrap_or_default();
        if !links.is_empty() {
            out.push_str(&format!("\n{title}:\n"));
            for l in links {
                out.push_str(&format!(
                    "  {} [{}] {}\n",
                    l["displayId"].as_str().unwrap_or(""),
                    l["status"].as_str().unwrap_or(""),
                    l["title"].as_str().unwrap_or("")
                ));
            }
        }
    }
    out.push_str("\nHistory:\n");
    for e in data["events"].as_array().into_iter().flatten() {
        out.push_str(&format!(
            "  {}  {}{}{}\n",
            e["at"].as_str().unwrap_or(""),
            e["event"].as_str().unwrap_or(""),
            e["actor"]
                .as_str()
                .map(|a| format!(" by {a}"))
                .unwrap_or_default(),
            e["detail"]
                .as_str()
                .map(|d| format!(": {d}"))
                .unwrap_or_default()
        ));
    }
    out
}

fn task_json(task: &Task) -> Value {
    to_value(task)
}

fn detail_json(detail: &TaskDetail) -> Value {
    to_value(detail)
}

fn run_command(project: &Project, command: &TaskCommand) -> Result<Value, Failure> {
    Ok(match command {
        TaskCommand::List {
            status,
            label,
            claimed_by,
            parent,
            limit,
        } => {
            let tasks = project.list_tasks(&Filter {
                status: status.clone(),
                label: label.clone(),
                claimed_by: claimed_by.clone(),
                parent: parent.clone(),
                limit: *limit,
            })?;
            Value::Array(tasks.iter().map(task_json).collect())
        }
        TaskCommand::Create {
            title,
            description,
            priority,
            labels,
            parent,
            depends_on,
            agent,
        } => task_json(&project.create_task(
            NewTask {
                title: title.clone(),
                description: description.clone(),
                priority: Some(parse_priority(priority)?),
                labels: labels.clone(),
                parent: parent.clone(),
                depends_on: depends_on.clone(),
            },
            Some(&agent.id()),
        )?),
        TaskCommand::Update {
            id,
            title,
            description,
            priority,
            labels,
            unlabels,
            parent,
            no_parent,
            status,
            agent,
        } => task_json(&project.update_task(
            id,
            TaskUpdate {
                title: title.clone(),
                description: description.clone(),
                priority: priority.as_deref().map(parse_priority).transpose()?,
                add_labels: labels.clone(),
                remove_labels: unlabels.clone(),
                parent: if *no_parent {
                    Some(None)
                } else {
                    parent.clone().map(Some)
                },
                status: status.clone(),
            },
            Some(&agent.id()),
        )?),
        TaskCommand::Claim { id, agent } => {
            task_json(&project.claim_task(id.as_deref(), &agent.id())?)
        }
        TaskCommand::Complete { id, note, agent } => {
            task_json(&project.complete_task(id, Some(&agent.id()), note.as_deref())?)
        }
        TaskCommand::Block { id, reason, agent } => {
            task_json(&project.block_task(id, reason, Some(&agent.id()))?)
        }
        TaskCommand::Unblock { id, agent } => {
            task_json(&project.unblock_task(id, Some(&agent.id()))?)
        }
        TaskCommand::Show { id } => detail_json(&project.task_detail(id)?),
        TaskCommand::Import { file, agent } => {
            let text = super::read_input(file)?;
            to_value(&project.import_tasks(&text, Some(&agent.id()))?)
        }
        TaskCommand::Dep(DepCommand::Add { id, on, agent }) => {
            let (task, added) = project.add_dependency(id, on, Some(&agent.id()))?;
            json!({"task": task_json(&task), "changed": added})
        }
        TaskCommand::Dep(DepCommand::Remove { id, on, agent }) => {
            let (task, removed) = project.remove_dependency(id, on, Some(&agent.id()))?;
            json!({"task": task_json(&task), "changed": removed})
        }
    })
}

/// Runs one `car task` command and renders what it prints.
pub(crate) fn execute(env: &Env, command: TaskCommand) -> Printed {
    let name = command_name(&command);
    let result = open_project(env).and_then(|project| run_command(&project, &command));
    render(env.json, name, result, |data| match &command {
        TaskCommand::List { .. } => task_rows(data.as_array().map(Vec::as_slice).unwrap_or(&[])),
        TaskCommand::Show { .. } => detail(data),
        TaskCommand::Import { .. } => format!(
            "Imported {} task(s) ({} to {}) with {} dependencies.\n",
            data["created"],
            data["first"].as_str().unwrap_or("-"),
            data["last"].as_str().unwrap_or("-"),
            data["dependencies"]
        ),
        TaskCommand::Dep(_) => {
            let verb = if data["changed"] == true {
                "updated"
            } else {
                "unchanged"
            };
            format!("{verb}: {}", one_task(&data["task"]))
        }
        _ => one_task(data),
    })
}
