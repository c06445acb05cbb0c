//! The `assistant.json` compatibility format: flat notes `{subject, body, kind}`. CAR imports an
//! existing file once and can export to it; the database stays the source of truth.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::model::{Kind, Node};
use super::write::NewEntry;
use super::{MemoryError, Result};

/// One note.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Note {
    pub subject: String,
    pub body: String,
    #[serde(default = "default_kind")]
    pub kind: String,
}

fn default_kind() -> String {
    "fact".to_string()
}

#[derive(Deserialize)]
#[serde(untagged)]
enum File {
    Wrapped { notes: Vec<Note> },
    Bare(Vec<Note>),
}

#[derive(Serialize)]
struct FileOut<'a> {
    version: u32,
    notes: &'a [Note],
}

/// Reads a notes file: `{"notes": [...]}` or a bare array.
pub fn read(path: &Path) -> Result<Vec<Note>> {
    let err = |message: String| MemoryError::File {
        path: path.display().to_string(),
        message,
    };
    let text = std::fs::read_to_string(path).map_err(|e| err(e.to_string()))?;
    let file: File = serde_json::from_str(&text).map_err(|e| {
        err(format!(
            "not an assistant.json notes file ({e}); expected {{\"notes\": [{{\"subject\", \"body\", \"kind\"}}]}}"
        ))
    })?;
    let notes = match file {
        File::Wrapped { notes } | File::Bare(notes) => notes,
    };
    for (i, note) in notes.iter().enumerate() {
        if note.subject.trim().is_empty() || note.body.trim().is_empty() {
            return Err(err(format!("note {i} has an empty subject or body")));
        }
        if kind_of(&note.kind).is_none() {
            return Err(err(format!(
                "note {i} has kind {:?}; expected fact, preference, procedure, pattern, constraint, knowledge or procedural",
                note.kind
            )));
        }
    }
    Ok(notes)
}

/// Writes a notes file atomically (a temporary file renamed over the target).
pub fn write(path: &Path, notes: &[Note]) -> Result<()> {
    let err = |e: std::io::Error| MemoryError::File {
        path: path.display().to_string(),
        message: e.to_string(),
    };
    let text = serde_json::to_string_pretty(&FileOut { version: 1, notes })
        .map_err(|e| err(std::io::Error::other(e)))?;
    crate::home::write_atomic(path, (text + "\n").as_bytes()).map_err(err)
}

/// The CAR kind and scope of a note kind (assistant vocabulary or CAR's own).
fn kind_of(kind: &str) -> Option<(Kind, bool)> {
    Some(match kind {
        "fact" | "pattern" => (Kind::Pattern, false),
        // A preference is user-wide: injected into every project.
        "preference" => (Kind::Pattern, true),
        "constraint" => (Kind::Constraint, false),
        "procedure" | "procedural" => (Kind::Procedural, false),
        "knowledge" => (Kind::Knowledge, false),
        _ => return None,
    })
}

pub fn to_entry(note: &Note) -> NewEntry {
    let (kind, preference) = kind_of(&note.kind).unwrap_or((Kind::Pattern, false));
    let mut entry = NewEntry::new(kind, &note.subject, &note.body);
    // Notes are user-wide: the file lives in CAR_HOME, not in a project.
    entry.global = true;
    entry.source = Some(
        if preference {
            "assistant.json:preference"
        } else {
            "assistant.json"
        }
        .into(),
    );
    entry
}

pub fn from_node(node: &Node) -> Note {
    Note {
        subject: node.subject.clone(),
        body: node.body.clone(),
        kind: match node.kind {
            Kind::Pattern => "fact",
            Kind::Constraint => "constraint",
            Kind::Knowledge => "knowledge",
            Kind::Procedural => "procedure",
            Kind::Turn | Kind::Identity | Kind::Environment => "fact",
        }
        .to_string(),
    }
}
