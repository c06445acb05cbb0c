//! Looking after the projects CAR knows: counts of what each one holds (`stats`), listing,
//! finding and renaming projects, and forgetting the ones whose root directory is gone (every
//! per-project row, in one transaction, so a crash leaves the project whole or gone).

use std::path::Path;

use rusqlite::{params, OptionalExtension, Transaction};
use serde::{Deserialize, Serialize};

use super::archive::{self, Archived};
use super::decisions::DecisionStatus;
use super::progress::ProgressStatus;
use super::{Mode, ProjectError, Result};
use crate::store::Store;

/// A row of `projects`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ProjectInfo {
    pub id: i64,
    pub name: String,
    pub root: String,
    pub created_at: String,
    /// Whether the root directory still exists (`project prune` forgets the ones that don't).
    pub root_exists: bool,
}

fn root_exists(root: &str) -> bool {
    // A root we cannot check (permissions) counts as existing: never forget it by mistake.
    Path::new(root).try_exists().unwrap_or(true)
}

fn read_project(r: &rusqlite::Row<'_>) -> rusqlite::Result<ProjectInfo> {
    let root: String = r.get(2)?;
    Ok(ProjectInfo {
        id: r.get(0)?,
        name: r.get(1)?,
        root_exists: root_exists(&root),
        root,
        created_at: r.get(3)?,
    })
}

const PROJECT_COLUMNS: &str = "id, name, root, created_at";

/// Every project, oldest first.
pub fn projects(store: &Store) -> Result<Vec<ProjectInfo>> {
    let conn = store.conn();
    let mut stmt = conn.prepare(&format!(
        "SELECT {PROJECT_COLUMNS} FROM projects ORDER BY id"
    ))?;
    let rows = stmt.query_map([], read_project)?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// The project with this id.
pub fn project(store: &Store, id: i64) -> Result<ProjectInfo> {
    store
        .conn()
        .query_row(
            &format!("SELECT {PROJECT_COLUMNS} FROM projects WHERE id = ?1"),
            [id],
            read_project,
        )
        .optional()?
        .ok_or_else(|| ProjectError::NotFound(format!("no project with id {id}")))
}

/// Finds a project by id, root (absolute, or relative to `cwd`) or name.
pub fn find(store: &Store, reference: &str, cwd: &Path) -> Result<ProjectInfo> {
    let all = projects(store)?;
    if let Ok(id) = reference.parse::<i64>() {
        if let Some(found) = all.iter().find(|p| p.id == id) {
            return Ok(found.clone());
        }
    }
    let as_root = std::path::absolute(cwd.join(reference))
        .map(|p| p.to_string_lossy().to_string())
        .unwrap_or_default();
    if let Some(found) = all
        .iter()
        .find(|p| p.root == reference || p.root == as_root)
    {
        return Ok(found.clone());
    }
    let named: Vec<&ProjectInfo> = all.iter().filter(|p| p.name == reference).collect();
    match named.as_slice() {
        [one] => Ok((*one).clone()),
        [] => Err(ProjectError::NotFound(format!(
            "no project with id, root or name {reference:?}; `car project list` shows them"
        ))),
        many => Err(ProjectError::Conflict(format!(
            "{} projects are named {reference:?} (ids {}); give the id or the root",
            many.len(),
            many.iter()
                .map(|p| p.id.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

/// Renames a project (names are labels; the root identifies it).
pub fn rename(store: &Store, id: i64, name: &str) -> Result<ProjectInfo> {
    let name = name.trim();
    if name.is_empty() || name.chars().count() > 200 || name.chars().any(char::is_control) {
        return Err(ProjectError::Invalid(
            "a project name is 1 to 200 characters without control characters".into(),
        ));
    }
    let changed = store.write(|tx| {
        tx.execute(
            "UPDATE projects SET name = ?1 WHERE id = ?2",
            params![name, id],
        )
    })?;
    if changed == 0 {
        return Err(ProjectError::NotFound(format!("no project with id {id}")));
    }
    project(store, id)
}

/// What one project holds.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Counts {
    pub tasks: TaskCounts,
    /// Dependency links between tasks of the project.
    pub dependencies: i64,
    pub task_events: i64,
    pub progress: ProgressCounts,
    pub decisions: DecisionCounts,
    pub graph_nodes: i64,
    pub graph_edges: i64,
    pub checkpoints: i64,
    pub settings: i64,
    /// Current memory entries (not superseded) scoped to the project.
    pub memory_entries: i64,
    /// Every memory node of the project, superseded ones included.
    pub memory_nodes: i64,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TaskCounts {
    pub total: i64,
    /// Open with no dependency left undone.
    pub ready: i64,
    pub open: i64,
    pub claimed: i64,
    pub blocked: i64,
    pub done: i64,
    pub cancelled: i64,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ProgressCounts {
    pub open: i64,
    pub resolved: i64,
    pub blockers_open: i64,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DecisionCounts {
    pub total: i64,
    pub proposed: i64,
    pub accepted: i64,
    pub rejected: i64,
    pub deprecated: i64,
    pub superseded: i64,
}

/// Counts what project `id` holds, in one read transaction so the numbers agree.
pub fn counts(store: &Store, id: i64) -> Result<Counts> {
    let mut conn = store.conn();
    let tx = conn.transaction()?;
    let one = |sql: &str| -> rusqlite::Result<i64> { tx.query_row(sql, [id], |r| r.get(0)) };
    let mut counts = Counts {
        dependencies: one(
            "SELECT count(*) FROM task_deps d JOIN tasks t ON t.id = d.task_id
             WHERE t.project_id = ?1",
        )?,
        task_events: one(
            "SELECT count(*) FROM task_events e JOIN tasks t ON t.id = e.task_id
             WHERE t.project_id = ?1",
        )?,
        graph_nodes: one("SELECT count(*) FROM graph_nodes WHERE project_id = ?1")?,
        graph_edges: one(
            "SELECT count(*) FROM graph_edges e JOIN graph_nodes n ON n.id = e.src
             WHERE n.project_id = ?1",
        )?,
        checkpoints: one("SELECT count(*) FROM checkpoints WHERE project_id = ?1")?,
        settings: one("SELECT count(*) FROM project_config WHERE project_id = ?1")?,
        memory_entries: one(
            "SELECT count(*) FROM memory_nodes WHERE project_id = ?1 AND superseded_by IS NULL",
        )?,
        memory_nodes: one("SELECT count(*) FROM memory_nodes WHERE project_id = ?1")?,
        tasks: TaskCounts {
            ready: one(
                "SELECT count(*) FROM tasks WHERE project_id = ?1 AND status = 'open'
                 AND open_deps = 0",
            )?,
            ..TaskCounts::default()
        },
        progress: ProgressCounts {
            blockers_open: one(
                "SELECT count(*) FROM progress WHERE project_id = ?1 AND kind = 'blocker'
                 AND status = 'open'",
            )?,
            ..ProgressCounts::default()
        },
        ..Counts::default()
    };
    let by_status = |sql: &str| -> rusqlite::Result<Vec<(String, i64)>> {
        let mut stmt = tx.prepare(sql)?;
        let rows = stmt.query_map([id], |r| Ok((r.get(0)?, r.get(1)?)))?;
        rows.collect()
    };
    for (status, n) in
        by_status("SELECT status, count(*) FROM tasks WHERE project_id = ?1 GROUP BY status")?
    {
        let tasks = &mut counts.tasks;
        tasks.total += n;
        match status.as_str() {
            "open" => tasks.open = n,
            "claimed" => tasks.claimed = n,
            "blocked" => tasks.blocked = n,
            "done" => tasks.done = n,
            "cancelled" => tasks.cancelled = n,
            _ => {}
        }
    }
    for (status, n) in
        by_status("SELECT status, count(*) FROM progress WHERE project_id = ?1 GROUP BY status")?
    {
        match ProgressStatus::parse(&status) {
            Ok(ProgressStatus::Open) => counts.progress.open = n,
            Ok(ProgressStatus::Resolved) => counts.progress.resolved = n,
            Err(_) => {}
        }
    }
    for (status, n) in
        by_status("SELECT status, count(*) FROM decisions WHERE project_id = ?1 GROUP BY status")?
    {
        let decisions = &mut counts.decisions;
        decisions.total += n;
        match DecisionStatus::parse(&status) {
            Ok(DecisionStatus::Proposed) => decisions.proposed = n,
            Ok(DecisionStatus::Accepted) => decisions.accepted = n,
            Ok(DecisionStatus::Rejected) => decisions.rejected = n,
            Ok(DecisionStatus::Deprecated) => decisions.deprecated = n,
            Ok(DecisionStatus::Superseded) => decisions.superseded = n,
            Err(_) => {}
        }
    }
    Ok(counts)
}

/// The database's size in bytes (pages in use plus free pages, without the WAL).
pub fn db_bytes(store: &Store) -> Result<i64> {
    let conn = store.conn();
    let pages: i64 = conn.query_row("PRAGMA page_count", [], |r| r.get(0))?;
    let size: i64 = conn.query_row("PRAGMA page_size", [], |r| r.get(0))?;
    Ok(pages * size)
}

/// A project forgotten (or, in a dry run, that would be) and what it held.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Forgotten {
    pub project: ProjectInfo,
    pub counts: Counts,
}

/// What `project prune` did: the projects whose root is gone, forgotten unless a dry run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Forgetting {
    /// True when nothing was forgotten, only listed.
    pub dry_run: bool,
    pub projects: Vec<Forgotten>,
}

/// Every project CAR knows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Listed {
    pub projects: Vec<ProjectInfo>,
}

/// A project after its rename.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Renamed {
    pub project: ProjectInfo,
}

/// One project with what it holds and what `car prune` archived of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ProjectStats {
    pub project: ProjectInfo,
    pub counts: Counts,
    pub archived: Archived,
}

/// What `car stats` reports: each project's counts and the sizes of the two databases.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Stats {
    pub projects: Vec<ProjectStats>,
    /// The size of car.db in bytes (see [`db_bytes`]).
    pub db_bytes: i64,
    /// The size of archive.db in bytes (0 when there is none).
    pub archive_bytes: u64,
}

/// What `project` holds, counted in car.db and in the archive at `archive`.
pub fn project_stats(store: &Store, archive: &Path, project: ProjectInfo) -> Result<ProjectStats> {
    Ok(ProjectStats {
        counts: counts(store, project.id)?,
        archived: archive::archived(store, archive, project.id)?,
        project,
    })
}

/// The stats of `projects` and the sizes of car.db and of the archive at `archive`.
pub fn stats(store: &Store, archive: &Path, projects: Vec<ProjectInfo>) -> Result<Stats> {
    Ok(Stats {
        projects: projects
            .into_iter()
            .map(|project| project_stats(store, archive, project))
            .collect::<Result<_>>()?,
        db_bytes: db_bytes(store)?,
        archive_bytes: std::fs::metadata(archive).map(|m| m.len()).unwrap_or(0),
    })
}

/// Forgets every project whose root directory no longer exists: all its rows in every
/// per-project table go, one transaction per project (its archived rows in `archive` first, so
/// a crash in between never leaves archived rows to a project id that could be reused). A dry
/// run only reports them. A project whose root exists is never touched.
pub fn forget_gone(store: &Store, archive: &Path, mode: Mode) -> Result<Vec<Forgotten>> {
    let mut out = Vec::new();
    for project in projects(store)?.into_iter().filter(|p| !p.root_exists) {
        let counts = counts(store, project.id)?;
        if mode == Mode::Apply && !root_exists(&project.root) {
            archive::forget(store, archive, project.id)?;
            let id = project.id;
            let root = project.root.clone();
            store.write(|tx| {
                // Re-check inside the write lock: the root may have come back.
                if root_exists(&root) {
                    return Ok(false);
                }
                forget(tx, id)?;
                Ok::<_, ProjectError>(true)
            })?;
        }
        out.push(Forgotten { project, counts });
    }
    Ok(out)
}

/// Deletes every row of project `id`. Foreign keys are checked at the end of each statement,
/// so rows that point at each other inside the project go in one statement per table.
fn forget(tx: &Transaction<'_>, id: i64) -> rusqlite::Result<()> {
    const TASKS: &str = "SELECT id FROM tasks WHERE project_id = ?1";
    const NODES: &str = "SELECT id FROM graph_nodes WHERE project_id = ?1";
    const MEMORY: &str = "SELECT id FROM memory_nodes WHERE project_id = ?1";
    let statements = [
        format!("DELETE FROM task_events WHERE task_id IN ({TASKS})"),
        format!("DELETE FROM task_deps WHERE task_id IN ({TASKS}) OR depends_on IN ({TASKS})"),
        // A task elsewhere whose parent was here keeps living, without the parent.
        format!(
            "UPDATE tasks SET parent_id = NULL WHERE project_id <> ?1 AND parent_id IN ({TASKS})"
        ),
        format!("DELETE FROM progress WHERE project_id = ?1 OR task_id IN ({TASKS})"),
        "DELETE FROM tasks WHERE project_id = ?1".into(),
        "DELETE FROM decisions WHERE project_id = ?1".into(),
        format!("DELETE FROM graph_edges WHERE src IN ({NODES}) OR dst IN ({NODES})"),
        "DELETE FROM graph_nodes WHERE project_id = ?1".into(),
        "DELETE FROM checkpoints WHERE project_id = ?1".into(),
        "DELETE FROM project_config WHERE project_id = ?1".into(),
        // Memory: entries elsewhere that this project's entries overruled are current again,
        // and every touched node is logged so other processes' indexes drop or reload it.
        format!(
            "INSERT INTO memory_changes(node_id) SELECT id FROM memory_nodes
             WHERE (project_id IS NOT ?1) AND (superseded_by IN ({MEMORY})
                   OR invalidated_by IN ({MEMORY}))"
        ),
        format!(
            "UPDATE memory_nodes SET superseded_by = NULL
             WHERE project_id IS NOT ?1 AND superseded_by IN ({MEMORY})"
        ),
        format!(
            "UPDATE memory_nodes SET invalidated_by = NULL, invalidated_note = NULL
             WHERE project_id IS NOT ?1 AND invalidated_by IN ({MEMORY})"
        ),
        format!("INSERT INTO memory_changes(node_id) {MEMORY}"),
        format!(
            "INSERT INTO memory_changes(node_id)
             SELECT src FROM memory_edges WHERE dst IN ({MEMORY}) AND src NOT IN ({MEMORY})
             UNION SELECT dst FROM memory_edges WHERE src IN ({MEMORY}) AND dst NOT IN ({MEMORY})"
        ),
        format!("DELETE FROM memory_edges WHERE src IN ({MEMORY}) OR dst IN ({MEMORY})"),
        "DELETE FROM memory_nodes WHERE project_id = ?1".into(),
        "DELETE FROM memory_status WHERE project_id = ?1".into(),
        "DELETE FROM projects WHERE id = ?1".into(),
    ];
    for sql in &statements {
        tx.execute(sql, [id])?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::project::test_rows::{seed, table_dump};

    #[test]
    fn forgets_only_projects_whose_root_is_gone() {
        let dir = tempfile::tempdir().unwrap();
        let live = dir.path().join("live");
        let gone = dir.path().join("gone");
        std::fs::create_dir_all(&live).unwrap();
        std::fs::create_dir_all(&gone).unwrap();
        let store = Store::open_in_memory().unwrap();
        let live_id = store.project_id(&live).unwrap();
        let gone_id = store.project_id(&gone).unwrap();
        seed(&store, live_id, "L");
        seed(&store, gone_id, "G");
        let live_before = table_dump(&store, live_id);

        assert!(
            forget_gone(&store, &dir.path().join("archive.db"), Mode::Apply)
                .unwrap()
                .is_empty()
        );
        std::fs::remove_dir_all(&gone).unwrap();
        store
            .write(|tx| {
                tx.execute_batch(
                    "INSERT INTO memory_nodes(id, kind, subject, subject_key, body, created_at,
                         superseded_by) VALUES ('global', 'fact', 'build', 'build', 'make', 'x', 'm-G');
                     INSERT INTO memory_edges VALUES ('global', 'm-G', 'supersedes', 1.0);",
                )
            })
            .unwrap();
        let before = table_dump(&store, gone_id);
        let dry = forget_gone(&store, &dir.path().join("archive.db"), Mode::DryRun).unwrap();
        assert_eq!(dry.len(), 1);
        assert_eq!(dry[0].project.id, gone_id);
        assert_eq!(dry[0].counts.tasks.total, 3);
        assert_eq!(table_dump(&store, gone_id), before);

        let done = forget_gone(&store, &dir.path().join("archive.db"), Mode::Apply).unwrap();
        assert_eq!(done.len(), 1);
        assert!(table_dump(&store, gone_id)
            .iter()
            .all(|(_, rows)| rows.is_empty()));
        assert_eq!(table_dump(&store, live_id), live_before);
        assert_eq!(projects(&store).unwrap().len(), 1);
        // A global entry the gone project's entry had superseded is current again, and every
        // touched node is logged for the other processes' memory indexes.
        let (superseded, logged): (Option<String>, i64) = store
            .conn()
            .query_row(
                "SELECT superseded_by, (SELECT count(*) FROM memory_changes
                     WHERE node_id IN ('m-G', 'global')) FROM memory_nodes WHERE id = 'global'",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        assert_eq!((superseded, logged), (None, 3));
        // FTS stays consistent with its content table.
        store
            .conn()
            .execute(
                "INSERT INTO decisions_fts(decisions_fts) VALUES ('integrity-check')",
                [],
            )
            .unwrap();
        let hits: i64 = store
            .conn()
            .query_row(
                "SELECT count(*) FROM decisions_fts WHERE decisions_fts MATCH 'sqlite'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(hits, 1);
    }

    #[test]
    fn counts_tasks_by_status_and_readiness() {
        let store = Store::open_in_memory().unwrap();
        let id = store.project_id(Path::new("/tmp/x")).unwrap();
        seed(&store, id, "X");
        let counts = counts(&store, id).unwrap();
        assert_eq!(counts.tasks.total, 3);
        assert_eq!(counts.tasks.done, 1);
        assert_eq!(counts.tasks.open, 2);
        assert_eq!(counts.tasks.ready, 1);
        assert_eq!(counts.dependencies, 2);
        assert_eq!((counts.progress.open, counts.progress.resolved), (2, 2));
        assert_eq!(counts.progress.blockers_open, 1);
        assert_eq!(counts.decisions.accepted, 1);
        assert_eq!((counts.graph_nodes, counts.graph_edges), (2, 1));
        assert_eq!(counts.memory_entries, 1);
    }
}
