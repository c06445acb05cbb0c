//! `stats`, `project …` and `config …`: what projects hold, the projects CAR knows, and
//! per-project settings — the command lines the CLI and the `project_admin` tool both parse,
//! and what each command does.

use std::path::Path;
use std::sync::Arc;

use clap::{Args, Subcommand};
use serde::Serialize;

use crate::project::admin::{self, Forgetting, Listed, ProjectStats, Renamed, Stats};
use crate::project::{config, Mode, Project, ProjectError};
use crate::store::Store;

/// Options of `car stats`.
#[derive(Debug, Args)]
pub struct StatsArgs {
    /// Every project CAR knows, not only this one.
    #[arg(long)]
    pub all: bool,
}

#[derive(Debug, Subcommand)]
pub enum ProjectCommand {
    /// Every project CAR knows: id, name, root and whether the root still exists.
    List,
    /// One project (default: this one) with what it holds.
    #[command(
        after_help = "Examples:\n  car project show\n  car project show 3\n  car project show ~/src/payments\n  car project show payments"
    )]
    Show {
        /// Its id, root directory or name.
        #[arg(value_name = "ROOT|NAME|ID")]
        reference: Option<String>,
    },
    /// Rename a project (default: this one). The root, not the name, identifies it.
    #[command(
        after_help = "Examples:\n  car project rename \"Payments API\"\n  car project rename legacy --project-id 3"
    )]
    Rename {
        /// The new name.
        name: String,
        /// The project to rename (see `car project list`).
        #[arg(long, value_name = "ID")]
        project_id: Option<i64>,
    },
    /// Forget every project whose root directory is gone: all its tasks, progress, decisions,
    /// graph, checkpoints, settings, memory and archived rows. Projects whose root exists are never touched.
    #[command(
        after_help = "Examples:\n  car project prune --dry-run   # list them with what each holds\n  car project prune\n\nTo move old closed tasks of a live project to cold storage, see `car prune`."
    )]
    Prune {
        /// List what would be forgotten; change nothing.
        #[arg(long)]
        dry_run: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// A setting's value (its default when not set).
    Get {
        /// The setting (see `car config list`).
        key: String,
    },
    /// Set a setting for this project (validated; a bad value writes nothing).
    #[command(
        after_help = "Examples:\n  car config set task.prefix WEB\n  car config set prune.older_than_days 90"
    )]
    Set {
        /// The setting (see `car config list`).
        key: String,
        /// Its new value (checked; a bad one writes nothing).
        value: String,
    },
    /// Remove a setting so its default applies again.
    Unset {
        /// The setting (see `car config list`).
        key: String,
    },
    /// Every known setting: value, default and whether it is set.
    List,
}

/// Where an admin command runs: the store, this project's root, the archive database, and the
/// directory a relative project reference is read from.
pub struct Place<'a> {
    pub store: &'a Arc<Store>,
    pub root: &'a Path,
    pub archive: &'a Path,
    pub cwd: &'a Path,
}

impl Place<'_> {
    fn project(&self) -> Result<Project, ProjectError> {
        Project::open(self.store.clone(), self.root)
    }
}

/// What an admin command did, each by its own type.
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum AdminOutcome {
    /// `stats`.
    Stats(Stats),
    /// `project list`.
    Listed(Listed),
    /// `project show`.
    Project(Box<ProjectStats>),
    /// `project rename`.
    Renamed(Renamed),
    /// `project prune`.
    Forgetting(Forgetting),
    /// `config get`, `config set`.
    Setting(config::Value),
    /// `config unset`.
    Unset(config::Unset),
    /// `config list`.
    Settings(config::Settings),
}

/// `stats`: this project's counts, or (`--all`) every project's.
pub fn run_stats(place: &Place<'_>, args: &StatsArgs) -> Result<Stats, ProjectError> {
    let projects = if args.all {
        admin::projects(place.store)?
    } else {
        vec![admin::project(place.store, place.project()?.id)?]
    };
    admin::stats(place.store, place.archive, projects)
}

/// The envelope's name of a project command (`project.list`).
pub fn project_command_name(command: &ProjectCommand) -> &'static str {
    match command {
        ProjectCommand::List => "project.list",
        ProjectCommand::Show { .. } => "project.show",
        ProjectCommand::Rename { .. } => "project.rename",
        ProjectCommand::Prune { .. } => "project.prune",
    }
}

/// Runs one `project` command.
pub fn run_project(
    place: &Place<'_>,
    command: &ProjectCommand,
) -> Result<AdminOutcome, ProjectError> {
    let store = place.store;
    Ok(match command {
        ProjectCommand::List => AdminOutcome::Listed(Listed {
            projects: admin::projects(store)?,
        }),
        ProjectCommand::Show { reference } => {
            let info = match reference {
                Some(reference) => admin::find(store, reference, place.cwd)?,
                None => admin::project(store, place.project()?.id)?,
            };
            AdminOutcome::Project(Box::new(admin::project_stats(store, place.archive, info)?))
        }
        ProjectCommand::Rename { name, project_id } => {
            let id = match project_id {
                Some(id) => *id,
                None => place.project()?.id,
            };
            AdminOutcome::Renamed(Renamed {
                project: admin::rename(store, id, name)?,
            })
        }
        ProjectCommand::Prune { dry_run } => AdminOutcome::Forgetting(Forgetting {
            projects: admin::forget_gone(store, place.archive, Mode::dry_run_if(*dry_run))?,
            dry_run: *dry_run,
        }),
    })
}

/// The envelope's name of a config command (`config.get`).
pub fn config_command_name(command: &ConfigCommand) -> &'static str {
    match command {
        ConfigCommand::Get { .. } => "config.get",
        ConfigCommand::Set { .. } => "config.set",
        ConfigCommand::Unset { .. } => "config.unset",
        ConfigCommand::List => "config.list",
    }
}

/// Runs one `config` command on `project`.
pub fn run_config(
    project: &Project,
    command: &ConfigCommand,
) -> Result<AdminOutcome, ProjectError> {
    Ok(match command {
        ConfigCommand::Get { key } => AdminOutcome::Setting(config::describe(project, key)?),
        ConfigCommand::Set { key, value } => {
            AdminOutcome::Setting(config::set(project, key, value)?)
        }
        ConfigCommand::Unset { key } => AdminOutcome::Unset(config::unset(project, key)?),
        ConfigCommand::List => AdminOutcome::Settings(config::list(project)?),
    })
}
