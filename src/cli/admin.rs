//! Admin commands: `car stats`, `car project …` (list, show, rename, forget projects whose root
//! is gone), `car config …` (per-project settings) and `car prune` (cold storage in
//! `CAR_HOME/archive.db`, and `--restore`). Each has an `execute` that returns what it printed,
//! so the `project_admin` MCP tool can run the same code in-process.

use std::sync::Arc;
use std::time::Duration;

use clap::{Args, Subcommand};

use super::{open_project, render, render_typed, Env, Failure, Printed};
use crate::project::admin::{self, Counts, ProjectInfo, ProjectStats, Stats};
use crate::project::archive::{self, Archived, Report, Restore};
use crate::project::{config, Mode, Project};
use crate::store::Store;

pub const STATS_HELP: &str = "\
Examples:
  car stats                    # this project
  car stats --all --json       # every project CAR knows

Counts tasks by status (ready = open with every dependency done), dependency links, progress notes
and open blockers, decisions by status, context-graph nodes and edges, checkpoints, memory entries,
what `car prune` archived, and the size of car.db and archive.db.";

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
    Get { key: String },
    /// Set a setting for this project (validated; a bad value writes nothing).
    #[command(
        after_help = "Examples:\n  car config set task.prefix WEB\n  car config set prune.older_than_days 90"
    )]
    Set { key: String, value: String },
    /// Remove a setting so its default applies again.
    Unset { key: String },
    /// Every known setting: value, default and whether it is set.
    List,
}

pub fn config_help() -> String {
    let mut text = String::from("Settings (per project):\n");
    for setting in config::SETTINGS {
        text.push_str(&format!(
            "  {:<22} default {:<4} {}\n",
            setting.key, setting.default, setting.help
        ));
    }
    text.push_str("\nExamples:\n  car config list\n  car config set task.prefix WEB\n  car config unset task.prefix");
    text
}

pub const PRUNE_HELP: &str = "\
Examples:
  car prune --dry-run                      # what would move
  car prune --older-than 90d
  car prune --restore --all --dry-run      # what the archive holds for this project
  car prune --restore CTX-0012 CTX-0013    # bring two tasks back (with events, links, notes)
  car prune --restore --all

Moves this project's tasks closed (done or cancelled) longer ago than --older-than (default: the
project's prune.older_than_days, 30), with their dependency links, events and progress notes, and
its progress notes resolved that long ago, from CAR_HOME/car.db to CAR_HOME/archive.db. Open tasks
that depended on a moved task stay ready. The project's highest-numbered task and a parent whose
child stays are kept. A move copies, then deletes what is still exactly what was copied, so a crash
can duplicate rows but never lose them; the next prune or restore tidies a duplicate.
`car project prune` is different: it forgets projects whose root directory is gone.";

/// Options of `car prune`.
#[derive(Debug, Args)]
pub struct PruneArgs {
    /// Archive what closed longer ago than this: 30d, 12h or a number of days.
    #[arg(long, value_name = "AGE", conflicts_with = "restore")]
    pub older_than: Option<String>,
    /// Report what would move; change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Move archived rows back into car.db instead (with --all or task numbers).
    #[arg(long)]
    pub restore: bool,
    /// With --restore: everything archived for this project.
    #[arg(long, requires = "restore", conflicts_with = "tasks")]
    pub all: bool,
    /// With --restore: the tasks to bring back (CTX-0012 or 12).
    #[arg(value_name = "TASK", requires = "restore")]
    pub tasks: Vec<String>,
}

fn open_store(env: &Env) -> Result<Arc<Store>, Failure> {
    Ok(Arc::new(Store::open(&env.home.db_path())?))
}

/// `car stats`.
pub(crate) fn stats(env: &Env, args: &StatsArgs) -> Printed {
    let result = (|| {
        let store = open_store(env)?;
        let projects = if args.all {
            admin::projects(&store)?
        } else {
            vec![admin::project(
                &store,
                store.project_id(&env.project_root)?,
            )?]
        };
        Ok(admin::stats(&store, &env.home.archive_db_path(), projects)?)
    })();
    render_typed(env.json, "stats", result, human_stats)
}

fn human_size(bytes: f64) -> String {
    if bytes >= 1024.0 * 1024.0 {
        format!("{:.1} MiB", bytes / 1024.0 / 1024.0)
    } else {
        format!("{:.1} KiB", bytes / 1024.0)
    }
}

fn project_line(p: &ProjectInfo) -> String {
    let gone = if p.root_exists { "" } else { " (root gone)" };
    format!("{}  {}  {}{gone}", p.id, p.name, p.root)
}

fn human_counts(c: &Counts, archived: &Archived) -> String {
    let (t, d, p) = (&c.tasks, &c.decisions, &c.progress);
    let rows = [
        (
            "tasks",
            format!(
                "{} total: {} ready, {} open, {} claimed, {} blocked, {} done, {} cancelled",
                t.total, t.ready, t.open, t.claimed, t.blocked, t.done, t.cancelled
            ),
        ),
        ("dependencies", c.dependencies.to_string()),
        (
            "progress",
            format!(
                "{} open ({} blockers), {} resolved",
                p.open, p.blockers_open, p.resolved
            ),
        ),
        (
            "decisions",
            format!(
                "{} total: {} proposed, {} accepted, {} rejected, {} deprecated, {} superseded",
                d.total, d.proposed, d.accepted, d.rejected, d.deprecated, d.superseded
            ),
        ),
        (
            "graph",
            format!("{} nodes, {} edges", c.graph_nodes, c.graph_edges),
        ),
        ("checkpoints", c.checkpoints.to_string()),
        ("memory", format!("{} entries", c.memory_entries)),
        (
            "archived",
            format!(
                "{} tasks, {} progress notes",
                archived.tasks, archived.progress
            ),
        ),
    ];
    rows.iter()
        .map(|(label, text)| format!("  {label:<13}{text}\n"))
        .collect()
}

fn human_project_stats(stats: &ProjectStats) -> String {
    project_line(&stats.project) + "\n" + &human_counts(&stats.counts, &stats.archived)
}

fn human_stats(stats: &Stats) -> String {
    let mut out: String = stats.projects.iter().map(human_project_stats).collect();
    out.push_str(&format!(
        "car.db {}, archive.db {}\n",
        human_size(stats.db_bytes as f64),
        human_size(stats.archive_bytes as f64)
    ));
    out
}

fn project_command_name(command: &ProjectCommand) -> &'static str {
    match command {
        ProjectCommand::List => "project.list",
        ProjectCommand::Show { .. } => "project.show",
        ProjectCommand::Rename { .. } => "project.rename",
        ProjectCommand::Prune { .. } => "project.prune",
    }
}

/// `car project …`.
pub(crate) fn project(env: &Env, command: &ProjectCommand) -> Printed {
    let name = project_command_name(command);
    match command {
        ProjectCommand::List => {
            let listed = open_store(env).and_then(|store| {
                Ok(admin::Listed {
                    projects: admin::projects(&store)?,
                })
            });
            render_typed(env.json, name, listed, human_project_list)
        }
        ProjectCommand::Show { reference } => render_typed(
            env.json,
            name,
            show_project(env, reference.as_deref()),
            human_project_stats,
        ),
        ProjectCommand::Rename {
            name: new_name,
            project_id,
        } => render_typed(
            env.json,
            name,
            rename_project(env, new_name, *project_id),
            |renamed| format!("Renamed: {}\n", project_line(&renamed.project)),
        ),
        ProjectCommand::Prune { dry_run } => {
            let forgetting = open_store(env).and_then(|store| {
                let mode = Mode::dry_run_if(*dry_run);
                Ok(admin::Forgetting {
                    projects: admin::forget_gone(&store, &env.home.archive_db_path(), mode)?,
                    dry_run: *dry_run,
                })
            });
            render_typed(env.json, name, forgetting, human_forgetting)
        }
    }
}

/// `project show`: the project named by id, root or name, else this one.
fn show_project(env: &Env, reference: Option<&str>) -> Result<ProjectStats, Failure> {
    let store = open_store(env)?;
    let info = match reference {
        Some(reference) => {
            let cwd = std::env::current_dir().unwrap_or_default();
            admin::find(&store, reference, &cwd)?
        }
        None => {
            let current = open_project(env)?;
            admin::project(&store, current.id)?
        }
    };
    Ok(admin::project_stats(
        &store,
        &env.home.archive_db_path(),
        info,
    )?)
}

/// `project rename`: the project with this id, else this one.
fn rename_project(
    env: &Env,
    name: &str,
    project_id: Option<i64>,
) -> Result<admin::Renamed, Failure> {
    let (store, id) = match project_id {
        Some(id) => (open_store(env)?, id),
        None => {
            let current = open_project(env)?;
            (current.store.clone(), current.id)
        }
    };
    Ok(admin::Renamed {
        project: admin::rename(&store, id, name)?,
    })
}

fn human_project_list(listed: &admin::Listed) -> String {
    if listed.projects.is_empty() {
        return "no projects yet; any car command run in a directory registers it\n".into();
    }
    listed
        .projects
        .iter()
        .map(|p| project_line(p) + "\n")
        .collect()
}

fn human_forgetting(forgetting: &admin::Forgetting) -> String {
    if forgetting.projects.is_empty() {
        return "Every project's root exists; nothing to forget.\n".into();
    }
    let mut out = format!(
        "{} {} project(s) whose root is gone:\n",
        if forgetting.dry_run {
            "Would forget"
        } else {
            "Forgot"
        },
        forgetting.projects.len()
    );
    for gone in &forgetting.projects {
        let c = &gone.counts;
        out.push_str(&format!(
            "{}\n      {} tasks, {} progress notes, {} decisions, {} graph nodes, {} checkpoints, {} memory nodes\n",
            project_line(&gone.project),
            c.tasks.total,
            c.progress.open + c.progress.resolved,
            c.decisions.total,
            c.graph_nodes,
            c.checkpoints,
            c.memory_nodes
        ));
    }
    out
}

fn config_command_name(command: &ConfigCommand) -> &'static str {
    match command {
        ConfigCommand::Get { .. } => "config.get",
        ConfigCommand::Set { .. } => "config.set",
        ConfigCommand::Unset { .. } => "config.unset",
        ConfigCommand::List => "config.list",
    }
}

/// `car config …`.
pub(crate) fn config(env: &Env, command: &ConfigCommand) -> Printed {
    let name = config_command_name(command);
    let project = match open_project(env) {
        Ok(project) => project,
        Err(failure) => return render(env.json, name, Err(failure), |_| String::new()),
    };
    match command {
        ConfigCommand::Get { key } => render_typed(
            env.json,
            name,
            config::describe(&project, key).map_err(Failure::from),
            |setting| format!("{}\n", setting.value),
        ),
        ConfigCommand::Set { key, value } => render_typed(
            env.json,
            name,
            config::set(&project, key, value).map_err(Failure::from),
            setting_line,
        ),
        ConfigCommand::Unset { key } => render_typed(
            env.json,
            name,
            config::unset(&project, key).map_err(Failure::from),
            |unset| setting_line(&unset.setting),
        ),
        ConfigCommand::List => render_typed(
            env.json,
            name,
            config::list(&project).map_err(Failure::from),
            |list| {
                list.settings
                    .iter()
                    .map(|s| {
                        format!(
                            "{:<22} {:<6} {}\n",
                            s.key,
                            s.value,
                            if s.set { "(set)" } else { "(default)" }
                        )
                    })
                    .collect()
            },
        ),
    }
}

/// `key = value`, with `(default)` when the project did not set it.
fn setting_line(setting: &config::Value) -> String {
    format!(
        "{} = {}{}\n",
        setting.key,
        setting.value,
        if setting.set { "" } else { " (default)" }
    )
}

/// Parses `30d`, `12h` or a bare number of days.
fn parse_age(text: &str) -> Result<Duration, Failure> {
    let bad = || {
        Failure::usage(format!(
            "bad --older-than {text:?}: give 30d, 12h or a number of days"
        ))
    };
    let (number, unit) = match text.strip_suffix('d') {
        Some(days) => (days, 86_400),
        None => match text.strip_suffix('h') {
            Some(hours) => (hours, 3_600),
            None => (text, 86_400),
        },
    };
    let number: u64 = number.parse().map_err(|_| bad())?;
    Ok(Duration::from_secs(
        number.checked_mul(unit).ok_or_else(bad)?,
    ))
}

/// Reads `CTX-0012` (with this project's prefix) or `12` as a task number.
fn task_number(text: &str, prefix: &str) -> Result<i64, Failure> {
    let digits = match text.rsplit_once('-') {
        Some((given, digits)) if given.eq_ignore_ascii_case(prefix) => digits,
        Some(_) => {
            return Err(Failure::usage(format!(
                "task {text:?} does not have this project's prefix {prefix}"
            )))
        }
        None => text,
    };
    digits
        .parse::<i64>()
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(|| Failure::usage(format!("bad task {text:?}: give {prefix}-0012 or 12")))
}

/// `car prune`.
pub(crate) fn prune(env: &Env, args: &PruneArgs) -> Printed {
    let name = if args.restore {
        "prune.restore"
    } else {
        "prune"
    };
    let result = open_project(env).and_then(|project| prune_report(env, &project, args));
    render_typed(env.json, name, result, |report| human_prune(report, args))
}

/// What `car prune` moved: archived, or with `--restore` brought back.
fn prune_report(env: &Env, project: &Project, args: &PruneArgs) -> Result<Report, Failure> {
    let path = env.home.archive_db_path();
    let prefix = config::get(project, "task.prefix")?;
    let mode = Mode::dry_run_if(args.dry_run);
    let (moved, older_than) = if args.restore {
        let what = match (args.all, args.tasks.is_empty()) {
            (true, _) => Restore::All,
            (false, false) => Restore::Tasks(
                args.tasks
                    .iter()
                    .map(|t| task_number(t, &prefix))
                    .collect::<Result<_, _>>()?,
            ),
            (false, true) => {
                return Err(Failure::usage(
                    "say what to restore: --all, or task numbers such as CTX-0012",
                ))
            }
        };
        (archive::restore(project, &path, &what, mode)?, None)
    } else {
        let days = config::older_than_days(project)?;
        let older_than = match &args.older_than {
            Some(text) => parse_age(text)?,
            None => Duration::from_secs(u64::from(days) * 86_400),
        };
        (
            archive::prune(project, &path, older_than, mode)?,
            Some(older_than.as_secs()),
        )
    };
    Ok(Report {
        moved,
        older_than_seconds: older_than,
        dry_run: args.dry_run,
        archive: path,
        prefix,
    })
}

fn human_prune(report: &Report, args: &PruneArgs) -> String {
    let verb = match (args.restore, args.dry_run) {
        (false, true) => "Would archive",
        (false, false) => "Archived",
        (true, true) => "Would restore",
        (true, false) => "Restored",
    };
    let moved = &report.moved;
    let mut out = format!(
        "{verb} {} task(s) ({} events, {} dependency links) and {} progress note(s) {} {}.\n",
        moved.tasks.len(),
        moved.events,
        moved.dependencies,
        moved.progress,
        if args.restore { "from" } else { "to" },
        report.archive.display()
    );
    for task in &moved.tasks {
        out.push_str(&format!(
            "  {}-{:04}  {:<9} {}  {}\n",
            report.prefix,
            task.number,
            task.status,
            task.closed_at.as_deref().unwrap_or("-"),
            task.title
        ));
    }
    out
}
