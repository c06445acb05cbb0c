//! Admin commands: `car stats`, `car project …` (list, show, rename, forget projects whose root
//! is gone), `car config …` (per-project settings) and `car prune` (cold storage in
//! `CAR_HOME/archive.db`, and `--restore`). Each has an `execute` that returns what it printed,
//! so the `project_admin` MCP tool can run the same code in-process.

use std::sync::Arc;
use std::time::Duration;

use clap::{Args, Subcommand};
use serde_json::{json, Value};

use super::{open_project, render, Env, Failure, Printed};
use crate::project::admin::{self, ProjectInfo};
use crate::project::archive::{self, Restore};
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

fn mode(dry_run: bool) -> Mode {
    if dry_run {
        Mode::DryRun
    } else {
        Mode::Apply
    }
}

fn open_store(env: &Env) -> Result<Arc<Store>, Failure> {
    Ok(Arc::new(Store::open(&env.home.db_path())?))
}

fn to_json(value: impl serde::Serialize) -> Result<Value, Failure> {
    serde_json::to_value(value).map_err(|e| Failure::new("failed", e.to_string()))
}

fn project_stats(store: &Store, env: &Env, project: &ProjectInfo) -> Result<Value, Failure> {
    Ok(json!({
        "project": project,
        "counts": admin::counts(store, project.id)?,
        "archived": archive::archived(store, &env.home.archive_db_path(), project.id)?,
    }))
}

fn file_bytes(path: &std::path::Path) -> u64 {
    std::fs::metadata(path).map(|m| m.len()).unwrap_or(0)
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
        let stats = projects
            .iter()
            .map(|p| project_stats(&store, env, p))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(json!({
            "projects": stats,
            "db_bytes": admin::db_bytes(&store)?,
            "archive_bytes": file_bytes(&env.home.archive_db_path()),
        }))
    })();
    render(env.json, "stats", result, human_stats)
}

fn human_size(bytes: &Value) -> String {
    let bytes = bytes.as_f64().unwrap_or(0.0);
    if bytes >= 1024.0 * 1024.0 {
        format!("{:.1} MiB", bytes / 1024.0 / 1024.0)
    } else {
        format!("{:.1} KiB", bytes / 1024.0)
    }
}

fn project_line(p: &Value) -> String {
    let gone = if p["root_exists"] == false {
        " (root gone)"
    } else {
        ""
    };
    format!(
        "{:>4}  {}  {}{gone}",
        p["id"],
        p["name"].as_str().unwrap_or_default(),
        p["root"].as_str().unwrap_or_default()
    )
}

fn human_counts(c: &Value, archived: &Value) -> String {
    let t = &c["tasks"];
    let d = &c["decisions"];
    let p = &c["progress"];
    let rows = [
        (
            "tasks",
            format!(
                "{} total: {} ready, {} open, {} claimed, {} blocked, {} done, {} cancelled",
                t["total"],
                t["ready"],
                t["open"],
                t["claimed"],
                t["blocked"],
                t["done"],
                t["cancelled"]
            ),
        ),
        ("dependencies", c["dependencies"].to_string()),
        (
            "progress",
            format!(
                "{} open ({} blockers), {} resolved",
                p["open"], p["blockers_open"], p["resolved"]
            ),
        ),
        (
            "decisions",
            format!(
                "{} total: {} proposed, {} accepted, {} rejected, {} deprecated, {} superseded",
                d["total"],
                d["proposed"],
                d["accepted"],
                d["rejected"],
                d["deprecated"],
                d["superseded"]
            ),
        ),
        (
            "graph",
            format!("{} nodes, {} edges", c["graph_nodes"], c["graph_edges"]),
        ),
        ("checkpoints", c["checkpoints"].to_string()),
        ("memory", format!("{} entries", c["memory_entries"])),
        (
            "archived",
            format!(
                "{} tasks, {} progress notes",
                archived["tasks"], archived["progress"]
            ),
        ),
    ];
    rows.iter()
        .map(|(label, text)| format!("  {label:<13}{text}\n"))
        .collect()
}

fn human_stats(data: &Value) -> String {
    let mut out = String::new();
    for stats in data["projects"].as_array().into_iter().flatten() {
        out.push_str(&project_line(&stats["project"]));
        out.push('\n');
        out.push_str(&human_counts(&stats["counts"], &stats["archived"]));
    }
    out.push_str(&format!(
        "car.db {}, archive.db {}\n",
        human_size(&data["db_bytes"]),
        human_size(&data["archive_bytes"])
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
    let result = (|| match command {
        ProjectCommand::List => Ok(json!({"projects": admin::projects(&*open_store(env)?)?})),
        ProjectCommand::Show { reference } => {
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
            project_stats(&store, env, &info)
        }
        ProjectCommand::Rename { name, project_id } => {
            let (store, id) = match project_id {
                Some(id) => (open_store(env)?, *id),
                None => {
                    let current = open_project(env)?;
                    (current.store.clone(), current.id)
                }
            };
            Ok(json!({"project": admin::rename(&store, id, name)?}))
        }
        ProjectCommand::Prune { dry_run } => {
            let store = open_store(env)?;
            let forgotten =
                admin::forget_gone(&store, &env.home.archive_db_path(), mode(*dry_run))?;
            Ok(json!({"dry_run": dry_run, "projects": forgotten}))
        }
    })();
    render(
        env.json,
        project_command_name(command),
        result,
        |data| match command {
            ProjectCommand::List => {
                let projects = data["projects"].as_array().cloned().unwrap_or_default();
                if projects.is_empty() {
                    return "no projects yet; any car command run in a directory registers it\n"
                        .into();
                }
                projects.iter().map(|p| project_line(p) + "\n").collect()
            }
            ProjectCommand::Show { .. } => {
                project_line(&data["project"])
                    + "\n"
                    + &human_counts(&data["counts"], &data["archived"])
            }
            ProjectCommand::Rename { .. } => {
                format!("Renamed: {}\n", project_line(&data["project"]).trim_start())
            }
            ProjectCommand::Prune { dry_run } => {
                let projects = data["projects"].as_array().cloned().unwrap_or_default();
                if projects.is_empty() {
                    return "Every project's root exists; nothing to forget.\n".into();
                }
                let mut out = format!(
                    "{} {} project(s) whose root is gone:\n",
                    if *dry_run { "Would forget" } else { "Forgot" },
                    projects.len()
                );
                for p in &projects {
                    let c = &p["counts"];
                    out.push_str(&format!(
                        "{}\n      {} tasks, {} progress notes, {} decisions, {} graph nodes, {} checkpoints, {} memory nodes\n",
                        project_line(&p["project"]),
                        c["tasks"]["total"],
                        c["progress"]["open"].as_i64().unwrap_or(0) + c["progress"]["resolved"].as_i64().unwrap_or(0),
                        c["decisions"]["total"],
                        c["graph_nodes"],
                        c["checkpoints"],
                        c["memory_nodes"]
                    ));
                }
                out
            }
        },
    )
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
    let result = (|| {
        let project = open_project(env)?;
        match command {
            ConfigCommand::Get { key } => to_json(config::describe(&project, key)?),
            ConfigCommand::Set { key, value } => to_json(config::set(&project, key, value)?),
            ConfigCommand::Unset { key } => {
                let removed = config::unset(&project, key)?;
                let mut value = to_json(config::describe(&project, key)?)?;
                value["removed"] = json!(removed);
                Ok(value)
            }
            ConfigCommand::List => Ok(json!({"settings": config::list(&project)?})),
        }
    })();
    render(
        env.json,
        config_command_name(command),
        result,
        |data| match command {
            ConfigCommand::Get { .. } => {
                format!("{}\n", data["value"].as_str().unwrap_or_default())
            }
            ConfigCommand::Set { .. } | ConfigCommand::Unset { .. } => format!(
                "{} = {}{}\n",
                data["key"].as_str().unwrap_or_default(),
                data["value"].as_str().unwrap_or_default(),
                if data["set"] == true {
                    ""
                } else {
                    " (default)"
                }
            ),
            ConfigCommand::List => data["settings"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|s| {
                    format!(
                        "{:<22} {:<6} {}\n",
                        s["key"].as_str().unwrap_or_default(),
                        s["value"].as_str().unwrap_or_default(),
                        if s["set"] == true {
                            "(set)"
                        } else {
                            "(default)"
                        }
                    )
                })
                .collect(),
        },
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
    let result = (|| {
        let project: Project = open_project(env)?;
        let path = env.home.archive_db_path();
        let prefix = config::get(&project, "task.prefix")?;
        let mut data = if args.restore {
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
            to_json(archive::restore(
                &project,
                &path,
                &what,
                mode(args.dry_run),
            )?)?
        } else {
            let days = config::older_than_days(&project)?;
            let older_than = match &args.older_than {
                Some(text) => parse_age(text)?,
                None => Duration::from_secs(u64::from(days) * 86_400),
            };
            let mut data = to_json(archive::prune(
                &project,
                &path,
                older_than,
                mode(args.dry_run),
            )?)?;
            data["older_than_seconds"] = json!(older_than.as_secs());
            data
        };
        data["dry_run"] = json!(args.dry_run);
        data["archive"] = json!(path);
        data["prefix"] = json!(prefix);
        Ok(data)
    })();
    render(env.json, name, result, |data| {
        let verb = match (args.restore, args.dry_run) {
            (false, true) => "Would archive",
            (false, false) => "Archived",
            (true, true) => "Would restore",
            (true, false) => "Restored",
        };
        let mut out = format!(
            "{verb} {} task(s) ({} events, {} dependency links) and {} progress note(s) {} {}.\n",
            data["tasks"].as_array().map_or(0, Vec::len),
            data["events"],
            data["dependencies"],
            data["progress"],
            if args.restore { "from" } else { "to" },
            data["archive"].as_str().unwrap_or_default()
        );
        let prefix = data["prefix"].as_str().unwrap_or_default();
        for task in data["tasks"].as_array().into_iter().flatten() {
            out.push_str(&format!(
                "  {prefix}-{:04}  {:<9} {}  {}\n",
                task["number"].as_i64().unwrap_or(0),
                task["status"].as_str().unwrap_or_default(),
                task["closed_at"].as_str().unwrap_or("-"),
                task["title"].as_str().unwrap_or_default()
            ));
        }
        out
    })
}
