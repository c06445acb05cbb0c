//! `task …`: the project's task tracker, as a command line the `car task` CLI and the
//! `task_manager` tool both parse, and what each command does.

use clap::{Args, Subcommand};
use serde::Serialize;

use crate::project::import::Imported;
use crate::project::tasks::{
    parse_priority, DependencyChange, Filter, NewTask, Task, TaskDetail, TaskUpdate,
};
use crate::project::{Project, ProjectError};

pub const TASK_HELP: &str = "\
Ids: CTX-0001, ctx-1, #1 or 1 (the prefix is the task.prefix setting).
Statuses: open, ready (open with every dependency done), claimed, blocked, done, cancelled.
Agents: claims and history record --agent, else CAR_AGENT_ID, else USER.

Examples:
  car task create \"Fix retry logic\" --priority P1 --label backend
  car task create \"Ship 2.0\" --depends-on CTX-0001
  car task ready                       # open tasks whose dependencies are done
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
        /// Only tasks with this label.
        #[arg(long)]
        label: Option<String>,
        /// Only tasks this agent claimed.
        #[arg(long)]
        claimed_by: Option<String>,
        /// Only the children of this task.
        #[arg(long)]
        parent: Option<String>,
        /// How many (0: all).
        #[arg(long, default_value_t = 50)]
        limit: usize,
    },
    /// The ready work: open tasks whose dependencies are all done, most urgent first (the same
    /// as `list --status ready`).
    Ready {
        /// Only tasks with this label.
        #[arg(long)]
        label: Option<String>,
        /// How many (0: all).
        #[arg(long, default_value_t = 50)]
        limit: usize,
    },
    /// Create a task.
    Create {
        /// What is to be done, in a line.
        title: String,
        /// More detail: context, acceptance criteria.
        #[arg(long, default_value = "")]
        description: String,
        /// P0 (most urgent) … P4.
        #[arg(long, default_value = "P2")]
        priority: String,
        /// A label (repeatable).
        #[arg(long = "label")]
        labels: Vec<String>,
        /// The task this one is part of.
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
        /// The task (CTX-0001, 1, #1).
        id: String,
        /// A new title.
        #[arg(long)]
        title: Option<String>,
        /// A new description.
        #[arg(long)]
        description: Option<String>,
        /// A new priority: P0 (most urgent) … P4.
        #[arg(long)]
        priority: Option<String>,
        /// Add a label (repeatable).
        #[arg(long = "label")]
        labels: Vec<String>,
        /// Remove a label (repeatable).
        #[arg(long = "unlabel")]
        unlabels: Vec<String>,
        /// Make it part of this task.
        #[arg(long, conflicts_with = "no_parent")]
        parent: Option<String>,
        /// Make it a top-level task.
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
        /// The task to claim (default: the most urgent ready one).
        id: Option<String>,
        #[command(flatten)]
        agent: AgentArg,
    },
    /// Mark a task done; tasks waiting only on it become ready.
    Complete {
        /// The task.
        id: String,
        /// What was done (kept in its history).
        #[arg(long)]
        note: Option<String>,
        #[command(flatten)]
        agent: AgentArg,
    },
    /// Mark a task blocked, saying why.
    Block {
        /// The task.
        id: String,
        /// Why it cannot go on.
        #[arg(long)]
        reason: String,
        #[command(flatten)]
        agent: AgentArg,
    },
    /// Lift a block (back to claimed if someone holds the task, else open).
    Unblock {
        /// The task.
        id: String,
        #[command(flatten)]
        agent: AgentArg,
    },
    /// Show a task with its dependencies, dependents, children and history.
    Show {
        /// The task (CTX-0001, 1, #1).
        id: String,
    },
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
        /// The task.
        id: String,
        /// The task it waits for.
        on: String,
        #[command(flatten)]
        agent: AgentArg,
    },
    /// ID no longer waits for ON.
    Remove {
        /// The task that waits.
        id: String,
        /// The task it no longer waits for.
        on: String,
        #[command(flatten)]
        agent: AgentArg,
    },
}

#[derive(Debug, Args)]
pub struct AgentArg {
    /// Who is acting (default: CAR_AGENT_ID, else USER).
    #[arg(long)]
    pub agent: Option<String>,
}

impl AgentArg {
    pub fn id(&self) -> String {
        crate::home::agent_id(self.agent.as_deref())
    }
}

pub fn command_name(command: &TaskCommand) -> &'static str {
    match command {
        TaskCommand::List { .. } => "task.list",
        TaskCommand::Ready { .. } => "task.ready",
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

/// What a task command did, each by its own type (serialized as that type alone).
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum TaskOutcome {
    /// `list`: the tasks, most urgent first.
    Tasks(Vec<Task>),
    /// `create`, `update`, `claim`, `complete`, `block`, `unblock`: the task as it is now.
    Task(Task),
    /// `show`: the task with its links and history.
    Detail(TaskDetail),
    /// `import`.
    Imported(Imported),
    /// `dep add`, `dep remove`.
    Dependency(DependencyChange),
}

/// Runs one task command.
pub fn run(project: &Project, command: &TaskCommand) -> Result<TaskOutcome, ProjectError> {
    Ok(match command {
        TaskCommand::List {
            status,
            label,
            claimed_by,
            parent,
            limit,
        } => TaskOutcome::Tasks(project.list_tasks(&Filter {
            status: status.clone(),
            label: label.clone(),
            claimed_by: claimed_by.clone(),
            parent: parent.clone(),
            limit: *limit,
        })?),
        TaskCommand::Ready { label, limit } => TaskOutcome::Tasks(project.list_tasks(&Filter {
            status: Some("ready".into()),
            label: label.clone(),
            claimed_by: None,
            parent: None,
            limit: *limit,
        })?),
        TaskCommand::Create {
            title,
            description,
            priority,
            labels,
            parent,
            depends_on,
            agent,
        } => TaskOutcome::Task(project.create_task(
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
        } => TaskOutcome::Task(project.update_task(
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
            TaskOutcome::Task(project.claim_task(id.as_deref(), &agent.id())?)
        }
        TaskCommand::Complete { id, note, agent } => {
            TaskOutcome::Task(project.complete_task(id, Some(&agent.id()), note.as_deref())?)
        }
        TaskCommand::Block { id, reason, agent } => {
            TaskOutcome::Task(project.block_task(id, reason, Some(&agent.id()))?)
        }
        TaskCommand::Unblock { id, agent } => {
            TaskOutcome::Task(project.unblock_task(id, Some(&agent.id()))?)
        }
        TaskCommand::Show { id } => TaskOutcome::Detail(project.task_detail(id)?),
        TaskCommand::Import { file, agent } => {
            let text = super::read_input(file)?;
            TaskOutcome::Imported(project.import_tasks(&text, Some(&agent.id()))?)
        }
        TaskCommand::Dep(DepCommand::Add { id, on, agent }) => {
            TaskOutcome::Dependency(project.add_dependency(id, on, Some(&agent.id()))?)
        }
        TaskCommand::Dep(DepCommand::Remove { id, on, agent }) => {
            TaskOutcome::Dependency(project.remove_dependency(id, on, Some(&agent.id()))?)
        }
    })
}
