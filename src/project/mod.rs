//! A project's lifecycle state in `car.db`: tasks and their dependencies, progress notes and
//! blockers, decisions (ADRs), the context graph, checkpoints and per-project settings. Every
//! row carries the project's id; every change is one transaction (see `store`), so concurrent
//! agents never lose an update and a claim race has exactly one winner.

pub mod admin;
pub mod archive;
pub mod commands;
pub mod config;
pub mod decisions;
pub mod graph;
pub mod import;
pub mod lifecycle;
pub mod progress;
pub mod tasks;
#[cfg(test)]
mod test_rows;
pub mod tools;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::store::{Store, StoreError};

#[derive(Debug, thiserror::Error)]
pub enum ProjectError {
    /// Bad input: nothing was written.
    #[error("{0}")]
    Invalid(String),
    #[error("{0}")]
    NotFound(String),
    /// The change conflicts with the current state (a claimed task, a dependency cycle).
    #[error("{0}")]
    Conflict(String),
    #[error("{path}: {message}")]
    Io { path: String, message: String },
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<rusqlite::Error> for ProjectError {
    fn from(err: rusqlite::Error) -> Self {
        ProjectError::Store(StoreError::Sqlite(err))
    }
}

impl ProjectError {
    /// The envelope's error code.
    pub fn code(&self) -> &'static str {
        match self {
            ProjectError::Invalid(_) => "invalid_arguments",
            ProjectError::NotFound(_) => "not_found",
            ProjectError::Conflict(_) => "conflict",
            ProjectError::Io { .. } => "io",
            ProjectError::Store(_) => "store",
        }
    }
}

/// Whether an admin command changes anything or only reports what it would change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Report what would change; write nothing.
    DryRun,
    Apply,
}

impl Mode {
    /// The mode a `--dry-run` flag selects (`car doctor --fix` is `dry_run_if(!fix)`).
    pub fn dry_run_if(dry_run: bool) -> Mode {
        if dry_run {
            Mode::DryRun
        } else {
            Mode::Apply
        }
    }
}

pub type Result<T, E = ProjectError> = std::result::Result<T, E>;

/// The number a display id names: `CTX-0001`, `ctx-1`, `#1` or `1` (`ADR-0002` for decisions).
/// `what` and `example` make the error say what was expected.
pub(crate) fn number_of(reference: &str, what: &str, example: &str) -> Result<i64> {
    let text = reference.trim();
    let digits = text
        .rsplit_once('-')
        .map_or(text, |(_, n)| n)
        .trim_start_matches('#');
    digits
        .parse::<i64>()
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(|| {
            ProjectError::Invalid(format!(
                "{reference:?} is not a {what} id (expected e.g. {example} or 1)"
            ))
        })
}

/// A column stored as an enum's name, read back through `parse` (a name this build does not
/// know is an error naming it, not a silent default).
pub(crate) fn stored<T>(
    row: &crate::store::sql::Row,
    column: &str,
    parse: impl Fn(&str) -> Result<T>,
) -> Result<T, StoreError> {
    let text: String = row.get(column)?;
    parse(&text).map_err(|e| StoreError::Decode(format!("column {column}: {e}")))
}

/// [`stored`] for a row of the local store's own queries (the code graph).
pub(crate) fn stored_sqlite<T>(
    row: &rusqlite::Row<'_>,
    column: &str,
    parse: impl Fn(&str) -> Result<T>,
) -> rusqlite::Result<T> {
    let text: String = row.get(column)?;
    parse(&text).map_err(|e| {
        rusqlite::Error::FromSqlConversionFailure(
            0,
            rusqlite::types::Type::Text,
            Box::new(std::io::Error::other(e.to_string())),
        )
    })
}

/// One project: its root, its id in the store, and the store.
#[derive(Clone)]
pub struct Project {
    pub store: Arc<Store>,
    pub id: i64,
    pub root: PathBuf,
}

impl Project {
    /// The project rooted at `root` (registered on first use).
    pub fn open(store: Arc<Store>, root: &Path) -> Result<Project> {
        let id = store.project_id(root)?;
        Ok(Project {
            store,
            id,
            root: root.to_path_buf(),
        })
    }

    /// The project rooted at `root` if CAR was ever used there; registers nothing.
    pub fn registered(store: Arc<Store>, root: &Path) -> Result<Option<Project>> {
        Ok(store.registered_project_id(root)?.map(|id| Project {
            store,
            id,
            root: root.to_path_buf(),
        }))
    }
}
