//! Bringing archived rows back (`car prune --restore`), counting what the archive holds for a
//! project, and dropping a forgotten project's archived rows.

use std::path::Path;

use rusqlite::{params, Transaction, TransactionBehavior};

use super::{
    among, drop_shadowed, ids_json, read_moved, with_archive, Archived, Moved, Restore,
    EVENT_COLUMNS, PROGRESS_COLUMNS, TASK_COLUMNS,
};
use crate::project::{Mode, Project, ProjectError, Result};
use crate::store::Store;

/// Moves archived tasks of the project back into car.db with their ids, events, progress notes
/// and every dependency link whose two tasks are then in car.db (`Restore::All` also brings back
/// the project's archived progress notes). Fails, restoring nothing, when an id or task number
/// was taken meanwhile. A dry run reports the same numbers and writes nothing.
pub fn restore(project: &Project, archive: &Path, what: &Restore, mode: Mode) -> Result<Moved> {
    if !archive.exists() {
        return match what {
            Restore::All => Ok(Moved::default()),
            Restore::Tasks(numbers) => Err(not_archived(numbers)),
        };
    }
    with_archive(&project.store, archive, |conn| {
        let tx = Transaction::new(conn, TransactionBehavior::Immediate)?;
        let tasks: Vec<i64> = {
            let mut stmt = tx.prepare(
                "SELECT id, number FROM archive.tasks WHERE project_id = ?1 ORDER BY number",
            )?;
            let rows = stmt.query_map([project.id], |r| Ok((r.get(0)?, r.get(1)?)))?;
            let archived: Vec<(i64, i64)> = rows.collect::<rusqlite::Result<_>>()?;
            match what {
                Restore::All => archived.iter().map(|(id, _)| *id).collect(),
                Restore::Tasks(numbers) => {
                    let missing: Vec<i64> = numbers
                        .iter()
                        .filter(|n| !archived.iter().any(|(_, number)| number == *n))
                        .copied()
                        .collect();
                    if !missing.is_empty() {
                        return Err(not_archived(&missing));
                    }
                    archived
                        .iter()
                        .filter(|(_, number)| numbers.contains(number))
                        .map(|(id, _)| *id)
                        .collect()
                }
            }
        };
        let ids = ids_json(&tasks);
        let taken: Vec<i64> = {
            let mut stmt = tx.prepare(&format!(
                "SELECT a.number FROM archive.tasks a WHERE a.id IN {} AND (
                     EXISTS (SELECT 1 FROM main.tasks m WHERE m.id = a.id
                             AND m.created_at IS NOT a.created_at)
                     OR EXISTS (SELECT 1 FROM main.tasks m WHERE m.project_id = a.project_id
                                AND m.number = a.number AND m.id <> a.id))
                 ORDER BY a.number",
                among(1)
            ))?;
            let rows = stmt.query_map([&ids], |r| r.get(0))?;
            rows.collect::<rusqlite::Result<_>>()?
        };
        if !taken.is_empty() {
            return Err(ProjectError::Conflict(format!(
                "archived task number(s) {} are taken in car.db by other tasks; nothing was restored",
                join(&taken)
            )));
        }
        let moved_tasks = read_moved(&tx, "archive", &tasks)?;
        let progress_filter = match what {
            Restore::All => format!(
                "project_id = ?2 AND (task_id IS NULL OR task_id IN {0}
                     OR task_id IN (SELECT id FROM main.tasks))",
                among(1)
            ),
            Restore::Tasks(_) => format!("task_id IN {} AND ?2 IS NOT NULL", among(1)),
        };
        let clash: i64 = tx.query_row(
            &format!(
                "SELECT (SELECT count(*) FROM archive.task_events a JOIN main.task_events m
                         ON m.id = a.id AND m.at IS NOT a.at WHERE a.task_id IN {0})
                      + (SELECT count(*) FROM archive.progress a WHERE {progress_filter}
                         AND EXISTS (SELECT 1 FROM main.progress m WHERE m.id = a.id
                                     AND m.created_at IS NOT a.created_at))",
                among(1)
            ),
            params![ids, project.id],
            |r| r.get(0),
        )?;
        if clash > 0 {
            return Err(ProjectError::Conflict(format!(
                "{clash} archived event or progress id(s) are taken in car.db by other rows; nothing was restored"
            )));
        }
        tx.execute(
            &format!(
                "INSERT INTO main.tasks({TASK_COLUMNS}) SELECT {TASK_COLUMNS} FROM archive.tasks
                 WHERE id IN {} AND id NOT IN (SELECT id FROM main.tasks)",
                among(1)
            ),
            [&ids],
        )?;
        let events = tx.execute(
            &format!(
                "INSERT INTO main.task_events({EVENT_COLUMNS}) SELECT {EVENT_COLUMNS}
                 FROM archive.task_events WHERE task_id IN {}
                 AND id NOT IN (SELECT id FROM main.task_events)",
                among(1)
            ),
            [&ids],
        )?;
        let progress = tx.execute(
            &format!(
                "INSERT INTO main.progress({PROGRESS_COLUMNS}) SELECT {PROGRESS_COLUMNS}
                 FROM archive.progress WHERE {progress_filter}
                 AND id NOT IN (SELECT id FROM main.progress)"
            ),
            params![ids, project.id],
        )?;
        let ends = "(SELECT id FROM main.tasks WHERE project_id = ?2)";
        let deps_filter = match what {
            Restore::All => "?1 IS NOT NULL".to_string(),
            Restore::Tasks(_) => format!("(task_id IN {0} OR depends_on IN {0})", among(1)),
        };
        let dependencies = tx.execute(
            &format!(
                "INSERT OR IGNORE INTO main.task_deps(task_id, depends_on)
                 SELECT task_id, depends_on FROM archive.task_deps
                 WHERE {deps_filter} AND task_id IN {ends} AND depends_on IN {ends}"
            ),
            params![ids, project.id],
        )?;
        let moved = Moved {
            tasks: moved_tasks,
            dependencies,
            events,
            progress,
        };
        if mode == Mode::DryRun {
            return Ok(moved);
        }
        tx.commit()?;
        // car.db has committed the rows; now the archive lets go of them.
        let tx = Transaction::new(conn, TransactionBehavior::Immediate)?;
        drop_shadowed(&tx)?;
        tx.commit()?;
        Ok(moved)
    })
}

fn join(numbers: &[i64]) -> String {
    numbers
        .iter()
        .map(i64::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

fn not_archived(numbers: &[i64]) -> ProjectError {
    ProjectError::NotFound(format!(
        "task number(s) {} are not in this project's archive; `car prune --restore --all --dry-run` lists it",
        join(numbers)
    ))
}

/// What the archive holds for project `id` (zeros when there is no archive.db).
pub fn archived(store: &Store, archive: &Path, id: i64) -> Result<Archived> {
    if !archive.exists() {
        return Ok(Archived::default());
    }
    with_archive(store, archive, |conn| {
        let one = |sql: &str| -> rusqlite::Result<i64> { conn.query_row(sql, [id], |r| r.get(0)) };
        Ok(Archived {
            tasks: one("SELECT count(*) FROM archive.tasks WHERE project_id = ?1")?,
            dependencies: one("SELECT count(*) FROM archive.task_deps WHERE task_id IN
                 (SELECT id FROM archive.tasks WHERE project_id = ?1) OR depends_on IN
                 (SELECT id FROM archive.tasks WHERE project_id = ?1)")?,
            events: one("SELECT count(*) FROM archive.task_events WHERE task_id IN
                 (SELECT id FROM archive.tasks WHERE project_id = ?1)")?,
            progress: one("SELECT count(*) FROM archive.progress WHERE project_id = ?1")?,
        })
    })
}

/// Deletes every archived row of project `id` (when the project itself is forgotten).
pub fn forget(store: &Store, archive: &Path, id: i64) -> Result<()> {
    if !archive.exists() {
        return Ok(());
    }
    with_archive(store, archive, |conn| {
        let tx = Transaction::new(conn, TransactionBehavior::Immediate)?;
        tx.execute(
            "DELETE FROM archive.task_events WHERE task_id IN
             (SELECT id FROM archive.tasks WHERE project_id = ?1)",
            [id],
        )?;
        tx.execute(
            "DELETE FROM archive.task_deps WHERE task_id IN
             (SELECT id FROM archive.tasks WHERE project_id = ?1) OR depends_on IN
             (SELECT id FROM archive.tasks WHERE project_id = ?1)",
            [id],
        )?;
        tx.execute("DELETE FROM archive.progress WHERE project_id = ?1", [id])?;
        tx.execute("DELETE FROM archive.tasks WHERE project_id = ?1", [id])?;
        tx.commit()?;
        Ok(())
    })
}
