//! Cold storage: `car prune` moves a project's closed tasks (with their dependency links, events
//! and progress notes) and old resolved progress notes from `car.db` into `CAR_HOME/archive.db`,
//! and `car prune --restore` moves them back with their ids.
//!
//! The archive is attached to the store's connection, but car.db runs in WAL mode, where SQLite
//! makes a transaction over several attached databases atomic per database only, not as a set.
//! So a move is two transactions whose order makes a crash duplicate rows, never lose them:
//! the rows are first copied (archive.db commits), then deleted from their source only if they
//! are still exactly what was copied. A row found in both places is a leftover of such a crash;
//! car.db's copy is the current one and the archive's is dropped (see [`drop_shadowed`]).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{params, Connection, Transaction, TransactionBehavior};
use serde::{Deserialize, Serialize};

use super::tasks::TaskStatus;
use super::{Mode, Project, ProjectError, Result};
use crate::store::Store;

mod restore;
#[cfg(test)]
mod tests;

pub use restore::{archived, forget, restore};

const SCHEMA: &str = include_str!("schema.sql");
const SCHEMA_VERSION: i64 = 1;

const TASK_COLUMNS: &str = "id, project_id, number, title, description, status, priority, labels, \
     parent_id, claimed_by, claimed_at, blocked_reason, open_deps, created_at, updated_at, closed_at";
const EVENT_COLUMNS: &str = "id, task_id, at, actor, event, detail";
const PROGRESS_COLUMNS: &str = "id, project_id, task_id, kind, body, status, resolution, author, \
     created_at, updated_at, resolved_at";

/// `IN` over a JSON array of ids bound as parameter `?n`.
fn among(n: u8) -> String {
    format!("(SELECT value FROM json_each(?{n}))")
}

fn ids_json(ids: &[i64]) -> String {
    serde_json::to_string(ids).unwrap_or_else(|_| "[]".into())
}

/// A task that moved (or would move).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MovedTask {
    pub id: i64,
    pub number: i64,
    pub title: String,
    /// `done` or `cancelled`.
    pub status: TaskStatus,
    pub closed_at: Option<String>,
}

/// What a prune or a restore moved (or, in a dry run, would move).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Moved {
    pub tasks: Vec<MovedTask>,
    pub dependencies: usize,
    pub events: usize,
    pub progress: usize,
}

/// What `car prune` (or `car prune --restore`) moved, between car.db and which archive.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Report {
    #[serde(flatten)]
    pub moved: Moved,
    /// How long ago archived rows were closed, at least (absent for a restore).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub older_than_seconds: Option<u64>,
    /// True when nothing moved: `moved` says what would have.
    pub dry_run: bool,
    /// The archive database.
    pub archive: PathBuf,
    /// The project's task prefix (task.prefix), for showing task numbers.
    pub prefix: String,
}

/// What the archive holds for a project.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Archived {
    pub tasks: i64,
    pub dependencies: i64,
    pub events: i64,
    pub progress: i64,
}

/// Which archived tasks to bring back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Restore {
    /// Every archived task and progress note of the project.
    All,
    /// These task numbers, with their events, links and notes.
    Tasks(Vec<i64>),
}

/// Runs `work` with archive.db attached as `archive` (its schema created on first use), and
/// detaches it whatever happens.
fn with_archive<T>(
    store: &Store,
    path: &Path,
    work: impl FnOnce(&mut Connection) -> Result<T>,
) -> Result<T> {
    let mut conn = store.conn();
    let attached: i64 = conn.query_row(
        "SELECT count(*) FROM pragma_database_list WHERE name = 'archive'",
        [],
        |r| r.get(0),
    )?;
    if attached > 0 {
        conn.execute("DETACH DATABASE archive", [])?;
    }
    conn.execute(
        "ATTACH DATABASE ?1 AS archive",
        [path.to_string_lossy().as_ref()],
    )?;
    let result = prepare(&conn, path).and_then(|()| work(&mut conn));
    let detached = conn.execute("DETACH DATABASE archive", []);
    let value = result?;
    detached?;
    Ok(value)
}

fn prepare(conn: &Connection, path: &Path) -> Result<()> {
    let version: i64 = conn.query_row("PRAGMA archive.user_version", [], |r| r.get(0))?;
    if version > SCHEMA_VERSION {
        return Err(ProjectError::Conflict(format!(
            "{} was written by a newer CAR (archive schema {version}); upgrade CAR",
            path.display()
        )));
    }
    if version < SCHEMA_VERSION {
        conn.execute_batch(SCHEMA)?;
        conn.pragma_update(Some("archive"), "user_version", SCHEMA_VERSION)?;
    }
    Ok(())
}

/// The rows one move takes, and their contents (to check nothing changed in between).
#[derive(Debug, PartialEq, Eq)]
struct Plan {
    tasks: Vec<i64>,
    progress: Vec<i64>,
    contents: Vec<String>,
}

/// Closed tasks of the project closed before `cutoff` — except its highest-numbered task (so a
/// new task never reuses an archived number) and a parent whose child stays — and progress
/// notes on them or resolved before `cutoff`.
fn plan(tx: &Transaction<'_>, project: i64, cutoff: &str) -> Result<Plan> {
    let mut tasks: BTreeSet<i64> = {
        let mut stmt = tx.prepare(
            "SELECT id FROM main.tasks WHERE project_id = ?1 AND status IN ('done', 'cancelled')
             AND closed_at IS NOT NULL AND closed_at < ?2
             AND number < (SELECT max(number) FROM main.tasks WHERE project_id = ?1)",
        )?;
        let rows = stmt.query_map(params![project, cutoff], |r| r.get(0))?;
        rows.collect::<rusqlite::Result<_>>()?
    };
    let children: Vec<(i64, i64)> = {
        let mut stmt = tx.prepare(&format!(
            "SELECT id, parent_id FROM main.tasks WHERE parent_id IN {}",
            among(1)
        ))?;
        let ids: Vec<i64> = tasks.iter().copied().collect();
        let rows = stmt.query_map([ids_json(&ids)], |r| Ok((r.get(0)?, r.get(1)?)))?;
        rows.collect::<rusqlite::Result<_>>()?
    };
    loop {
        let staying: Vec<i64> = children
            .iter()
            .filter(|(child, parent)| !tasks.contains(child) && tasks.contains(parent))
            .map(|(_, parent)| *parent)
            .collect();
        if staying.is_empty() {
            break;
        }
        for parent in staying {
            tasks.remove(&parent);
        }
    }
    let tasks: Vec<i64> = tasks.into_iter().collect();
    let task_ids = ids_json(&tasks);
    let progress: Vec<i64> = {
        let mut stmt = tx.prepare(&format!(
            "SELECT id FROM main.progress WHERE task_id IN {}
             OR (project_id = ?2 AND status = 'resolved' AND resolved_at IS NOT NULL
                 AND resolved_at < ?3) ORDER BY id",
            among(1)
        ))?;
        let rows = stmt.query_map(params![task_ids, project, cutoff], |r| r.get(0))?;
        rows.collect::<rusqlite::Result<_>>()?
    };
    let progress_ids = ids_json(&progress);
    let mut contents = Vec::new();
    for (sql, ids) in [
        (
            format!(
                "SELECT json_array({TASK_COLUMNS}) FROM main.tasks WHERE id IN {} ORDER BY id",
                among(1)
            ),
            &task_ids,
        ),
        (
            format!(
                "SELECT json_array(task_id, depends_on) FROM main.task_deps
                 WHERE task_id IN {0} OR depends_on IN {0} ORDER BY task_id, depends_on",
                among(1)
            ),
            &task_ids,
        ),
        (
            format!(
                "SELECT json_array({EVENT_COLUMNS}) FROM main.task_events WHERE task_id IN {}
                 ORDER BY id",
                among(1)
            ),
            &task_ids,
        ),
        (
            format!(
                "SELECT json_array({PROGRESS_COLUMNS}) FROM main.progress WHERE id IN {}
                 ORDER BY id",
                among(1)
            ),
            &progress_ids,
        ),
    ] {
        let mut stmt = tx.prepare(&sql)?;
        let rows = stmt.query_map([ids], |r| r.get::<_, String>(0))?;
        contents.extend(rows.collect::<rusqlite::Result<Vec<_>>>()?);
        contents.push(String::new());
    }
    Ok(Plan {
        tasks,
        progress,
        contents,
    })
}

fn read_moved(tx: &Transaction<'_>, schema: &str, ids: &[i64]) -> Result<Vec<MovedTask>> {
    let mut stmt = tx.prepare(&format!(
        "SELECT id, number, title, status, closed_at FROM {schema}.tasks WHERE id IN {}
         ORDER BY number",
        among(1)
    ))?;
    let rows = stmt.query_map([ids_json(ids)], |r| {
        Ok(MovedTask {
            id: r.get(0)?,
            number: r.get(1)?,
            title: r.get(2)?,
            status: TaskStatus::shown(&r.get::<_, String>(3)?, 0).map_err(|e| {
                rusqlite::Error::FromSqlConversionFailure(
                    3,
                    rusqlite::types::Type::Text,
                    Box::new(e),
                )
            })?,
            closed_at: r.get(4)?,
        })
    })?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

fn count(tx: &Transaction<'_>, sql: &str, ids: &[i64]) -> Result<usize> {
    Ok(tx.query_row(sql, [ids_json(ids)], |r| r.get::<_, i64>(0))? as usize)
}

/// What moving `plan` out of car.db takes.
fn summary(tx: &Transaction<'_>, plan: &Plan) -> Result<Moved> {
    Ok(Moved {
        tasks: read_moved(tx, "main", &plan.tasks)?,
        dependencies: count(
            tx,
            &format!(
                "SELECT count(*) FROM main.task_deps WHERE task_id IN {0} OR depends_on IN {0}",
                among(1)
            ),
            &plan.tasks,
        )?,
        events: count(
            tx,
            &format!(
                "SELECT count(*) FROM main.task_events WHERE task_id IN {}",
                among(1)
            ),
            &plan.tasks,
        )?,
        progress: plan.progress.len(),
    })
}

/// Moves the project's tasks closed (done or cancelled) more than `older_than` ago, with their
/// dependency links, events and progress notes, and its progress notes resolved more than
/// `older_than` ago, into the archive. A dry run reports the same numbers and writes nothing
/// (not even archive.db).
pub fn prune(project: &Project, archive: &Path, older_than: Duration, mode: Mode) -> Result<Moved> {
    let cutoff = crate::store::now_minus(older_than);
    let store = &project.store;
    {
        let mut conn = store.conn();
        let tx = conn.transaction()?;
        let plan = plan(&tx, project.id, &cutoff)?;
        let nothing = plan.tasks.is_empty() && plan.progress.is_empty();
        if mode == Mode::DryRun || nothing {
            return summary(&tx, &plan);
        }
    }
    with_archive(store, archive, |conn| {
        let copied = copy(conn, project.id, &cutoff)?;
        delete_if_unchanged(conn, project.id, &cutoff, &copied)
    })
}

/// Step 1 of a move: copies what `plan` selects into the archive, which commits. car.db is
/// locked meanwhile, so the copy is consistent.
fn copy(conn: &mut Connection, project: i64, cutoff: &str) -> Result<Plan> {
    let archived_at = crate::store::now();
    let tx = Transaction::new(conn, TransactionBehavior::Immediate)?;
    let plan = plan(&tx, project, cutoff)?;
    let (tasks, progress) = (ids_json(&plan.tasks), ids_json(&plan.progress));
    for (sql, ids) in [
        (
            format!(
                "INSERT OR REPLACE INTO archive.tasks SELECT {TASK_COLUMNS}, ?2
                 FROM main.tasks WHERE id IN {}",
                among(1)
            ),
            &tasks,
        ),
        (
            format!(
                "INSERT OR REPLACE INTO archive.task_deps SELECT task_id, depends_on, ?2
                 FROM main.task_deps WHERE task_id IN {0} OR depends_on IN {0}",
                among(1)
            ),
            &tasks,
        ),
        (
            format!(
                "INSERT OR REPLACE INTO archive.task_events SELECT {EVENT_COLUMNS}, ?2
                 FROM main.task_events WHERE task_id IN {}",
                among(1)
            ),
            &tasks,
        ),
        (
            format!(
                "INSERT OR REPLACE INTO archive.progress SELECT {PROGRESS_COLUMNS}, ?2
                 FROM main.progress WHERE id IN {}",
                among(1)
            ),
            &progress,
        ),
    ] {
        tx.execute(&sql, params![ids, archived_at])?;
    }
    tx.commit()?;
    Ok(plan)
}

/// Step 2 of a move: deletes from car.db what step 1 copied, if it is still exactly that;
/// otherwise deletes nothing, drops the now stale copies and says so.
fn delete_if_unchanged(
    conn: &mut Connection,
    project: i64,
    cutoff: &str,
    copied: &Plan,
) -> Result<Moved> {
    let tx = Transaction::new(conn, TransactionBehavior::Immediate)?;
    if plan(&tx, project, cutoff)? != *copied {
        drop(tx);
        let tx = Transaction::new(conn, TransactionBehavior::Immediate)?;
        drop_shadowed(&tx)?;
        tx.commit()?;
        return Err(ProjectError::Conflict(
            "the project changed while pruning; nothing was moved; run `car prune` again".into(),
        ));
    }
    let moved = summary(&tx, copied)?;
    let (tasks, progress) = (ids_json(&copied.tasks), ids_json(&copied.progress));
    for (sql, ids) in [
        (
            format!(
                "DELETE FROM main.task_deps WHERE task_id IN {0} OR depends_on IN {0}",
                among(1)
            ),
            &tasks,
        ),
        (
            format!("DELETE FROM main.task_events WHERE task_id IN {}", among(1)),
            &tasks,
        ),
        (
            format!("DELETE FROM main.progress WHERE id IN {}", among(1)),
            &progress,
        ),
        (
            format!("DELETE FROM main.tasks WHERE id IN {}", among(1)),
            &tasks,
        ),
    ] {
        tx.execute(&sql, [ids])?;
    }
    tx.commit()?;
    Ok(moved)
}

/// Drops archived rows that are also in car.db (the same id and creation time): leftovers of
/// a move interrupted between its two transactions. car.db's copy is the current one.
fn drop_shadowed(tx: &Transaction<'_>) -> Result<()> {
    tx.execute_batch(
        "DELETE FROM archive.tasks WHERE (id, created_at) IN
             (SELECT id, created_at FROM main.tasks);
         DELETE FROM archive.task_events WHERE (id, at) IN (SELECT id, at FROM main.task_events);
         DELETE FROM archive.progress WHERE (id, created_at) IN
             (SELECT id, created_at FROM main.progress);
         DELETE FROM archive.task_deps WHERE (task_id, depends_on) IN
             (SELECT task_id, depends_on FROM main.task_deps);",
    )?;
    Ok(())
}
