//! Decisions: architecture decision records (`ADR-0001`) with context, decision and
//! consequences; a status (`proposed`, `accepted`, `rejected`, `deprecated`, `superseded`); a
//! decision that supersedes another marks it `superseded`. Searched with SQLite FTS5 (Porter
//! stemming, BM25 ranking) over title, context, decision and consequences.

use crate::store::sql::{args, Dialect, Row, Sql};
use crate::store::StoreError;
use serde::{Deserialize, Serialize};

use super::{Project, ProjectError, Result};
use crate::store::now;

/// Where a decision stands.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum DecisionStatus {
    Proposed,
    Accepted,
    Rejected,
    Deprecated,
    /// Replaced by a later decision.
    Superseded,
}

impl DecisionStatus {
    pub const ALL: [DecisionStatus; 5] = [
        DecisionStatus::Proposed,
        DecisionStatus::Accepted,
        DecisionStatus::Rejected,
        DecisionStatus::Deprecated,
        DecisionStatus::Superseded,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            DecisionStatus::Proposed => "proposed",
            DecisionStatus::Accepted => "accepted",
            DecisionStatus::Rejected => "rejected",
            DecisionStatus::Deprecated => "deprecated",
            DecisionStatus::Superseded => "superseded",
        }
    }

    /// A status by name, or the error that lists them.
    pub fn parse(text: &str) -> Result<DecisionStatus> {
        DecisionStatus::ALL
            .into_iter()
            .find(|s| s.as_str() == text)
            .ok_or_else(|| {
                let names: Vec<&str> = DecisionStatus::ALL.iter().map(|s| s.as_str()).collect();
                ProjectError::Invalid(format!(
                    "unknown decision status {text:?}; use {}",
                    names.join(", ")
                ))
            })
    }

    /// Still in force: not superseded or rejected.
    pub fn in_force(self) -> bool {
        !matches!(self, DecisionStatus::Superseded | DecisionStatus::Rejected)
    }
}

impl std::fmt::Display for DecisionStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Decision {
    #[serde(rename = "displayId")]
    pub display_id: String,
    pub title: String,
    pub status: DecisionStatus,
    pub context: String,
    pub decision: String,
    pub consequences: String,
    pub supersedes: Option<String>,
    #[serde(rename = "supersededBy")]
    pub superseded_by: Option<String>,
    pub resolution: Option<String>,
    #[serde(rename = "createdAt")]
    pub created_at: String,
    #[serde(rename = "updatedAt")]
    pub updated_at: String,
}

/// What `record` needs.
#[derive(Debug, Clone, Default)]
pub struct NewDecision {
    pub title: String,
    pub context: String,
    pub decision: String,
    pub consequences: String,
    /// Default `accepted`.
    pub status: Option<String>,
    pub supersedes: Option<String>,
}

fn display(number: i64) -> String {
    format!("ADR-{number:04}")
}

fn decision_id(conn: &dyn Sql, project: i64, reference: &str) -> Result<i64> {
    let number = super::number_of(reference, "decision", "ADR-0001")?;
    conn.value(
        "SELECT id FROM decisions WHERE project_id = ?1 AND number = ?2",
        args![project, number],
    )?
    .ok_or_else(|| {
        ProjectError::NotFound(format!(
            "no decision {reference} in this project; `car decision list --status all` shows them"
        ))
    })
}

const COLUMNS: &str = "d.id, d.number, d.title, d.status, d.context, d.decision, d.consequences, \
     s.number AS supersedes_number, \
     (SELECT n.number FROM decisions n WHERE n.supersedes = d.id ORDER BY n.id DESC LIMIT 1) AS superseded_by_number, \
     d.resolution, d.created_at, d.updated_at";

fn from_row(row: &Row) -> Result<Decision, StoreError> {
    Ok(Decision {
        display_id: display(row.get("number")?),
        title: row.get("title")?,
        status: super::stored(row, "status", DecisionStatus::parse)?,
        context: row.get("context")?,
        decision: row.get("decision")?,
        consequences: row.get("consequences")?,
        supersedes: row.get::<Option<i64>>("supersedes_number")?.map(display),
        superseded_by: row.get::<Option<i64>>("superseded_by_number")?.map(display),
        resolution: row.get("resolution")?,
        created_at: row.get("created_at")?,
        updated_at: row.get("updated_at")?,
    })
}

/// An FTS5 query from free text: each word quoted (so `-`, `:`, `*` and quotes are plain
/// text), all words required.
fn fts_query(text: &str) -> Option<String> {
    let words: Vec<String> = text
        .split(|c: char| !c.is_alphanumeric() && c != '_')
        .filter(|w| !w.is_empty())
        .map(|w| format!("\"{w}\""))
        .collect();
    (!words.is_empty()).then(|| words.join(" "))
}

impl Project {
    fn decision_by_id(&self, id: i64) -> Result<Decision> {
        let row = self.store.read(|conn| {
            conn.query_one(
                &format!(
                    "SELECT {COLUMNS} FROM decisions d LEFT JOIN decisions s ON s.id = d.supersedes
                     WHERE d.id = ?1"
                ),
                args![id],
            )
        })?;
        Ok(from_row(&row)?)
    }

    /// Records a decision; `supersedes` marks the named one superseded.
    pub fn record_decision(&self, new: NewDecision) -> Result<Decision> {
        let title = new.title.trim().to_string();
        let decision = new.decision.trim().to_string();
        if title.is_empty() || decision.is_empty() {
            return Err(ProjectError::Invalid(
                "a decision needs a title and the decision itself (--decision)".into(),
            ));
        }
        let status = match &new.status {
            Some(text) => DecisionStatus::parse(text)?,
            None => DecisionStatus::Accepted,
        }
        .as_str();
        let project = self.id;
        let id = self.store.transaction(|tx| -> Result<i64> {
            let supersedes = match &new.supersedes {
                Some(r) => Some(decision_id(tx, project, r)?),
                None => None,
            };
            let number: i64 = tx
                .query_one(
                    "SELECT COALESCE(MAX(number), 0) + 1 FROM decisions WHERE project_id = ?1",
                    args![project],
                )?
                .get(0)?;
            let at = now();
            let id: i64 = tx
                .query_one(
                "INSERT INTO decisions (project_id, number, title, context, decision, consequences,
                                        status, supersedes, created_at, updated_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?9) RETURNING id",
                args![
                    project,
                    number,
                    title,
                    new.context.trim(),
                    decision,
                    new.consequences.trim(),
                    status,
                    supersedes,
                    at
                ],
            )?
                .get(0)?;
            if let Some(old) = supersedes {
                tx.execute(
                    "UPDATE decisions SET status = 'superseded', resolution = ?2, updated_at = ?3 WHERE id = ?1",
                    args![old, format!("superseded by {}", display(number)), at],
                )?;
            }
            Ok(id)
        })?;
        self.decision_by_id(id)
    }

    /// Decisions, newest first; with `search`, the best FTS matches first.
    pub fn list_decisions(
        &self,
        status: Option<&str>,
        search: Option<&str>,
        limit: usize,
    ) -> Result<Vec<Decision>> {
        if let Some(s) = status.filter(|s| *s != "all") {
            DecisionStatus::parse(s)?;
        }
        let status = status.filter(|s| *s != "all");
        let limit = if limit == 0 { i64::MAX } else { limit as i64 };
        let search =
            match search {
                Some(text) => Some(fts_query(text).ok_or_else(|| {
                    ProjectError::Invalid("--search needs at least one word".into())
                })?),
                None => None,
            };
        let rows = self.store.read(|conn| match &search {
            // Every word required, best matches first: SQLite's FTS5 (BM25), or PostgreSQL's
            // text search over the same four fields (its rank).
            Some(query) => conn.query(
                &match conn.dialect() {
                    Dialect::Sqlite => format!(
                        "SELECT {COLUMNS} FROM decisions_fts f
                         JOIN decisions d ON d.id = f.rowid
                         LEFT JOIN decisions s ON s.id = d.supersedes
                         WHERE decisions_fts MATCH ?1 AND d.project_id = ?2
                           AND (CAST(?3 AS TEXT) IS NULL OR d.status = ?3)
                         ORDER BY bm25(decisions_fts), d.number DESC LIMIT ?4"
                    ),
                    Dialect::Postgres => format!(
                        "SELECT {COLUMNS} FROM decisions d
                         LEFT JOIN decisions s ON s.id = d.supersedes
                         WHERE d.search @@ plainto_tsquery('english', ?1) AND d.project_id = ?2
                           AND (CAST(?3 AS TEXT) IS NULL OR d.status = ?3)
                         ORDER BY ts_rank(d.search, plainto_tsquery('english', ?1)) DESC,
                                  d.number DESC LIMIT ?4"
                    ),
                },
                args![query, self.id, status, limit],
            ),
            None => conn.query(
                &format!(
                    "SELECT {COLUMNS} FROM decisions d LEFT JOIN decisions s ON s.id = d.supersedes
                     WHERE d.project_id = ?1 AND (CAST(?2 AS TEXT) IS NULL OR d.status = ?2)
                     ORDER BY d.number DESC LIMIT ?3"
                ),
                args![self.id, status, limit],
            ),
        })?;
        rows.iter().map(|row| Ok(from_row(row)?)).collect()
    }

    /// Settles a decision: `accepted`, `rejected` or `deprecated`, with an optional note.
    pub fn resolve_decision(
        &self,
        reference: &str,
        status: &str,
        note: Option<&str>,
    ) -> Result<Decision> {
        let status = DecisionStatus::parse(status)?;
        if matches!(
            status,
            DecisionStatus::Proposed | DecisionStatus::Superseded
        ) {
            return Err(ProjectError::Invalid(format!(
                "resolve to accepted, rejected or deprecated; {status} is set by {}",
                if status == DecisionStatus::Proposed {
                    "`decision record --status proposed`"
                } else {
                    "`decision record --supersedes`"
                }
            )));
        }
        let project = self.id;
        let id = self.store.transaction(|tx| -> Result<i64> {
            let id = decision_id(tx, project, reference)?;
            tx.execute(
                "UPDATE decisions SET status = ?2, resolution = COALESCE(?3, resolution), updated_at = ?4
                 WHERE id = ?1",
                args![id, status.as_str(), note.map(str::trim).filter(|n| !n.is_empty()), now()],
            )?;
            Ok(id)
        })?;
        self.decision_by_id(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::team::testing::{on_both_stores, TestStore};

    on_both_stores!(record_supersede_search_and_resolve, |stores: &TestStore| {
        let root = stores
            .project_root()
            .unwrap_or_else(|| std::path::PathBuf::from("/p"));
        let p = Project::open(stores.store(), &root).unwrap();
        let first = p
            .record_decision(NewDecision {
                title: "Use SQLite for storage".into(),
                context: "one file, many processes".into(),
                decision: "SQLite in WAL mode".into(),
                ..NewDecision::default()
            })
            .unwrap();
        assert_eq!(
            (first.display_id.as_str(), first.status.as_str()),
            ("ADR-0001", "accepted")
        );
        let second = p
            .record_decision(NewDecision {
                title: "Shard the database".into(),
                decision: "one SQLite file per project".into(),
                supersedes: Some("ADR-1".into()),
                ..NewDecision::default()
            })
            .unwrap();
        assert_eq!(second.supersedes.as_deref(), Some("ADR-0001"));
        let all = p.list_decisions(None, None, 0).unwrap();
        assert_eq!(all[1].status, DecisionStatus::Superseded);
        assert_eq!(all[1].superseded_by.as_deref(), Some("ADR-0002"));
        // Porter stemming: "processes" matches "process"; syntax characters are plain text.
        let found = p.list_decisions(None, Some("process"), 0).unwrap();
        assert_eq!(found.len(), 1);
        assert!(p.list_decisions(None, Some("\"OR -x:*"), 0).is_ok());
        assert!(p.list_decisions(None, Some("  "), 0).is_err());
        let resolved = p
            .resolve_decision("2", "deprecated", Some("moved to Postgres"))
            .unwrap();
        assert_eq!(resolved.resolution.as_deref(), Some("moved to Postgres"));
        assert!(p.resolve_decision("2", "superseded", None).is_err());
        assert!(p.resolve_decision("9", "accepted", None).is_err());
    });
}
