//! `car reason "<problem>"`: one answer from a model, grounded in what the project holds. It
//! gathers the files that bear on the problem — ranked by the problem's distinctive words in
//! their paths and text, then widened one step through the context graph's import edges — and
//! what memory recalls, sends them with the problem to a small model, or to a large one when
//! the material is big, and reports which of the files the answer cites.

use std::collections::HashMap;
use std::path::Path;
use std::time::Instant;

use serde::Serialize;

use super::model::{Block, Message, Model, Role};
use crate::memory::text;
use crate::project::graph::Direction;
use crate::project::Project;

pub const SCHEMA: &str = "car.reason/1";
/// Files sent at most, and the bytes of each.
const MAX_FILES: usize = 8;
const FILE_BYTES: usize = 12 * 1024;
/// Files larger than this are not read when ranking.
const SCAN_BYTES: u64 = 256 * 1024;

/// A file chosen for the model, and why.
#[derive(Debug, Clone, Serialize)]
pub struct File {
    pub path: String,
    pub why: String,
    /// The answer names it.
    pub cited: bool,
    #[serde(skip)]
    pub text: String,
    #[serde(skip)]
    score: f64,
}

/// A memory entry sent to the model.
#[derive(Debug, Clone, Serialize)]
pub struct Note {
    pub id: String,
    pub subject: String,
    #[serde(skip)]
    pub body: String,
}

/// The `car.reason/1` document.
#[derive(Debug, Clone, Serialize)]
pub struct Reasoned {
    pub schema: &'static str,
    /// `success` or `error`.
    pub status: super::RunStatus,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub answer: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    pub model_used: String,
    /// `small` or `large`: which model the material's size chose.
    pub size: &'static str,
    /// The estimated tokens of what was sent.
    pub context_tokens: usize,
    pub files: Vec<File>,
    pub memory: Vec<Note>,
    pub tokens: super::Tokens,
    pub elapsed_seconds: f64,
}

/// The files of `root` that bear on `problem`, best first, widened through `project`'s graph.
pub fn gather_files(root: &Path, problem: &str, project: Option<&Project>) -> Vec<File> {
    let terms: Vec<String> = text::terms(problem)
        .into_iter()
        .filter(|t| t.chars().count() >= 3)
        .collect();
    if terms.is_empty() {
        return Vec::new();
    }
    // Every readable text file with the terms it holds.
    let mut holding: Vec<(String, String, Vec<usize>, Vec<usize>)> = Vec::new();
    let mut df = vec![0usize; terms.len()];
    for entry in ignore::WalkBuilder::new(root).build().flatten() {
        if !entry.file_type().is_some_and(|t| t.is_file())
            || entry.metadata().map_or(true, |m| m.len() > SCAN_BYTES)
        {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(entry.path()) else {
            continue;
        };
        let relative = entry
            .path()
            .strip_prefix(root)
            .unwrap_or(entry.path())
            .display()
            .to_string();
        let lower = text.to_lowercase();
        let path_lower = relative.to_lowercase();
        let in_text: Vec<usize> = (0..terms.len())
            .filter(|&i| lower.contains(&terms[i]))
            .collect();
        let in_path: Vec<usize> = (0..terms.len())
            .filter(|&i| path_lower.contains(&terms[i]))
            .collect();
        if in_text.is_empty() && in_path.is_empty() {
            continue;
        }
        for &i in &in_text {
            df[i] += 1;
        }
        holding.push((relative, text, in_text, in_path));
    }
    let n = holding.len().max(1) as f64;
    let idf = |i: usize| (1.0 + n / (1.0 + df[i] as f64)).ln();
    let mut files: Vec<File> = holding
        .into_iter()
        .map(|(path, text, in_text, in_path)| {
            let score = in_text.iter().map(|&i| idf(i)).sum::<f64>()
                + 2.0 * in_path.iter().map(|&i| idf(i)).sum::<f64>();
            let mut words: Vec<&str> = in_path
                .iter()
                .chain(in_text.iter())
                .map(|&i| terms[i].as_str())
                .collect();
            words.dedup();
            words.truncate(4);
            File {
                why: format!("mentions {}", words.join(", ")),
                path,
                text,
                cited: false,
                score,
            }
        })
        .collect();
    files.sort_by(|a, b| {
        b.score
            .total_cmp(&a.score)
            .then_with(|| a.path.cmp(&b.path))
    });
    files.truncate(MAX_FILES);
    // One step through the graph from the best files: what they import and what imports them.
    if let Some(project) = project {
        let mut by_path: HashMap<String, usize> = files
            .iter()
            .enumerate()
            .map(|(i, f)| (f.path.clone(), i))
            .collect();
        let seeds: Vec<(String, f64)> = files
            .iter()
            .take(3)
            .map(|f| (f.path.clone(), f.score))
            .collect();
        for (seed, score) in seeds {
            let Ok(edges) = project.graph_edges(&seed, Direction::Both) else {
                continue;
            };
            let linked = edges
                .outgoing
                .into_iter()
                .flatten()
                .map(|n| (n.key, format!("imported by {seed}")))
                .chain(
                    edges
                        .incoming
                        .into_iter()
                        .flatten()
                        .map(|n| (n.key, format!("imports {seed}"))),
                );
            for (key, why) in linked {
                if by_path.contains_key(&key) {
                    continue;
                }
                let Ok(text) = std::fs::read_to_string(root.join(&key)) else {
                    continue;
                };
                by_path.insert(key.clone(), files.len());
                files.push(File {
                    path: key,
                    why,
                    cited: false,
                    text,
                    score: score * 0.5,
                });
            }
        }
        files.sort_by(|a, b| {
            b.score
                .total_cmp(&a.score)
                .then_with(|| a.path.cmp(&b.path))
        });
        files.truncate(MAX_FILES);
    }
    for file in &mut files {
        file.text = super::truncate(&file.text, FILE_BYTES);
    }
    files
}

const SYSTEM: &str = "You answer a developer's question about their project from the files and notes given. Be concrete and brief. Cite every file you rely on by its path in square brackets, like [src/lib.rs]. If the material does not answer the question, say what is missing.";

/// What to send: the problem, the notes, the files.
pub fn prompt(problem: &str, files: &[File], memory: &[Note]) -> String {
    let mut text = format!("Problem: {problem}\n");
    if !memory.is_empty() {
        text.push_str("\nWhat CAR remembers about this project:\n");
        for note in memory {
            text.push_str(&format!("- {}: {}\n", note.subject, note.body));
        }
    }
    for file in files {
        text.push_str(&format!("\n=== {} ===\n{}\n", file.path, file.text));
    }
    text
}

/// Asks `model` (already chosen by size) and marks the files the answer cites.
pub async fn answer(
    model: &Model,
    size: &'static str,
    problem: &str,
    mut files: Vec<File>,
    memory: Vec<Note>,
) -> Reasoned {
    let started = Instant::now();
    let text = prompt(problem, &files, &memory);
    let context_tokens = text::token_estimate(&text);
    let reply = model
        .turn(
            SYSTEM,
            &[Message {
                role: Role::User,
                blocks: vec![Block::Text(text)],
            }],
            &[],
            &mut |_| {},
        )
        .await;
    let (status, answer, message, tokens) = match reply {
        Ok(reply) => {
            let answer: String = reply
                .blocks
                .iter()
                .filter_map(|b| match b {
                    Block::Text(t) => Some(t.as_str()),
                    _ => None,
                })
                .collect::<Vec<_>>()
                .join("\n");
            let tokens = super::Tokens {
                input: reply.input_tokens,
                output: reply.output_tokens,
                budget: 0,
            };
            (super::RunStatus::Success, Some(answer), None, tokens)
        }
        Err(e) => (
            super::RunStatus::Error,
            None,
            Some(e.to_string()),
            super::Tokens::default(),
        ),
    };
    if let Some(answer) = &answer {
        for file in &mut files {
            let name = Path::new(&file.path)
                .file_name()
                .map(|n| n.to_string_lossy().to_string())
                .unwrap_or_default();
            file.cited = answer.contains(&file.path)
                || (!name.is_empty() && answer.contains(&format!("[{name}]")));
        }
    }
    Reasoned {
        schema: SCHEMA,
        status,
        answer,
        message,
        model_used: model.name().to_string(),
        size,
        context_tokens,
        files,
        memory,
        tokens,
        elapsed_seconds: (started.elapsed().as_secs_f64() * 100.0).round() / 100.0,
    }
}

/// The estimated tokens of the material, to choose the model by.
pub fn size_of(problem: &str, files: &[File], memory: &[Note]) -> usize {
    text::token_estimate(&prompt(problem, files, memory))
}
