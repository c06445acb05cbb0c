//! Progress: notes and blockers, on a task or on the project. A blocker stays open until it is
//! resolved (with what resolved it); `status` and `context` show the open ones.

use crate::store::sql::{args, Row};
use crate::store::StoreError;
use serde::{Deserialize, Serialize};

use super::tasks::prefix;
use super::{Project, ProjectError, Result};
use crate::store::now;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Progress {
    pub id: i64,
    pub task: Option<String>,
    pub kind: ProgressKind,
    pub body: String,
    pub status: ProgressStatus,
    pub resolution: Option<String>,
    pub author: Option<String>,
    #[serde(rename = "createdAt")]
    pub created_at: String,
    #[serde(rename = "updatedAt")]
    pub updated_at: String,
    #[serde(rename = "resolvedAt")]
    pub resolved_at: Option<String>,
}

/// Which entries `list` shows.
#[derive(Debug, Clone, Default)]
pub struct ProgressFilter {
    pub task: Option<String>,
    /// `open` (default), `resolved` or `all`.
    pub status: Option<String>,
    /// `note` or `blocker`.
    pub kind: Option<String>,
    pub limit: usize,
}

const COLUMNS: &str = "g.id, t.number AS task_number, g.kind, g.body, g.status, g.resolution, \
     g.author, g.created_at, g.updated_at, g.resolved_at";

fn from_row(prefix: &str, row: &Row) -> Result<Progress, StoreError> {
    Ok(Progress {
        id: row.get("id")?,
        task: row
            .get::<Option<i64>>("task_number")?
            .map(|n| format!("{prefix}-{n:04}")),
        kind: super::stored(row, "kind", ProgressKind::parse)?,
        body: row.get("body")?,
        status: super::stored(row, "status", ProgressStatus::parse)?,
        resolution: row.get("resolution")?,
        author: row.get("author")?,
        created_at: row.get("created_at")?,
        updated_at: row.get("updated_at")?,
        resolved_at: row.get("resolved_at")?,
    })
}

fn parse_id(reference: &str) -> Result<i64> {
    reference
        .trim()
        .trim_start_matches('#')
        .parse::<i64>()
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(|| {
            ProjectError::Invalid(format!(
                "{reference:?} is not a progress id (the number `car progress list` shows)"
            ))
        })
}

fn check_kind(kind: &str) -> Result<()> {
    ProgressKind::parse(kind).map(|_| ())
}

/// A progress entry: a note, or a blocker (open until resolved).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum ProgressKind {
    Note,
    Blocker,
}

impl ProgressKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ProgressKind::Note => "note",
            ProgressKind::Blocker => "blocker",
        }
    }

    pub fn parse(text: &str) -> Result<ProgressKind> {
        match text {
            "note" => Ok(ProgressKind::Note),
            "blocker" => Ok(ProgressKind::Blocker),
            _ => Err(ProjectError::Invalid(format!(
                "kind {text:?} is not note or blocker"
            ))),
        }
    }
}

/// Whether a progress entry still stands.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum ProgressStatus {
    Open,
    Resolved,
}

impl ProgressStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ProgressStatus::Open => "open",
            ProgressStatus::Resolved => "resolved",
        }
    }

    pub fn parse(text: &str) -> Result<ProgressStatus> {
        match text {
            "open" => Ok(ProgressStatus::Open),
            "resolved" => Ok(ProgressStatus::Resolved),
            _ => Err(ProjectError::Invalid(format!(
                "status {text:?} is not open or resolved"
            ))),
        }
    }
}

impl std::fmt::Display for ProgressKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::fmt::Display for ProgressStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Project {
    fn progress_by_id(&self, id: i64) -> Result<Progress> {
        self.store.read(|conn| {
            let prefix = prefix(conn, self.id)?;
            conn.query_opt(
                &format!(
                    "SELECT {COLUMNS} FROM progress g LEFT JOIN tasks t ON t.id = g.task_id
                     WHERE g.id = ?1 AND g.project_id = ?2"
                ),
                args![id, self.id],
            )?
            .map(|row| Ok(from_row(&prefix, &row)?))
            .unwrap_or_else(|| {
                Err(ProjectError::NotFound(format!(
                    "no progress entry {id} in this project"
                )))
            })
        })
    }

    /// Adds a note or a blocker, on a task or on the project.
    pub fn add_progress(
        &self,
        task: Option<&str>,
        kind: &str,
        body: &str,
        author: Option<&str>,
    ) -> Result<Progress> {
        check_kind(kind)?;
        let body = body.trim();
        if body.is_empty() {
            return Err(ProjectError::Invalid(
                "a progress entry needs a text".into(),
            ));
        }
        let project = self.id;
        let id = self.store.transaction(|tx| -> Result<i64> {
            let task_id = match task {
                Some(t) => Some(super::tasks::task_id(tx, project, t)?),
                None => None,
            };
            let at = now();
            Ok(tx
                .query_one(
                    "INSERT INTO progress (project_id, task_id, kind, body, status, author, created_at, updated_at)
                     VALUES (?1, ?2, ?3, ?4, 'open', ?5, ?6, ?6) RETURNING id",
                    args![project, task_id, kind, body, author, at],
                )?
                .get(0)?)
        })?;
        self.progress_by_id(id)
    }

    /// Progress entries, newest first.
    pub fn list_progress(&self, filter: &ProgressFilter) -> Result<Vec<Progress>> {
        let status = filter.status.as_deref().unwrap_or("open");
        if !["open", "resolved", "all"].contains(&status) {
            return Err(ProjectError::Invalid(format!(
                "unknown status {status:?}; use open, resolved or all"
            )));
        }
        if let Some(kind) = &filter.kind {
            check_kind(kind)?;
        }
        let limit = if filter.limit == 0 {
            i64::MAX
        } else {
            filter.limit as i64
        };
        self.store.read(|conn| {
            let prefix = prefix(conn, self.id)?;
            let task_id = match &filter.task {
                Some(t) => Some(super::tasks::task_id(conn, self.id, t)?),
                None => None,
            };
            conn.query(
                &format!(
                    "SELECT {COLUMNS} FROM progress g LEFT JOIN tasks t ON t.id = g.task_id
                     WHERE g.project_id = ?1 AND (?2 = 'all' OR g.status = ?2)
                       AND (CAST(?3 AS TEXT) IS NULL OR g.kind = ?3)
                       AND (CAST(?4 AS BIGINT) IS NULL OR g.task_id = ?4)
                     ORDER BY g.id DESC LIMIT ?5"
                ),
                args![self.id, status, filter.kind, task_id, limit],
            )?
            .iter()
            .map(|row| Ok(from_row(&prefix, row)?))
            .collect()
        })
    }

    /// Rewrites an entry's text (and optionally its kind).
    pub fn update_progress(
        &self,
        id: &str,
        body: Option<&str>,
        kind: Option<&str>,
    ) -> Result<Progress> {
        let id = parse_id(id)?;
        if let Some(kind) = kind {
            check_kind(kind)?;
        }
        let body = body.map(str::trim);
        if body == Some("") {
            return Err(ProjectError::Invalid(
                "a progress entry needs a text".into(),
            ));
        }
        if body.is_none() && kind.is_none() {
            return Err(ProjectError::Invalid(
                "nothing to update; give --body or --kind".into(),
            ));
        }
        let project = self.id;
        self.store.transaction(|tx| -> Result<()> {
            let changed = tx.execute(
                "UPDATE progress SET body = COALESCE(?3, body), kind = COALESCE(?4, kind), updated_at = ?5
                 WHERE id = ?1 AND project_id = ?2",
                args![id, project, body, kind, now()],
            )?;
            if changed == 0 {
                return Err(ProjectError::NotFound(format!("no progress entry {id} in this project")));
            }
            Ok(())
        })?;
        self.progress_by_id(id)
    }

    /// Resolves an entry (a blocker lifted, a note dealt with).
    pub fn resolve_progress(&self, id: &str, resolution: Option<&str>) -> Result<Progress> {
        let id = parse_id(id)?;
        let project = self.id;
        self.store.transaction(|tx| -> Result<()> {
            let status: Option<String> = tx.value(
                "SELECT status FROM progress WHERE id = ?1 AND project_id = ?2",
                args![id, project],
            )?;
            match status.as_deref() {
                None => Err(ProjectError::NotFound(format!("no progress entry {id} in this project"))),
                Some("resolved") => Err(ProjectError::Conflict(format!("progress entry {id} is already resolved"))),
                Some(_) => {
                    let at = now();
                    tx.execute(
                        "UPDATE progress SET status = 'resolved', resolution = ?2, resolved_at = ?3, updated_at = ?3
                         WHERE id = ?1",
                        args![id, resolution.map(str::trim).filter(|r| !r.is_empty()), at],
                    )?;
                    Ok(())
                }
            }
        })?;
        self.progress_by_id(id)
    }
}
