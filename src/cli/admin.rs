//! Admin commands: `car stats`, `car project …` (list, show, rename, forget projects whose root
//! is gone), `car config …` (per-project settings) and `car prune` (cold storage in
//! `CAR_HOME/archive.db`, and `--restore`). The first three are the project capability's
//! commands (`project::commands::admin`, which the `project_admin` tool runs too); this face
//! renders their outcome.

use std::sync::Arc;
use std::time::Duration;

use clap::Args;

use super::{open_project, render_typed, Env, Failure, Printed};
use crate::project::admin::{self, Counts, ProjectInfo, ProjectStats, Stats};
use crate::project::archive::{self, Archived, Report, Restore};
use crate::project::commands::admin::{
    config_command_name, project_command_name, run_config, run_project, run_stats, AdminOutcome,
    Place,
};
pub use crate::project::commands::admin::{ConfigCommand, ProjectCommand, StatsArgs};
use crate::project::{config, Mode, Project, ProjectError};
use crate::store::Store;

pub const STATS_HELP: &str = "\
Examples:
  car stats                    # this project
  car stats --all --json       # every project CAR knows

Counts tasks by status (ready = open with every dependency done), dependency links, progress notes
and open blockers, decisions by status, context-graph nodes and edges, checkpoints, memory entries,
what `car prune` archived, and the size of car.db and archive.db.";

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

/// Where this command's admin commands run.
fn with_place<T>(
    env: &Env,
    run: impl FnOnce(&Place<'_>) -> Result<T, ProjectError>,
) -> Result<T, Failure> {
    let store = open_store(env)?;
    let archive = env.home.archive_db_path();
    let cwd = std::env::current_dir().unwrap_or_default();
    Ok(run(&Place {
        store: &store,
        root: &env.project_root,
        archive: &archive,
        cwd: &cwd,
    })?)
}

/// `car stats`.
pub(crate) fn stats(env: &Env, args: &StatsArgs) -> Printed {
    let result = with_place(env, |place| run_stats(place, args));
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

/// `car project …`.
pub(crate) fn project(env: &Env, command: &ProjectCommand) -> Printed {
    let result = with_place(env, |place| run_project(place, command));
    render_typed(
        env.json,
        project_command_name(command),
        result,
        |outcome| match outcome {
            AdminOutcome::Listed(listed) => human_project_list(listed),
            AdminOutcome::Project(stats) => human_project_stats(stats),
            AdminOutcome::Renamed(renamed) => {
                format!("Renamed: {}\n", project_line(&renamed.project))
            }
            AdminOutcome::Forgetting(forgetting) => human_forgetting(forgetting),
            other => human_setting(other),
        },
    )
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

/// `car config …`.
pub(crate) fn config(env: &Env, command: &ConfigCommand) -> Printed {
    let result = open_project(env).and_then(|project| Ok(run_config(&project, command)?));
    let get = matches!(command, ConfigCommand::Get { .. });
    render_typed(
        env.json,
        config_command_name(command),
        result,
        |outcome| match outcome {
            AdminOutcome::Setting(setting) if get => format!("{}\n", setting.value),
            other => human_setting(other),
        },
    )
}

/// A config command's outcome for a person.
fn human_setting(outcome: &AdminOutcome) -> String {
    match outcome {
        AdminOutcome::Setting(setting) => setting_line(setting),
        AdminOutcome::Unset(unset) => setting_line(&unset.setting),
        AdminOutcome::Settings(list) => list
            .settings
            .iter()
            .map(|s| {
                format!(
                    "{:<22} {:<6} {}\n",
                    s.key,
                    s.value,
                    if s.set { "(set)" } else { "(default)" }
                )
            })
            .collect(),
        _ => String::new(),
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
