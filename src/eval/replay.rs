//! Replaying one timeline into a fresh memory through the public memory API, and the contexts
//! the three strategies present at each query: memgine's assembled briefing, the transcript
//! (newest turns within the budget) and nothing.

use std::collections::HashMap;

use serde_json::Value;

use super::timeline::{Event, GroundTruth, InitialState, Timeline, Write};
use crate::memory::{ContextMode, ContextRequest, Kind, Memory, NewEntry, Result};

/// Where a strategy's context comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Strategy {
    /// CAR's memory: every event written to memory, the context assembled per query.
    Memgine,
    /// Every conversation turn as a `speaker: text` line, newest kept within the budget.
    TranscriptReplay,
    /// An empty context.
    NoMemory,
}

impl Strategy {
    pub const ALL: [Strategy; 3] = [
        Strategy::Memgine,
        Strategy::TranscriptReplay,
        Strategy::NoMemory,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Strategy::Memgine => "memgine",
            Strategy::TranscriptReplay => "transcript_replay",
            Strategy::NoMemory => "no_memory",
        }
    }
}

/// One query of a timeline with what each strategy presented.
#[derive(Debug, Clone)]
pub struct QueryContexts {
    pub prompt: String,
    pub ground_truth: GroundTruth,
    /// Everything the timeline had said or written before the query (to tell which phrases
    /// a memory could have had at all).
    pub known_text: String,
    /// One context per strategy, in [`Strategy::ALL`] order.
    pub contexts: Vec<(Strategy, String)>,
}

/// How contexts are assembled.
#[derive(Debug, Clone, Copy)]
pub struct Assembly {
    pub mode: ContextMode,
    pub budget_tokens: usize,
}

/// Replays a timeline into a fresh in-memory memory and returns the contexts of its queries.
pub fn replay(timeline: &Timeline, assembly: Assembly) -> Result<Vec<QueryContexts>> {
    let mut run = Replay {
        memory: Memory::in_memory()?,
        engine_ids: HashMap::new(),
        turns: Vec::new(),
        known_text: String::new(),
    };
    run.initial_state(&timeline.initial_state)?;
    let mut queries = Vec::new();
    for event in &timeline.events {
        match event {
            Event::ConversationTurn { speaker, text } => run.turn(speaker, text)?,
            Event::StateWrite { writes } | Event::Supersession { writes } => run.writes(writes)?,
            Event::Query {
                prompt,
                ground_truth,
            } => queries.push(run.query(prompt, ground_truth, assembly)?),
        }
    }
    Ok(queries)
}

struct Replay {
    memory: Memory,
    /// StateBench fact id → the id memory gave the entry, so `supersedes`/`depends_on` that
    /// name a fact id find it (keys are resolved by memory itself, as subjects).
    engine_ids: HashMap<String, String>,
    turns: Vec<String>,
    known_text: String,
}

impl Replay {
    fn initial_state(&mut self, state: &InitialState) -> Result<()> {
        let mut entries = Vec::new();
        for (field, value) in &state.identity_role {
            if let Some(value) = value.as_deref().filter(|v| has_text(v)) {
                self.remember_text(&[field, value]);
                entries.push(NewEntry::new(Kind::Identity, field, value));
            }
        }
        for (key, value) in &state.environment {
            let value = match value {
                Value::String(text) => text.clone(),
                other => other.to_string(),
            };
            if has_text(&value) {
                self.remember_text(&[key, &value]);
                entries.push(NewEntry::new(Kind::Environment, key, &value));
            }
        }
        for item in state.working_set.iter().filter(|i| has_text(&i.content)) {
            self.remember_text(&[&item.content]);
            let mut entry = NewEntry::new(Kind::Pattern, "working_set", &item.content);
            entry.replace_same_subject = false;
            entry.tenant = tenant_for(&item.content);
            entries.push(entry);
        }
        self.write(entries)?;
        self.writes(&state.persistent_facts)
    }

    fn turn(&mut self, speaker: &str, text: &str) -> Result<()> {
        self.remember_text(&[text]);
        self.turns.push(format!("{speaker}: {text}"));
        if !has_text(text) {
            return Ok(());
        }
        let mut entry = NewEntry::new(Kind::Turn, speaker, text);
        entry.replace_same_subject = false;
        self.memory.write(entry)?;
        Ok(())
    }

    /// The writes of one event (or the initial facts), in one transaction.
    fn writes(&mut self, writes: &[Write]) -> Result<()> {
        let mut entries = Vec::with_capacity(writes.len());
        let mut fact_ids = Vec::with_capacity(writes.len());
        for write in writes {
            self.remember_text(&[&write.key, &write.value]);
            if !has_text(&write.value) {
                continue;
            }
            if write.value.starts_with(RETRACTION) {
                // A retraction, not a new fact: the conclusion it names needs review.
                if let Some(target) = &write.supersedes {
                    self.memory
                        .invalidate(&self.engine_ref(target), "", &write.value)?;
                    continue;
                }
            }
            let kind = if write.is_environment() {
                Kind::Environment
            } else if write.is_constraint {
                Kind::Constraint
            } else {
                Kind::Pattern
            };
            let mut entry = NewEntry::new(kind, &write.key, &write.value);
            entry.tenant = tenant_for(&write.value);
            entry.source = write.source.as_ref().and_then(|s| s.kind.clone());
            entry.supersedes = write
                .supersedes
                .iter()
                .map(|r| self.engine_ref(r))
                .collect();
            if write.is_environment() {
                // The environment now: a new value of a key replaces the old one.
                entry.supersedes.push(write.key.clone());
            }
            entry.depends_on = write
                .depends_on
                .iter()
                .map(|r| self.engine_ref(r))
                .collect();
            entries.push(entry);
            fact_ids.push(write.id.clone());
        }
        let written = self.write(entries)?;
        for (fact_id, engine) in fact_ids.into_iter().zip(written) {
            if let Some(fact_id) = fact_id {
                self.engine_ids.insert(fact_id, engine);
            }
        }
        Ok(())
    }

    fn query(
        &self,
        prompt: &str,
        ground_truth: &GroundTruth,
        assembly: Assembly,
    ) -> Result<QueryContexts> {
        let mut request = ContextRequest::new(prompt);
        request.mode = assembly.mode;
        request.budget_tokens = assembly.budget_tokens;
        let memgine = self.memory.context(&request)?.text;
        let transcript = transcript(&self.turns, assembly.budget_tokens);
        Ok(QueryContexts {
            prompt: prompt.to_string(),
            ground_truth: ground_truth.clone(),
            known_text: self.known_text.clone(),
            contexts: vec![
                (Strategy::Memgine, memgine),
                (Strategy::TranscriptReplay, transcript),
                (Strategy::NoMemory, String::new()),
            ],
        })
    }

    /// Writes entries in one transaction; returns the ids memory gave them, in order.
    fn write(&self, entries: Vec<NewEntry>) -> Result<Vec<String>> {
        if entries.is_empty() {
            return Ok(Vec::new());
        }
        Ok(self
            .memory
            .write_entries(entries)?
            .into_iter()
            .map(|w| w.id)
            .collect())
    }

    fn engine_ref(&self, reference: &str) -> String {
        self.engine_ids
            .get(reference)
            .cloned()
            .unwrap_or_else(|| reference.to_string())
    }

    fn remember_text(&mut self, parts: &[&str]) {
        for part in parts {
            self.known_text.push_str(part);
            self.known_text.push('\n');
        }
    }
}

/// How a StateBench write marks a conclusion as retracted.
const RETRACTION: &str = "[INVALIDATED";

/// The tenant an entry is kept in. Entries StateBench marks `[RESTRICTED: …]` (readable only by
/// a role the querying user lacks) and working-set items marked `[SCOPE: …]` (a draft, an
/// estimate, another user's session) go to tenants of their own, which the untenanted query
/// never sees — CAR's isolation, used as a deployment would use it.
fn tenant_for(value: &str) -> String {
    let marked = |prefix: &str| {
        value
            .strip_prefix(prefix)
            .and_then(|rest| rest.split_once(']'))
            .map(|(name, _)| name.trim().to_string())
    };
    if let Some(name) = marked("[RESTRICTED:") {
        return format!("restricted:{name}");
    }
    if let Some(name) = marked("[SCOPE:") {
        return format!("scope:{name}");
    }
    String::new()
}

/// Whether a value has anything to remember (memory rejects an empty body).
fn has_text(value: &str) -> bool {
    !value.trim().is_empty()
}

/// The newest turns whose lines fit in `budget_tokens` (4 bytes a token), oldest first.
fn transcript(turns: &[String], budget_tokens: usize) -> String {
    let mut bytes = 0;
    let mut kept = 0;
    for line in turns.iter().rev() {
        let with_newline = bytes + line.len() + usize::from(kept > 0);
        if with_newline.div_ceil(4) > budget_tokens {
            break;
        }
        bytes = with_newline;
        kept += 1;
    }
    turns[turns.len() - kept..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restricted_and_scoped_values_get_their_own_tenants() {
        assert_eq!(
            tenant_for("[RESTRICTED: VP+ only] floor is $30k"),
            "restricted:VP+ only"
        );
        assert_eq!(
            tenant_for("[SCOPE: draft document] terms"),
            "scope:draft document"
        );
        assert_eq!(tenant_for("plain fact"), "");
    }

    #[test]
    fn transcript_keeps_the_newest_turns_within_the_budget() {
        let turns: Vec<String> = ["user: aaaa", "user: bbbb", "user: cccc"]
            .map(String::from)
            .to_vec();
        assert_eq!(
            transcript(&turns, 100),
            "user: aaaa\nuser: bbbb\nuser: cccc"
        );
        // 10 + 1 + 10 bytes = 6 tokens; a third line would need 8.
        assert_eq!(transcript(&turns, 6), "user: bbbb\nuser: cccc");
        assert_eq!(transcript(&turns, 2), "");
        assert_eq!(transcript(&[], 10), "");
    }
}
