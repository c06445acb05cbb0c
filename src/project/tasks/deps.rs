//! Task dependencies: adding one refuses a cycle with its path (a breadth-first search from the
//! new dependency back to the task), and both directions keep `open_deps` right in the same
//! transaction. Also the parent check (a task cannot be its own ancestor).

use crate::store::sql::{args, Sql};

use super::{display, event, load, prefix, resolved, status_of, task_id, DependencyChange};
use crate::project::{Project, ProjectError, Result};

/// The path from `from` to `to` along dependencies, if any (breadth-first, so the shortest).
pub(super) fn dependency_path(tx: &dyn Sql, from: i64, to: i64) -> Result<Option<Vec<i64>>> {
    let mut previous: std::collections::HashMap<i64, i64> = std::collections::HashMap::new();
    let mut queue = std::collections::VecDeque::from([from]);
    while let Some(node) = queue.pop_front() {
        if node == to {
            let mut path = vec![to];
            let mut at = to;
            while let Some(&p) = previous.get(&at) {
                path.push(p);
                at = p;
            }
            path.reverse();
            return Ok(Some(path));
        }
        let next: Vec<i64> = tx
            .query(
                "SELECT depends_on FROM task_deps WHERE task_id = ?1",
                args![node],
            )?
            .iter()
            .map(|r| r.get(0))
            .collect::<Result<_, _>>()?;
        for n in next {
            if n != from && !previous.contains_key(&n) {
                previous.insert(n, node);
                queue.push_back(n);
            }
        }
    }
    Ok(None)
}

pub(super) fn number(tx: &dyn Sql, id: i64) -> Result<i64> {
    Ok(tx
        .query_one("SELECT number FROM tasks WHERE id = ?1", args![id])?
        .get(0)?)
}

/// Adds `task` depends-on `on`, refusing a cycle with its path.
pub(super) fn add_dep(tx: &dyn Sql, project: i64, task: i64, on: i64) -> Result<bool> {
    if task == on {
        return Err(ProjectError::Conflict(
            "a task cannot depend on itself".into(),
        ));
    }
    if let Some(path) = dependency_path(tx, on, task)? {
        let prefix = prefix(tx, project)?;
        let mut names = vec![display(&prefix, number(tx, task)?)];
        for id in path {
            names.push(display(&prefix, number(tx, id)?));
        }
        return Err(ProjectError::Conflict(format!(
            "that dependency would close a cycle: {}",
            names.join(" → ")
        )));
    }
    let added = tx.execute(
        "INSERT OR IGNORE INTO task_deps (task_id, depends_on) VALUES (?1, ?2)",
        args![task, on],
    )? > 0;
    if added && !resolved(&status_of(tx, on)?) {
        tx.execute(
            "UPDATE tasks SET open_deps = open_deps + 1 WHERE id = ?1",
            args![task],
        )?;
    }
    Ok(added)
}

pub(super) fn would_parent_cycle(tx: &dyn Sql, task: i64, parent: i64) -> Result<bool> {
    let mut at = Some(parent);
    let mut steps = 0;
    while let Some(node) = at {
        if node == task {
            return Ok(true);
        }
        steps += 1;
        if steps > 10_000 {
            return Ok(true);
        }
        at = tx
            .query_one("SELECT parent_id FROM tasks WHERE id = ?1", args![node])?
            .get(0)?;
    }
    Ok(false)
}

/// Removes `task` depends-on `on`, keeping `open_deps` right. Returns whether there was one.
pub(super) fn remove_dep(tx: &dyn Sql, task: i64, on: i64) -> Result<bool> {
    let removed = tx.execute(
        "DELETE FROM task_deps WHERE task_id = ?1 AND depends_on = ?2",
        args![task, on],
    )? > 0;
    if removed && !resolved(&status_of(tx, on)?) {
        tx.execute(
            "UPDATE tasks SET open_deps = open_deps - 1 WHERE id = ?1",
            args![task],
        )?;
    }
    Ok(removed)
}

impl Project {
    /// `task` depends on `on` (refused when it would close a cycle); `changed` says whether it
    /// is new.
    pub fn add_dependency(
        &self,
        task: &str,
        on: &str,
        actor: Option<&str>,
    ) -> Result<DependencyChange> {
        self.change_dependency(task, on, actor, "dependency added", add_dep)
    }

    /// Removes a dependency; `changed` says whether there was one.
    pub fn remove_dependency(
        &self,
        task: &str,
        on: &str,
        actor: Option<&str>,
    ) -> Result<DependencyChange> {
        self.change_dependency(task, on, actor, "dependency removed", |tx, _, id, dep| {
            remove_dep(tx, id, dep)
        })
    }

    /// Resolves both ids, applies `change` and records `what` in the history when it changed.
    fn change_dependency(
        &self,
        task: &str,
        on: &str,
        actor: Option<&str>,
        what: &str,
        change: impl FnOnce(&dyn Sql, i64, i64, i64) -> Result<bool>,
    ) -> Result<DependencyChange> {
        let project = self.id;
        let (id, changed) = self.store.transaction(|tx| -> Result<(i64, bool)> {
            let id = task_id(tx, project, task)?;
            let dep = task_id(tx, project, on)?;
            let changed = change(tx, project, id, dep)?;
            if changed {
                let name = display(&prefix(tx, project)?, number(tx, dep)?);
                event(tx, id, actor, what, Some(&name))?;
            }
            Ok((id, changed))
        })?;
        Ok(DependencyChange {
            task: self.store.read(|sql| load(sql, self.id, id))?,
            changed,
        })
    }
}
