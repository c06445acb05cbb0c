//! StateBench replay for `car-memgine-eval`: each timeline goes into a fresh memory through the
//! public memory API, the context is assembled at every query, and the contexts are scored
//! against the query's ground truth without a model — must-mention recall, stale phrases
//! presented as current, context size — next to two baselines computed in the same run
//! (transcript replay within the same budget, and no memory). `--contexts` exports every
//! context for an external LLM judge.

pub mod cli;

mod phrase;
mod replay;
mod score;
mod timeline;

use std::fs::File;
use std::io::{BufWriter, Write as _};
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::memory::{ContextMode, ContextRequest, MemoryError};
use replay::{Assembly, QueryContexts};
pub use score::Report;

pub type Result<T, E = EvalError> = std::result::Result<T, E>;

/// A 20-timeline sample of the StateBench dev split (MIT, its licence beside it) that ships
/// in the repository, for trying the evaluation from a checkout; `--data` names any other file.
pub const SAMPLE_DATA: &str = "tests/it/data/statebench/dev-sample.jsonl";

/// Progress is reported after this many timelines (and after the last one).
pub const PROGRESS_EVERY: usize = 20;

#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    #[error("cannot read {}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: line {line}, column {column}: not a StateBench timeline: {message}", path.display())]
    Malformed {
        path: PathBuf,
        line: usize,
        column: usize,
        message: String,
    },
    #[error("no timeline has track {name:?}; the tracks are: {}", known.join(", "))]
    UnknownTrack { name: String, known: Vec<String> },
    #[error("memory failed on timeline {timeline} (line {line})")]
    Memory {
        timeline: String,
        line: usize,
        #[source]
        source: MemoryError,
    },
    #[error("cannot write {}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl EvalError {
    /// The code of the error in a `--json` failure envelope.
    pub fn code(&self) -> &'static str {
        match self {
            EvalError::Read { .. } | EvalError::Write { .. } => "io",
            EvalError::Malformed { .. } => "invalid_input",
            EvalError::UnknownTrack { .. } => "usage",
            EvalError::Memory { .. } => "memory",
        }
    }

    /// The process exit status: 2 for a bad command line, 1 for anything else.
    pub fn exit_code(&self) -> u8 {
        match self {
            EvalError::UnknownTrack { .. } => 2,
            EvalError::Read { .. }
            | EvalError::Malformed { .. }
            | EvalError::Memory { .. }
            | EvalError::Write { .. } => 1,
        }
    }
}

/// A resolved evaluation run.
#[derive(Debug, Clone)]
pub struct Config {
    /// The StateBench JSONL file.
    pub data: PathBuf,
    /// The token budget of memgine's context and of the transcript.
    pub budget_tokens: usize,
    /// How memgine assembles its context.
    pub mode: ContextMode,
    /// Only timelines of these tracks (all when empty).
    pub tracks: Vec<String>,
    /// At most this many timelines (after the track filter).
    pub limit: Option<usize>,
    /// Where to write every query's contexts as JSON Lines.
    pub contexts: Option<PathBuf>,
}

impl Config {
    /// The defaults of the command line for a data file.
    pub fn new(data: PathBuf) -> Config {
        Config {
            data,
            budget_tokens: ContextRequest::new("").budget_tokens,
            mode: ContextMode::Full,
            tracks: Vec::new(),
            limit: None,
            contexts: None,
        }
    }
}

/// How far a run is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    pub done: usize,
    pub total: usize,
}

/// Reads the whole file (a malformed line anywhere is an error), replays the selected
/// timelines and scores them; `progress` hears about every [`PROGRESS_EVERY`] timelines.
pub fn run(config: &Config, progress: &mut dyn FnMut(Progress)) -> Result<Outcome> {
    let timelines = timeline::read(&config.data)?;
    let known: Vec<String> = {
        let mut tracks: Vec<String> = timelines.iter().map(|t| t.timeline.track.clone()).collect();
        tracks.sort();
        tracks.dedup();
        tracks
    };
    if let Some(name) = config.tracks.iter().find(|name| !known.contains(name)) {
        return Err(EvalError::UnknownTrack {
            name: name.clone(),
            known,
        });
    }
    let selected: Vec<&timeline::NumberedTimeline> = timelines
        .iter()
        .filter(|t| config.tracks.is_empty() || config.tracks.contains(&t.timeline.track))
        .take(config.limit.unwrap_or(usize::MAX))
        .collect();

    let mut contexts_out = match &config.contexts {
        Some(path) => Some(ContextsFile::create(path)?),
        None => None,
    };
    let assembly = Assembly {
        mode: config.mode,
        budget_tokens: config.budget_tokens,
    };
    let mut report = Report::default();
    let total = selected.len();
    for (done, numbered) in selected.iter().enumerate() {
        let timeline = &numbered.timeline;
        let queries = replay::replay(timeline, assembly).map_err(|source| EvalError::Memory {
            timeline: timeline.id.clone(),
            line: numbered.line,
            source,
        })?;
        if let Some(out) = &mut contexts_out {
            out.append(timeline, &queries)?;
        }
        report.add_timeline(&timeline.track, &queries);
        let done = done + 1;
        if done % PROGRESS_EVERY == 0 || done == total {
            progress(Progress { done, total });
        }
    }
    if let Some(out) = contexts_out {
        out.finish()?;
    }
    Ok(Outcome {
        data: config.data.clone(),
        mode: config.mode,
        budget_tokens: config.budget_tokens,
        report,
    })
}

/// A finished run: its settings and its report.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub data: PathBuf,
    pub mode: ContextMode,
    pub budget_tokens: usize,
    pub report: Report,
}

impl Outcome {
    /// The `data` of the `--json` envelope.
    pub fn to_json(&self) -> Value {
        let mut data = json!({
            "data_path": self.data.display().to_string(),
            "mode": mode_name(self.mode),
            "budget_tokens": self.budget_tokens,
        });
        if let (Value::Object(data), Value::Object(report)) = (&mut data, self.report.to_json()) {
            data.extend(report);
        }
        data
    }

    /// The readable report.
    pub fn to_table(&self) -> String {
        format!(
            "StateBench replay of {} (mode {}, budget {} tokens)\n{}",
            self.data.display(),
            mode_name(self.mode),
            self.budget_tokens,
            self.report.to_table()
        )
    }
}

fn mode_name(mode: ContextMode) -> &'static str {
    match mode {
        ContextMode::Full => "full",
        ContextMode::Fast => "fast",
    }
}

/// The `--contexts` export: one JSON line per query and strategy.
struct ContextsFile {
    path: PathBuf,
    out: BufWriter<File>,
}

impl ContextsFile {
    fn create(path: &Path) -> Result<ContextsFile> {
        let file = File::create(path).map_err(|source| EvalError::Write {
            path: path.to_path_buf(),
            source,
        })?;
        Ok(ContextsFile {
            path: path.to_path_buf(),
            out: BufWriter::new(file),
        })
    }

    fn append(&mut self, timeline: &timeline::Timeline, queries: &[QueryContexts]) -> Result<()> {
        for query in queries {
            for (strategy, context) in &query.contexts {
                let line = json!({
                    "timeline_id": timeline.id,
                    "track": timeline.track,
                    "query": query.prompt,
                    "strategy": strategy.as_str(),
                    "context": context,
                    "must_mention": query.ground_truth.must_mention,
                    "must_not_mention": query.ground_truth.must_not_mention,
                });
                writeln!(self.out, "{line}").map_err(|source| self.write_error(source))?;
            }
        }
        Ok(())
    }

    fn finish(mut self) -> Result<()> {
        self.out.flush().map_err(|source| self.write_error(source))
    }

    fn write_error(&self, source: std::io::Error) -> EvalError {
        EvalError::Write {
            path: self.path.clone(),
            source,
        }
    }
}
