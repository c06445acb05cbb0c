//! The StateBench timeline format (one JSON timeline per line, release v1.0) and reading a
//! file of them. Only the fields the replay uses are typed; unknown fields are ignored.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;
use serde_json::Value;

use super::{EvalError, Result};

/// One timeline: a starting state, then events in order.
#[derive(Debug, Clone, Deserialize)]
pub struct Timeline {
    pub id: String,
    pub track: String,
    #[serde(default)]
    pub initial_state: InitialState,
    pub events: Vec<Event>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct InitialState {
    /// Who the user is: field name → value (null fields are absent from memory).
    #[serde(default)]
    pub identity_role: BTreeMap<String, Option<String>>,
    #[serde(default)]
    pub persistent_facts: Vec<Write>,
    #[serde(default)]
    pub working_set: Vec<WorkingItem>,
    /// The environment now: key → value (strings, or any JSON value shown as JSON).
    #[serde(default)]
    pub environment: BTreeMap<String, Value>,
}

/// An item of the working set (what the user is in the middle of).
#[derive(Debug, Clone, Deserialize)]
pub struct WorkingItem {
    pub content: String,
}

/// A fact: an initial persistent fact or one write of a `state_write`/`supersession` event.
#[derive(Debug, Clone, Deserialize)]
pub struct Write {
    #[serde(default)]
    pub id: Option<String>,
    /// `persistent_facts` or `environment` (initial facts have none: persistent).
    #[serde(default)]
    pub layer: Option<String>,
    pub key: String,
    pub value: String,
    /// The key (or fact id) this write retires.
    #[serde(default)]
    pub supersedes: Option<String>,
    #[serde(default)]
    pub depends_on: Vec<String>,
    #[serde(default)]
    pub is_constraint: bool,
    #[serde(default)]
    pub source: Option<Source>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Source {
    #[serde(rename = "type", default)]
    pub kind: Option<String>,
}

impl Write {
    /// Whether the write belongs to the Environment layer rather than the facts.
    pub fn is_environment(&self) -> bool {
        self.layer.as_deref() == Some("environment")
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    ConversationTurn {
        speaker: String,
        text: String,
    },
    StateWrite {
        writes: Vec<Write>,
    },
    Supersession {
        writes: Vec<Write>,
    },
    Query {
        prompt: String,
        ground_truth: GroundTruth,
    },
}

/// What a correct answer to a query mentions and must not mention.
#[derive(Debug, Clone, Deserialize)]
pub struct GroundTruth {
    #[serde(default)]
    pub must_mention: Vec<String>,
    #[serde(default)]
    pub must_not_mention: Vec<String>,
}

/// A timeline and the line of the file it came from.
#[derive(Debug, Clone)]
pub struct NumberedTimeline {
    pub line: usize,
    pub timeline: Timeline,
}

/// Reads every timeline of a JSONL file (blank lines are skipped); the first malformed line
/// is an error naming it.
pub fn read(path: &Path) -> Result<Vec<NumberedTimeline>> {
    let text = std::fs::read_to_string(path).map_err(|source| EvalError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    parse(path, &text)
}

fn parse(path: &Path, text: &str) -> Result<Vec<NumberedTimeline>> {
    let mut timelines = Vec::new();
    for (index, raw) in text.lines().enumerate() {
        if raw.trim().is_empty() {
            continue;
        }
        let line = index + 1;
        let timeline: Timeline = serde_json::from_str(raw).map_err(|err| EvalError::Malformed {
            path: path.to_path_buf(),
            line,
            column: err.column(),
            message: without_position(&err),
        })?;
        timelines.push(NumberedTimeline { line, timeline });
    }
    Ok(timelines)
}

/// serde_json's message without its " at line 1 column N" (each record is one line; the
/// column is reported separately).
fn without_position(err: &serde_json::Error) -> String {
    let message = err.to_string();
    let suffix = format!(" at line {} column {}", err.line(), err.column());
    match message.strip_suffix(&suffix) {
        Some(bare) => bare.to_string(),
        None => message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINIMAL: &str = r#"{"id":"T-1","track":"supersession","events":[
        {"type":"conversation_turn","speaker":"user","text":"hello"},
        {"type":"query","prompt":"q?","ground_truth":{"must_mention":["a"],"must_not_mention":[]}}]}"#;

    #[test]
    fn blank_lines_are_skipped_and_lines_are_numbered_from_one() {
        let text = format!(
            "\n{}\n\n{}\n",
            MINIMAL.replace('\n', ""),
            MINIMAL.replace('\n', "")
        );
        let timelines = parse(Path::new("x.jsonl"), &text).unwrap();
        let lines: Vec<usize> = timelines.iter().map(|t| t.line).collect();
        assert_eq!(lines, vec![2, 4]);
    }

    #[test]
    fn a_malformed_line_is_named_with_its_column() {
        let text = format!("{}\n{{\"id\": 3}}\n", MINIMAL.replace('\n', ""));
        let err = parse(Path::new("x.jsonl"), &text).unwrap_err();
        assert_eq!(
            err.to_string(),
            "x.jsonl: line 2, column 8: not a StateBench timeline: invalid type: integer `3`, expected a string"
        );
    }

    #[test]
    fn an_unknown_event_type_is_malformed() {
        let text = r#"{"id":"T","track":"t","events":[{"type":"telepathy"}]}"#;
        let err = parse(Path::new("x.jsonl"), text).unwrap_err();
        assert!(matches!(err, EvalError::Malformed { line: 1, .. }), "{err}");
    }
}
