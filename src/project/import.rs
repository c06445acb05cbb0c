//! Bulk task import: JSON Lines, one task a line, all in one transaction.
//!
//! ```json
//! {"ref": "auth", "title": "Add login", "priority": "P1", "labels": ["backend"]}
//! {"title": "Ship", "depends_on": ["auth", "CTX-0003"], "status": "open"}
//! ```
//!
//! `ref` (or `id`) names a line so later lines can depend on it or make it their `parent`; a
//! reference that is no line's `ref` must be an existing task's id. beads exports
//! (`issues.jsonl`) import as they are: `id`, `title`, `description`, `priority` 0–4, `labels`,
//! `status` (`closed` → done, `in_progress` → open, `blocked` → open) and `dependencies`
//! `[{depends_on_id, type}]` (type `blocks` and `parent-child`). The import is refused, with
//! the line, when any line is invalid or the new dependencies form a cycle; nothing is written.

use std::collections::HashMap;

use rusqlite::params;
use serde::Deserialize;
use serde_json::Value;

use super::tasks::{parse_priority, prefix, task_id, Priority};
use super::{Project, ProjectError, Result};
use crate::store::now;

#[derive(Debug, Deserialize)]
struct Line {
    #[serde(alias = "id")]
    r#ref: Option<Value>,
    title: String,
    #[serde(default)]
    description: String,
    priority: Option<Value>,
    #[serde(default)]
    labels: Vec<String>,
    status: Option<String>,
    #[serde(default)]
    depends_on: Vec<Value>,
    #[serde(default)]
    dependencies: Vec<BeadsDep>,
    parent: Option<Value>,
}

#[derive(Debug, Deserialize)]
struct BeadsDep {
    depends_on_id: Value,
    #[serde(default, rename = "type")]
    kind: Option<String>,
}

fn reference(value: &Value) -> String {
    match value {
        Value::String(s) => s.trim().to_string(),
        other => other.to_string(),
    }
}

/// What an import did.
#[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema)]
pub struct Imported {
    pub created: usize,
    pub dependencies: usize,
    pub first: Option<String>,
    pub last: Option<String>,
}

impl Project {
    /// Imports JSON Lines of tasks (see the module docs). All or nothing.
    pub fn import_tasks(&self, text: &str, actor: Option<&str>) -> Result<Imported> {
        let mut lines = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            if raw.trim().is_empty() {
                continue;
            }
            let line: Line = serde_json::from_str(raw)
                .map_err(|e| ProjectError::Invalid(format!("line {}: {e}", i + 1)))?;
            if line.title.trim().is_empty() {
                return Err(ProjectError::Invalid(format!(
                    "line {}: a task needs a title",
                    i + 1
                )));
            }
            lines.push((i + 1, line));
        }
        let mut local: HashMap<String, usize> = HashMap::new();
        for (n, (line_no, line)) in lines.iter().enumerate() {
            if let Some(r) = &line.r#ref {
                if local.insert(reference(r), n).is_some() {
                    return Err(ProjectError::Invalid(format!(
                        "line {line_no}: ref {} is used twice",
                        reference(r)
                    )));
                }
            }
        }
        let project = self.id;
        self.store.write(|tx| -> Result<Imported> {
            let start: i64 = tx.query_row(
                "SELECT COALESCE(MAX(number), 0) FROM tasks WHERE project_id = ?1",
                [project],
                |r| r.get(0),
            )?;
            let at = now();
            let mut ids = Vec::with_capacity(lines.len());
            {
                let mut insert = tx.prepare(
                    "INSERT INTO tasks (project_id, number, title, description, status, priority,
                                        labels, created_at, updated_at, closed_at)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?8, ?9)",
                )?;
                let mut event = tx.prepare(
                    "INSERT INTO task_events (task_id, at, actor, event) VALUES (?1, ?2, ?3, 'imported')",
                )?;
                for (n, (line_no, line)) in lines.iter().enumerate() {
                    let priority = match &line.priority {
                        None => Priority::P2,
                        Some(Value::Number(p)) => p
                            .as_i64()
                            .filter(|p| (0..=4).contains(p))
                            .map(Priority::of_level)
                            .ok_or_else(|| ProjectError::Invalid(format!("line {line_no}: priority is 0–4")))?,
                        Some(other) => parse_priority(&reference(other))
                            .map_err(|e| ProjectError::Invalid(format!("line {line_no}: {e}")))?,
                    }
                    .level();
                    let status = match line.status.as_deref().unwrap_or("open") {
                        "done" | "closed" => "done",
                        "cancelled" | "canceled" | "tombstone" => "cancelled",
                        _ => "open",
                    };
                    let mut labels: Vec<String> = line.labels.iter().map(|l| l.trim().to_lowercase()).filter(|l| !l.is_empty()).collect();
                    labels.sort();
                    labels.dedup();
                    insert.execute(params![
                        project,
                        start + n as i64 + 1,
                        line.title.trim(),
                        line.description.trim(),
                        status,
                        priority,
                        serde_json::to_string(&labels).unwrap_or_else(|_| "[]".into()),
                        at,
                        (status != "open").then_some(&at),
                    ])?;
                    let id = tx.last_insert_rowid();
                    event.execute(params![id, at, actor])?;
                    ids.push(id);
                }
            }
            let resolve = |line_no: usize, r: &Value| -> Result<(i64, Option<usize>)> {
                let key = reference(r);
                match local.get(&key) {
                    Some(&n) => Ok((ids[n], Some(n))),
                    None => task_id(&**tx, project, &key)
                        .map(|id| (id, None))
                        .map_err(|_| ProjectError::Invalid(format!(
                            "line {line_no}: {key} is neither a ref in this file nor a task of this project"
                        ))),
                }
            };
            // Edges among the new tasks, for the cycle check.
            let mut new_edges: Vec<Vec<usize>> = vec![Vec::new(); lines.len()];
            let mut dependencies = 0;
            {
                let mut dep = tx.prepare("INSERT OR IGNORE INTO task_deps (task_id, depends_on) VALUES (?1, ?2)")?;
                let mut parent = tx.prepare("UPDATE tasks SET parent_id = ?2 WHERE id = ?1")?;
                for (n, (line_no, line)) in lines.iter().enumerate() {
                    let mut on: Vec<&Value> = line.depends_on.iter().collect();
                    let mut parent_ref = line.parent.as_ref();
                    for d in &line.dependencies {
                        match d.kind.as_deref() {
                            Some("parent-child") => parent_ref = parent_ref.or(Some(&d.depends_on_id)),
                            Some("blocks") | None => on.push(&d.depends_on_id),
                            Some(_) => {}
                        }
                    }
                    for r in on {
                        let (id, local_n) = resolve(*line_no, r)?;
                        if id == ids[n] {
                            return Err(ProjectError::Invalid(format!("line {line_no}: a task cannot depend on itself")));
                        }
                        if dep.execute(params![ids[n], id])? > 0 {
                            dependencies += 1;
                            if let Some(m) = local_n {
                                new_edges[n].push(m);
                            }
                        }
                    }
                    if let Some(r) = parent_ref {
                        parent.execute(params![ids[n], resolve(*line_no, r)?.0])?;
                    }
                }
            }
            if let Some(n) = cycle_member(&new_edges) {
                return Err(ProjectError::Invalid(format!(
                    "line {}: the file's dependencies form a cycle through this task",
                    lines[n].0
                )));
            }
            tx.execute(
                "UPDATE tasks SET open_deps = (SELECT COUNT(*) FROM task_deps d JOIN tasks x ON x.id = d.depends_on
                   WHERE d.task_id = tasks.id AND x.status NOT IN ('done', 'cancelled'))
                 WHERE project_id = ?1 AND number > ?2",
                params![project, start],
            )?;
            let prefix = prefix(&**tx, project)?;
            let name = |n: i64| format!("{prefix}-{n:04}");
            Ok(Imported {
                created: lines.len(),
                dependencies,
                first: (!lines.is_empty()).then(|| name(start + 1)),
                last: (!lines.is_empty()).then(|| name(start + lines.len() as i64)),
            })
        })
    }
}

/// A node on a cycle of `edges` (Kahn's algorithm: what is never freed is on or behind a cycle).
fn cycle_member(edges: &[Vec<usize>]) -> Option<usize> {
    let mut indegree = vec![0usize; edges.len()];
    for targets in edges {
        for &t in targets {
            indegree[t] += 1;
        }
    }
    let mut queue: Vec<usize> = (0..edges.len()).filter(|&n| indegree[n] == 0).collect();
    let mut seen = 0;
    while let Some(n) = queue.pop() {
        seen += 1;
        for &t in &edges[n] {
            indegree[t] -= 1;
            if indegree[t] == 0 {
                queue.push(t);
            }
        }
    }
    (seen < edges.len()).then(|| (0..edges.len()).find(|&n| indegree[n] > 0).unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::project::tasks::Filter;
    use crate::store::Store;

    fn project() -> Project {
        Project::open(
            Arc::new(Store::open_in_memory().unwrap()),
            std::path::Path::new("/p"),
        )
        .unwrap()
    }

    #[test]
    fn imports_refs_beads_lines_and_computes_readiness() {
        let p = project();
        let text = r#"{"ref": "a", "title": "schema", "priority": "P1"}
{"id": "bd-2", "title": "api", "priority": 0, "dependencies": [{"depends_on_id": "a", "type": "blocks"}]}
{"title": "old", "status": "closed"}
{"title": "ui", "depends_on": ["bd-2", "CTX-0003"], "parent": "a"}
"#;
        let done = p.import_tasks(text, None).unwrap();
        assert_eq!((done.created, done.dependencies), (4, 3));
        assert_eq!(done.last.as_deref(), Some("CTX-0004"));
        let ready: Vec<String> = p
            .list_tasks(&Filter {
                status: Some("ready".into()),
                ..Filter::default()
            })
            .unwrap()
            .into_iter()
            .map(|t| t.display_id)
            .collect();
        assert_eq!(ready, ["CTX-0001"]);
        assert_eq!(
            p.task_detail("4").unwrap().task.parent.as_deref(),
            Some("CTX-0001")
        );
    }

    #[test]
    fn a_bad_line_or_a_cycle_imports_nothing() {
        let p = project();
        let cyclic = "{\"ref\":\"a\",\"title\":\"a\",\"depends_on\":[\"b\"]}\n{\"ref\":\"b\",\"title\":\"b\",\"depends_on\":[\"a\"]}\n";
        let err = p.import_tasks(cyclic, None).unwrap_err().to_string();
        assert!(err.contains("cycle"), "{err}");
        let err = p
            .import_tasks("{\"title\":\"x\"}\nnot json\n", None)
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("line 2:"), "{err}");
        let err = p
            .import_tasks("{\"title\":\"x\",\"depends_on\":[\"nope\"]}\n", None)
            .unwrap_err()
            .to_string();
        assert!(err.contains("neither a ref"), "{err}");
        assert!(p
            .list_tasks(&Filter {
                status: Some("all".into()),
                ..Filter::default()
            })
            .unwrap()
            .is_empty());
    }
}
