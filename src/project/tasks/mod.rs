//! Tasks: per-project numbered work items with priorities, labels, parents and dependencies.
//!
//! - Display ids are `<prefix>-0001` (prefix from the `task.prefix` setting, default `CTX`);
//!   commands accept `CTX-0001`, `ctx-1`, `#1` or `1`.
//! - Statuses: `open`, `claimed` (by an agent id), `done`, `blocked` (with a reason),
//!   `cancelled`. `ready` is derived: open with every dependency done or cancelled. Each task
//!   keeps `open_deps`, the count of its unresolved dependencies, updated in the transaction
//!   that changes a dependency's status, so the ready queue is one partial-index scan.
//! - A claim is one conditional UPDATE (`… WHERE status = 'open' AND open_deps = 0`): of any
//!   number of agents claiming one task at once, exactly one wins; the others get a conflict
//!   naming the winner.
//! - A dependency that would close a cycle is refused with the cycle's path.
//! - Every change is recorded in `task_events` (who, what, when): `task show` prints it.

use crate::store::sql::{args, Row, Sql};
use crate::store::StoreError;
use serde::{Deserialize, Serialize};

use super::{Project, ProjectError, Result};
use crate::store::now;
use deps::{add_dep, number, would_parent_cycle};

pub const STATUSES: &[&str] = &["open", "claimed", "done", "blocked", "cancelled"];
const DEFAULT_PREFIX: &str = "CTX";
const MAX_TITLE_CHARS: usize = 500;

/// A task's status as every face shows it: the stored one, or `ready` for an open task whose
/// dependencies are all done (derived in one place, [`TaskStatus::shown`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum TaskStatus {
    Open,
    Ready,
    Claimed,
    Blocked,
    Done,
    Cancelled,
}

impl TaskStatus {
    /// The status shown for a stored one and the count of dependencies not done yet.
    pub(crate) fn shown(stored: &str, open_deps: i64) -> Result<TaskStatus, StoreError> {
        Ok(match stored {
            "open" if open_deps == 0 => TaskStatus::Ready,
            "open" => TaskStatus::Open,
            "claimed" => TaskStatus::Claimed,
            "blocked" => TaskStatus::Blocked,
            "done" => TaskStatus::Done,
            "cancelled" => TaskStatus::Cancelled,
            other => return Err(StoreError::Decode(format!("unknown task status '{other}'"))),
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            TaskStatus::Open => "open",
            TaskStatus::Ready => "ready",
            TaskStatus::Claimed => "claimed",
            TaskStatus::Blocked => "blocked",
            TaskStatus::Done => "done",
            TaskStatus::Cancelled => "cancelled",
        }
    }
}

impl std::fmt::Display for TaskStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PartialEq<&str> for TaskStatus {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

/// One task as every face shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Task {
    #[serde(rename = "displayId")]
    pub display_id: String,
    #[serde(skip)]
    pub id: i64,
    pub title: String,
    pub status: TaskStatus,
    pub priority: Priority,
    pub labels: Vec<String>,
    pub parent: Option<String>,
    #[serde(rename = "claimedBy")]
    pub claimed_by: Option<String>,
    #[serde(rename = "blockedReason")]
    pub blocked_reason: Option<String>,
    /// How many dependencies are not done yet.
    #[serde(rename = "waitingOn")]
    pub waiting_on: i64,
    #[serde(rename = "createdAt")]
    pub created_at: String,
    #[serde(rename = "updatedAt")]
    pub updated_at: String,
    #[serde(rename = "closedAt")]
    pub closed_at: Option<String>,
}

/// A task with everything `task show` prints.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TaskDetail {
    #[serde(flatten)]
    pub task: Task,
    pub description: String,
    #[serde(rename = "dependsOn")]
    pub depends_on: Vec<Link>,
    pub blocks: Vec<Link>,
    pub children: Vec<Link>,
    #[serde(rename = "claimedAt")]
    pub claimed_at: Option<String>,
    pub events: Vec<Event>,
}

/// Another task, by id, title and status.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Link {
    #[serde(rename = "displayId")]
    pub display_id: String,
    pub title: String,
    pub status: TaskStatus,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Event {
    pub at: String,
    pub actor: Option<String>,
    pub event: String,
    pub detail: Option<String>,
}

/// What adding or removing a dependency did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DependencyChange {
    /// The task that waits (or no longer waits), as it is now.
    pub task: Task,
    /// False when there was nothing to do: the dependency existed (add) or did not (remove).
    pub changed: bool,
}

/// What `create` needs.
#[derive(Debug, Clone, Default)]
pub struct NewTask {
    pub title: String,
    pub description: String,
    /// Default P2.
    pub priority: Option<Priority>,
    pub labels: Vec<String>,
    pub parent: Option<String>,
    pub depends_on: Vec<String>,
}

/// What `update` changes; `None` leaves a field alone.
#[derive(Debug, Clone, Default)]
pub struct TaskUpdate {
    pub title: Option<String>,
    pub description: Option<String>,
    pub priority: Option<Priority>,
    pub add_labels: Vec<String>,
    pub remove_labels: Vec<String>,
    /// `Some(None)` removes the parent.
    pub parent: Option<Option<String>>,
    /// `open`, `done` or `cancelled` (claim, block and unblock have their own commands).
    pub status: Option<String>,
}

/// Which tasks `list` shows.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    /// A status, `ready`, or `all`; `None` shows everything not done or cancelled.
    pub status: Option<String>,
    pub label: Option<String>,
    pub claimed_by: Option<String>,
    pub parent: Option<String>,
    /// 0: no limit.
    pub limit: usize,
}

/// How urgent a task is: P0 (most urgent) … P4; stored as its level, 0 … 4.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema,
)]
pub enum Priority {
    P0,
    P1,
    P2,
    P3,
    P4,
}

impl Priority {
    const ALL: [Priority; 5] = [
        Priority::P0,
        Priority::P1,
        Priority::P2,
        Priority::P3,
        Priority::P4,
    ];

    /// The priority of a stored level (a level past 4 reads as P4).
    pub fn of_level(level: i64) -> Priority {
        Priority::ALL[level.clamp(0, 4) as usize]
    }

    /// The level it is stored as: 0 (most urgent) … 4.
    pub fn level(self) -> i64 {
        self as i64
    }
}

impl std::fmt::Display for Priority {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "P{}", *self as u8)
    }
}

/// Parses `P0`–`P4` or `0`–`4`.
pub fn parse_priority(text: &str) -> Result<Priority> {
    let digits = text.trim().trim_start_matches(['P', 'p']);
    match digits.parse::<u8>() {
        Ok(n) if n <= 4 => Ok(Priority::of_level(n.into())),
        _ => Err(ProjectError::Invalid(format!(
            "priority {text:?} is not one of P0 (most urgent) … P4"
        ))),
    }
}

/// The display prefix of the project's tasks.
pub fn prefix(conn: &dyn Sql, project: i64) -> Result<String> {
    Ok(conn
        .value::<String>(
            "SELECT value FROM project_config WHERE project_id = ?1 AND key = 'task.prefix'",
            args![project],
        )?
        .unwrap_or_else(|| DEFAULT_PREFIX.to_string()))
}

fn display(prefix: &str, number: i64) -> String {
    format!("{prefix}-{number:04}")
}

/// The row id of a referenced task, or a not-found error.
pub(crate) fn task_id(conn: &dyn Sql, project: i64, reference: &str) -> Result<i64> {
    let number = super::number_of(reference, "task", "CTX-0001")?;
    conn.value(
        "SELECT id FROM tasks WHERE project_id = ?1 AND number = ?2",
        args![project, number],
    )?
    .ok_or_else(|| {
        ProjectError::NotFound(format!(
            "no task {reference} in this project; `car task list --status all` shows them"
        ))
    })
}

const TASK_COLUMNS: &str = "t.id, t.number, t.title, t.status, t.priority, t.labels, \
     p.number AS parent_number, t.claimed_by, t.blocked_reason, t.open_deps, t.created_at, \
     t.updated_at, t.closed_at";

fn task_from_row(prefix: &str, row: &Row) -> Result<Task, StoreError> {
    let status: String = row.get("status")?;
    let open_deps: i64 = row.get("open_deps")?;
    let labels: String = row.get("labels")?;
    Ok(Task {
        id: row.get("id")?,
        display_id: display(prefix, row.get("number")?),
        title: row.get("title")?,
        status: TaskStatus::shown(&status, open_deps)?,
        priority: Priority::of_level(row.get("priority")?),
        labels: serde_json::from_str(&labels).unwrap_or_default(),
        parent: row
            .get::<Option<i64>>("parent_number")?
            .map(|n| display(prefix, n)),
        claimed_by: row.get("claimed_by")?,
        blocked_reason: row.get("blocked_reason")?,
        waiting_on: open_deps,
        created_at: row.get("created_at")?,
        updated_at: row.get("updated_at")?,
        closed_at: row.get("closed_at")?,
    })
}

fn load(conn: &dyn Sql, project: i64, id: i64) -> Result<Task> {
    let prefix = prefix(conn, project)?;
    let row = conn.query_one(
        &format!(
            "SELECT {TASK_COLUMNS} FROM tasks t LEFT JOIN tasks p ON p.id = t.parent_id
             WHERE t.id = ?1"
        ),
        args![id],
    )?;
    Ok(task_from_row(&prefix, &row)?)
}

fn event(
    tx: &dyn Sql,
    id: i64,
    actor: Option<&str>,
    what: &str,
    detail: Option<&str>,
) -> Result<()> {
    tx.execute(
        "INSERT INTO task_events (task_id, at, actor, event, detail) VALUES (?1, ?2, ?3, ?4, ?5)",
        args![id, now(), actor, what, detail],
    )?;
    Ok(())
}

fn clean_labels(labels: &[String]) -> Result<Vec<String>> {
    let mut out: Vec<String> = Vec::new();
    for label in labels {
        let label = label.trim().to_lowercase();
        if label.is_empty() {
            continue;
        }
        if label.chars().any(|c| c.is_whitespace() || c == ',') {
            return Err(ProjectError::Invalid(format!(
                "label {label:?} has a space or comma; labels are single words like `backend`"
            )));
        }
        if !out.contains(&label) {
            out.push(label);
        }
    }
    out.sort();
    Ok(out)
}

fn clean_title(title: &str) -> Result<String> {
    let title = title.trim();
    if title.is_empty() {
        return Err(ProjectError::Invalid("a task needs a title".into()));
    }
    if title.chars().count() > MAX_TITLE_CHARS {
        return Err(ProjectError::Invalid(format!(
            "a title has at most {MAX_TITLE_CHARS} characters; put details in --description"
        )));
    }
    Ok(title.to_string())
}

fn resolved(status: &str) -> bool {
    status == "done" || status == "cancelled"
}

fn status_of(tx: &dyn Sql, id: i64) -> Result<String> {
    Ok(tx
        .query_one("SELECT status FROM tasks WHERE id = ?1", args![id])?
        .get(0)?)
}

/// Sets a task's stored status and keeps its dependents' `open_deps` counts right.
fn set_status(tx: &dyn Sql, id: i64, status: &str) -> Result<()> {
    let before = status_of(tx, id)?;
    let closed = if resolved(status) { Some(now()) } else { None };
    tx.execute(
        "UPDATE tasks SET status = ?2, updated_at = ?3, closed_at = ?4,
                          blocked_reason = CASE WHEN ?2 = 'blocked' THEN blocked_reason END
         WHERE id = ?1",
        args![id, status, now(), closed],
    )?;
    let delta = match (resolved(&before), resolved(status)) {
        (false, true) => -1,
        (true, false) => 1,
        _ => 0,
    };
    if delta != 0 {
        tx.execute(
            "UPDATE tasks SET open_deps = open_deps + ?2
             WHERE id IN (SELECT task_id FROM task_deps WHERE depends_on = ?1)",
            args![id, delta],
        )?;
    }
    Ok(())
}

impl Project {
    /// Creates a task (with its parent and dependencies, all or nothing).
    pub fn create_task(&self, new: NewTask, actor: Option<&str>) -> Result<Task> {
        let title = clean_title(&new.title)?;
        let labels = clean_labels(&new.labels)?;
        let priority = new.priority.unwrap_or(Priority::P2).level();
        let project = self.id;
        let id = self.store.transaction(|tx| -> Result<i64> {
            let parent = match &new.parent {
                Some(p) => Some(task_id(tx, project, p)?),
                None => None,
            };
            let number: i64 = tx
                .query_one(
                    "SELECT COALESCE(MAX(number), 0) + 1 FROM tasks WHERE project_id = ?1",
                    args![project],
                )?
                .get(0)?;
            let at = now();
            let id: i64 = tx
                .query_one(
                    "INSERT INTO tasks (project_id, number, title, description, status, priority,
                                    labels, parent_id, created_at, updated_at)
                 VALUES (?1, ?2, ?3, ?4, 'open', ?5, ?6, ?7, ?8, ?8) RETURNING id",
                    args![
                        project,
                        number,
                        title,
                        new.description.trim(),
                        priority,
                        serde_json::to_string(&labels).unwrap_or_else(|_| "[]".into()),
                        parent,
                        at
                    ],
                )?
                .get(0)?;
            event(tx, id, actor, "created", None)?;
            for dep in &new.depends_on {
                let on = task_id(tx, project, dep)?;
                add_dep(tx, project, id, on)?;
            }
            Ok(id)
        })?;
        self.store.read(|sql| load(sql, self.id, id))
    }

    /// One task with its dependencies, dependents, children and history.
    pub fn task_detail(&self, reference: &str) -> Result<TaskDetail> {
        self.store.read(|conn| {
            let id = task_id(conn, self.id, reference)?;
            let task = load(conn, self.id, id)?;
            let prefix = prefix(conn, self.id)?;
            let links = |sql: &str| -> Result<Vec<Link>> {
                let mut links = Vec::new();
                conn.for_each(sql, args![id], &mut |r| {
                    let status: String = r.get(2)?;
                    let open_deps: i64 = r.get(3)?;
                    links.push(Link {
                        display_id: display(&prefix, r.get(0)?),
                        title: r.get(1)?,
                        status: TaskStatus::shown(&status, open_deps)?,
                    });
                    Ok(())
                })?;
                Ok(links)
            };
            let depends_on = links(
                "SELECT t.number, t.title, t.status, t.open_deps FROM task_deps d
                 JOIN tasks t ON t.id = d.depends_on WHERE d.task_id = ?1 ORDER BY t.number",
            )?;
            let blocks = links(
                "SELECT t.number, t.title, t.status, t.open_deps FROM task_deps d
                 JOIN tasks t ON t.id = d.task_id WHERE d.depends_on = ?1 ORDER BY t.number",
            )?;
            let children = links(
                "SELECT number, title, status, open_deps FROM tasks WHERE parent_id = ?1 ORDER BY number",
            )?;
            let row = conn.query_one(
                "SELECT description, claimed_at FROM tasks WHERE id = ?1",
                args![id],
            )?;
            let (description, claimed_at): (String, Option<String>) = (row.get(0)?, row.get(1)?);
            let mut events = Vec::new();
            conn.for_each(
                "SELECT at, actor, event, detail FROM task_events WHERE task_id = ?1 ORDER BY id",
                args![id],
                &mut |r| {
                    events.push(Event {
                        at: r.get(0)?,
                        actor: r.get(1)?,
                        event: r.get(2)?,
                        detail: r.get(3)?,
                    });
                    Ok(())
                },
            )?;
            Ok(TaskDetail {
                task,
                description,
                depends_on,
                blocks,
                children,
                claimed_at,
                events,
            })
        })
    }

    /// Tasks matching a filter, most urgent first (priority, then number).
    pub fn list_tasks(&self, filter: &Filter) -> Result<Vec<Task>> {
        let status = filter.status.as_deref().map(str::to_lowercase);
        // Each names ?2 (the status asked for), so the statement's every parameter has a type.
        let condition = match status.as_deref() {
            None => "CAST(?2 AS TEXT) IS NULL AND t.status IN ('open', 'claimed', 'blocked')",
            Some("all") => "CAST(?2 AS TEXT) = 'all'",
            Some("ready") => "CAST(?2 AS TEXT) = 'ready' AND t.status = 'open' AND t.open_deps = 0",
            Some(s) if STATUSES.contains(&s) => "t.status = ?2",
            Some(other) => {
                return Err(ProjectError::Invalid(format!(
                    "unknown status {other:?}; use ready, open, claimed, blocked, done, cancelled or all"
                )))
            }
        };
        let limit = if filter.limit == 0 {
            i64::MAX
        } else {
            filter.limit as i64
        };
        // The ready queue reads its partial index whatever the planner guesses, so it stays one
        // short index scan even when few open tasks are ready.
        let indexed = if status.as_deref() == Some("ready") {
            "INDEXED BY tasks_ready"
        } else {
            ""
        };
        // Labels are a JSON array of strings: a label is in it when its JSON string is.
        let sql = format!(
            "SELECT {TASK_COLUMNS} FROM tasks t {indexed} LEFT JOIN tasks p ON p.id = t.parent_id
             WHERE t.project_id = ?1 AND {condition}
               AND (CAST(?3 AS TEXT) IS NULL OR instr(t.labels, ?3) > 0)
               AND (CAST(?4 AS TEXT) IS NULL OR t.claimed_by = ?4)
               AND (CAST(?5 AS BIGINT) IS NULL OR t.parent_id = ?5)
             ORDER BY t.priority, t.number LIMIT ?6"
        );
        let label = filter
            .label
            .as_deref()
            .map(|l| serde_json::Value::from(l.trim().to_lowercase()).to_string());
        self.store.read(|conn| {
            let prefix = prefix(conn, self.id)?;
            let parent = match &filter.parent {
                Some(p) => Some(task_id(conn, self.id, p)?),
                None => None,
            };
            conn.query(
                &sql,
                args![self.id, status, label, filter.claimed_by, parent, limit],
            )?
            .iter()
            .map(|row| Ok(task_from_row(&prefix, row)?))
            .collect()
        })
    }

    /// Changes a task's fields (and `open`/`done`/`cancelled` status).
    pub fn update_task(
        &self,
        reference: &str,
        update: TaskUpdate,
        actor: Option<&str>,
    ) -> Result<Task> {
        let title = update.title.as_deref().map(clean_title).transpose()?;
        let add = clean_labels(&update.add_labels)?;
        let remove = clean_labels(&update.remove_labels)?;
        if let Some(status) = update.status.as_deref() {
            if !["open", "done", "cancelled"].contains(&status) {
                return Err(ProjectError::Invalid(format!(
                    "update sets status open, done or cancelled; for {status:?} use `car task {}`",
                    match status {
                        "claimed" => "claim",
                        "blocked" => "block",
                        _ => "…",
                    }
                )));
            }
        }
        let project = self.id;
        let id = self.store.transaction(|tx| -> Result<i64> {
            let id = task_id(tx, project, reference)?;
            let mut changes = Vec::new();
            if let Some(title) = &title {
                tx.execute("UPDATE tasks SET title = ?2 WHERE id = ?1", args![id, title])?;
                changes.push("title".to_string());
            }
            if let Some(description) = &update.description {
                tx.execute(
                    "UPDATE tasks SET description = ?2 WHERE id = ?1",
                    args![id, description.trim()],
                )?;
                changes.push("description".into());
            }
            if let Some(priority) = update.priority {
                tx.execute("UPDATE tasks SET priority = ?2 WHERE id = ?1", args![id, priority.level()])?;
                changes.push(format!("priority {priority}"));
            }
            if !add.is_empty() || !remove.is_empty() {
                let current: String = tx
                    .query_one("SELECT labels FROM tasks WHERE id = ?1", args![id])?
                    .get(0)?;
                let mut labels: Vec<String> = serde_json::from_str(&current).unwrap_or_default();
                labels.retain(|l| !remove.contains(l));
                for l in &add {
                    if !labels.contains(l) {
                        labels.push(l.clone());
                    }
                }
                labels.sort();
                tx.execute(
                    "UPDATE tasks SET labels = ?2 WHERE id = ?1",
                    args![id, serde_json::to_string(&labels).unwrap_or_default()],
                )?;
                changes.push("labels".into());
            }
            if let Some(parent) = &update.parent {
                let parent_id = match parent {
                    Some(p) => {
                        let pid = task_id(tx, project, p)?;
                        if would_parent_cycle(tx, id, pid)? {
                            return Err(ProjectError::Conflict(format!(
                                "{p} is this task or one of its descendants; a task cannot be its own ancestor"
                            )));
                        }
                        Some(pid)
                    }
                    None => None,
                };
                tx.execute("UPDATE tasks SET parent_id = ?2 WHERE id = ?1", args![id, parent_id])?;
                changes.push("parent".into());
            }
            if let Some(status) = &update.status {
                set_status(tx, id, status)?;
                if status == "open" {
                    tx.execute(
                        "UPDATE tasks SET claimed_by = NULL, claimed_at = NULL WHERE id = ?1",
                        args![id],
                    )?;
                }
                changes.push(format!("status {status}"));
            }
            if changes.is_empty() {
                return Err(ProjectError::Invalid(
                    "nothing to update; give --title, --description, --priority, --label, --unlabel, --parent or --status".into(),
                ));
            }
            tx.execute("UPDATE tasks SET updated_at = ?2 WHERE id = ?1", args![id, now()])?;
            event(tx, id, actor, "updated", Some(&changes.join(", ")))?;
            Ok(id)
        })?;
        self.store.read(|sql| load(sql, self.id, id))
    }

    /// Claims a task for `agent`, or (no reference) the most urgent ready task. Atomic: of
    /// concurrent claimers exactly one wins. Claiming a task one already holds is a no-op.
    pub fn claim_task(&self, reference: Option<&str>, agent: &str) -> Result<Task> {
        let agent = agent.trim();
        if agent.is_empty() {
            return Err(ProjectError::Invalid(
                "a claim needs an agent id (--agent, or CAR_AGENT_ID)".into(),
            ));
        }
        let project = self.id;
        let id = self.store.transaction(|tx| -> Result<i64> {
            let id = match reference {
                Some(r) => task_id(tx, project, r)?,
                None => tx
                    .value(
                        "SELECT id FROM tasks INDEXED BY tasks_ready WHERE project_id = ?1
                           AND status = 'open' AND open_deps = 0 ORDER BY priority, number LIMIT 1",
                        args![project],
                    )?
                    .ok_or_else(|| ProjectError::NotFound("no task is ready to claim".into()))?,
            };
            let won = tx.execute(
                "UPDATE tasks SET status = 'claimed', claimed_by = ?2, claimed_at = ?3, updated_at = ?3
                 WHERE id = ?1 AND status = 'open' AND open_deps = 0",
                args![id, agent, now()],
            )?;
            if won == 1 {
                event(tx, id, Some(agent), "claimed", None)?;
                return Ok(id);
            }
            let row = tx.query_one(
                "SELECT status, claimed_by, open_deps FROM tasks WHERE id = ?1",
                args![id],
            )?;
            let (status, holder, open_deps): (String, Option<String>, i64) =
                (row.get(0)?, row.get(1)?, row.get(2)?);
            let name = display(&prefix(tx, project)?, number(tx, id)?);
            Err(match (status.as_str(), holder) {
                ("claimed", Some(h)) if h == agent => return Ok(id),
                ("claimed", Some(h)) => {
                    ProjectError::Conflict(format!("{name} is already claimed by {h}"))
                }
                ("open", _) => ProjectError::Conflict(format!(
                    "{name} is not ready: it waits on {open_deps} unfinished dependenc{}; `car task show {name}` lists them",
                    if open_deps == 1 { "y" } else { "ies" }
                )),
                (other, _) => ProjectError::Conflict(format!("{name} is {other}; only a ready task can be claimed")),
            })
        })?;
        self.store.read(|sql| load(sql, self.id, id))
    }

    /// Marks a task done (from any status but cancelled), which may make dependents ready.
    pub fn complete_task(
        &self,
        reference: &str,
        actor: Option<&str>,
        note: Option<&str>,
    ) -> Result<Task> {
        self.transition(reference, actor, "completed", note, |tx, id, name| {
            match status_of(tx, id)?.as_str() {
                "done" => Err(ProjectError::Conflict(format!("{name} is already done"))),
                "cancelled" => Err(ProjectError::Conflict(format!(
                    "{name} was cancelled; reopen it first with `car task update {name} --status open`"
                ))),
                _ => set_status(tx, id, "done"),
            }
        })
    }

    /// Marks a task blocked with a reason.
    pub fn block_task(&self, reference: &str, reason: &str, actor: Option<&str>) -> Result<Task> {
        let reason = reason.trim();
        if reason.is_empty() {
            return Err(ProjectError::Invalid(
                "say why the task is blocked (--reason)".into(),
            ));
        }
        self.transition(reference, actor, "blocked", Some(reason), |tx, id, name| {
            let status = status_of(tx, id)?;
            if resolved(&status) {
                return Err(ProjectError::Conflict(format!("{name} is {status}; it cannot be blocked")));
            }
            tx.execute(
                "UPDATE tasks SET status = 'blocked', blocked_reason = ?2, updated_at = ?3 WHERE id = ?1",
                args![id, reason, now()],
            )?;
            Ok(())
        })
    }

    /// Lifts a block: back to claimed (if someone holds it) or open.
    pub fn unblock_task(&self, reference: &str, actor: Option<&str>) -> Result<Task> {
        self.transition(reference, actor, "unblocked", None, |tx, id, name| {
            if status_of(tx, id)? != "blocked" {
                return Err(ProjectError::Conflict(format!("{name} is not blocked")));
            }
            tx.execute(
                "UPDATE tasks SET status = CASE WHEN claimed_by IS NULL THEN 'open' ELSE 'claimed' END,
                                  blocked_reason = NULL, updated_at = ?2 WHERE id = ?1",
                args![id, now()],
            )?;
            Ok(())
        })
    }

    fn transition(
        &self,
        reference: &str,
        actor: Option<&str>,
        what: &str,
        detail: Option<&str>,
        change: impl FnOnce(&dyn Sql, i64, &str) -> Result<()>,
    ) -> Result<Task> {
        let project = self.id;
        let id = self.store.transaction(|tx| -> Result<i64> {
            let id = task_id(tx, project, reference)?;
            let name = display(&prefix(tx, project)?, number(tx, id)?);
            change(tx, id, &name)?;
            event(tx, id, actor, what, detail)?;
            Ok(id)
        })?;
        self.store.read(|sql| load(sql, self.id, id))
    }
}

mod deps;
#[cfg(test)]
mod tests;
