//! The session lifecycle: `status` (where the project stands), `context` (the briefing an agent
//! reads at session start), `checkpoint` (a named snapshot with a note), `resume` (a
//! checkpoint's briefing and what changed since) and the project checks behind `doctor`.

use std::collections::BTreeMap;

use crate::store::sql::{args, Dialect};
use serde::{Deserialize, Serialize};

use super::decisions::Decision;
use super::progress::{Progress, ProgressFilter};
use super::tasks::{Filter, Task};
use super::{Mode, Project, ProjectError, Result};
use crate::memory::Memory;
use crate::store::now;

/// How many tasks in progress, blocked tasks and blockers a briefing lists (ready tasks: the
/// `context.max_ready` setting, default the same).
const BRIEF_ITEMS: usize = 10;
const BRIEF_DECISIONS: usize = 5;
const BRIEF_FACTS: usize = 8;

/// Where the project stands.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Status {
    pub project: ProjectInfo,
    pub tasks: BTreeMap<String, i64>,
    pub ready: Vec<Task>,
    #[serde(rename = "inProgress")]
    pub in_progress: Vec<Task>,
    pub blocked: Vec<Task>,
    pub blockers: Vec<Progress>,
    pub decisions: Vec<Decision>,
    #[serde(rename = "lastCheckpoint")]
    pub last_checkpoint: Option<CheckpointInfo>,
}

#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ProjectInfo {
    pub name: String,
    pub root: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CheckpointInfo {
    pub name: String,
    pub note: String,
    #[serde(rename = "createdAt")]
    pub created_at: String,
}

/// What a checkpoint stores: enough to say later what changed.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
struct Snapshot {
    /// Task number → stored status.
    tasks: BTreeMap<i64, String>,
    decisions: i64,
    progress: i64,
    briefing: String,
}

/// One memory fact in a briefing.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Fact {
    pub id: String,
    pub subject: String,
    pub body: String,
}

/// The session-start briefing (`context`) and what it was made from.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Briefing {
    /// The briefing as Markdown.
    pub briefing: String,
    pub status: Status,
    /// The memory facts most relevant to the work at hand.
    pub facts: Vec<Fact>,
}

/// A checkpoint's briefing and what changed since (`resume`).
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Resumed {
    pub checkpoint: CheckpointInfo,
    /// The briefing as it was at the checkpoint.
    pub briefing: String,
    pub changes: Changes,
    /// Where the project stands now.
    pub now: Status,
}

/// What changed since a checkpoint.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Changes {
    /// Tasks created since, by display id.
    #[serde(rename = "tasksCreated")]
    pub tasks_created: Vec<String>,
    /// Tasks whose stored status changed.
    #[serde(rename = "tasksMoved")]
    pub tasks_moved: Vec<TaskMove>,
    /// Tasks archived or deleted since, by display id.
    #[serde(rename = "tasksRemoved")]
    pub tasks_removed: Vec<String>,
    /// Decisions recorded since.
    pub decisions: Vec<Decision>,
    /// Progress notes and blockers added since.
    pub progress: Vec<Progress>,
}

/// A task whose stored status changed since a checkpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TaskMove {
    #[serde(rename = "displayId")]
    pub display_id: String,
    /// The stored status at the checkpoint.
    pub from: String,
    /// The stored status now.
    pub to: String,
}

/// One check of `car doctor`: what was checked, whether it passed, and what to do if not.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Check {
    pub check: String,
    pub ok: bool,
    pub detail: String,
}

impl Check {
    pub fn new(check: impl Into<String>, ok: bool, detail: impl Into<String>) -> Check {
        Check {
            check: check.into(),
            ok,
            detail: detail.into(),
        }
    }
}

impl Project {
    fn info(&self) -> Result<ProjectInfo> {
        let name: String = self.store.read(|sql| {
            sql.query_one("SELECT name FROM projects WHERE id = ?1", args![self.id])?
                .get(0)
        })?;
        Ok(ProjectInfo {
            name,
            root: self.root.display().to_string(),
        })
    }

    fn counts(&self) -> Result<BTreeMap<String, i64>> {
        let mut counts: BTreeMap<String, i64> =
            ["open", "ready", "claimed", "blocked", "done", "cancelled"]
                .iter()
                .map(|s| (s.to_string(), 0))
                .collect();
        // Two index-only counts: by stored status (tasks_status), then the ready part of the
        // open ones (the partial index tasks_ready).
        let (rows, ready) = self.store.read(|sql| {
            let rows = sql.query(
                "SELECT status, COUNT(*) FROM tasks WHERE project_id = ?1 GROUP BY status",
                args![self.id],
            )?;
            let ready: i64 = sql
                .query_one(
                    "SELECT COUNT(*) FROM tasks INDEXED BY tasks_ready
                     WHERE project_id = ?1 AND status = 'open' AND open_deps = 0",
                    args![self.id],
                )?
                .get(0)?;
            Ok::<_, ProjectError>((rows, ready))
        })?;
        let mut total = 0;
        for row in rows {
            let (status, n): (String, i64) = (row.get(0)?, row.get(1)?);
            total += n;
            counts.insert(status, n);
        }
        counts.insert("ready".into(), ready);
        if let Some(open) = counts.get_mut("open") {
            *open -= ready;
        }
        counts.insert("total".into(), total);
        Ok(counts)
    }

    fn last_checkpoint(&self) -> Result<Option<CheckpointInfo>> {
        self.store.read(|sql| {
            sql.query_opt(
                "SELECT name, note, created_at FROM checkpoints WHERE project_id = ?1 ORDER BY id DESC LIMIT 1",
                args![self.id],
            )?
            .map(|r| {
                Ok(CheckpointInfo {
                    name: r.get(0)?,
                    note: r.get(1)?,
                    created_at: r.get(2)?,
                })
            })
            .transpose()
        })
    }

    fn with_status(&self, status: &str, limit: usize) -> Result<Vec<Task>> {
        self.list_tasks(&Filter {
            status: Some(status.into()),
            limit,
            ..Filter::default()
        })
    }

    /// Counts, ready tasks (as many as the `context.max_ready` setting), work in progress,
    /// blockers, recent decisions, last checkpoint.
    pub fn status(&self) -> Result<Status> {
        let max_ready = super::config::get(self, "context.max_ready")?
            .parse()
            .unwrap_or(BRIEF_ITEMS);
        Ok(Status {
            project: self.info()?,
            tasks: self.counts()?,
            ready: self.with_status("ready", max_ready)?,
            in_progress: self.with_status("claimed", BRIEF_ITEMS)?,
            blocked: self.with_status("blocked", BRIEF_ITEMS)?,
            blockers: self.list_progress(&ProgressFilter {
                kind: Some("blocker".into()),
                limit: BRIEF_ITEMS,
                ..ProgressFilter::default()
            })?,
            decisions: self.list_decisions(None, None, BRIEF_DECISIONS)?,
            last_checkpoint: self.last_checkpoint()?,
        })
    }

    /// The session-start briefing: status plus the memory facts most relevant to the work at
    /// hand (`query`, else the titles of the tasks in progress and ready).
    pub fn context(&self, memory: Option<&Memory>, query: Option<&str>) -> Result<Briefing> {
        let status = self.status()?;
        let topic = match query.map(str::trim).filter(|q| !q.is_empty()) {
            Some(q) => q.to_string(),
            None => status.topic(),
        };
        let facts: Vec<Fact> = match memory {
            Some(memory) if !topic.is_empty() => memory
                .query(&topic, "", BRIEF_FACTS)
                .map_err(|e| ProjectError::Invalid(e.to_string()))?
                .into_iter()
                .map(|hit| Fact {
                    id: hit.id,
                    subject: hit.subject,
                    body: hit.body,
                })
                .collect(),
            _ => Vec::new(),
        };
        Ok(Briefing {
            briefing: briefing(&status, &facts),
            status,
            facts,
        })
    }

    /// Saves a named snapshot (default name: `cp-<timestamp>`); a taken name is refused.
    pub fn checkpoint(&self, name: Option<&str>, note: &str) -> Result<CheckpointInfo> {
        let at = now();
        let chosen = match name.map(str::trim) {
            Some("") => {
                return Err(ProjectError::Invalid(
                    "a checkpoint name cannot be empty".into(),
                ))
            }
            Some(n) => n.to_string(),
            // cp-20261130-114222 from 2026-11-30T11:42:22.737Z
            None => {
                let digits: String = at.chars().take(19).filter(char::is_ascii_digit).collect();
                format!("cp-{}-{}", &digits[..8], &digits[8..])
            }
        };
        let default_name = name.is_none();
        let mut name = chosen;
        let status = self.status()?;
        let snapshot = self.snapshot(briefing(&status, &[]))?;
        let project = self.id;
        self.store.transaction(|tx| -> Result<()> {
            let exists = |name: &str| -> Result<bool> {
                Ok(tx
                    .query_opt(
                        "SELECT 1 FROM checkpoints WHERE project_id = ?1 AND name = ?2",
                        args![project, name],
                    )?
                    .is_some())
            };
            let taken = exists(&name)?;
            if taken && default_name {
                // Two unnamed checkpoints in one second: cp-…-2, cp-…-3.
                let base = name.clone();
                let mut n = 2;
                while exists(&format!("{base}-{n}"))? {
                    n += 1;
                }
                name = format!("{base}-{n}");
            } else if taken {
                return Err(ProjectError::Conflict(format!(
                    "a checkpoint named {name:?} exists; pick another name"
                )));
            }
            tx.execute(
                "INSERT INTO checkpoints (project_id, name, note, state, created_at) VALUES (?1, ?2, ?3, ?4, ?5)",
                args![project, name, note.trim(), serde_json::to_string(&snapshot).unwrap_or_default(), at],
            )?;
            Ok(())
        })?;
        Ok(CheckpointInfo {
            name,
            note: note.trim().to_string(),
            created_at: at,
        })
    }

    fn snapshot(&self, briefing: String) -> Result<Snapshot> {
        self.store.read_consistent(|conn| {
            let tasks = conn
                .query(
                    "SELECT number, status FROM tasks WHERE project_id = ?1",
                    args![self.id],
                )?
                .iter()
                .map(|r| Ok((r.get(0)?, r.get(1)?)))
                .collect::<Result<_>>()?;
            let max =
                |sql: &str| -> Result<i64> { Ok(conn.query_one(sql, args![self.id])?.get(0)?) };
            Ok(Snapshot {
                tasks,
                decisions: max(
                    "SELECT COALESCE(MAX(number), 0) FROM decisions WHERE project_id = ?1",
                )?,
                progress: max("SELECT COALESCE(MAX(id), 0) FROM progress WHERE project_id = ?1")?,
                briefing,
            })
        })
    }

    /// Where the project stands, as the opaque text [`Project::changes_since`] compares with
    /// (the session hook keeps it with each briefing).
    pub fn state(&self) -> Result<String> {
        Ok(serde_json::to_string(&self.snapshot(String::new())?).unwrap_or_default())
    }

    /// What changed since `state` (from [`Project::state`]) was taken.
    pub fn changes_since(&self, state: &str) -> Result<Changes> {
        let before: Snapshot = serde_json::from_str(state).map_err(|e| {
            ProjectError::Invalid(format!("a saved project state is unreadable: {e}"))
        })?;
        self.changes(&before)
    }

    fn changes(&self, before: &Snapshot) -> Result<Changes> {
        let now_state = self.snapshot(String::new())?;
        let prefix = self.store.read(|sql| super::tasks::prefix(sql, self.id))?;
        let id = |n: &i64| format!("{prefix}-{n:04}");
        let tasks_created: Vec<String> = now_state
            .tasks
            .keys()
            .filter(|n| !before.tasks.contains_key(n))
            .map(id)
            .collect();
        let tasks_moved: Vec<TaskMove> = now_state
            .tasks
            .iter()
            .filter_map(|(n, status)| {
                let was = before.tasks.get(n)?;
                (was != status).then(|| TaskMove {
                    display_id: id(n),
                    from: was.clone(),
                    to: status.clone(),
                })
            })
            .collect();
        let tasks_removed: Vec<String> = before
            .tasks
            .keys()
            .filter(|n| !now_state.tasks.contains_key(n))
            .map(id)
            .collect();
        // Decisions are numbered in order: the new ones are those past the snapshot's highest
        // (clock skew between writers cannot hide one, as a timestamp comparison could).
        let new = (now_state.decisions - before.decisions).max(0) as usize;
        let decisions = if new == 0 {
            Vec::new()
        } else {
            self.list_decisions(None, None, new)?
                .into_iter()
                .filter(|d| {
                    d.display_id
                        .rsplit_once('-')
                        .and_then(|(_, n)| n.parse::<i64>().ok())
                        .is_some_and(|n| n > before.decisions)
                })
                .collect::<Vec<_>>()
        };
        let progress = self
            .list_progress(&ProgressFilter {
                status: Some("all".into()),
                ..ProgressFilter::default()
            })?
            .into_iter()
            .filter(|p| p.id > before.progress)
            .collect::<Vec<_>>();
        Ok(Changes {
            tasks_created,
            tasks_moved,
            tasks_removed,
            decisions,
            progress,
        })
    }

    /// A checkpoint (the latest when `name` is `None`): its note and briefing, and what changed
    /// since — tasks created, tasks whose status moved, decisions recorded, progress added.
    pub fn resume(&self, name: Option<&str>) -> Result<Resumed> {
        let row: Option<(String, String, String, String)> = self.store.read(|sql| {
            sql.query_opt(
                "SELECT name, note, state, created_at FROM checkpoints
                 WHERE project_id = ?1 AND (CAST(?2 AS TEXT) IS NULL OR name = ?2)
                 ORDER BY id DESC LIMIT 1",
                args![self.id, name],
            )?
            .map(|r| Ok::<_, ProjectError>((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
            .transpose()
        })?;
        let Some((name, note, state, created_at)) = row else {
            return Err(ProjectError::NotFound(match name {
                Some(n) => format!("no checkpoint named {n:?}; `car status` shows the last one"),
                None => "no checkpoint yet; `car checkpoint NAME --note …` saves one".into(),
            }));
        };
        let before: Snapshot = serde_json::from_str(&state).map_err(|e| {
            ProjectError::Invalid(format!("checkpoint {name:?} is unreadable: {e}"))
        })?;
        let changes = self.changes(&before)?;
        Ok(Resumed {
            checkpoint: CheckpointInfo {
                name,
                note,
                created_at,
            },
            briefing: before.briefing,
            changes,
            now: self.status()?,
        })
    }

    /// Project consistency checks; with [`Mode::Apply`], repairs what it can (recounts
    /// `open_deps`, rebuilds the decision search index), with [`Mode::DryRun`] only reports.
    pub fn check(&self, mode: Mode) -> Result<Vec<Check>> {
        let mut checks = Vec::new();
        let (drift, stale): (i64, i64) = self.store.read(|conn| {
            let drift = conn
                .query_one(
                    "SELECT COUNT(*) FROM tasks t WHERE t.project_id = ?1 AND t.open_deps !=
                       (SELECT COUNT(*) FROM task_deps d JOIN tasks x ON x.id = d.depends_on
                        WHERE d.task_id = t.id AND x.status NOT IN ('done', 'cancelled'))",
                    args![self.id],
                )?
                .get(0)?;
            let stale = conn
                .query_one(
                    "SELECT COUNT(*) FROM tasks WHERE project_id = ?1 AND status = 'claimed' AND claimed_at < ?2",
                    args![self.id, crate::store::now_minus(std::time::Duration::from_secs(7 * 86_400))],
                )?
                .get(0)?;
            Ok::<_, ProjectError>((drift, stale))
        })?;
        if drift > 0 && mode == Mode::Apply {
            self.store.transaction(|tx| -> Result<()> {
                tx.execute(
                    "UPDATE tasks SET open_deps = (SELECT COUNT(*) FROM task_deps d JOIN tasks x ON x.id = d.depends_on
                       WHERE d.task_id = tasks.id AND x.status NOT IN ('done', 'cancelled'))
                     WHERE project_id = ?1",
                    args![self.id],
                )?;
                // PostgreSQL's text search reads the rows themselves: nothing to rebuild.
                if tx.dialect() == Dialect::Sqlite {
                    tx.execute("INSERT INTO decisions_fts(decisions_fts) VALUES ('rebuild')", &[])?;
                }
                Ok(())
            })?;
            checks.push(Check::new(
                "task dependencies",
                true,
                format!("fixed: recounted {drift} task(s)"),
            ));
        } else {
            checks.push(Check::new(
                "task dependencies",
                drift == 0,
                if drift == 0 {
                    "every ready/waiting count matches its dependencies".to_string()
                } else {
                    format!("{drift} task(s) have a wrong count of open dependencies; run `car doctor --fix`")
                },
            ));
        }
        checks.push(Check::new(
            "claims",
            true,
            if stale == 0 {
                "no claim older than 7 days".to_string()
            } else {
                format!("{stale} claim(s) older than 7 days; release with `car task update ID --status open`")
            },
        ));
        Ok(checks)
    }
}

/// `- CTX-0003 [high] Wire the API (claimed by agent)`: a task as the briefings list it.
pub fn task_line(task: &Task) -> String {
    let mut line = format!("- {} [{}] {}", task.display_id, task.priority, task.title);
    if let Some(by) = &task.claimed_by {
        line.push_str(&format!(" (claimed by {by})"));
    }
    if let Some(reason) = &task.blocked_reason {
        line.push_str(&format!(" — blocked: {reason}"));
    }
    line
}

/// `- ADR-0002 (accepted) Use PostgreSQL: …`: a decision as the briefings list it.
pub fn decision_line(decision: &Decision) -> String {
    format!(
        "- {} ({}) {}: {}",
        decision.display_id, decision.status, decision.title, decision.decision
    )
}

/// `- blocker #4 on CTX-0002: …`: a progress entry (a blocker, a note) as the briefings list it.
pub fn progress_line(progress: &Progress) -> String {
    format!(
        "- {} #{}{}: {}",
        progress.kind,
        progress.id,
        progress
            .task
            .as_ref()
            .map(|t| format!(" on {t}"))
            .unwrap_or_default(),
        progress.body
    )
}

impl Status {
    /// What the project is working on: the titles of the tasks in progress and ready (the
    /// query the briefings find relevant memory with).
    pub fn topic(&self) -> String {
        self.in_progress
            .iter()
            .chain(self.ready.iter())
            .map(|t| t.title.as_str())
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// The briefing as Markdown.
fn briefing(status: &Status, facts: &[Fact]) -> String {
    let mut out = format!("# {} — briefing\n", status.project.name);
    let t = &status.tasks;
    out.push_str(&format!(
        "Tasks: {} ready, {} in progress, {} blocked, {} open, {} done.\n",
        t["ready"], t["claimed"], t["blocked"], t["open"], t["done"]
    ));
    let mut section = |title: &str, lines: Vec<String>| {
        if !lines.is_empty() {
            out.push_str(&format!("\n## {title}\n{}\n", lines.join("\n")));
        }
    };
    section(
        "In progress",
        status.in_progress.iter().map(task_line).collect(),
    );
    section("Ready", status.ready.iter().map(task_line).collect());
    section(
        "Blocked",
        status
            .blocked
            .iter()
            .map(task_line)
            .chain(status.blockers.iter().map(progress_line))
            .collect(),
    );
    section(
        "Recent decisions",
        status.decisions.iter().map(decision_line).collect(),
    );
    section(
        "Relevant memory",
        facts
            .iter()
            .map(|f| format!("- {}: {}", f.subject, f.body))
            .collect(),
    );
    if let Some(cp) = &status.last_checkpoint {
        out.push_str(&format!(
            "\nLast checkpoint: {} ({}){}\n",
            cp.name,
            cp.created_at,
            if cp.note.is_empty() {
                String::new()
            } else {
                format!(" — {}", cp.note)
            }
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::project::tasks::NewTask;
    use crate::team::testing::{on_both_stores, TestStore};

    on_both_stores!(
        resume_says_what_changed_since_the_checkpoint,
        |stores: &TestStore| {
            let root = stores
                .project_root()
                .unwrap_or_else(|| std::path::PathBuf::from("/p"));
            let p = Project::open(stores.store(), &root).unwrap();
            let new = |title: &str| NewTask {
                title: title.into(),
                ..NewTask::default()
            };
            p.create_task(new("wire the API"), None).unwrap();
            p.create_task(new("write docs"), None).unwrap();
            let cp = p.checkpoint(Some("before-lunch"), "API half done").unwrap();
            assert!(p.checkpoint(Some("before-lunch"), "").is_err());
            p.claim_task(Some("1"), "agent").unwrap();
            p.create_task(new("add tests"), None).unwrap();
            let resumed = p.resume(None).unwrap();
            assert_eq!(resumed.checkpoint.name, cp.name);
            assert!(resumed.briefing.contains("wire the API"));
            assert_eq!(resumed.changes.tasks_created, ["CTX-0003"]);
            assert_eq!(
                resumed.changes.tasks_moved,
                [TaskMove {
                    display_id: "CTX-0001".into(),
                    from: "open".into(),
                    to: "claimed".into()
                }]
            );
            assert!(p.resume(Some("nope")).is_err());
            crate::project::config::set(&p, "context.max_ready", "1").unwrap();
            p.create_task(new("one more"), None).unwrap();
            assert_eq!(p.status().unwrap().ready.len(), 1);
            let checks = p.check(Mode::DryRun).unwrap();
            assert!(checks.iter().all(|c| c.ok), "{checks:?}");
        }
    );
}
